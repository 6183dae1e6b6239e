#!/usr/bin/env bash
# The CUDA plugin cross-built for a Jetson Orin: every source of plugins/cuda (the list in its
# CMakeLists.txt) compiled for aarch64 with nvcc for sm_87 (the .cu files) and the aarch64 g++
# (the rest), linked into libedgert_plugin_cuda.so with every symbol resolved (--no-undefined).
# This machine has no aarch64 CUDA libraries (JetPack has them on the board), so the link uses
# stand-ins with the sonames and exactly the symbols the plugin takes from libcudart, cuBLASLt
# and cuDNN, each checked to exist in the build machine's own CUDA libraries first: a symbol no
# CUDA library exports fails the link, as it would on the board.
# usage: cross_cuda_plugin.sh WORK_DIR SOURCE_DIR [JOBS]
set -euo pipefail
work=$1
source=$(cd "$2" && pwd)
jobs=${3:-2}
cuda=${CUDA_TOOLKIT_ROOT:-/usr/local/cuda}
nvcc=$cuda/bin/nvcc
cxx=aarch64-linux-gnu-g++
rm -rf "$work" && mkdir -p "$work/obj" "$work/stubs"

# The sources, as CMake lists them (paths relative to plugins/cuda or the project root).
mapfile -t sources < <(sed -n '/add_library(edgert_plugin_cuda MODULE/,/^)/p' "$source/plugins/cuda/CMakeLists.txt" |
  sed '1d;$d' | sed 's/^ *//; s#\${PROJECT_SOURCE_DIR}/#'"$source"'/#' |
  while read -r f; do [[ $f = /* ]] && echo "$f" || echo "$source/plugins/cuda/$f"; done)
[[ ${#sources[@]} -gt 5 ]] || { echo "FAIL: no sources read from plugins/cuda/CMakeLists.txt"; exit 1; }

defines=(-DEDGERT_CUDA_PLUGIN_VERSION='"cross"' -DEDGERT_VERSION='"cross"')
includes=(-I"$source/plugins/cuda" -I"$source/plugins/common" -I"$source/runtime/include" -isystem "$cuda/include")
compile() {
  local src=$1 obj
  obj="$work/obj/$(basename "$src").o"
  if [[ $src == *.cu ]]; then
    "$nvcc" -ccbin "$cxx" -arch=sm_87 -std=c++17 -O2 --expt-relaxed-constexpr -Xcompiler=-fPIC,-fvisibility=hidden \
      "${defines[@]}" "${includes[@]}" -c "$src" -o "$obj"
  else
    "$cxx" -std=c++17 -O2 -fPIC -fvisibility=hidden "${defines[@]}" "${includes[@]}" -c "$src" -o "$obj"
  fi
}
export work cxx nvcc
printf '%s\n' "${sources[@]}" | xargs -P "$jobs" -I{} bash -c "$(declare -p defines includes; declare -f compile); compile {}" \
  || { echo "FAIL: a CUDA plugin source does not compile for aarch64 / sm_87"; exit 1; }

# Stand-in libraries: what the objects leave undefined and a CUDA library of this machine
# exports, by library.
undefined=$(aarch64-linux-gnu-nm -u "$work"/obj/*.o | awk '{print $2}' | sort -u)
declare -A lib_of=([cudart]=libcudart.so.13 [cublasLt]=libcublasLt.so.13 [cudnn]=libcudnn.so.9)
declare -A path_of=([cudart]="$cuda/lib64/libcudart.so" [cublasLt]="$cuda/lib64/libcublasLt.so"
                    [cudnn]="$(ls "$cuda"/lib64/libcudnn.so "$cuda"/targets/x86_64-linux/lib/libcudnn.so \
                               /usr/lib/x86_64-linux-gnu/libcudnn.so 2>/dev/null | head -1)")
for lib in cudart cublasLt cudnn; do
  [[ -n ${path_of[$lib]} && -e ${path_of[$lib]} ]] || { echo "FAIL: no $lib library on this machine"; exit 1; }
  exported=$(nm -D --defined-only "${path_of[$lib]}" | awk '{print $3}' | sed 's/@.*//' | sort -u)
  comm -12 <(echo "$undefined") <(echo "$exported") | sed 's/.*/void &(void) {}/' >"$work/stubs/$lib.c"
  aarch64-linux-gnu-gcc -shared -fPIC -Wl,-soname,"${lib_of[$lib]}" -o "$work/stubs/${lib_of[$lib]}" "$work/stubs/$lib.c"
  ln -sf "${lib_of[$lib]}" "$work/stubs/lib$lib.so"
done
[[ -s $work/stubs/cudnn.c && -s $work/stubs/cublasLt.c && -s $work/stubs/cudart.c ]] ||
  { echo "FAIL: the plugin takes nothing from cudart, cuBLASLt or cuDNN?"; exit 1; }

"$cxx" -shared -o "$work/libedgert_plugin_cuda.so" "$work"/obj/*.o -L"$work/stubs" -lcudnn -lcublasLt -lcudart \
  -Wl,--no-undefined || { echo "FAIL: the aarch64 CUDA plugin does not link"; exit 1; }
plugin=$work/libedgert_plugin_cuda.so
file "$plugin" | grep -q 'ARM aarch64' || { echo "FAIL: not an aarch64 library: $(file "$plugin")"; exit 1; }
aarch64-linux-gnu-nm -D --defined-only "$plugin" | grep ' edgert_plugin_entry$' >/dev/null ||
  { echo "FAIL: the plugin does not export edgert_plugin_entry"; exit 1; }
strings "$plugin" | grep 'sm_87' >/dev/null || { echo "FAIL: no sm_87 code in the plugin"; exit 1; }
needed=$(aarch64-linux-gnu-readelf -d "$plugin" | grep NEEDED | tr -d '[]' | awk '{print $NF}' | tr '\n' ' ')
echo "aarch64 CUDA plugin OK: ${#sources[@]} sources, sm_87 kernels, needs $needed"
