# Checks the include graph of the source tree:
# 1. Every #include between tessel's folders points down the layering of ARCHITECTURE §8: a header may
#    include headers of its own layer's folder and of the layers listed before it, never of a later one. A
#    folder's top-level header (ops.hpp for ops/, lax.hpp for prim/) is a node of its own, just above its
#    folder: it may include the folder, never the reverse.
# 2. No include loop anywhere, within a folder too. Two declared loops are left out: each prim/*.hpp ends
#    by including prim/all.hpp, the generated list of every primitive, which includes it back (prim/build.hpp
#    says why); and a header's X-inl.hpp (its definitions, compiled where TESSEL_IMPLEMENTATION is defined)
#    includes X.hpp only to stand alone.
# 3. src/, examples/ and bench/ (above include/, in that order): they name tessel's headers as tessel/...
#    (never by a path into include/), and their own headers by a path in their own folder.
# Includes are read in both spellings, <tessel/...> and "tessel/...", and quoted paths relative to the file.
#   cmake -DSOURCE_DIR=<tessel source> -P check_layering.cmake
# Prints each include that breaks a rule (file, the include, the rule) and each loop, and fails if there is one.

cmake_policy(SET CMP0012 NEW)  # if(TRUE), while(TRUE): the constant

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
  pipeline
  distributed
  dump
  export
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

# Every file of the graph, relative to SOURCE_DIR: tessel's headers, then the sources above them.
file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR} ${root}/*.hpp)
foreach(folder src examples bench)
  if(IS_DIRECTORY ${SOURCE_DIR}/${folder})
    file(GLOB_RECURSE more RELATIVE ${SOURCE_DIR} ${SOURCE_DIR}/${folder}/*.hpp ${SOURCE_DIR}/${folder}/*.cpp)
    list(APPEND files ${more})
  endif()
endforeach()
list(SORT files)

set(violations 0)
set(checked 0)
set(nodes)
foreach(file IN LISTS files)
  string(MAKE_C_IDENTIFIER "${file}" id)
  list(APPEND nodes ${id})
  set(name_${id} ${file})
  set(edges_${id})
  string(REGEX REPLACE "/.*$" "" home "${file}")  # include, src, examples or bench
  get_filename_component(dir "${file}" DIRECTORY)
  file(STRINGS ${SOURCE_DIR}/${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "include[ \t]*([<\"])([^\">]+)[\">]" _ "${line}")
    set(quote "${CMAKE_MATCH_1}")
    set(named "${CMAKE_MATCH_2}")
    set(target "")
    if(named MATCHES "^tessel/")
      set(target "include/${named}")
    elseif(quote STREQUAL "\"" AND EXISTS ${SOURCE_DIR}/${dir}/${named})
      get_filename_component(target "${SOURCE_DIR}/${dir}/${named}" ABSOLUTE)
      file(RELATIVE_PATH target ${SOURCE_DIR} ${target})
      if(target MATCHES "^include/tessel/" AND NOT home STREQUAL "include")
        string(REGEX REPLACE "^include/" "" spelled "${target}")
        message("${file}: includes \"${named}\", a path into include/: name it ${spelled}")
        math(EXPR violations "${violations} + 1")
      endif()
    endif()
    if(target STREQUAL "" OR NOT EXISTS ${SOURCE_DIR}/${target})
      continue()  # another library's header (or a tessel header the fixture lacks)
    endif()
    math(EXPR checked "${checked} + 1")
    string(REGEX REPLACE "/.*$" "" to_home "${target}")
    if(NOT to_home STREQUAL "include" AND NOT to_home STREQUAL home)
      message("${file}: includes ${target}: ${home}/ may include tessel's headers and its own, not ${to_home}/'s")
      math(EXPR violations "${violations} + 1")
    endif()
    if(home STREQUAL "include")
      string(REGEX REPLACE "^include/tessel/" "" from_path "${file}")
      string(REGEX REPLACE "^include/tessel/" "" to_path "${target}")
      layer_of(${from_path} from)
      layer_of(${to_path} to)
      if(to GREATER from)
        message("${file}: includes tessel/${to_path}: layer '${to_name}' is above '${from_name}'")
        math(EXPR violations "${violations} + 1")
      elseif(to EQUAL from AND to_top_level AND NOT from_top_level)
        message("${file}: includes tessel/${to_path}, the top-level header that gathers its own "
          "folder (a loop from ${from_name}/ through ${to_path}); include the folder's header it needs instead")
        math(EXPR violations "${violations} + 1")
      endif()
      if(from_path MATCHES "^prim/" AND to_path STREQUAL "prim/all.hpp")
        continue()  # the declared loop of the primitive list (above)
      endif()
      string(REGEX REPLACE "-inl\\.hpp$" ".hpp" defined_in "${from_path}")
      if(NOT defined_in STREQUAL from_path AND to_path STREQUAL defined_in)
        continue()  # an -inl.hpp naming its own header (above)
      endif()
    endif()
    string(MAKE_C_IDENTIFIER "${target}" to_id)
    list(APPEND edges_${id} ${to_id})
  endforeach()
endforeach()

# Loops: peel off every file whose includes are all peeled; what is left is in a loop or leads into one.
set(left ${nodes})
set(peeled TRUE)
while(peeled)
  set(peeled FALSE)
  set(next)
  foreach(id IN LISTS left)
    set(open FALSE)
    foreach(to IN LISTS edges_${id})
      if(NOT done_${to})
        set(open TRUE)
        break()
      endif()
    endforeach()
    if(open)
      list(APPEND next ${id})
    else()
      set(done_${id} TRUE)
      set(peeled TRUE)
    endif()
  endforeach()
  set(left ${next})
endwhile()
# Each loop once: from a file left, follow includes among the files left until one repeats.
set(loops 0)
foreach(start IN LISTS left)
  if(shown_${start})
    continue()
  endif()
  set(path ${start})
  set(at ${start})
  while(TRUE)
    foreach(to IN LISTS edges_${at})
      if(NOT done_${to})
        set(at ${to})
        break()
      endif()
    endforeach()
    list(FIND path ${at} seen)
    if(NOT seen EQUAL -1)
      break()
    endif()
    list(APPEND path ${at})
  endwhile()
  list(SUBLIST path ${seen} -1 cycle)
  set(text "")
  set(new FALSE)
  foreach(id IN LISTS cycle)
    if(NOT shown_${id})
      set(new TRUE)
    endif()
    set(shown_${id} TRUE)
    string(APPEND text "${name_${id}} -> ")
  endforeach()
  list(GET cycle 0 first)
  if(new)
    message("include loop: ${text}${name_${first}}")
    math(EXPR loops "${loops} + 1")
  endif()
  set(shown_${start} TRUE)
endforeach()

if(violations GREATER 0 OR loops GREATER 0)
  message(FATAL_ERROR "check_layering: ${violations} of ${checked} includes break the layering; ${loops} include "
    "loops shown (a file may lead into one already shown) (core <- kernels <- ir <- prim <- ops <- transform <- target <- plan <- run <- jit <- ...; include/ <- src/ <- "
    "examples/ <- bench/); move the code the lower file needs down, or the file up, or split a loop's files by what "
    "they need of each other")
endif()
list(LENGTH files count)
message(STATUS "check_layering: ${checked} includes among ${count} files, all pointing down the layering, no loop")
