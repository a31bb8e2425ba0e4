# tkexport run end to end on examples/mlp: export, compile (signed by the per-user key that the
# first compile makes, in a configuration folder as fresh as a new machine's), run on DEVICE with
# a .npy input that run_ref wrote by hand, and the output checked by run_ref against its own float
# reference from the same weights; deterministic random inputs; the refusals (batch 2000, shape
# [4, 100], missing and unknown inputs, an unsigned package without --allow-unsigned); --bench
# and --profile; --bench over streams of shapes (--shapes).
#   cmake -DTKEXPORT=<exe> -DRUN_REF=<exe> -DSOURCE_DIR=<repo> -DWEIGHTS=<mlp.safetensors>
#         -DWORK=<scratch folder> -DDEVICE=cpu|cuda -P run_mlp.cmake
# Prints "run_mlp: skipped: ..." (the test's SKIP_REGULAR_EXPRESSION) without nvcc, or without a
# GPU for DEVICE=cuda.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
# a machine where nobody has set up a key: compile makes one and trusts it
set(ENV{XDG_CONFIG_HOME} ${WORK}/config)
set(ENV{TKEXPORT_SIGN_KEY} "")
set(ENV{TKEXPORT_TRUST_FILE} "")
set(ENV{TKEXPORT_TRUSTED_KEYS} "")

# Runs a command; checks its exit status and optional regular expressions on stdout and stderr.
function(step expect_rc)
  cmake_parse_arguments(PARSE_ARGV 1 S "" "STDOUT;STDERR;DIR" "COMMAND")
  if(NOT S_DIR)
    set(S_DIR ${WORK})
  endif()
  execute_process(COMMAND ${S_COMMAND} WORKING_DIRECTORY ${S_DIR}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " shown "${S_COMMAND}")
  set(report "${shown}\n--- exit status: ${rc}\n--- stdout:\n${out}\n--- stderr:\n${err}")
  if(NOT "${rc}" STREQUAL "${expect_rc}")
    message(FATAL_ERROR "exit status ${rc}, expected ${expect_rc}\n${report}")
  endif()
  if(S_STDOUT AND NOT "${out}" MATCHES "${S_STDOUT}")
    message(FATAL_ERROR "stdout does not match '${S_STDOUT}'\n${report}")
  endif()
  if(S_STDERR AND NOT "${err}" MATCHES "${S_STDERR}")
    message(FATAL_ERROR "stderr does not match '${S_STDERR}'\n${report}")
  endif()
  message(STATUS "ok: ${shown}")
  set(last_out "${out}" PARENT_SCOPE)
  set(last_err "${err}" PARENT_SCOPE)
endfunction()

step(0 DIR ${SOURCE_DIR} COMMAND ${TKEXPORT} export examples/mlp --program mlp --weights ${WEIGHTS} -o ${WORK}/mlp.tkprog)
# a kernel source that does not parse fails the export (it used to fail at compile, once per variant)
file(REMOVE_RECURSE ${WORK}/badmlp)
file(COPY ${SOURCE_DIR}/examples/mlp/ DESTINATION ${WORK}/badmlp)
file(APPEND ${WORK}/badmlp/silu.cu "this is not CUDA;\n")
step(1 COMMAND ${TKEXPORT} export ${WORK}/badmlp --program mlp --weights ${WEIGHTS} -o ${WORK}/bad.tkprog
  STDERR "^tkexport export: cannot export 'mlp': [^\n]*badmlp/silu.cu:[0-9]+:[0-9]+ does not parse: [^\n]*its kernels would not compile\\)\n$")
if(EXISTS ${WORK}/bad.tkprog)
  message(FATAL_ERROR "a failed export wrote bad.tkprog")
endif()
execute_process(COMMAND ${TKEXPORT} compile ${WORK}/mlp.tkprog -o ${WORK}/mlp.tkpkg --arch sm_90
  RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  if(err MATCHES "nvcc not found")
    message("run_mlp: skipped: no nvcc to compile the package (${err})")
    return()
  endif()
  message(FATAL_ERROR "tkexport compile failed (${rc}):\n${err}")
endif()
if(NOT err MATCHES "tkexport compile: created your signing key '[^']*/config/tkexport/signing_key' \\(key id [0-9a-f]+\\) and added it to this machine's trusted keys")
  message(FATAL_ERROR "tkexport compile did not say it made the signing key:\n${err}")
endif()

# one condition, one exit status, whatever the subcommand (docs/cli.md): a missing input is 2, an
# output that cannot be written 5, a missing C compiler 6
foreach(cmd_args "compile;${WORK}/none.tkprog;-o;${WORK}/x.tkpkg" "inspect;${WORK}/none.tkprog"
                 "run;${WORK}/none.tkpkg;--input;x=random:2x128")
  step(2 COMMAND ${TKEXPORT} ${cmd_args} STDERR "none.tk[a-z]+' does not exist")
endforeach()
# weights that do not exist: said before the sources are compiled
step(2 DIR ${SOURCE_DIR} COMMAND ${TKEXPORT} export examples/mlp --program mlp --weights ${WORK}/none.safetensors
  -o ${WORK}/x.tkprog STDERR "^tkexport export: --weights '[^']*none.safetensors' does not exist \\(expected a .safetensors file\\)\n$")
step(5 COMMAND ${TKEXPORT} compile ${WORK}/mlp.tkprog -o /nonexistent/dir/x.tkpkg --arch sm_90 --no-sign
  STDERR "^tkexport compile: [^\n]*/nonexistent/dir/x.tkpkg")
step(5 DIR ${SOURCE_DIR} COMMAND ${TKEXPORT} export examples/mlp --program mlp --weights ${WEIGHTS}
  -o /nonexistent/dir/x.tkprog STDERR "^tkexport export: [^\n]*/nonexistent/dir/x.tkprog")
step(6 DIR ${SOURCE_DIR} COMMAND ${CMAKE_COMMAND} -E env CC=/nonexistent/cc ${TKEXPORT} export examples/mlp
  --program mlp --weights ${WEIGHTS} -o ${WORK}/x.tkprog STDERR "C compiler '/nonexistent/cc'")
step(6 COMMAND ${CMAKE_COMMAND} -E env CC=/nonexistent/cc ${TKEXPORT} compile ${WORK}/mlp.tkprog -o ${WORK}/x.tkpkg
  --arch sm_90 --no-sign --no-cache STDERR "(C compiler '/nonexistent/cc'|nvcc)")

# an nvcc that fails says how: its exit status and its last line (or that it printed nothing)
step(6 COMMAND ${CMAKE_COMMAND} -E env TKEXPORT_NVCC=/bin/false ${TKEXPORT} compile ${WORK}/mlp.tkprog
  -o ${WORK}/never.tkpkg --arch sm_90 --no-sign
  STDERR "^tkexport compile: nvcc at '/bin/false' does not run: '/bin/false --version' exited with status 1: [^\n]+\n$")

set(pkg ${WORK}/mlp.tkpkg)
if(DEVICE STREQUAL "cuda")
  execute_process(COMMAND ${TKEXPORT} run ${pkg} --device cuda --input x=random:1x128
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 AND err MATCHES "no CUDA driver|no CUDA device")
    message("run_mlp: skipped: no GPU (${err})")
    return()
  endif()
endif()

# a .npy input written by run_ref, the output against run_ref's reference
step(0 COMMAND ${RUN_REF} input ${WORK}/x.npy 37)
step(0 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=${WORK}/x.npy --output-dir ${WORK}/out
  STDOUT "program 'mlp' on ${DEVICE}.*x: bf16\\[37, 128\\]  from [^\n]*x.npy\npackage opened in [0-9.]+ ms \\(signed by key [0-9a-f]+, signature and digests verified[^\n]*\nout0: bf16\\[37, 128\\] [^\n]* -> [^\n]*out/out0.npy\n")
step(0 COMMAND ${RUN_REF} check ${WEIGHTS} ${WORK}/x.npy ${WORK}/out/out0.npy STDOUT " 0 outside")

# an output read back as an input (bf16 written as float32, read as bf16 again)
step(0 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=${WORK}/out/out0.npy
  STDOUT "out0: bf16\\[37, 128\\]")

# random inputs: the same seed gives the same bytes, another seed others
foreach(run a b c)
  set(seed 7)
  if(run STREQUAL "c")
    set(seed 8)
  endif()
  step(0 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=random:3x128 --seed ${seed}
    --output-dir ${WORK}/random_${run} STDOUT "x: bf16\\[3, 128\\]  from random:3x128")
  file(SHA256 ${WORK}/random_${run}/out0.npy sum_${run})
endforeach()
if(NOT sum_a STREQUAL sum_b OR sum_a STREQUAL sum_c)
  message(FATAL_ERROR "random inputs: seed 7 gave ${sum_a} and ${sum_b}, seed 8 ${sum_c}")
endif()

# refusals: the runtime's checks as one line, and the expected inputs for a missing or unknown name
step(0 COMMAND ${RUN_REF} input ${WORK}/x2000.npy 2000)
step(1 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=${WORK}/x2000.npy
  STDERR "^tkexport run: error: input 'x' dim 0 is 2000, outside \\[1, 1024\\][^\n]*'batch'[^\n]*\n$")
step(0 COMMAND ${RUN_REF} input ${WORK}/x4.npy 4 100)
step(1 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=${WORK}/x4.npy
  STDERR "^tkexport run: error: input 'x' dim 1 is 100[^\n]*128[^\n]*\n$")
# -o FILE.npy: the one output into that file (not a folder named FILE.npy); never over an input
step(0 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=random:3x128 -o ${WORK}/result.npy
  STDOUT "-> [^\n]*result.npy\n")
if(IS_DIRECTORY ${WORK}/result.npy OR NOT EXISTS ${WORK}/result.npy)
  message(FATAL_ERROR "run -o result.npy did not write the file result.npy")
endif()
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=${WORK}/result.npy -o ${WORK}/result.npy
  STDERR "^tkexport run: -o [^\n]*result.npy is the input [^\n]*result.npy itself")
# random: shapes are checked against the program before anything is allocated (a batch of ten
# million used to take 37 s and 2.5 GB before the range error)
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=random:4x128x1
  STDERR "^tkexport run: 'x=random:4x128x1': 3 dims, input 'x' has 2\n$")
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=random:100000000x128
  STDERR "^tkexport run: 'x=random:100000000x128': dim 0 \\(batch\\) is 100000000, outside its range \\[1, 1024\\]\n$")
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=random:4x64
  STDERR "^tkexport run: 'x=random:4x64': dim 1 is 64, input 'x' has 128 there\n$")
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE}
  STDERR "missing input 'x'[^\n]*expects x: bf16\\[batch, 128\\], batch in \\[1, 1024\\]\n$")
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=random:2x128 --input y=random:2
  STDERR "unknown input 'y'[^\n]*expects x: bf16\\[batch, 128\\], batch in \\[1, 1024\\]\n$")
step(2 COMMAND ${TKEXPORT} run ${pkg} --input x=random:2x128 --input x=random:3x128 STDERR "input 'x' given twice")
step(2 COMMAND ${TKEXPORT} run ${pkg} --input x=random:2by128 STDERR "expected random:DxD")
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=${WORK}/no_such.npy
  STDERR "^tkexport run: input 'x': '[^']*no_such.npy' does not exist \\(expected a .npy file or random:DxD\\)\n$")
step(4 COMMAND ${TKEXPORT} run ${WORK}/mlp.tkprog --input x=random:2x128 STDERR "^tkexport run: error: [^\n]*mlp.tkprog")

# -o naming the package itself (under a name that says .npy): refused, the package as it was
file(COPY_FILE ${pkg} ${WORK}/pkg_copy.npy)
file(SHA256 ${WORK}/pkg_copy.npy before)
step(2 COMMAND ${TKEXPORT} run ${WORK}/pkg_copy.npy --device ${DEVICE} --input x=random:2x128 -o ${WORK}/pkg_copy.npy
  STDERR "^tkexport run: -o [^\n]*pkg_copy.npy is the input [^\n]*pkg_copy.npy itself")
file(SHA256 ${WORK}/pkg_copy.npy after)
if(NOT before STREQUAL after)
  message(FATAL_ERROR "run -o over its own package changed the package")
endif()
# a GPU that is not there is exit status 7 (no usable GPU), with or without a driver
step(7 COMMAND ${TKEXPORT} run ${pkg} --device cuda:63 --input x=random:2x128 STDERR "^tkexport run: [^\n]*cuda:63")
# a result that cannot be written to stdout is a failed command (5), said in one line
foreach(cmd_args "run;${pkg};--device;${DEVICE};--input;x=random:2x128" "inspect;${pkg}" "inspect;--format;json;${pkg}"
                 "analyze;--no-cache;${SOURCE_DIR}/examples/mlp" "lint;--no-cache;--format;json;${SOURCE_DIR}/examples/mlp")
  execute_process(COMMAND ${TKEXPORT} ${cmd_args} OUTPUT_FILE /dev/full RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 5 OR NOT err MATCHES "^tkexport [a-z]+: cannot write to stdout: [^\n]+\n$")
    message(FATAL_ERROR "tkexport ${cmd_args} > /dev/full: exit status ${rc} (expected 5), stderr:\n${err}")
  endif()
endforeach()
# damaged or contradictory inputs, each said in one line: a .npy of its magic alone, a shapes file
# with a NUL byte (its text would end there), --cache-dir with --no-cache, -o naming the input by
# another path to the same file (the input itself, not a link)
execute_process(COMMAND printf "\\223NUMPY" OUTPUT_FILE ${WORK}/magic.npy)
step(4 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=${WORK}/magic.npy
  STDERR "^tkexport run: error: '[^']*magic.npy': truncated .npy file \\(6 bytes, no version\\)\n$")
execute_process(COMMAND printf "batch=4\\0batch=8\\n" OUTPUT_FILE ${WORK}/nul_sizes.txt)
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --bench 3 --shapes file:${WORK}/nul_sizes.txt
  STDERR "^tkexport run: --shapes file:[^\n]*nul_sizes.txt: a NUL byte at offset 7: expected a text file")
step(2 COMMAND ${TKEXPORT} compile ${WORK}/mlp.tkprog -o ${WORK}/never.tkpkg --cache-dir ${WORK}/cache --no-cache
  STDERR "^tkexport compile: --cache-dir and --no-cache contradict each other\n$")
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=${WORK}/./result.npy -o ${WORK}/result.npy
  STDERR "^tkexport run: -o [^\n]*result.npy is the input [^\n]*result.npy itself: writing")
# inspect on a package: its entries' sizes, the weights' among them (its program.json has no sizes)
step(0 COMMAND ${TKEXPORT} inspect ${pkg}
  STDOUT "\nentries: [0-9]+, [0-9]+ bytes \\(weights.safetensors [1-9][0-9]* bytes\\)\n.*sources:\n  [^\n]*silu.cu  sha256 [0-9a-f]+\\.\\.\\.\n")
if(last_out MATCHES "weights: 0 bytes|  0 bytes")
  message(FATAL_ERROR "inspect printed sizes it does not know:\n${last_out}")
endif()

# an unsigned package: refused, unless allowed explicitly
step(0 COMMAND ${TKEXPORT} compile ${WORK}/mlp.tkprog -o ${WORK}/unsigned.tkpkg --arch sm_90 --no-sign --quiet)
step(1 COMMAND ${TKEXPORT} run ${WORK}/unsigned.tkpkg --device ${DEVICE} --input x=random:2x128
  STDERR "^tkexport run: error: '[^']*unsigned.tkpkg' is not signed; refusing to run it[^\n]*tkexport run --allow-unsigned[^\n]*\n$")
step(0 COMMAND ${TKEXPORT} run ${WORK}/unsigned.tkpkg --device ${DEVICE} --input x=random:2x128 --allow-unsigned
  STDOUT "package opened in [0-9.]+ ms \\(unsigned, digests verified")

# --bench and --profile
step(0 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --input x=random:16x128 --bench 20 --warmup 2 --profile
  STDOUT "bench on ${DEVICE}[^\n]*batch 16: 20 calls[^\n]*2 warm-up\n  median +[0-9.]+ us\n  p10 +[0-9.]+ us\n  p90 +[0-9.]+ us\n  p99 +[0-9.]+ us\n  min +[0-9.]+ us\n.*calls/s +[0-9]+.*samples/s +[0-9]+.*profile on ${DEVICE}[^\n]*: 3 nodes\n.*tk::linear.*custom_ops::silu.*tk::linear.*total")

# --bench over streams of shapes: uniform (new shapes and repeats reported apart), cycle (8 sizes:
# 16 calls are 8 new and 8 repeats) with --profile on its first size, a file of sizes, and a file
# with a size outside the range (a usage error naming the line)
step(0 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --bench 20 --warmup 2 --shapes uniform --seed 3
  STDOUT "bench on ${DEVICE}[^\n]*, shapes uniform over batch in \\[1, 1024\\]: 20 calls \\(run \\+ sync[^\n]*2 warm-up, seed 3\n  median +[0-9.]+ us\n  p10 +[0-9.]+ us\n  p90 +[0-9.]+ us\n  p99 +[0-9.]+ us\n  min +[0-9.]+ us\n  mean +[0-9.]+ us\n  calls/s +[0-9]+[^\n]*\n  samples/s +[0-9]+[^\n]*\n  new shapes +[0-9]+ calls: median [0-9.]+ us, p90 [0-9.]+ us, p99 [0-9.]+ us, max [0-9.]+ us\n  repeat shapes +[0-9]+ calls")
step(0 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --bench 16 --warmup 0 --shapes cycle --profile
  STDOUT "shapes cycle over batch in \\[1, 1024\\]: 16 calls.*\n  new shapes +8 calls: median [^\n]*\n  repeat shapes +8 calls: median [^\n]*\nprofile of batch=1:\nprofile on ${DEVICE}[^\n]*: 3 nodes\n.*tk::linear.*custom_ops::silu.*tk::linear.*total")
# a session set up as a service's: the prefill from creation and bound buffers, waited for; on a
# GPU every shape then replays a graph captured on the buffers, the CPU has no graphs to bind
if(DEVICE STREQUAL "cpu")
  step(0 COMMAND ${TKEXPORT} run ${pkg} --device cpu --bench 6 --warmup 0 --shapes uniform --prefill now
    STDOUT "session ready in [0-9.]+ ms: no prefill \\(the symbol space is above 1024 shapes, or a CPU session\\)")
  step(1 COMMAND ${TKEXPORT} run ${pkg} --device cpu --bench 6 --shapes uniform --bind
    STDERR "tk_session_bind: the session on cpu runs without CUDA graphs: nothing to bind")
else()
  step(0 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --bench 50 --warmup 0 --shapes uniform --bind
    STDOUT "session ready in [0-9.]+ ms: every shape of the program has its graph\n.*new shapes +[0-9]+ calls")
endif()
file(WRITE ${WORK}/sizes.txt "# sizes a service saw\nbatch=3\nbatch=1024; batch=77;batch=3\n")
step(0 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --bench 8 --warmup 0 --shapes file:${WORK}/sizes.txt
  STDOUT "shapes file:[^\n]*sizes.txt over batch in \\[1, 1024\\]: 8 calls.*\n  new shapes +3 calls: [^\n]*\n  repeat shapes +5 calls")
file(WRITE ${WORK}/bad_sizes.txt "batch=3\nbatch=2000\n")
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --bench 8 --shapes file:${WORK}/bad_sizes.txt
  STDERR "^tkexport run: --shapes file:[^\n]*bad_sizes.txt: line 2: batch=2000 is outside \\[1, 1024\\]\n$")
# a value is all of the text up to the next separator: not read across a line, nor with a '+'
file(WRITE ${WORK}/bad_sizes.txt "batch=3\nbatch=\n16\n")
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --bench 8 --shapes file:${WORK}/bad_sizes.txt
  STDERR "^tkexport run: --shapes file:[^\n]*bad_sizes.txt: line 2: batch=: the value is not a whole number\n$")
file(WRITE ${WORK}/bad_sizes.txt "batch=+3\n")
step(2 COMMAND ${TKEXPORT} run ${pkg} --device ${DEVICE} --bench 8 --shapes file:${WORK}/bad_sizes.txt
  STDERR "^tkexport run: --shapes file:[^\n]*bad_sizes.txt: line 1: batch=\\+3: the value is not a whole number\n$")
