# Checks that every #include between tessel's folders points down the layering of ARCHITECTURE §8:
# a header may include headers of its own layer's folder and of the layers listed before it, never of a
# later one. This also rules out include cycles between folders. A folder's top-level header (ops.hpp for
# ops/, lax.hpp for prim/) is a node of its own, just above its folder: it may include the folder, never the
# reverse, so no loop runs from a folder through the header that gathers it.
#   cmake -DSOURCE_DIR=<tessel source> -P check_layering.cmake
# Prints each include that points the wrong way (file, line, the layers) and fails if there is one.

# Lowest first. kernels/ depends on core/ alone; transform/ and plan/ come before run/, so nothing of
# the run time is reachable from them.
set(layers
  core
  kernels
  ir
  prim
  ops
  transform
  target
  plan
  run
  jit
  shard_map
  distributed
  dump
  random
  nn
  optim
  profile
  io
  data
  tessel)

set(root ${SOURCE_DIR}/include/tessel)
function(layer_of path out)  # path relative to include/tessel
  string(REGEX REPLACE "/.*$" "" top "${path}")
  string(REGEX REPLACE "\\.hpp$" "" top "${top}")
  if(top STREQUAL "lax")  # lax.hpp: includes prim/all.hpp, the list of primitives
    set(top prim)
  endif()
  list(FIND layers "${top}" index)
  if(index EQUAL -1)
    message(FATAL_ERROR "check_layering: ${path} is in no layer; add '${top}' to the list in check_layering.cmake")
  endif()
  set(${out} ${index} PARENT_SCOPE)
  set(${out}_name ${top} PARENT_SCOPE)
  if(path MATCHES "/")
    set(${out}_top_level FALSE PARENT_SCOPE)
  else()
    set(${out}_top_level TRUE PARENT_SCOPE)
  endif()
endfunction()

file(GLOB_RECURSE headers RELATIVE ${root} ${root}/*.hpp)
set(violations 0)
set(checked 0)
foreach(header IN LISTS headers)
  layer_of(${header} from)
  file(STRINGS ${root}/${header} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]tessel/")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "tessel/([^\">]+)" _ "${line}")
    set(target ${CMAKE_MATCH_1})
    layer_of(${target} to)
    math(EXPR checked "${checked} + 1")
    if(to GREATER from)
      message("include/tessel/${header}: includes tessel/${target}: layer '${to_name}' is above '${from_name}'")
      math(EXPR violations "${violations} + 1")
    elseif(to EQUAL from AND to_top_level AND NOT from_top_level)
      message("include/tessel/${header}: includes tessel/${target}, the top-level header that gathers its own "
        "folder (a loop from ${from_name}/ through ${target}); include the folder's header it needs instead")
      math(EXPR violations "${violations} + 1")
    endif()
  endforeach()
endforeach()
if(violations GREATER 0)
  message(FATAL_ERROR "check_layering: ${violations} of ${checked} includes point up the layering "
    "(core <- kernels <- ir <- prim <- ops <- transform <- target <- plan <- run <- jit <- ...); move the code "
    "the lower header needs down, or the header up")
endif()
message(STATUS "check_layering: ${checked} includes between tessel headers, all pointing down the layering")
