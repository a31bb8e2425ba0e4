# nn.Linear(bias=False) end to end (issue 14, item 1): a model calling tk_linear(ctx, x, w, NULL)
# with only "proj.weight" in its safetensors exports (the node's bias recorded as absent),
# compiles and runs on the CPU; the output is x W^T, checked against values worked out here.
#   cmake -DTKEXPORT=<exe> -DPYTHON=<python3> -DWORK=<dir> -P nobias_linear.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/model)
file(WRITE ${WORK}/model/model.c [=[
#include <tk/ops.h>
#include <tk/program.h>
#include <tk/runtime.h>

TK_PROGRAM(nobias, "nobias", TK_INPUT("x", TK_F32, TK_DIM("batch", 1, 8), 4))
{
    tk_tensor *w = tk_param(ctx, "proj.weight");
    if (!w)
        return TK_ENOTFOUND;
    out[0] = tk_linear(ctx, in[0], w, NULL);
    return out[0] ? 0 : TK_EINVAL;
}
]=])
# proj.weight [3, 4] = [[1,0,0,0],[0,1,0,0],[0,0,1,1]]: y = (x0, x1, x2 + x3); x [2, 4] = 1..8
file(WRITE ${WORK}/make.py [=[
import json, struct, sys
w = [1,0,0,0, 0,1,0,0, 0,0,1,1]
data = struct.pack('<12f', *w)
head = json.dumps({"proj.weight": {"dtype": "F32", "shape": [3, 4], "data_offsets": [0, len(data)]}}).encode()
head += b' ' * ((8 - len(head) % 8) % 8)
open(sys.argv[1] + '/w.safetensors', 'wb').write(struct.pack('<Q', len(head)) + head + data)
h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }"
h += ' ' * ((64 - (10 + len(h) + 1) % 64) % 64) + '\n'
open(sys.argv[1] + '/x.npy', 'wb').write(b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + struct.pack('<8f', *range(1, 9)))
]=])
file(WRITE ${WORK}/check.py [=[
import struct, sys
b = open(sys.argv[1], 'rb').read()
hl = struct.unpack('<H', b[8:10])[0]
vals = struct.unpack('<6f', b[10 + hl:10 + hl + 24])
want = (1.0, 2.0, 7.0, 5.0, 6.0, 15.0)
sys.exit(0 if vals == want else print("got", vals, "want", want) or 1)
]=])
execute_process(COMMAND ${PYTHON} ${WORK}/make.py ${WORK} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "making the weights failed")
endif()
function(run)
  execute_process(COMMAND ${ARGN} WORKING_DIRECTORY ${WORK} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " shown "${ARGN}")
    message(FATAL_ERROR "${shown}: exit status ${rc}\n${out}\n${err}")
  endif()
  set(last_out "${out}" PARENT_SCOPE)
endfunction()
run(${TKEXPORT} export model --program nobias --weights w.safetensors -o nobias.tkprog --no-cache)
run(${TKEXPORT} inspect nobias.tkprog --format json)
if(NOT last_out MATCHES "\"inputs\":[ \t\n]*\\[[^]]*null")
  message(FATAL_ERROR "program.json does not record the absent bias as null:\n${last_out}")
endif()
run(${TKEXPORT} compile nobias.tkprog -o nobias.tkpkg --no-sign --no-cache)
run(${TKEXPORT} run nobias.tkpkg --allow-unsigned --device cpu --input x=x.npy -o y.npy)
run(${PYTHON} ${WORK}/check.py ${WORK}/y.npy)
message(STATUS "ok")
