# Helpers that register tessel's tests with CTest, each under one capability label:
# core fail headers fusion backend grad vmap scan random nn optim data checkpoint profile example shard.
include(GoogleTest)

set(TESSEL_TEST_LABELS core fail headers fusion backend grad vmap scan random nn optim data checkpoint profile example shard)

# tessel_add_test(<name> LABEL <label> SOURCES <files...> [LIBRARIES <libs...>] [HEAVY])
# One GoogleTest executable; every test case in it becomes a CTest test carrying the label.
# HEAVY: its translation units are template-heavy (transform checkers over every primitive) while the code
# they run at run time is the executor's, which the other tests already run under the sanitizers; it is
# built and run in the Release build only, not again in the sanitizer build (TESSEL_SANITIZE).
function(tessel_add_test name)
  cmake_parse_arguments(arg "HEAVY" "LABEL" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT arg_LABEL IN_LIST TESSEL_TEST_LABELS)
    message(FATAL_ERROR "tessel_add_test(${name}): LABEL '${arg_LABEL}' is not one of: ${TESSEL_TEST_LABELS}")
  endif()
  if(arg_HEAVY AND TESSEL_SANITIZE)
    return()
  endif()
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE tessel::tessel tessel_project_options tessel_test_support GTest::gtest_main
    ${arg_LIBRARIES})
  gtest_discover_tests(${name} PROPERTIES LABELS ${arg_LABEL} DISCOVERY_TIMEOUT 60)
endfunction()

# tessel_add_fail_test(<file.cpp>)
# The file must fail to compile with one error (one "error:" line; "// errors: <n>" in the file allows n)
# in at most 25 lines (not counting the source lines clang quotes under its notes), and the diagnostic must contain every text given on a line "// expect: <text>" in
# the file (cmake/check_compile_failure.cmake).
function(tessel_add_fail_test file)
  get_filename_component(stem ${file} NAME_WE)
  set(target fail_${stem})
  add_executable(${target} EXCLUDE_FROM_ALL ${file})
  target_link_libraries(${target} PRIVATE tessel::tessel)
  file(STRINGS ${file} expect_lines REGEX "^// expect: ")
  list(TRANSFORM expect_lines REPLACE "^// expect: " "")
  foreach(line IN LISTS expect_lines)
    if(line STREQUAL "")
      message(FATAL_ERROR "${file}: an '// expect:' line is empty or holds a ';' (write a fragment without ';')")
    endif()
  endforeach()
  if(NOT expect_lines)
    message(FATAL_ERROR "${file}: a fail-test needs at least one '// expect: <text>' line")
  endif()
  add_test(NAME fail.${stem}
    COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DTARGET=${target} -DSOURCE=${file}
            -DCOMPILER_ID=${CMAKE_CXX_COMPILER_ID} -P ${PROJECT_SOURCE_DIR}/cmake/check_compile_failure.cmake)
  set_tests_properties(fail.${stem} PROPERTIES LABELS fail RESOURCE_LOCK tessel_build)
  set(${stem}_test fail.${stem} PARENT_SCOPE)
endfunction()

# tessel_add_header_check(<label>)
# Every public header compiled on its own, as its own translation unit, warnings as errors.
function(tessel_add_header_check)
  file(GLOB_RECURSE headers RELATIVE ${PROJECT_SOURCE_DIR}/include CONFIGURE_DEPENDS
    ${PROJECT_SOURCE_DIR}/include/tessel/*.hpp)
  set(sources)
  foreach(header IN LISTS headers)
    string(MAKE_C_IDENTIFIER ${header} id)
    set(source ${CMAKE_CURRENT_BINARY_DIR}/header_check/${id}.cpp)
    file(CONFIGURE OUTPUT ${source} CONTENT "#include \"${header}\"\n#include \"${header}\"  // and include guards work\n")
    list(APPEND sources ${source})
  endforeach()
  add_library(tessel_header_check OBJECT EXCLUDE_FROM_ALL ${sources})
  target_link_libraries(tessel_header_check PRIVATE tessel::tessel)
  target_compile_options(tessel_header_check PRIVATE -Wall -Wextra -Wpedantic -Werror)
  add_test(NAME headers.self_contained
    COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target tessel_header_check)
  set_tests_properties(headers.self_contained PROPERTIES LABELS headers RESOURCE_LOCK tessel_build)
endfunction()
