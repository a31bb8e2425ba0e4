# The installed tkexport as another project sees it (cmake -P; tests/CMakeLists.txt passes the -D):
# installs BUILD_DIR into WORK/prefix; builds copies of examples/add, sincos and mlp outside the
# tree, each on its own against the prefix (find_package, tk_add_kernels), and runs them on the
# CPU (example_mlp's output and weights the same as the build's); builds a copy of
# examples/consumer against it with find_package (the MLP packaged through tkexport_add_package,
# the consumer program run on the CPU), checks that a second build does nothing and that touching
# silu.cu rebuilds the package, and compiles the same main.c through pkg-config. Skipped
# (SKIP_REGULAR_EXPRESSION) only where no nvcc can compile the MLP's kernel.
#
#   -DBUILD_DIR -DSOURCE_DIR -DWORK -DWEIGHTS -DGENERATOR -DPKG_CONFIG -DCC -DNM
foreach(var BUILD_DIR SOURCE_DIR WORK WEIGHTS GENERATOR PKG_CONFIG CC NM)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "consumer.cmake: -D${var}=... is required")
  endif()
endforeach()

# run(<what> <command>...): runs the command, stops the test with its output when it fails, and
# leaves its output in `out`.
macro(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "consumer: ${what} failed (${rc}):\n  ${ARGN}\n${out}")
  endif()
  message(STATUS "consumer: ${what}: ok")
endmacro()

set(prefix ${WORK}/prefix)
set(src ${WORK}/src/examples)
set(build ${WORK}/build)
file(REMOVE_RECURSE ${WORK})
# A machine where nobody has set up a signing key: the first tkexport compile of the build makes
# the per-user key and trusts it, so the consumer opens the package it signed.
set(ENV{XDG_CONFIG_HOME} ${WORK}/config)
set(ENV{TKEXPORT_SIGN_KEY} "")
set(ENV{TKEXPORT_TRUST_FILE} "")
set(ENV{TKEXPORT_TRUSTED_KEYS} "")

# 1. Install, and what the prefix must hold.
run("cmake --install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(file bin/tkexport lib/libtkrt.so include/tk/runtime.h include/tk/op.h include/tk/export.h
        include/tk/log.h include/tk/safetensors.h
        share/tkexport/include/tk/program.h share/tkexport/shim/texture_fetch_functions.h
        lib/pkgconfig/tkrt.pc lib/cmake/tkexport/tkexportConfig.cmake
        lib/cmake/tkexport/tkexportConfigVersion.cmake lib/cmake/tkexport/tkexportTargets.cmake
        lib/cmake/tkexport/tkexport_package.cmake lib/cmake/tkexport/tkexport_kernels.cmake)
  if(NOT EXISTS ${prefix}/${file})
    message(FATAL_ERROR "consumer: the install has no ${file}")
  endif()
endforeach()
run("installed tkexport runs" ${prefix}/bin/tkexport export --help)

# 2. A copy of the sources, so that touching them leaves the repository alone.
file(COPY ${SOURCE_DIR}/examples/consumer ${SOURCE_DIR}/examples/mlp ${SOURCE_DIR}/examples/add
     ${SOURCE_DIR}/examples/sincos DESTINATION ${src})

# 3. The examples, each on its own against the prefix (their CMakeLists.txt: find_package and
# tk_add_kernels; kernels for one architecture, to save time), run on the CPU. They include tk/
# headers only, or they would not compile here.
foreach(ex add sincos mlp)
  run("configure examples/${ex} on its own" ${CMAKE_COMMAND} -S ${src}/${ex} -B ${WORK}/build-${ex} -G ${GENERATOR}
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_C_COMPILER=${CC} "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror"
      -DTK_CUDA_ARCHS=80)
  run("build examples/${ex}" ${CMAKE_COMMAND} --build ${WORK}/build-${ex})
endforeach()
run("example_add runs" ${WORK}/build-add/example_add --device cpu -n 1000)
run("example_sincos runs" ${WORK}/build-sincos/example_sincos --device cpu)
run("example_mlp runs" ${WORK}/build-mlp/example_mlp --device cpu 37)
set(copied "${out}")
run("the build's example_mlp runs" ${BUILD_DIR}/examples/example_mlp --device cpu 37)
if(NOT copied STREQUAL out OR NOT out MATCHES "checksum")
  message(FATAL_ERROR "consumer: example_mlp built outside the tree printed\n${copied}\nthe build's\n${out}")
endif()
run("example_mlp writes weights" ${WORK}/build-mlp/example_mlp --write-weights ${WORK}/mlp.safetensors)
file(SHA256 ${WORK}/mlp.safetensors copied)
file(SHA256 ${WEIGHTS} built)
if(NOT copied STREQUAL built)
  message(FATAL_ERROR "consumer: example_mlp built outside the tree wrote other weights than ${WEIGHTS}")
endif()

# 4. examples/consumer, configured against the prefix (find_package(tkexport CONFIG) and
# tkexport_add_package).
run("configure examples/consumer" ${CMAKE_COMMAND} -S ${src}/consumer -B ${build} -G ${GENERATOR}
    -DCMAKE_PREFIX_PATH=${prefix} -DMLP_WEIGHTS=${WEIGHTS} -DCMAKE_C_COMPILER=${CC} -DCMAKE_C_FLAGS=-Werror)

# 5. pkg-config: the flags, and main.c compiled with them.
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
run("pkg-config tkrt" ${PKG_CONFIG} --cflags --libs tkrt)
string(STRIP "${out}" pc_flags)
if(NOT pc_flags MATCHES "-I[^ ]*/include( |$)" OR NOT pc_flags MATCHES "-L[^ ]*/lib -ltkrt( |$)")
  message(FATAL_ERROR "consumer: pkg-config --cflags --libs tkrt gave '${pc_flags}'")
endif()
run("pkg-config compile" sh -c "${CC} -Wall -Wextra -Werror -c '${src}/consumer/main.c' -o '${WORK}/main.o' $(${PKG_CONFIG} --cflags tkrt)")

# What the rest needs from others: tkexport compile, tk_package_open, and an nvcc for silu.cu.
execute_process(COMMAND ${prefix}/bin/tkexport compile --help RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer: the installed tkexport has no working 'compile' command yet")
endif()
execute_process(COMMAND ${NM} -D --defined-only ${prefix}/lib/libtkrt.so OUTPUT_VARIABLE dynsyms)
if(NOT dynsyms MATCHES " T tk_package_open\n")
  message(FATAL_ERROR "consumer: the installed libtkrt does not define tk_package_open yet")
endif()
set(nvccs $ENV{TKEXPORT_NVCC} $ENV{CUDA_HOME}/bin/nvcc /usr/local/cuda/bin/nvcc)
find_program(NVCC nvcc)
set(have_nvcc FALSE)
foreach(nvcc IN LISTS nvccs NVCC)
  if(nvcc AND EXISTS ${nvcc})
    set(have_nvcc TRUE)
  endif()
endforeach()
if(NOT have_nvcc)
  message("consumer: skipped: no nvcc to compile the MLP's kernel (set TKEXPORT_NVCC or CUDA_HOME)")
  return()
endif()

# 6. Build: the package, then the program, which runs it on the CPU.
run("build" ${CMAKE_COMMAND} --build ${build})
if(NOT EXISTS ${build}/mlp.tkpkg)
  message(FATAL_ERROR "consumer: the build made no mlp.tkpkg:\n${out}")
endif()
if(NOT out MATCHES "created your signing key '[^']*/config/tkexport/signing_key'")
  message(FATAL_ERROR "consumer: the first compile did not make the per-user signing key:\n${out}")
endif()
set(ENV{LD_LIBRARY_PATH} ${prefix}/lib)
run("consumer runs the package" ${build}/consumer ${build}/mlp.tkpkg)
set(result "${out}")
message(STATUS "${result}")
if(NOT result MATCHES "program 'mlp': output 0 has 512 values, sum ")
  message(FATAL_ERROR "consumer: unexpected output:\n${result}")
endif()

# 7. Nothing touched: nothing is rebuilt.
run("second build" ${CMAKE_COMMAND} --build ${build})
if(out MATCHES "tkexport export|tkexport compile|Building|Linking"
   OR (GENERATOR STREQUAL "Ninja" AND NOT out MATCHES "ninja: no work to do"))
  message(FATAL_ERROR "consumer: a build with nothing changed did work:\n${out}")
endif()

# 8. A kernel source touched: the package is made again, and only the package.
file(TIMESTAMP ${build}/mlp.tkpkg before "%s")
execute_process(COMMAND ${CMAKE_COMMAND} -E sleep 1.1)
file(TOUCH ${src}/mlp/silu.cu)
run("build after touching silu.cu" ${CMAKE_COMMAND} --build ${build})
file(TIMESTAMP ${build}/mlp.tkpkg after "%s")
if(NOT out MATCHES "tkexport export" OR NOT out MATCHES "tkexport compile" OR after STREQUAL before
   OR out MATCHES "Linking")
  message(FATAL_ERROR "consumer: touching silu.cu did not rebuild mlp.tkpkg:\n${out}")
endif()

# 9. The pkg-config one-liner, linked and run: the same output.
run("pkg-config build" sh -c "${CC} '${src}/consumer/main.c' -o '${WORK}/consumer-pc' $(${PKG_CONFIG} --cflags --libs tkrt)")
run("pkg-config consumer runs the package" ${WORK}/consumer-pc ${build}/mlp.tkpkg)
if(NOT out STREQUAL result)
  message(FATAL_ERROR "consumer: the pkg-config build printed\n${out}\nthe CMake build\n${result}")
endif()
