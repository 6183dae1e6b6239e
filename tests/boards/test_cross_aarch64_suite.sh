#!/usr/bin/env bash
# The aarch64 cross build's own tests under qemu-aarch64-static, called explicitly (binfmt_misc
# is not registered on these machines):
#   unit         edgert_unit_tests (GoogleTest)
#   conformance  `edgert conformance` on the ONNX 1.12 node tests; the set of passed, failed and
#                skipped tests must be the x86_64 build's (tests/conformance/RESULTS.md explains
#                the failures), so an ARM-only numerical or codegen difference shows up by name.
# The cross build is BUILD_DIR/cross-aarch64 ($EDGERT_CROSS_BUILD_DIR), made by
# test_cross_aarch64.sh (ctest fixture cross_aarch64).
#
# usage: test_cross_aarch64_suite.sh BUILD_DIR SOURCE_DIR unit|conformance
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
what=$3
cross=${EDGERT_CROSS_BUILD_DIR:-$build/cross-aarch64}
work=$build/cross-aarch64-$what
fail() { echo "FAIL: $*"; exit 1; }
[[ -x $cross/bin/edgert_unit_tests ]] || fail "$cross has no aarch64 build (run boards.cross_aarch64 first)"
# Libraries: the cross toolchain's libstdc++ (-L), then Debian's :arm64 packages and the build's own.
# qemu-user 7.2 (bookworm) on this kernel hangs when a guest creates a thread or forks: the CPU
# plugin runs on the calling thread alone (EDGERT_CPU_THREADS=1) and conformance runs in process
# (-j 0). Threads and child processes are covered by the same tests natively on x86_64.
qemu=(qemu-aarch64-static -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$cross/lib:/usr/lib/aarch64-linux-gnu"
      -E EDGERT_CPU_THREADS=1)
rm -rf "$work" && mkdir -p "$work"
start=$SECONDS

case $what in
unit)
  # Excluded, because they start bin/edgert as a child process (popen) to check the CLI: an
  # emulated program's children are exec'd by the kernel, which cannot run an aarch64 binary
  # without binfmt_misc (toolchain/with-qemu-binfmt can give one, Linux >= 6.7, but these tests
  # also build with the CLI's default board, x86_64-generic, which aarch64 rightly refuses). The
  # same CLI paths run under qemu here directly: `edgert conformance` builds and runs 900+ models
  # (boards.cross_aarch64_conformance); boards.cross_aarch64 builds and runs an engine with the
  # packaged `edgert`. They run on x86_64 (unit tests of the main build).
  spawning='CliTest.*:CliHostileInput.*:CliHostileRun.*:ToolsTest.*:ProfileTest.*:TacticTuningTest.*:BoardTuningTest.*:BoardsCommand.*'
  # Excluded, because it starts threads of its own to call the plugin concurrently, and a guest
  # thread hangs qemu-user here (the CPU plugin itself starts none when emulated).
  threaded='CpuTactics.ConcurrentCallersShareThePoolSafely'
  (cd "$work" && "${qemu[@]}" "$cross/bin/edgert_unit_tests" --gtest_filter="-$spawning:$threaded" --gtest_brief=1) ||
    fail "edgert_unit_tests under qemu-aarch64-static"
  echo "unit tests (all but $spawning:$threaded) passed under qemu-aarch64-static in $((SECONDS - start)) s"
  # The INT8 kernels (NEON, NEON dotprod) bit for bit against the reference, on qemu's default
  # CPU (dotprod and float16 arithmetic) and on a Cortex-A72 (Armv8.0: neither), where the
  # kernels that need them must not be listed and the float16 convolution tactics neither.
  for cpu in max cortex-a72; do
    for program in edgert_qgemm_tests edgert_int8_tactics_tests; do
      (cd "$work" && "${qemu[@]}" -cpu "$cpu" "$cross/bin/$program" --gtest_brief=1) ||
        fail "$program under qemu-aarch64-static -cpu $cpu"
    done
    (cd "$work" && "${qemu[@]}" -cpu "$cpu" "$cross/bin/edgert_unit_tests" --gtest_brief=1 \
      --gtest_filter='CpuTactics.Fp16*:CpuTactics.Bf16*') || fail "the float16 tactics under qemu-aarch64-static -cpu $cpu"
  done
  echo "INT8 and float16 kernels passed under qemu-aarch64-static -cpu max and -cpu cortex-a72"
  ;;
conformance)
  data=/usr/share/libonnx-testdata/data/node
  [[ -d $data ]] || fail "$data missing (apt-get install libonnx-testdata)"
  # In process (-j 0): qemu-user hangs in fork()ed children here (see above). One test first, so
  # a broken emulator fails in seconds rather than after 932 tests.
  probe=$("${qemu[@]}" "$cross/bin/edgert" conformance "$data/test_abs" --board qemu-virt-aarch64 \
    --plugin-path "$cross/lib/edgert/plugins" -j 0 2>&1 || true)
  [[ $probe == *"1 passed"* ]] || fail "one test (test_abs) under qemu-aarch64-static: $probe"
  # The x86_64 side is conformance.onnx_node_tests' report (fixture x86_conformance) when it is
  # newer than the edgert that wrote it; run here otherwise (this script run by hand).
  if [[ -f $build/conformance.json && $build/conformance.json -nt $build/bin/edgert ]]; then
    cp "$build/conformance.json" "$work/x86_64.json"
    echo "x86_64 report: $build/conformance.json (conformance.onnx_node_tests)" >"$work/x86_64.txt"
  else
    "$build/bin/edgert" conformance "$data" -q --json "$work/x86_64.json" >"$work/x86_64.txt" 2>&1 || true
  fi
  t=$SECONDS
  "${qemu[@]}" "$cross/bin/edgert" conformance "$data" -q -j 0 --board qemu-virt-aarch64 --plugin-path "$cross/lib/edgert/plugins" \
    --json "$work/aarch64.json" >"$work/aarch64.txt" 2>&1 || true
  echo "x86_64:  $(tail -n 1 "$work/x86_64.txt")"
  echo "aarch64: $(tail -n 1 "$work/aarch64.txt") ($((SECONDS - t)) s under qemu-aarch64-static)"
  /usr/bin/python3 - "$work/x86_64.json" "$work/aarch64.json" <<'EOF' || fail "the aarch64 conformance run differs from x86_64"
import json, sys
x86, arm = (json.load(open(p)) for p in sys.argv[1:3])
def by_status(report):
    out = {}
    for t in report:
        out.setdefault(t["status"], set()).add(t["test"])
    return out
a, b = by_status(x86), by_status(arm)
print("x86_64 ", {k: len(v) for k, v in sorted(a.items())})
print("aarch64", {k: len(v) for k, v in sorted(b.items())})
bad = False
for status in sorted(set(a) | set(b)):
    only_x86, only_arm = a.get(status, set()) - b.get(status, set()), b.get(status, set()) - a.get(status, set())
    if only_x86 or only_arm:
        bad = True
        print("%s only on x86_64: %s" % (status, sorted(only_x86)[:20]))
        print("%s only on aarch64: %s" % (status, sorted(only_arm)[:20]))
if not a.get("pass"):
    bad = True
    print("no test passed on x86_64")
sys.exit(1 if bad else 0)
EOF
  echo "aarch64 conformance matches x86_64 test by test"
  ;;
*) fail "unknown suite '$what' (unit or conformance)" ;;
esac
