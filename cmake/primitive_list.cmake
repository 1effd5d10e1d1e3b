# Writes include/tessel/prim/all.hpp, the list of every primitive, from the files of include/tessel/prim/:
# each file there (family/, build.hpp and all.hpp aside) is included, and each descriptor it defines
# (`inline constexpr ir::primitive <name>_p`) is listed in tessel::all_primitives, which the checkers
# iterate. So a new primitive is its file (and its test-table rows): run this, commit the result.
#   cmake -DSOURCE_DIR=<tessel source> -P primitive_list.cmake           rewrites all.hpp if it changed
#   cmake -DSOURCE_DIR=<tessel source> -DCHECK=ON -P primitive_list.cmake fails if all.hpp is stale
# all.hpp stays in the source tree so that a program that only adds the include folder has it.

get_filename_component(SOURCE_DIR "${SOURCE_DIR}" ABSOLUTE)
set(prim ${SOURCE_DIR}/include/tessel/prim)
file(GLOB files RELATIVE ${prim} ${prim}/*.hpp)
list(REMOVE_ITEM files build.hpp all.hpp)
list(SORT files)

set(includes "")
set(descriptors "")
set(instances "")
set(count 0)
foreach(file IN LISTS files)
  string(APPEND includes "#include \"tessel/prim/${file}\"\n")
  file(STRINGS ${prim}/${file} lines REGEX "^inline constexpr ir::primitive [a-z_0-9]+_p[ ={]")
  if(NOT lines)
    message(FATAL_ERROR "primitive_list: include/tessel/prim/${file} defines no descriptor "
      "(a line 'inline constexpr ir::primitive <name>_p = ...'); a helper shared by primitives belongs in prim/family/")
  endif()
  foreach(line IN LISTS lines)
    string(REGEX MATCH "[a-z_0-9]+_p" name "${line}")
    list(APPEND descriptors "&prim::${name}")
    math(EXPR count "${count} + 1")
    # An elementwise or reduction rule's tile functions, instantiated once (prim/family/elementwise.hpp,
    # prim/family/reduce.hpp).
    # (A binary rule's takes one-value operands: ir::splat_fn.)
    if(line MATCHES "= unary_primitive<([a-z_0-9]+)>")
      string(APPEND instances "template void evaluate_unary<${CMAKE_MATCH_1}>(const ir::node&, const void* const*, void*, std::size_t);\n")
    elseif(line MATCHES "= binary_primitive<([a-z_0-9]+)>")
      string(APPEND instances "template void evaluate_binary<${CMAKE_MATCH_1}>(const ir::node&, const void* const*, unsigned, void*, std::size_t);\n")
    elseif(line MATCHES "= reduce_primitive<([a-z_0-9]+)>")
      set(rule ${CMAKE_MATCH_1})
      string(APPEND instances "template void reduce_row<${rule}>(const ir::node&, const void*, std::size_t, void*);\n")
      string(APPEND instances "template void combine<${rule}>(const ir::node&, const void*, std::size_t, void*);\n")
      string(APPEND instances "template void init<${rule}>(const ir::node&, void*, std::size_t);\n")
    endif()
  endforeach()
endforeach()
list(JOIN descriptors ",\n    " listed)
list(LENGTH files file_count)

set(text "#pragma once
// Every primitive (JAX's lax): one file each under prim/, each of which ends by including this list
// (prim/build.hpp says why); tessel/lax.hpp includes it. Written by cmake/primitive_list.cmake from the
// files of prim/: do not edit; the test headers.primitive_list fails when it is stale.
${includes}
#include <array>

namespace tessel {
// Every primitive descriptor, for the checkers that must cover them all (tests/vmap/coverage_test.cpp).
inline constexpr std::array<const ir::primitive*, ${count}> all_primitives{
    ${listed}};
}  // namespace tessel

#ifdef TESSEL_IMPLEMENTATION
// The elementwise and reduction rules' tile functions, compiled here once (prim/family/elementwise.hpp
// says why).
namespace tessel::prim {
${instances}}  // namespace tessel::prim
#endif
")

set(lax ${SOURCE_DIR}/include/tessel/prim/all.hpp)
file(READ ${lax} current)
if(current STREQUAL text)
  message(STATUS "primitive_list: include/tessel/prim/all.hpp lists the ${count} primitives of prim/")
elseif(CHECK)
  message(FATAL_ERROR "primitive_list: include/tessel/prim/all.hpp does not list the primitives of include/tessel/prim/ "
    "(${count} descriptors in ${file_count} files); regenerate it: cmake -DSOURCE_DIR=. -P cmake/primitive_list.cmake")
else()
  file(WRITE ${lax} "${text}")
  message(STATUS "primitive_list: wrote include/tessel/prim/all.hpp (${count} primitives)")
endif()
