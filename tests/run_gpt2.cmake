# examples/gpt2 end to end on the CPU, tiny (2 layers, width 64, 4 heads): exported with its
# weights, compiled (built-in ops only: no nvcc), run with random tokens (the runtime's random
# i64 inputs are in [0, 16): valid token ids and positions), and over a stream of batch and seq
# sizes; inspect shows the transposes folded away at run time and the attributes in the calls.
#   cmake -DTKEXPORT=<exe> -DSOURCE_DIR=<repo> -DWEIGHTS=<gpt2_tiny.safetensors> -DWORK=<dir> -P run_gpt2.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
function(step expect_rc)
  cmake_parse_arguments(PARSE_ARGV 1 S "" "STDOUT;DIR" "COMMAND")
  if(NOT S_DIR)
    set(S_DIR ${WORK})
  endif()
  execute_process(COMMAND ${S_COMMAND} WORKING_DIRECTORY ${S_DIR} RESULT_VARIABLE rc OUTPUT_VARIABLE out
    ERROR_VARIABLE err)
  string(REPLACE ";" " " shown "${S_COMMAND}")
  if(NOT "${rc}" STREQUAL "${expect_rc}" OR (S_STDOUT AND NOT "${out}" MATCHES "${S_STDOUT}"))
    message(FATAL_ERROR "${shown}\n--- exit status ${rc} (expected ${expect_rc})\n--- stdout:\n${out}\n--- stderr:\n${err}\n"
                        "--- expected stdout to match: ${S_STDOUT}")
  endif()
  message(STATUS "ok: ${shown}")
endfunction()

step(0 DIR ${SOURCE_DIR} COMMAND ${TKEXPORT} export examples/gpt2 --program gpt2_tiny --weights ${WEIGHTS}
  -o ${WORK}/tiny.tkprog)
step(0 COMMAND ${TKEXPORT} inspect ${WORK}/tiny.tkprog
  STDOUT "tk::transpose\\(h\\.0\\.attn\\.c_attn\\.weight, dim0=0, dim1=1\\).*tk::sdpa_qkv\\([^\n]*heads=4, causal=True, scale=0\\.0\\)")
step(0 COMMAND ${TKEXPORT} compile ${WORK}/tiny.tkprog -o ${WORK}/tiny.tkpkg --no-sign)
step(0 COMMAND ${TKEXPORT} run ${WORK}/tiny.tkpkg --device cpu --allow-unsigned --input ids=random:2x16
  --input pos=random:2x16 --profile
  STDOUT "out0: bf16\\[2, 16, 500\\].*tk::transpose \\(folded\\).*tk::_linear_gelu.*tk::narrow \\(output view\\)")
# the logits as a view of the padded LM head's rows (the default) and copied out of them: the same
step(0 COMMAND ${TKEXPORT} run ${WORK}/tiny.tkpkg --device cpu --allow-unsigned --input ids=random:2x16
  --input pos=random:2x16 -o ${WORK}/logits_view.npy)
step(0 COMMAND ${TKEXPORT} run ${WORK}/tiny.tkpkg --device cpu --allow-unsigned --input ids=random:2x16
  --input pos=random:2x16 --dense-outputs -o ${WORK}/logits_dense.npy)
step(0 COMMAND ${CMAKE_COMMAND} -E compare_files ${WORK}/logits_view.npy ${WORK}/logits_dense.npy)
step(0 COMMAND ${TKEXPORT} run ${WORK}/tiny.tkpkg --device cpu --allow-unsigned --shapes uniform --bench 20
  --warmup 2 STDOUT "shapes uniform over batch in \\[1, 16\\], seq in \\[1, 128\\]")
