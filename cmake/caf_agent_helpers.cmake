# caf_agent_test(NAME SOURCES... LIBS ... LABELS ...): one GoogleTest binary.
function(caf_agent_test name)
  if(NOT TARGET GTest::gtest)
    return()  # LibTorch-only builds without GoogleTest: libraries and tools only
  endif()
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  if(NOT T_LABELS)
    set(T_LABELS cpu)
  endif()
  gtest_discover_tests(${name}
    WORKING_DIRECTORY "${PROJECT_SOURCE_DIR}"
    PROPERTIES LABELS "${T_LABELS}"
               ENVIRONMENT "CAF_AGENT_SOURCE_DIR=${PROJECT_SOURCE_DIR};CAF_AGENT_BINARY_DIR=${PROJECT_BINARY_DIR}"
    DISCOVERY_TIMEOUT 60)
endfunction()
