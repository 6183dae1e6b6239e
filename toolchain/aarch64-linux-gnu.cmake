# Cross build for 64-bit ARM boards (Raspberry Pi 5, Jetson CPU side, qemu-virt-aarch64) with
# Debian's cross compiler (g++-aarch64-linux-gnu) and arm64 libraries from multiarch
# (dpkg --add-architecture arm64; toolchain/setup-deps installs the :arm64 -dev packages).
#
#   cmake -S . -B build-arm64 -G Ninja -DCMAKE_TOOLCHAIN_FILE=toolchain/aarch64-linux-gnu.cmake \
#         -DCMAKE_INSTALL_PREFIX=/usr
#
# builds the whole project (builder CLI, edgertd, edgertctl, tests); -DEDGERT_RUNTIME_ONLY=ON only
# libedgert, the plugins and the engine runner. protoc and flatc are the build machine's.
#
# Binaries run on the build machine under `qemu-aarch64-static -L /usr/aarch64-linux-gnu` (binfmt
# is not registered on these machines, so call qemu explicitly): CMAKE_CROSSCOMPILING_EMULATOR
# does that for ctest and for try_run.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# No CUDA plugin in a plain arm64 build: the build machine's CUDA libraries are x86-64.
# toolchain/jetson-orin.cmake turns it on for sm_87 with JetPack's (or stand-in) libraries.
set(EDGERT_WITH_CUDA OFF CACHE STRING "Build the CUDA plugin: AUTO, ON or OFF")

set(EDGERT_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${EDGERT_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${EDGERT_CROSS_TRIPLE}-g++)

# Headers and libraries from the target's multiarch directories only; programs (flatc, protoc)
# from the build machine.
set(CMAKE_FIND_ROOT_PATH /usr/${EDGERT_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(CMAKE_IGNORE_PATH /usr/lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu/cmake)

# libonnx-dev:arm64 cannot be installed next to libonnx-dev (both own /usr/lib/libonnxifi.so):
# the arm64 libonnx_proto (libonnx1:arm64) with the build machine's headers.
set(ONNX_DIR ${CMAKE_CURRENT_LIST_DIR}/cmake/onnx-multiarch CACHE PATH "ONNXConfig.cmake for the cross build")

# pkg-config must see the arm64 .pc files, never the build machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${EDGERT_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")

find_program(EDGERT_QEMU_AARCH64 qemu-aarch64-static)
if(EDGERT_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${EDGERT_QEMU_AARCH64} -L /usr/${EDGERT_CROSS_TRIPLE})
endif()

# GNUInstallDirs skips Debian's multiarch libdir when cross compiling: name it, so libedgert and
# the plugin directory compiled into it are /usr/lib/aarch64-linux-gnu/... as on the board.
set(CMAKE_INSTALL_LIBDIR lib/${EDGERT_CROSS_TRIPLE} CACHE PATH "Object code libraries (lib/<multiarch>)")

# Debian packages for this architecture (CPack).
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
