# Special files (issue 16): a FIFO named like a source inside a folder is skipped by the walk (it
# used to hang `tkexport analyze DIR` forever), one given by name is refused with one line.
#   cmake -DTKEXPORT=<exe> -DFIXTURE=<tests/fixtures/analyzer/direct> -DWORK=<dir> -P cli_special_files.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/src)
file(COPY ${FIXTURE}/ DESTINATION ${WORK}/src)
execute_process(COMMAND mkfifo ${WORK}/src/x.c RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mkfifo failed")
endif()
execute_process(COMMAND ${TKEXPORT} analyze --no-cache src WORKING_DIRECTORY ${WORK} TIMEOUT 120
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "test::direct")
  message(FATAL_ERROR "analyze of a folder holding a FIFO: exit status ${rc}\n${out}\n${err}")
endif()
execute_process(COMMAND ${TKEXPORT} analyze --no-cache src/x.c WORKING_DIRECTORY ${WORK} TIMEOUT 120
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^tkexport analyze: 'src/x.c' is not a regular file \\(a FIFO, socket or device is never read")
  message(FATAL_ERROR "analyze of a FIFO: exit status ${rc} (expected 2)\n${out}\n${err}")
endif()
# a folder with no C or CUDA source (only C++) is an error, not a clean pass
file(MAKE_DIRECTORY ${WORK}/cpp)
file(WRITE ${WORK}/cpp/a.cpp "int f() { return 1; }\n")
foreach(cmd analyze lint)
  execute_process(COMMAND ${TKEXPORT} ${cmd} --no-cache cpp WORKING_DIRECTORY ${WORK} TIMEOUT 120
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "^tkexport ${cmd}: no C or CUDA source found in cpp \\(files ending in .c, .h, .cu or .cuh are read; C\\+\\+ files are not\\)\n$")
    message(FATAL_ERROR "${cmd} of a folder of .cpp files: exit status ${rc} (expected 2)\n${out}\n${err}")
  endif()
endforeach()
message(STATUS "ok")
