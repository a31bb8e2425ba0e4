# One CLI test case: runs tkexport with ARGS ('|'-separated) in the current folder and checks its
# exit status and, when given, regular expressions its stdout and stderr must match.
#   cmake -DTKEXPORT=<exe> -DARGS=<a|b> -DEXPECT_RC=<n> [-DEXPECT_STDOUT=<re>] [-DEXPECT_STDERR=<re>]
#         -P cli_case.cmake
string(REPLACE "|" ";" args "${ARGS}")
execute_process(COMMAND ${TKEXPORT} ${args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(report "tkexport ${args}\n--- exit status: ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
if(NOT "${rc}" STREQUAL "${EXPECT_RC}")
  message(FATAL_ERROR "exit status ${rc}, expected ${EXPECT_RC}\n${report}")
endif()
if(NOT "${EXPECT_STDOUT}" STREQUAL "" AND NOT "${out}" MATCHES "${EXPECT_STDOUT}")
  message(FATAL_ERROR "stdout does not match '${EXPECT_STDOUT}'\n${report}")
endif()
if(NOT "${EXPECT_STDERR}" STREQUAL "" AND NOT "${err}" MATCHES "${EXPECT_STDERR}")
  message(FATAL_ERROR "stderr does not match '${EXPECT_STDERR}'\n${report}")
endif()
message(STATUS "ok\n${report}")
