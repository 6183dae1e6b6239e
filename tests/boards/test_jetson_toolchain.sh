#!/usr/bin/env bash
# toolchain/jetson-orin.cmake: edgert configures with it (runtime-only), nvcc with the toolchain's
# settings (aarch64 host compiler, sm_87) compiles a kernel into an aarch64 object, and the CUDA
# plugin cross-builds for the Orin (cross_cuda_plugin.sh). Exit 77 when nvcc or the cross
# compiler is absent.
# usage: test_jetson_toolchain.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
work=$build/jetson-toolchain
nvcc=${CUDA_TOOLKIT_ROOT:-/usr/local/cuda}/bin/nvcc
[[ -x $nvcc ]] || { echo "FAIL: no nvcc at $nvcc"; exit 77; }
command -v aarch64-linux-gnu-g++ >/dev/null || { echo "FAIL: aarch64-linux-gnu-g++ missing"; exit 77; }
rm -rf "$work" && mkdir -p "$work"
cmake -S "$source" -B "$work/build" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$source/toolchain/jetson-orin.cmake" \
  -DEDGERT_RUNTIME_ONLY=ON >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; echo "FAIL: configure"; exit 1; }
cache=$work/build/CMakeCache.txt
grep -q '^CMAKE_CUDA_ARCHITECTURES:STRING=87$' "$cache" || { echo "FAIL: CUDA architectures are not sm_87"; exit 1; }
grep -q '^CMAKE_CUDA_HOST_COMPILER:FILEPATH=aarch64-linux-gnu-g++$' "$cache" || { echo "FAIL: CUDA host compiler is not aarch64"; exit 1; }
grep -q '^CMAKE_C_COMPILER:.*aarch64-linux-gnu-gcc' "$work/build/CMakeFiles/"*/CMakeCCompiler.cmake 2>/dev/null ||
  grep -q 'aarch64-linux-gnu-gcc' "$work/build/CMakeFiles/"*/CMakeCCompiler.cmake || { echo "FAIL: not the aarch64 C compiler"; exit 1; }
# As the toolchain file does without aarch64 CUDA target libraries: the host's headers stand in.
cuda=$(dirname "$(dirname "$nvcc")")
flags=""
[[ -d $cuda/targets/sbsa-linux/include || -d $cuda/targets/aarch64-linux/include ]] || flags="-I$cuda/targets/x86_64-linux/include"
"$nvcc" -ccbin aarch64-linux-gnu-g++ -arch=sm_87 $flags -c "$source/tests/boards/jetson_probe_scale.cu" -o "$work/probe.o"
file "$work/probe.o" | grep -q 'ARM aarch64' || { echo "FAIL: probe.o is not aarch64: $(file "$work/probe.o")"; exit 1; }
grep -c 'sm_87' <(strings "$work/probe.o") >/dev/null || { echo "FAIL: no sm_87 code in probe.o"; exit 1; }
echo "jetson toolchain OK: configured, probe kernel compiled for sm_87 on aarch64"
"$source/tests/boards/cross_cuda_plugin.sh" "$work/cuda-plugin" "$source" 2
