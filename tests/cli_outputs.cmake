# Outputs never written over inputs (issue 16): -o naming an input itself, a hard link or a symlink
# to it, or a source inside an input folder is refused with one line and exit status 2, and the
# input stays as it was; -o - is stdout for the text outputs and refused for the binary ones.
#   cmake -DTKEXPORT=<exe> -DFIXTURE=<tests/fixtures/analyzer/direct> -DWORK=<dir> -P cli_outputs.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/src)
file(COPY ${FIXTURE}/ DESTINATION ${WORK}/src)
file(GLOB sources RELATIVE ${WORK}/src ${WORK}/src/*.c)
list(GET sources 0 op)
file(READ ${WORK}/src/${op} original)
file(WRITE ${WORK}/x.tkprog "not a program, and never read: the output check comes first\n")
file(WRITE ${WORK}/w.safetensors "weights\n")
file(CREATE_LINK ${WORK}/src/${op} ${WORK}/hard.c)
file(CREATE_LINK ${WORK}/src/${op} ${WORK}/soft.c SYMBOLIC)

function(expect rc stderr_re)
  execute_process(COMMAND ${TKEXPORT} ${ARGN} WORKING_DIRECTORY ${WORK}
    RESULT_VARIABLE got OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " shown "${ARGN}")
  if(NOT "${got}" STREQUAL "${rc}" OR NOT "${err}" MATCHES "${stderr_re}")
    message(FATAL_ERROR "tkexport ${shown}: exit status ${got} (expected ${rc}), stderr:\n${err}\n(expected to match '${stderr_re}')")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
endfunction()

expect(2 "^tkexport analyze: -o src/${op} is the input src/${op} itself: writing it would destroy the input \\(choose another output\\)\n$"
  analyze --no-cache src/${op} -o src/${op})
expect(2 "^tkexport lint: -o hard.c is the input src/${op} itself \\(a link to the same file\\)"
  lint --no-cache src/${op} -o hard.c)
expect(2 "^tkexport lint: -o soft.c is the input src/${op} itself \\(a link to the same file\\)"
  lint --no-cache src/${op} -o soft.c)
expect(2 "^tkexport analyze: -o src/${op} is a source inside the input folder src: writing it would destroy the input"
  analyze --no-cache src -o src/${op})
expect(2 "^tkexport compile: -o x.tkprog is the input x.tkprog itself"
  compile x.tkprog -o x.tkprog)
expect(2 "^tkexport export: -o w.safetensors is the input w.safetensors itself"
  export src --program p --weights w.safetensors -o w.safetensors)
expect(2 "^tkexport compile: -o -: a package is a zip archive, written to a file: give its path\n$"
  compile x.tkprog -o -)
file(READ ${WORK}/src/${op} after)
if(NOT after STREQUAL original)
  message(FATAL_ERROR "src/${op} changed although every command was refused")
endif()
foreach(f x.tkprog w.safetensors)
  if(NOT EXISTS ${WORK}/${f})
    message(FATAL_ERROR "${f} is gone")
  endif()
endforeach()
if(EXISTS ${WORK}/-)
  message(FATAL_ERROR "a file named '-' was written")
endif()

# -o -: stdout (JSON for analyze, as -o FILE gives), no file named '-'
expect(0 "" analyze --no-cache src -o -)
if(NOT last_out MATCHES "^[ \n]*{.*\"ops\"")
  message(FATAL_ERROR "analyze -o - did not print JSON:\n${last_out}")
endif()
if(EXISTS ${WORK}/-)
  message(FATAL_ERROR "analyze -o - wrote a file named '-'")
endif()
# an output that differs from every input is written as before
expect(0 "" analyze --no-cache src -o result.json)
if(NOT EXISTS ${WORK}/result.json)
  message(FATAL_ERROR "analyze -o result.json wrote nothing")
endif()
# an output that cannot be written: exit status 5 for analyze and lint as for export and compile
expect(5 "^tkexport analyze: [^\n]*/nonexistent/dir/r.json" analyze --no-cache src -o /nonexistent/dir/r.json)
expect(5 "^tkexport lint: [^\n]*/nonexistent/dir/r.sarif" lint --no-cache src -o /nonexistent/dir/r.sarif)
# a missing input: 2
expect(2 "does not exist" analyze --no-cache nothing_here.c)
expect(2 "does not exist" lint --no-cache nothing_here.c)
message(STATUS "ok")
