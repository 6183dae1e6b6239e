// edgert.QLookup(X uint8, Table uint8 [256]) -> Y uint8, Y[i] = Table[X[i]]: any elementwise
// function between two quantized tensors (HardSwish, SiLU, Sigmoid, ... of an int8 network,
// int8_rewrite.h) as a table the builder computes once from the float kernels, so the tensor
// stays in uint8 instead of going through DequantizeLinear, the float op and QuantizeLinear.
#include <algorithm>
#include <cstring>

#include "fast/qlookup.h"
#include "kernel.h"
#include "nn_common.h"
#include "thread_pool.h"

namespace edgert::cpu {
namespace {

constexpr int64_t kQLookupAvx512Vbmi = 1;  // stable id: engines and timing caches store it

class QLookupOp : public Op {
 public:
  void prepare(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, edgert_prepare_info&) override {
    if (in[0].dtype != EDGERT_DTYPE_UINT8) fail(EDGERT_ERR_UNSUPPORTED, "X has dtype %s, expected uint8", dtype_name(in[0].dtype));
    if (in[1].dtype != EDGERT_DTYPE_UINT8 || numel(in[1]) != 256)
      fail(EDGERT_ERR_SHAPE, "Table has dtype %s and %lld values, expected 256 uint8", dtype_name(in[1].dtype),
           static_cast<long long>(numel(in[1])));
    set_output(out[0], EDGERT_DTYPE_UINT8, shape_of(in[0]));
  }

  void execute(const edgert_node&, const edgert_tensor* in, edgert_tensor* out, void*) override {
    const uint8_t* x = data_as<uint8_t>(in[0]);
    const uint8_t* table = data_as<uint8_t>(in[1]);
    uint8_t* y = data_as<uint8_t>(out[0]);
    const int64_t n = numel(in[0]);
    const bool vbmi = tactic() == kQLookupAvx512Vbmi && qlookup::avx512_vbmi_available();
    auto rows = [&](int64_t begin, int64_t end, int) {
#if defined(__x86_64__)
      if (vbmi) return qlookup::lookup_u8_avx512vbmi(x + begin, end - begin, table, y + begin);
#endif
      for (int64_t i = begin; i < end; ++i) y[i] = table[x[i]];
    };
    // Chunks of 16 KiB: below that a second thread costs more than it saves.
    const int64_t chunk = int64_t{1} << 14, chunks = (n + chunk - 1) / chunk;
    if (chunks <= 1) return rows(0, n, 0);
    ThreadPool::instance().parallel_ranges(chunks, [&](int64_t c0, int64_t c1, int thread) {
      rows(c0 * chunk, std::min(n, c1 * chunk), thread);
    });
  }
};

std::vector<TacticSpec> qlookup_tactics(const edgert_node*, const edgert_tensor* inputs) {
  if (inputs[0].dtype != EDGERT_DTYPE_UINT8 || !qlookup::avx512_vbmi_available()) return {};
  return {{kQLookupAvx512Vbmi, "u8-lookup-avx512vbmi"}};
}

}  // namespace

void register_qlookup_kernels(KernelRegistry& r) {
  r.add_in_domain<QLookupOp>("edgert", "QLookup", "ref-qlookup", nullptr, qlookup_tactics);
}

}  // namespace edgert::cpu
