# tk_add_kernels(<target> SOURCES a.cu ... [INCLUDE_DIRS dir ...] [OPTIONS nvcc-flag ...]):
# compiles the target's CUDA kernels with nvcc into one fatbin per .cu file and embeds them in
# the target, which registers them with libtkrt when it is loaded, so that tk_wrap finds its
# kernels by name. Used by libtkrt for its built-in kernels and by programs for their own.
#
# Settings (cache variables): TK_WITH_CUDA (ON when nvcc is found), TK_NVCC, TK_CUDA_ARCHS.
include_guard(GLOBAL)

# Where tk/kernel.h lives: include/ beside this file's folder (the source tree; for an installed
# copy, tkexportConfig.cmake sets it to the prefix's include folder first).
get_filename_component(TK__KERNELS_INCLUDE_DEFAULT "${CMAKE_CURRENT_LIST_DIR}/../include" ABSOLUTE)
set(TK_KERNELS_INCLUDE_DIR "${TK__KERNELS_INCLUDE_DEFAULT}" CACHE PATH
    "folder holding tk/kernel.h, passed to nvcc")

if(NOT DEFINED TK_CUDA_HOME)
  if(DEFINED ENV{CUDA_HOME})
    set(TK_CUDA_HOME "$ENV{CUDA_HOME}")
  else()
    set(TK_CUDA_HOME /usr/local/cuda)
  endif()
endif()

# nvcc from the toolkit of TK_CUDA_HOME first, then from PATH.
find_program(TK_NVCC nvcc HINTS "${TK_CUDA_HOME}/bin" NO_DEFAULT_PATH)
find_program(TK_NVCC nvcc)
if(TK_NVCC)
  set(TK__WITH_CUDA_DEFAULT ON)
else()
  set(TK__WITH_CUDA_DEFAULT OFF)
  message(STATUS "tkexport: nvcc not found (looked in ${TK_CUDA_HOME}/bin and PATH): building without "
                 "CUDA kernels; the CPU paths work, kernel launches fail with 'not in any loaded fatbin'")
endif()
option(TK_WITH_CUDA "compile CUDA kernels with nvcc and embed them (tk_add_kernels)" ${TK__WITH_CUDA_DEFAULT})
if(TK_WITH_CUDA AND NOT TK_NVCC)
  message(FATAL_ERROR "TK_WITH_CUDA is ON but nvcc was not found: set TK_CUDA_HOME or TK_NVCC")
endif()

# The driver API's and cuBLASLt's headers, for their types (libtkrt opens both with dlopen).
# Without them libtkrt still builds, and every GPU request fails with "no CUDA driver".
find_path(TK_CUDA_INCLUDE_DIR cuda.h HINTS "${TK_CUDA_HOME}/include" NO_DEFAULT_PATH)
find_path(TK_CUDA_INCLUDE_DIR cuda.h)
if(NOT TK_CUDA_INCLUDE_DIR)
  message(STATUS "tkexport: cuda.h not found (looked in ${TK_CUDA_HOME}/include): libtkrt is built "
                 "without its CUDA backend")
endif()

# Target architectures, listed once (as ggml documents its CMAKE_CUDA_ARCHITECTURES choice):
# real cubins for sm_80 (A100, and through binary compatibility the other 8.x parts such as
# A10, L4 and RTX 30/40) and sm_90a (H100, H200: sm_90 with Hopper's own instructions, wgmma,
# which the attention kernel uses; such cubins run on 9.0 parts only), plus PTX of the lowest
# architecture, which the driver JIT-compiles on any newer GPU (Blackwell included) the cubins do
# not cover. CUDA 13 dropped everything below sm_75.
set(TK_CUDA_ARCHS "80;90a" CACHE STRING "CUDA architectures of the embedded cubins (PTX of the lowest is added)")

# The nvcc -gencode flags for TK_CUDA_ARCHS: one cubin per architecture, PTX of the lowest.
function(tk__gencode_flags out)
  set(archs ${TK_CUDA_ARCHS})
  list(SORT archs COMPARE NATURAL)
  list(GET archs 0 lowest)
  set(flags "")
  foreach(arch IN LISTS archs)
    list(APPEND flags -gencode arch=compute_${arch},code=sm_${arch})
  endforeach()
  list(APPEND flags -gencode arch=compute_${lowest},code=compute_${lowest})
  set(${out} ${flags} PARENT_SCOPE)
endfunction()

function(tk_add_kernels target)
  cmake_parse_arguments(PARSE_ARGV 1 TKK "" "" "SOURCES;INCLUDE_DIRS;OPTIONS")
  if(NOT TKK_SOURCES)
    message(FATAL_ERROR "tk_add_kernels(${target}): no SOURCES")
  endif()
  if(NOT TK_WITH_CUDA)
    message(STATUS "tkexport: ${target}: CUDA kernels not built (TK_WITH_CUDA is OFF)")
    return()
  endif()
  get_target_property(done ${target} TK_KERNELS_ADDED)
  if(done)
    message(FATAL_ERROR "tk_add_kernels(${target}): called twice; list every .cu file in one call")
  endif()
  set_target_properties(${target} PROPERTIES TK_KERNELS_ADDED ON)
  tk__gencode_flags(gencode)
  set(includes -I${TK_KERNELS_INCLUDE_DIR})
  foreach(dir IN LISTS TKK_INCLUDE_DIRS)
    get_filename_component(dir "${dir}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND includes -I${dir})
  endforeach()

  set(outdir "${CMAKE_CURRENT_BINARY_DIR}/tk_kernels")
  set(fatbins "")
  set(blobs "")
  set(nodes "")
  set(unnodes "")
  set(index 0)
  foreach(src IN LISTS TKK_SOURCES)
    get_filename_component(src "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    get_filename_component(stem "${src}" NAME_WE)
    get_filename_component(srcdir "${src}" DIRECTORY)
    set(fatbin "${outdir}/${target}_${stem}.fatbin")
    if(fatbin IN_LIST fatbins)
      message(FATAL_ERROR "tk_add_kernels(${target}): two sources named ${stem}.cu")
    endif()
    add_custom_command(
      OUTPUT "${fatbin}"
      COMMAND "${CMAKE_COMMAND}" -E make_directory "${outdir}"
      COMMAND "${TK_NVCC}" -fatbin -O3 -std=c++17 ${gencode} ${includes} -I${srcdir} ${TKK_OPTIONS}
              -MD -MF "${fatbin}.d" -o "${fatbin}" "${src}"
      MAIN_DEPENDENCY "${src}"
      DEPFILE "${fatbin}.d"
      COMMENT "nvcc: ${target}: ${stem}.cu -> ${target}_${stem}.fatbin"
      VERBATIM)
    list(APPEND fatbins "${fatbin}")

    # .incbin takes a quoted string: escape backslashes and quotes of the path.
    string(REPLACE "\\" "\\\\\\\\" qpath "${fatbin}")
    string(REPLACE "\"" "\\\\\\\"" qpath "${qpath}")
    string(MAKE_C_IDENTIFIER "tk__fatbin_${target}_${index}" sym)
    # Global but hidden symbols (not local labels), so that LTO may put the reference and the
    # definition in different partitions; hidden keeps them inside the target's own object.
    string(APPEND blobs
      "__asm__(\".pushsection .rodata\\n\"\n"
      "        \".globl ${sym}\\n\"\n"
      "        \".hidden ${sym}\\n\"\n"
      "        \".globl ${sym}_size\\n\"\n"
      "        \".hidden ${sym}_size\\n\"\n"
      "        \".balign 16\\n\"\n"
      "        \"${sym}:\\n\"\n"
      "        \".incbin \\\"${qpath}\\\"\\n\"\n"
      "        \"${sym}_end:\\n\"\n"
      "        \".balign 8\\n\"\n"
      "        \"${sym}_size:\\n\"\n"
      "        \".quad ${sym}_end - ${sym}\\n\"\n"
      "        \".popsection\\n\");\n"
      "extern const unsigned char ${sym}[] TK__HIDDEN;\n"
      "extern const unsigned long long ${sym}_size TK__HIDDEN;\n"
      "static tk_fatbin_node ${sym}_node = {TK_FATBIN_RECORD_VERSION, ${sym}, 0, \"${target}/${stem}.cu\", 0, 0};\n\n")
    string(APPEND nodes "    ${sym}_node.size = (size_t)${sym}_size;\n    tk_fatbin_register(&${sym}_node);\n")
    string(APPEND unnodes "    tk_fatbin_unregister(&${sym}_node);\n")
    math(EXPR index "${index} + 1")
  endforeach()

  string(MAKE_C_IDENTIFIER "${target}" ctarget)
  set(gen "${outdir}/${target}_fatbins.c")
  file(CONFIGURE OUTPUT "${gen}" @ONLY CONTENT
"/* Generated by tk_add_kernels (cmake/tkexport_kernels.cmake) for target @target@: the target's
 * kernel fatbins, embedded in .rodata, registered with libtkrt while the target is loaded. */
#include <stddef.h>
#include <tk/op.h> /* tk_fatbin_node, its version, tk_fatbin_register */

#define TK__HIDDEN __attribute__((visibility(\"hidden\")))

@blobs@__attribute__((constructor)) static void tk__fatbins_register_@ctarget@(void)
{
@nodes@}

__attribute__((destructor)) static void tk__fatbins_unregister_@ctarget@(void)
{
@unnodes@}
")
  target_sources(${target} PRIVATE "${gen}" ${fatbins})
  set_source_files_properties(${fatbins} PROPERTIES HEADER_FILE_ONLY ON GENERATED ON)
  # .incbin is invisible to the compiler's dependency scan: a new fatbin must rebuild the object.
  set_source_files_properties("${gen}" PROPERTIES OBJECT_DEPENDS "${fatbins}" GENERATED ON)
endfunction()
