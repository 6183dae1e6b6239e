# ctest driver: build the fuzzer with clang, seed it with real engines, run it for SECONDS.
# Inputs: SOURCE_DIR BINARY_DIR CLANGXX EDGERT SECONDS
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/fuzz -B ${BINARY_DIR} -G Ninja
                        -DCMAKE_CXX_COMPILER=${CLANGXX} -DCMAKE_BUILD_TYPE=Debug
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the fuzzer failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BINARY_DIR} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the fuzzer failed")
endif()
file(MAKE_DIRECTORY ${BINARY_DIR}/corpus)
foreach(test test_conv_with_strides_padding test_gemm_all_attributes test_resize_downsample_scales_linear)
  execute_process(COMMAND ${EDGERT} build /usr/share/libonnx-testdata/data/node/${test}/model.onnx
                          -o ${BINARY_DIR}/corpus/${test}.engine RESULT_VARIABLE rc)
  if(rc)
    message(FATAL_ERROR "building the seed engine ${test} failed")
  endif()
endforeach()
get_filename_component(bin_dir ${EDGERT} DIRECTORY)
set(ENV{EDGERT_PLUGIN_PATH} "${bin_dir}/../lib/edgert/plugins")
execute_process(COMMAND ${BINARY_DIR}/engine_loader_fuzz -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
                        -print_final_stats=1 ${BINARY_DIR}/corpus
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the engine loader fuzzer found a failure (exit ${rc}); the crashing input is in the working directory")
endif()
