# Helpers that register tessel's tests with CTest, each under one capability label:
# core fail headers fusion backend grad vmap scan random nn optim data checkpoint profile example shard oracle export pipeline.
include(GoogleTest)

set(TESSEL_TEST_LABELS core fail headers fusion backend grad vmap scan random nn optim data checkpoint profile example shard oracle export pipeline)

# The JAX judges (the oracle and export tests, the checkpoints' interop test) come from the virtual
# environment that `scripts/setup` makes (.venv, or TESSEL_JUDGE_PYTHON); without it their tests are
# skipped with that advice, unless TESSEL_REQUIRE_JUDGES is set in their environment (CI sets it).
set(TESSEL_JUDGE_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python" CACHE FILEPATH "Python with jax, jaxlib and numpy: the oracle tests' judge")
set(TESSEL_JUDGES_FOUND OFF)
if(EXISTS "${TESSEL_JUDGE_PYTHON}")
  execute_process(COMMAND "${TESSEL_JUDGE_PYTHON}" -c "import jax, ml_dtypes, numpy, scipy" RESULT_VARIABLE judge_rc OUTPUT_QUIET ERROR_QUIET)
  if(judge_rc EQUAL 0)
    set(TESSEL_JUDGES_FOUND ON)
  endif()
endif()
if(NOT TESSEL_JUDGES_FOUND)
  message(STATUS "tessel: no JAX judge at ${TESSEL_JUDGE_PYTHON}, so the oracle tests will report a skip (scripts/setup makes it)")
endif()

# tessel_add_judged_test(<name> <label> <command...>): a test that needs the judges' Python; without them it
# reports a skip with the advice (a failure where TESSEL_REQUIRE_JUDGES is set: CI).
function(tessel_add_judged_test name label)
  if(TESSEL_JUDGES_FOUND)
    add_test(NAME ${name} COMMAND ${ARGN})
  else()
    add_test(NAME ${name} COMMAND sh -c "echo 'no JAX judge (${TESSEL_JUDGE_PYTHON}): run scripts/setup --deps-only, then cmake again'; \
[ -n \"$TESSEL_REQUIRE_JUDGES\" ] && exit 1; exit 77")
  endif()
  set_tests_properties(${name} PROPERTIES LABELS ${label} SKIP_RETURN_CODE 77 TIMEOUT 900)
endfunction()

# tessel_add_mpi_test(<name> LABEL <label> PROCESSES <n> TIMEOUT <seconds> TARGET <executable> [ARGS <args...>]
#                     [ENVIRONMENT <VAR=value...>])
# The executable under mpirun -n <n> (oversubscribed: more processes than cores), with the environment
# every mpirun test needs (TESSEL_MPI_ENVIRONMENT, and ENVIRONMENT's) and 2 of ctest's processors.
function(tessel_add_mpi_test name)
  cmake_parse_arguments(arg "" "LABEL;PROCESSES;TIMEOUT;TARGET" "ARGS;ENVIRONMENT" ${ARGN})
  add_test(NAME ${name}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${arg_PROCESSES} --oversubscribe ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:${arg_TARGET}> ${arg_ARGS} ${MPIEXEC_POSTFLAGS})
  set(environment ${TESSEL_MPI_ENVIRONMENT} ${arg_ENVIRONMENT})
  set_tests_properties(${name} PROPERTIES LABELS ${arg_LABEL} TIMEOUT ${arg_TIMEOUT} PROCESSORS 2 ENVIRONMENT "${environment}")
endfunction()

# tessel_add_test(<name> LABEL <label> SOURCES <files...> [HEAVY] [KERNELS])
# One GoogleTest executable; every test case in it becomes a CTest test carrying the label.
# KERNELS: it instantiates SIMD kernels itself (Highway's for every target, xsimd's), which keep -O1 under
# the sanitizers where the other tests build at -O0: their run time is its (backend_hwy_gemm ran 54 s at
# -O1, 125 s at -O0), and GCC 12 rejects xsimd's AVX-512BW select at -O0.
# HEAVY: its translation units are template-heavy (transform checkers over every primitive) while the code
# they run at run time is the executor's, which the other tests already run under the sanitizers; it is
# built and run in the Release build only, not again in the sanitizer build (TESSEL_SANITIZE). The other
# tests are left out of a Release build with TESSEL_RUNTIME_TESTS_SANITIZED_ELSEWHERE: a sanitizer build
# runs them.
function(tessel_add_test name)
  cmake_parse_arguments(arg "HEAVY;KERNELS" "LABEL" "SOURCES" ${ARGN})
  if(NOT arg_LABEL IN_LIST TESSEL_TEST_LABELS)
    message(FATAL_ERROR "tessel_add_test(${name}): LABEL '${arg_LABEL}' is not one of: ${TESSEL_TEST_LABELS}")
  endif()
  if(arg_HEAVY AND TESSEL_SANITIZE)
    return()
  endif()
  if(NOT arg_HEAVY AND TESSEL_RUNTIME_TESTS_SANITIZED_ELSEWHERE AND NOT TESSEL_SANITIZE)
    return()
  endif()
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE tessel::tessel tessel_project_options tessel_test_support GTest::gtest_main)
  # Tests build at -O1 in a Release build (vmap/transform_test.cpp: 12.7 s, against 14.9 at -O2 and 17.0
  # at -O3, g++ 12) and at -O0 in the sanitizer build (grad/remat_test.cpp: 10.9 s against 19.3 at -O1;
  # at -O0 the Release build's constexpr-bound files gain nothing): their time is compilation. The
  # library (the executor and the kernels), the examples and the benchmarks keep their -O3 (-O1 under
  # the sanitizers), and the examples' tests run that code.
  target_compile_options(${name} PRIVATE $<$<CONFIG:Release>:-O1>)
  if(TESSEL_SANITIZE AND NOT arg_KERNELS)
    target_compile_options(${name} PRIVATE -O0)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS ${arg_LABEL} DISCOVERY_TIMEOUT 60)
endfunction()

# tessel_add_fail_test(<file.cpp>)
# The file must fail to compile with one error (one "error:" line; "// errors: <n>" in the file allows n)
# in at most 25 lines (not counting the source lines clang quotes under its notes), and the diagnostic must
# contain every text given on a line "// expect: <text>" in the file (cmake/check_compile_failure.cmake).
# The test runs the compiler itself with the flags of a target fail_<name> (which
# `cmake --build <dir> --target fail_<name>` builds, to read the message in full), not the build tool, so
# that fail-tests run in parallel with each other and with the build's other tests.
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
  tessel_fail_test_precompiled_header(${target})
  set(flags ${CMAKE_CURRENT_BINARY_DIR}/${target}.flags.cmake)
  file(GENERATE OUTPUT ${flags} CONTENT "set(COMPILER [[${CMAKE_CXX_COMPILER}]])
set(STANDARD [[${CMAKE_CXX20_EXTENSION_COMPILE_OPTION}]])
set(DEFINITIONS [[$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>]])
set(INCLUDES [[${PROJECT_BINARY_DIR}/fail_test_pch;$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>]])
set(IMPLICIT_INCLUDES [[${CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES}]])
set(OPTIONS [[$<TARGET_PROPERTY:${target},COMPILE_OPTIONS>]])
")
  add_test(NAME fail.${stem}
    COMMAND ${CMAKE_COMMAND} -DFLAGS=${flags} -DSOURCE=${file} -DCOMPILER_ID=${CMAKE_CXX_COMPILER_ID}
            -P ${PROJECT_SOURCE_DIR}/cmake/check_compile_failure.cmake)
  set_tests_properties(fail.${stem} PROPERTIES LABELS fail)
  set(${stem}_test fail.${stem} PARENT_SCOPE)
endfunction()

# With g++, <tessel/tessel.hpp> and <tessel/ops.hpp> precompiled once (a target of the build) serve every
# fail-test that includes one of them first (56 of 62): g++ looks for tessel/<name>.gch in each include
# directory before the header, and uses it only if it was made with the same options (otherwise it reads
# the headers, silently). It makes such a fail-test about 2x faster to compile.
function(tessel_fail_test_precompiled_header flags_target)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU" OR TARGET tessel_fail_test_pch)
    return()
  endif()
  set(dir ${PROJECT_BINARY_DIR}/fail_test_pch)  # the fail-tests' first include directory
  set(definitions "$<TARGET_PROPERTY:${flags_target},COMPILE_DEFINITIONS>")
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/tessel/*.hpp)
  set(outputs)
  foreach(header tessel.hpp ops.hpp)
    set(pch ${dir}/tessel/${header}.gch)
    # Made from a file that includes the header: g++ warns of '#pragma once' in a header compiled as the main file.
    set(source ${PROJECT_BINARY_DIR}/fail_test_pch_${header})
    file(WRITE ${source} "#include <tessel/${header}>\n")
    add_custom_command(OUTPUT ${pch}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}/tessel
      COMMAND ${CMAKE_CXX_COMPILER} ${CMAKE_CXX20_EXTENSION_COMPILE_OPTION}
        "$<$<BOOL:${definitions}>:-D$<JOIN:${definitions},;-D>>"
        -I${PROJECT_SOURCE_DIR}/include -x c++-header ${source} -o ${pch}
      DEPENDS ${headers} COMMAND_EXPAND_LISTS
      COMMENT "Precompiling tessel/${header} for the fail-tests")
    list(APPEND outputs ${pch})
  endforeach()
  add_custom_target(tessel_fail_test_pch ALL DEPENDS ${outputs})
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
  # -fsyntax-only: the check is about includes and warnings (the compiler front end's), and the
  # implementation headers' code is compiled in the library already; writes no object, so the test
  # compiles every header each time it runs (kernels/implementation.hpp: 26 s at -O3).
  target_compile_options(tessel_header_check PRIVATE -Wall -Wextra -Wpedantic -Werror -fsyntax-only)
  add_test(NAME headers.self_contained
    COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --target tessel_header_check)
  set_tests_properties(headers.self_contained PROPERTIES LABELS headers)
endfunction()
