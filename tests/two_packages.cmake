# Two versions of fixtures/ns exported and compiled into packages whose op, kernel and tuning
# declaration have the same names and different bodies, then opened together by two_packages.
#   cmake -DTKEXPORT=<exe> -DTWO_PACKAGES=<exe> -DFIXTURE=<fixtures/ns> -DWORK=<scratch>
#         -DDEVICE=cpu|cuda -P two_packages.cmake
# Prints "two_packages: skipped: ..." without nvcc or, for DEVICE=cuda, without a GPU.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(coef_1 "#define NS_A 2.0f\n#define NS_B 0.0f\n")
set(coef_2 "#define NS_A 3.0f\n#define NS_B 1.0f\n")
foreach(v 1 2)
  # the same relative paths in both: the fatbin entries get the same names too
  set(dir ${WORK}/v${v}/src)
  file(MAKE_DIRECTORY ${dir})
  file(GLOB sources ${FIXTURE}/*.c ${FIXTURE}/*.cu)
  file(COPY ${sources} DESTINATION ${dir})
  file(WRITE ${dir}/version.h "/* version ${v} of fixtures/ns */\n${coef_${v}}")
  execute_process(COMMAND ${TKEXPORT} export src --program ns -o ns.tkprog WORKING_DIRECTORY ${WORK}/v${v}
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "export of version ${v} failed (${rc}):\n${err}")
  endif()
  execute_process(COMMAND ${TKEXPORT} compile ns.tkprog -o ns.tkpkg --arch sm_90 WORKING_DIRECTORY ${WORK}/v${v}
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    if(err MATCHES "nvcc not found")
      message("two_packages: skipped: no nvcc to compile the packages (${err})")
      return()
    endif()
    message(FATAL_ERROR "compile of version ${v} failed (${rc}):\n${err}")
  endif()
endforeach()
execute_process(COMMAND ${TWO_PACKAGES} ${WORK}/v1/ns.tkpkg ${WORK}/v2/ns.tkpkg ${DEVICE}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(rc EQUAL 77)
  message("two_packages: skipped: no GPU")
elseif(NOT rc EQUAL 0)
  message(FATAL_ERROR "two_packages exited ${rc}")
endif()
