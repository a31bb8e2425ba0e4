# ctest's kernels_wgmma_<name>: compiles one built-in kernel source for sm_90a with ptxas's
# report (-Xptxas -v) and fails where ptxas serialized its wgmma instructions (C7512, C7515, C7518,
# C7520: "wgmma.mma_async instructions are serialized due to ..."). The kernel still works then,
# at a fraction of its speed, and nothing else says so: a register too many, an accumulator read
# while another product is pending, or a product issued under a branch is enough (kernels/mlp.cu
# met all four). Needs no GPU. Run as cmake -DNVCC=... -DSRC=... -DINCLUDES="a;b" -DOUT=... -P.
foreach(v NVCC SRC INCLUDES OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_wgmma.cmake: -D${v}=... missing")
  endif()
endforeach()
set(incs "")
foreach(dir IN LISTS INCLUDES)
  list(APPEND incs "-I${dir}")
endforeach()
execute_process(
  COMMAND "${NVCC}" -cubin -arch=sm_90a -O3 -std=c++17 ${incs} -Xptxas -v -o "${OUT}" "${SRC}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nvcc failed on ${SRC} (${rc}):\n${out}${err}")
endif()
string(REGEX MATCHALL "[^\n]*wgmma[^\n]*serialized[^\n]*" found "${out}${err}")
if(found)
  list(JOIN found "\n" lines)
  message(FATAL_ERROR "ptxas serialized the wgmma instructions of ${SRC}:\n${lines}")
endif()
string(REGEX MATCHALL "Used [0-9]+ registers[^\n]*" regs "${err}")
list(JOIN regs "; " regs)
message(STATUS "${SRC}: no wgmma serialized (${regs})")
