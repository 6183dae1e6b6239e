#!/usr/bin/env bash
# Cross-builds the whole project for aarch64 (toolchain/aarch64-linux-gnu.cmake: libedgert, the
# plugins, the edgert CLI, edgertd, edgertctl, the test programs) into BUILD_DIR/cross-aarch64
# ($EDGERT_CROSS_BUILD_DIR) and runs the engine runner under qemu-aarch64-static: an engine built
# on this x86_64 machine for qemu-virt-aarch64 runs there with outputs matching the x86_64 run of
# the same model, and the x86_64 engine is refused there naming both boards. Then the arm64
# Debian packages: the same packages, contents and control fields as packaging.deb checks on
# amd64. The ctest fixture cross_aarch64 for boards.cross_aarch64_unit, _conformance and
# system.image_boot_aarch64, which use this build.
#
# usage: test_cross_aarch64.sh BUILD_DIR SOURCE_DIR
# Fails (exit 77, which CTest counts as a failure) when the cross compiler, qemu-aarch64-static or the arm64 libraries are absent.
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
cross=${EDGERT_CROSS_BUILD_DIR:-$build/cross-aarch64}
work=$build/cross-aarch64-work
sysroot=/usr/aarch64-linux-gnu

for tool in aarch64-linux-gnu-g++ qemu-aarch64-static; do
  command -v "$tool" >/dev/null || { echo "FAIL: $tool missing (toolchain/setup-deps installs it)"; exit 77; }
done
for pc in libxxhash flatbuffers protobuf libsystemd sqlite3 libgpiod libsodium yaml-0.1; do
  [[ -f /usr/lib/aarch64-linux-gnu/pkgconfig/$pc.pc ]] ||
    { echo "FAIL: arm64 $pc missing (dpkg --add-architecture arm64; toolchain/setup-deps)"; exit 77; }
done

start=$SECONDS
cmake -S "$source" -B "$cross" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$source/toolchain/aarch64-linux-gnu.cmake" \
  -DEDGERT_RUNTIME_ONLY=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr >"$build/cross-aarch64.log" 2>&1 ||
  { tail -n 30 "$build/cross-aarch64.log"; echo "FAIL: configuring the aarch64 cross build"; exit 1; }
cmake --build "$cross" -j"${EDGERT_CROSS_JOBS:-$(nproc)}" >>"$build/cross-aarch64.log" 2>&1 ||
  { grep -B2 -A20 -m1 'FAILED\|error:' "$build/cross-aarch64.log"; echo "FAIL: the aarch64 cross build (log: $build/cross-aarch64.log)"; exit 1; }
echo "cross build: $((SECONDS - start)) s"
for f in bin/edgert bin/edgertd bin/edgertctl bin/edgert_unit_tests bin/edgert_engine_runner lib/edgert/plugins/libedgert_plugin_cpu.so; do
  file -L "$cross/$f" | sed 's/, BuildID.*//'
  file -L "$cross/$f" | grep -q 'ARM aarch64' || { echo "FAIL: $f is not aarch64"; exit 1; }
done

rm -rf "$work" && mkdir -p "$work/x86" "$work/arm" "$work/refused"
/usr/bin/python3 "$source/tests/models/make_demo_model.py" --output "$work/demo.onnx" --input "$work/input.npy" >/dev/null
"$build/bin/edgert" build "$work/demo.onnx" --board x86_64-generic -o "$work/x86.engine" >/dev/null
"$build/bin/edgert" build "$work/demo.onnx" --board qemu-virt-aarch64 -o "$work/arm.engine" >/dev/null
"$build/bin/edgert_engine_runner" "$work/x86.engine" --board x86_64-generic --output-dir "$work/x86" "$work/input.npy"

# EDGERT_CPU_THREADS=1: qemu-user 7.2 hangs when a guest creates a thread on this kernel.
qemu=(qemu-aarch64-static -L "$sysroot" -E LD_LIBRARY_PATH="$cross/lib" -E EDGERT_CPU_THREADS=1)
start=$SECONDS
"${qemu[@]}" "$cross/bin/edgert_engine_runner" "$work/arm.engine" --board qemu-virt-aarch64 \
  --plugin-path "$cross/lib/edgert/plugins" --output-dir "$work/arm" "$work/input.npy"
echo "aarch64 run under qemu: $((SECONDS - start)) s"

status=0
refusal=$("${qemu[@]}" "$cross/bin/edgert_engine_runner" "$work/x86.engine" \
  --plugin-path "$cross/lib/edgert/plugins" --output-dir "$work/refused" "$work/input.npy" 2>&1) && status=1
echo "x86_64 engine under qemu: $refusal"
[[ $status -eq 0 && $refusal == *"'x86_64-generic' (x86_64)"*"aarch64"* ]] ||
  { echo "FAIL: the x86_64 engine was not refused on aarch64 with a message naming both"; exit 1; }
refusal=$("${qemu[@]}" "$cross/bin/edgert_engine_runner" "$work/arm.engine" --board raspberry-pi-5-8gb \
  --plugin-path "$cross/lib/edgert/plugins" --output-dir "$work/refused" "$work/input.npy" 2>&1) && status=1
echo "qemu-virt-aarch64 engine with --board raspberry-pi-5-8gb: $refusal"
[[ $status -eq 0 && $refusal == *qemu-virt-aarch64*raspberry-pi-5-8gb* ]] ||
  { echo "FAIL: a board name mismatch was not refused naming both"; exit 1; }

/usr/bin/python3 - "$work/x86" "$work/arm" <<'EOF'
import os, sys
import numpy as np
x86_dir, arm_dir = sys.argv[1:3]
names = sorted(os.listdir(x86_dir))
assert names and names == sorted(os.listdir(arm_dir)), (names, os.listdir(arm_dir))
for n in names:
    a, b = np.load(os.path.join(x86_dir, n)), np.load(os.path.join(arm_dir, n))
    assert a.shape == b.shape and a.dtype == b.dtype, (n, a.shape, b.shape, a.dtype, b.dtype)
    diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
    print("%s: %s %s, max |x86 - aarch64| = %.3g" % (n, a.dtype, a.shape, diff))
    assert np.allclose(a, b, rtol=1e-5, atol=1e-6), n + ": aarch64 output differs from x86_64"
print("aarch64 outputs match x86_64")
EOF

# arm64 Debian packages: the checks of packaging.deb (tests/boards/test_packages.sh) on the cross
# build; its engine round trip from the extracted files runs under qemu-aarch64-static.
"$source/tests/boards/test_packages.sh" "$cross" "$source" || { echo "FAIL: the arm64 packages"; exit 1; }
echo "cross aarch64 OK"
