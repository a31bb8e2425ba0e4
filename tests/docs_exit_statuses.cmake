# docs/cli.md's exit-status table and the one every subcommand's --help prints say the same:
# each status 0-7 with the same first words (the table's "meaning" against --help's line).
#   cmake -DTKEXPORT=<exe> -DSOURCE_DIR=<repo> -P docs_exit_statuses.cmake
file(READ ${SOURCE_DIR}/docs/cli.md doc)
foreach(cmd analyze lint export inspect compile run keygen)
  execute_process(COMMAND ${TKEXPORT} ${cmd} --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
  if(NOT help MATCHES "exit status \\(every subcommand, docs/cli.md\\):")
    message(FATAL_ERROR "tkexport ${cmd} --help does not print the shared exit-status table")
  endif()
endforeach()
foreach(pair "0;done" "1;the work failed on its own terms" "2;usage" "3;internal error"
             "4;a malformed input file" "5;a file that cannot be read or written" "6;nvcc or the C compiler"
             "7;no usable GPU")
  list(GET pair 0 code)
  list(GET pair 1 words)
  if(NOT help MATCHES "\n  ${code}  ${words}")
    message(FATAL_ERROR "--help: status ${code} is not '${words}...'")
  endif()
endforeach()
foreach(pair "0;done" "1;the work failed on its own terms" "2;usage" "3;internal error"
             "4;a malformed input file" "5;a file that cannot be read or written" "6;a tool tkexport runs"
             "7;the GPU")
  list(GET pair 0 code)
  list(GET pair 1 words)
  if(NOT doc MATCHES "\n\\| ${code} \\| ${words}")
    message(FATAL_ERROR "docs/cli.md: status ${code} is not '${words}...'")
  endif()
endforeach()
message(STATUS "ok")
