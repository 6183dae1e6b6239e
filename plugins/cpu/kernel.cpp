#include "kernel.h"

#include "edgert/dtype_info.h"

#include <cstdio>
#include <cstring>
#include <sstream>

namespace edgert::cpu {

size_t dtype_size(edgert_dtype dtype) { return edgert_dtype_size(dtype); }

const char* dtype_name(edgert_dtype dtype) { return edgert_dtype_name(dtype); }

void throw_unsupported_dtype(edgert_dtype dtype, const char* what) {
  fail(EDGERT_ERR_UNSUPPORTED, "%s has dtype %s, which this kernel does not handle", what,
       dtype_name(dtype));
}

double read_scalar(const edgert_tensor& t, const char* what) {
  if (!t.data) fail(EDGERT_ERR_NEEDS_DATA, "value of %s is not known yet", what);
  if (numel(t) != 1) fail(EDGERT_ERR_SHAPE, "%s must hold one value, it holds %lld", what,
                          static_cast<long long>(numel(t)));
  return dispatch(t.dtype, kAll, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return static_cast<double>(static_cast<compute_t<T>>(*data_as<T>(t)));
  }, what);
}

}  // namespace edgert::cpu
