# find_package(ONNX) for cross builds: the target's libonnx_proto from Debian's libonnx1:<arch>,
# headers from the build machine's libonnx-dev (generated protobuf code, the same on every
# architecture for one protobuf version). libonnx-dev:<arch> itself cannot be installed next to
# the build machine's: both ship /usr/lib/libonnxifi.so (not multiarch) with different contents.
# Defines the imported targets onnx_proto and onnx as Debian's ONNXTargets.cmake does.
set(ONNX_VERSION 1.12.0)
set(_edgert_onnx_libdir /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
foreach(_lib onnx_proto onnx)
  if(NOT EXISTS ${_edgert_onnx_libdir}/lib${_lib}.so.1)
    set(ONNX_FOUND FALSE)
    set(ONNX_NOT_FOUND_MESSAGE
        "${_edgert_onnx_libdir}/lib${_lib}.so.1 missing: apt-get install libonnx1:<arch> (toolchain/setup-deps)")
    return()
  endif()
endforeach()
if(NOT EXISTS /usr/include/onnx/onnx-ml.pb.h)
  set(ONNX_FOUND FALSE)
  set(ONNX_NOT_FOUND_MESSAGE "/usr/include/onnx/onnx-ml.pb.h missing: apt-get install libonnx-dev (the build machine's)")
  return()
endif()
if(NOT TARGET onnx_proto)
  add_library(onnx_proto SHARED IMPORTED)
  set_target_properties(onnx_proto PROPERTIES
    IMPORTED_LOCATION ${_edgert_onnx_libdir}/libonnx_proto.so.1
    IMPORTED_SONAME libonnx_proto.so.1
    INTERFACE_COMPILE_DEFINITIONS "ONNX_NAMESPACE=onnx;ONNX_ML=1"
    INTERFACE_INCLUDE_DIRECTORIES /usr/include)
  add_library(onnx SHARED IMPORTED)
  set_target_properties(onnx PROPERTIES
    IMPORTED_LOCATION ${_edgert_onnx_libdir}/libonnx.so.1
    IMPORTED_SONAME libonnx.so.1
    INTERFACE_COMPILE_DEFINITIONS "ONNX_NAMESPACE=onnx;ONNX_ML=1"
    INTERFACE_INCLUDE_DIRECTORIES /usr/include
    INTERFACE_LINK_LIBRARIES onnx_proto)
endif()
set(ONNX_INCLUDE_DIRS /usr/include)
