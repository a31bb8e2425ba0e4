# The examples use tkexport's public headers and nothing else of it (cmake -P), so that a copy of
# one builds against an installed tkexport: every #include of a file under EXAMPLES is a
# <tk/NAME.h> that include/tk has, a system header (<stdio.h>), or a "file" of the example's own
# folder (no '/' in its name).
#
#   -DEXAMPLES=<examples> -DHEADERS=<include/tk>
foreach(var EXAMPLES HEADERS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_examples.cmake: -D${var}=... is required")
  endif()
endforeach()

file(GLOB_RECURSE files LIST_DIRECTORIES false
     "${EXAMPLES}/*.c" "${EXAMPLES}/*.h" "${EXAMPLES}/*.cu" "${EXAMPLES}/*.cuh")
set(bad "")
set(count 0)
foreach(file IN LISTS files)
  get_filename_component(dir "${file}" DIRECTORY)
  file(RELATIVE_PATH rel "${EXAMPLES}" "${file}")
  file(STRINGS "${file}" lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS lines)
    math(EXPR count "${count} + 1")
    if(line MATCHES "include[ \t]*<tk/([^>]+)>")
      if(NOT EXISTS "${HEADERS}/${CMAKE_MATCH_1}")
        list(APPEND bad "${rel}: ${line} (include/tk has no ${CMAKE_MATCH_1})")
      endif()
    elseif(line MATCHES "include[ \t]*<([^>]+)>")
      # a system header; tkexport's own folders are not on an installed tkexport's include path
      if(CMAKE_MATCH_1 MATCHES "^(runtime|common|analyzer|exporter|aoti|cli|kernels)/")
        list(APPEND bad "${rel}: ${line} (tkexport's internals)")
      endif()
    elseif(line MATCHES "include[ \t]*\"([^\"]+)\"")
      if(CMAKE_MATCH_1 MATCHES "/" OR NOT EXISTS "${dir}/${CMAKE_MATCH_1}")
        list(APPEND bad "${rel}: ${line} (not a file of the example's folder)")
      endif()
    else()
      list(APPEND bad "${rel}: ${line} (not understood)")
    endif()
  endforeach()
endforeach()
list(LENGTH files nfiles)
if(nfiles EQUAL 0)
  message(FATAL_ERROR "check_examples: no sources under '${EXAMPLES}'")
endif()
if(bad)
  list(JOIN bad "\n  " s)
  message(FATAL_ERROR "check_examples: includes a copy of the examples outside the tree could not "
                      "resolve against an installed tkexport:\n  ${s}")
endif()
message(STATUS "check_examples: ${count} includes in ${nfiles} files: public headers, system headers and "
               "the examples' own files only")
