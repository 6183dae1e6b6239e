#!/usr/bin/env bash
# Cross-builds the whole project for aarch64 (toolchain/aarch64-linux-gnu.cmake: libedgert, the
# plugins, the edgert CLI, edgertd, edgertctl, the test programs) into BUILD_DIR/cross-aarch64
# ($EDGERT_CROSS_BUILD_DIR) and runs the engine runner under qemu-aarch64-static: engines built
# on this x86_64 machine for qemu-virt-aarch64 and for the three Jetson profiles (CPU kernels, the
# board's GPU in their record) pass the header, board and plugin checks there and run with outputs
# matching the x86_64 run of the same model, and the x86_64 engine is refused there naming both
# boards. The cross-built `edgert` runs there too: `edgert boards` says what native is on aarch64,
# `edgert run` runs a Jetson engine, and a build without --board is for that profile. (edgertd is
# in the cross build but does not run under qemu-user, whose guest threads hang on this kernel:
# system.image_boot_aarch64 runs it in a full arm64 VM.) Then the arm64
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
# The product's optimization (-O2) without its debug information: nothing here reads it, and it
# is a third of this build's compile time.
cmake -S "$source" -B "$cross" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$source/toolchain/aarch64-linux-gnu.cmake" \
  -DEDGERT_RUNTIME_ONLY=OFF -DEDGERT_UNITY_BUILD=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O2 -DNDEBUG" >"$build/cross-aarch64.log" 2>&1 ||
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

# Jetson engines hold the board's GPU in their record and only CPU kernels: the runtime's
# header, board (no board name given: the hardware decides) and plugin checks pass on aarch64.
jetsons=(jetson-orin-nano-8gb jetson-orin-nx-16gb jetson-agx-orin-64gb)
for jetson in "${jetsons[@]}"; do
  "$build/bin/edgert" build "$work/demo.onnx" --board "$jetson" -o "$work/$jetson.engine" >/dev/null
  mkdir -p "$work/$jetson"
  "${qemu[@]}" "$cross/bin/edgert_engine_runner" "$work/$jetson.engine" --plugin-path "$cross/lib/edgert/plugins" \
    --output-dir "$work/$jetson" "$work/input.npy" || { echo "FAIL: the $jetson engine did not run under qemu"; exit 1; }
done

# The cross-built edgert CLI on aarch64: what native is here, a Jetson engine through `edgert run`,
# and a build without --board for native's profile, run.
cli=("${qemu[@]}" -E EDGERT_PLUGIN_PATH="$cross/lib/edgert/plugins" -E EDGERT_BOARD_PROFILES="$source/board_profiles")
"${cli[@]}" "$cross/bin/edgert" boards --json >"$work/boards.json" || { echo "FAIL: edgert boards under qemu"; exit 1; }
native=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["machine"]["native"]["name"])' "$work/boards.json")
"${cli[@]}" "$cross/bin/edgert" boards | head -n 4
mkdir -p "$work/cli-jetson" "$work/cli-native"
"${cli[@]}" "$cross/bin/edgert" run "$work/jetson-orin-nano-8gb.engine" --input "input=$work/input.npy" --npy \
  --output-dir "$work/cli-jetson" | tail -n 1 || { echo "FAIL: edgert run of the Jetson engine under qemu"; exit 1; }
start=$SECONDS
"${cli[@]}" "$cross/bin/edgert" build "$work/demo.onnx" -o "$work/native.engine" ||
  { echo "FAIL: edgert build (native) under qemu"; exit 1; }
echo "native build under qemu: $((SECONDS - start)) s"
built_for=$("${cli[@]}" "$cross/bin/edgert" inspect --json "$work/native.engine" |
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["board"]["name"])')
[[ $built_for == "$native" ]] || { echo "FAIL: a build without --board on aarch64 is for '$built_for', native is '$native'"; exit 1; }
"${cli[@]}" "$cross/bin/edgert" run "$work/native.engine" --input "input=$work/input.npy" --npy \
  --output-dir "$work/cli-native" | tail -n 1 || { echo "FAIL: edgert run of the native engine under qemu"; exit 1; }
echo "aarch64 edgert: native is $native; Jetson engines run; the default build is for $native"

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

/usr/bin/python3 - "$work/x86" "$work/arm" "${jetsons[@]/#/$work/}" "$work/cli-jetson" "$work/cli-native" <<'EOF'
import os, sys
import numpy as np
x86_dir = sys.argv[1]
names = sorted(os.listdir(x86_dir))
for arm_dir in sys.argv[2:]:
    assert names and names == sorted(os.listdir(arm_dir)), (arm_dir, names, os.listdir(arm_dir))
    for n in names:
        a, b = np.load(os.path.join(x86_dir, n)), np.load(os.path.join(arm_dir, n))
        assert a.shape == b.shape and a.dtype == b.dtype, (n, a.shape, b.shape, a.dtype, b.dtype)
        diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
        print("%s (%s): %s %s, max |x86 - aarch64| = %.3g" % (n, os.path.basename(arm_dir), a.dtype, a.shape, diff))
        assert np.allclose(a, b, rtol=1e-5, atol=1e-6), n + ": aarch64 output of " + arm_dir + " differs from x86_64"
print("aarch64 outputs match x86_64")
EOF

# arm64 Debian packages: the checks of packaging.deb (tests/boards/test_packages.sh) on the cross
# build; its engine round trip from the extracted files runs under qemu-aarch64-static.
"$source/tests/boards/test_packages.sh" "$cross" "$source" || { echo "FAIL: the arm64 packages"; exit 1; }
echo "cross aarch64 OK"
