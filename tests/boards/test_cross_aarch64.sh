#!/usr/bin/env bash
# Cross-builds libedgert + the CPU plugin + the engine runner for aarch64
# (toolchain/aarch64-linux-gnu.cmake, EDGERT_RUNTIME_ONLY) and runs them under qemu-aarch64-static:
# an engine built on this x86_64 machine for qemu-virt-aarch64 runs there with outputs matching
# the x86_64 run of the same model, and the x86_64 engine is refused there naming both boards.
#
# usage: test_cross_aarch64.sh BUILD_DIR SOURCE_DIR
# Exit 77 (skipped) when the cross compiler, qemu-aarch64-static or the arm64 libraries are absent.
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
cross=${EDGERT_CROSS_BUILD_DIR:-$build/cross-aarch64}
work=$build/cross-aarch64-work
sysroot=/usr/aarch64-linux-gnu

for tool in aarch64-linux-gnu-g++ qemu-aarch64-static; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool missing (toolchain/setup-deps installs it)"; exit 77; }
done
for pc in libxxhash flatbuffers; do
  [[ -f /usr/lib/aarch64-linux-gnu/pkgconfig/$pc.pc ]] ||
    { echo "SKIP: arm64 $pc missing (dpkg --add-architecture arm64; toolchain/setup-deps)"; exit 77; }
done

start=$SECONDS
cmake -S "$source" -B "$cross" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$source/toolchain/aarch64-linux-gnu.cmake" \
  -DEDGERT_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr >/dev/null
cmake --build "$cross" -j"${EDGERT_CROSS_JOBS:-$(nproc)}" >/dev/null
echo "cross build: $((SECONDS - start)) s"
file -L "$cross/bin/edgert_engine_runner" "$cross/lib/edgert/plugins/libedgert_plugin_cpu.so" | sed 's/, BuildID.*//'
file -L "$cross/lib/edgert/plugins/libedgert_plugin_cpu.so" | grep -q 'ARM aarch64' || { echo "FAIL: plugin is not aarch64"; exit 1; }

rm -rf "$work" && mkdir -p "$work/x86" "$work/arm" "$work/refused"
/usr/bin/python3 "$source/tests/models/make_demo_model.py" --output "$work/demo.onnx" --input "$work/input.npy" >/dev/null
"$build/bin/edgert" build "$work/demo.onnx" --board x86_64-generic -o "$work/x86.engine" >/dev/null
"$build/bin/edgert" build "$work/demo.onnx" --board qemu-virt-aarch64 -o "$work/arm.engine" >/dev/null
"$build/bin/edgert_engine_runner" "$work/x86.engine" --board x86_64-generic --output-dir "$work/x86" "$work/input.npy"

qemu=(qemu-aarch64-static -L "$sysroot" -E LD_LIBRARY_PATH="$cross/lib")
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

# arm64 Debian packages of what cross-builds: edgert (libedgert, headers, profiles) and the plugin.
rm -rf "$work/debs" && mkdir -p "$work/debs"
(cd "$work/debs" && cpack -G DEB --config "$cross/CPackConfig.cmake" -B "$work/debs" >cpack.log 2>&1) ||
  { cat "$work/debs/cpack.log"; echo "FAIL: cpack (arm64)"; exit 1; }
for pkg in edgert edgert-plugin-cpu; do
  deb=$(ls "$work/debs/${pkg}_"*_arm64.deb 2>/dev/null | head -n 1)
  [[ -n $deb ]] || { echo "FAIL: no ${pkg}_*_arm64.deb"; exit 1; }
  echo "$(basename "$deb"): $(dpkg-deb -f "$deb" Architecture Depends | tr '\n' ' ')"
done
dpkg-deb -c "$(ls "$work/debs"/edgert-plugin-cpu_*_arm64.deb)" | grep -q 'usr/lib/aarch64-linux-gnu/edgert/plugins/libedgert_plugin_cpu.so' ||
  { echo "FAIL: the arm64 plugin is not in /usr/lib/aarch64-linux-gnu/edgert/plugins"; exit 1; }
echo "cross aarch64 OK"
