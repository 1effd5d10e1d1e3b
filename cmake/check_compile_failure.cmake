# cmake -DBUILD_DIR=<dir> -DTARGET=<target> -DSOURCE=<file.cpp> -P check_compile_failure.cmake
# Passes when building TARGET fails and the compiler's first lines contain every text that SOURCE
# gives on a line "// expect: <text>".
# clang prints a long message in 32-character parts (core/error.hpp); they are joined before matching.
set(first_lines 40)
file(STRINGS ${SOURCE} EXPECT REGEX "^// expect: ")
list(TRANSFORM EXPECT REPLACE "^// expect: " "")

execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(log "${out}${err}")
if(result EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but it must not: its rule was not enforced")
endif()

# Keep the compiler's own output: drop the build tool's lines before the first diagnostic.
string(REGEX REPLACE "\n" ";" lines "${log}")
set(diagnostic "")
set(seen 0)
set(started FALSE)
foreach(line IN LISTS lines)
  if(NOT started AND line MATCHES "(error|warning|In file included|In instantiation|note):?")
    set(started TRUE)
  endif()
  if(started AND seen LESS first_lines)
    string(APPEND diagnostic "${line}\n")
    math(EXPR seen "${seen} + 1")
  endif()
endforeach()
string(REGEX REPLACE "\"}, (tessel::)?fixed_string<[0-9]+(UL)?>{\"" "" joined "${diagnostic}")
# g++ prints a quote inside a string template argument as \' (axis names in sharding messages).
string(REPLACE "\\'" "'" joined "${joined}")

foreach(text IN LISTS EXPECT)
  string(FIND "${joined}" "${text}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${TARGET} failed to compile, but the first ${first_lines} lines of the diagnostic "
      "do not contain the expected text:\n  ${text}\nThey were:\n${diagnostic}")
  endif()
endforeach()
message(STATUS "${TARGET}: rejected with the expected message")
