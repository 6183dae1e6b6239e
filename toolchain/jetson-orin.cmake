# Jetson Orin (Nano, NX, AGX): the aarch64 cross build plus CUDA for sm_87 (Ampere, integrated
# GPU sharing LPDDR5 with the CPU). CUDA 13 on the build machine targets sm_87; it cannot target
# sm_53/sm_72 (Nano, Xavier), which need JetPack 5's CUDA 11.4.
#
#   cmake -S . -B build-jetson -G Ninja -DCMAKE_TOOLCHAIN_FILE=toolchain/jetson-orin.cmake \
#         -DEDGERT_RUNTIME_ONLY=ON
#
# This file pins the CUDA target (sm_87, nvcc with the aarch64 host compiler). Building the CUDA
# plugin with it (EDGERT_WITH_CUDA=ON) needs the aarch64 CUDA target libraries (JetPack's, or
# NVIDIA's cuda-cross-aarch64): enabling CUDA as a CMake language links a test program, and the
# plugin links libcudart, cuBLASLt and cuDNN; CUDA_TARGET_ROOT finds them under the toolkit.
# Without them, the build machine's CUDA headers (architecture-neutral) are used for compiling,
# and tests/boards/test_jetson_toolchain.sh checks that every source of the plugin compiles for
# aarch64 / sm_87 and links against stand-ins of those libraries (cross_cuda_plugin.sh).
include(${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-gnu.cmake)

set(EDGERT_BOARD_PROFILE jetson-orin-nano-8gb CACHE STRING "Default board profile of this build")
set(CUDA_TOOLKIT_ROOT /usr/local/cuda CACHE PATH "CUDA toolkit (nvcc) on the build machine")
foreach(dir sbsa-linux aarch64-linux)
  if(NOT CUDA_TARGET_ROOT AND EXISTS ${CUDA_TOOLKIT_ROOT}/targets/${dir}/lib)
    set(CUDA_TARGET_ROOT ${CUDA_TOOLKIT_ROOT}/targets/${dir} CACHE PATH "aarch64 CUDA target libraries")
  endif()
endforeach()
set(CMAKE_CUDA_COMPILER ${CUDA_TOOLKIT_ROOT}/bin/nvcc CACHE FILEPATH "")
set(CMAKE_CUDA_HOST_COMPILER ${CMAKE_CXX_COMPILER} CACHE FILEPATH "")
set(CMAKE_CUDA_ARCHITECTURES 87 CACHE STRING "Orin: sm_87")
if(CUDA_TARGET_ROOT)
  list(APPEND CMAKE_FIND_ROOT_PATH ${CUDA_TARGET_ROOT})
else()
  set(CMAKE_CUDA_FLAGS_INIT "-I${CUDA_TOOLKIT_ROOT}/targets/x86_64-linux/include")
endif()
