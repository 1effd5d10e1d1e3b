# cmake -DFLAGS=<flags.cmake> -DSOURCE=<file.cpp> [-DCOMPILER_ID=<id>] [-DMAX_LINES=<n>]
#       -P check_compile_failure.cmake
# FLAGS sets COMPILER, STANDARD, DEFINITIONS, INCLUDES, IMPLICIT_INCLUDES and OPTIONS (tessel_add_fail_test
# writes it). Passes when compiling SOURCE fails with one mistake reported once: the compiler's output has exactly one
# "error:" line (a line "// errors: <n>" in SOURCE allows n, for a rule not yet reported alone), at most
# MAX_LINES lines (25), and every text that SOURCE gives on a line "// expect: <text>".
# clang quotes the source line and a caret line under each of its notes (one per template instantiation);
# with COMPILER_ID Clang those quotes are not counted, only its diagnostic lines.
# clang prints a long message in 32-character parts (core/error.hpp); they are joined before matching.
if(NOT DEFINED MAX_LINES)
  set(MAX_LINES 25)
endif()
file(STRINGS ${SOURCE} EXPECT REGEX "^// expect: ")
list(TRANSFORM EXPECT REPLACE "^// expect: " "")
set(expected_errors 1)
file(STRINGS ${SOURCE} errors_line REGEX "^// errors: [0-9]+")
if(errors_line)
  string(REGEX REPLACE "^// errors: ([0-9]+).*" "\\1" expected_errors "${errors_line}")
endif()

cmake_minimum_required(VERSION 3.25)  # IN_LIST
include(${FLAGS})
get_filename_component(TARGET ${SOURCE} NAME)
set(command ${COMPILER} ${STANDARD})
foreach(definition IN LISTS DEFINITIONS)
  list(APPEND command -D${definition})
endforeach()
foreach(dir IN LISTS INCLUDES)
  if(dir AND NOT dir IN_LIST IMPLICIT_INCLUDES)  # as CMake does: -I/usr/include would break the C++ headers' #include_next
    list(APPEND command -I${dir})
  endif()
endforeach()
list(APPEND command ${OPTIONS} -fsyntax-only ${SOURCE})
execute_process(COMMAND ${command} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(log "${out}${err}")
if(result EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but it must not: its rule was not enforced")
endif()

# The characters that CMake lists treat specially (';' and brackets abound in template names) travel as
# placeholders while the output is split into lines.
string(REPLACE ";" "<semicolon>" safe "${log}")
string(REPLACE "[" "<open>" safe "${safe}")
string(REPLACE "]" "<close>" safe "${safe}")
string(REGEX REPLACE "\n" ";" lines "${safe}")
set(diagnostic "")
set(line_count 0)
set(error_count 0)
foreach(line IN LISTS lines)
  string(APPEND diagnostic "${line}\n")
  if(NOT COMPILER_ID STREQUAL "Clang" OR line MATCHES "^In file included from |^[^ ]+:[0-9]+:[0-9]+: |^[^ ]+: |^[0-9]+ errors? generated")
    math(EXPR line_count "${line_count} + 1")
  endif()
  if(line MATCHES "(^|: )(fatal )?error: ")
    math(EXPR error_count "${error_count} + 1")
  endif()
endforeach()
if(error_count EQUAL 0)  # no compiler diagnostic at all: the compiler failed otherwise, show all of it
  message(FATAL_ERROR "${TARGET} failed to compile without a compiler diagnostic (${result}):\n${log}")
endif()
string(REPLACE "<semicolon>" ";" diagnostic "${diagnostic}")
string(REPLACE "<open>" "[" diagnostic "${diagnostic}")
string(REPLACE "<close>" "]" diagnostic "${diagnostic}")

string(REGEX REPLACE "\"}, (tessel::)?fixed_string<[0-9]+(UL)?>{\"" "" joined "${diagnostic}")
# g++ prints a quote inside a string template argument as \' (axis names in sharding messages).
string(REPLACE "\\'" "'" joined "${joined}")

foreach(text IN LISTS EXPECT)
  string(FIND "${joined}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${TARGET} failed to compile, but the diagnostic does not contain the expected text:\n"
      "  ${text}\nIt was:\n${diagnostic}")
  endif()
endforeach()
if(NOT error_count EQUAL expected_errors)
  message(FATAL_ERROR "${TARGET} failed to compile with the expected message, but with ${error_count} error lines, "
    "not ${expected_errors}: a mistake must be reported once, and nothing that depends on the broken call be "
    "instantiated after it. The diagnostic was:\n${diagnostic}")
endif()
if(line_count GREATER MAX_LINES)
  message(FATAL_ERROR "${TARGET} failed to compile with the expected message, but the diagnostic has ${line_count} "
    "lines, more than ${MAX_LINES}. It was:\n${diagnostic}")
endif()
message(STATUS "${TARGET}: rejected with the expected message, ${error_count} error line(s), ${line_count} lines")
