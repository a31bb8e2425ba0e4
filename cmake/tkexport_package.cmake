# tkexport_add_package(NAME <name> PROGRAM <program> SOURCES <file or folder>...
#                      [WEIGHTS <file.safetensors>] [ARCH sm_XX...] [OUTPUT <path>]
#                      [DEPENDS <file or target>...])
#
# Adds the build steps that turn a model's sources into a package (docs/formats/tkpkg.md):
#
#   tkexport export <SOURCES> --program <program> [--weights <WEIGHTS>] -o <bin>/<name>.tkprog
#   tkexport compile <name>.tkprog -o <OUTPUT> [--arch sm_XX]...
#
# and a target <name>, built by default, that produces the package. OUTPUT defaults to
# ${CMAKE_CURRENT_BINARY_DIR}/<name>.tkpkg. The package's path is left in the variable
# <name>_PACKAGE and in the target property TKEXPORT_PACKAGE (the .tkprog's in
# TKEXPORT_PROGRAM_FILE).
#
# SOURCES are the .c/.cu/.h/.cuh files of the model and its ops, or folders holding them
# (searched recursively, as tkexport searches them: hidden folders and CMake build trees are
# skipped); relative paths are relative to CMAKE_CURRENT_SOURCE_DIR. Editing any of them, the
# weights or the tkexport executable rebuilds the package; a new file in a folder re-runs CMake.
# Export runs in the sources' common folder, so the paths recorded in the package are relative to
# it. DEPENDS adds files or targets the steps wait for, e.g. the target that writes the weights.
#
# The tkexport that runs the steps is tkexport::tkexport: the installed one under
# find_package(tkexport CONFIG), or the tool of the tkexport build this file is part of.
include_guard(GLOBAL)

# The files under dir that tkexport reads, skipping what tkexport skips (analyzer/analyzer.c).
function(tkexport__sources_under dir out)
  file(GLOB_RECURSE found CONFIGURE_DEPENDS LIST_DIRECTORIES false
       "${dir}/*.c" "${dir}/*.cu" "${dir}/*.h" "${dir}/*.cuh")
  file(GLOB_RECURSE caches LIST_DIRECTORIES false "${dir}/*/CMakeCache.txt")
  set(kept "")
  foreach(file IN LISTS found)
    file(RELATIVE_PATH rel "${dir}" "${file}")
    if(rel MATCHES "(^|/)\\.")
      continue()
    endif()
    set(in_build_tree FALSE)
    foreach(cache IN LISTS caches)
      get_filename_component(tree "${cache}" DIRECTORY)
      string(FIND "${file}" "${tree}/" at)
      if(at EQUAL 0)
        set(in_build_tree TRUE)
        break()
      endif()
    endforeach()
    if(NOT in_build_tree)
      list(APPEND kept "${file}")
    endif()
  endforeach()
  set(${out} ${kept} PARENT_SCOPE)
endfunction()

function(tkexport_add_package)
  cmake_parse_arguments(PARSE_ARGV 0 TKP "" "NAME;PROGRAM;WEIGHTS;OUTPUT" "SOURCES;ARCH;DEPENDS")
  if(TKP_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "tkexport_add_package: unexpected arguments: ${TKP_UNPARSED_ARGUMENTS}")
  endif()
  foreach(required NAME PROGRAM SOURCES)
    if(NOT TKP_${required})
      message(FATAL_ERROR "tkexport_add_package: ${required} is required")
    endif()
  endforeach()
  if(NOT TARGET tkexport::tkexport)
    message(FATAL_ERROR "tkexport_add_package(${TKP_NAME}): no tkexport::tkexport target; "
                        "call find_package(tkexport CONFIG REQUIRED) first")
  endif()
  if(DEFINED TKEXPORT_CAN_EXPORT AND NOT TKEXPORT_CAN_EXPORT)
    message(FATAL_ERROR "tkexport_add_package(${TKP_NAME}): this tkexport was built without the analyzer "
                        "(TK_WITH_ANALYZER=OFF) and cannot export; use one built with it")
  endif()
  set(tool tkexport::tkexport)

  # The paths handed to tkexport, the files the steps depend on, and their common folder.
  set(paths "")
  set(deps "")
  set(base "")
  foreach(src IN LISTS TKP_SOURCES)
    get_filename_component(src "${src}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    if(IS_DIRECTORY "${src}")
      tkexport__sources_under("${src}" files)
      set(dir "${src}")
    elseif(EXISTS "${src}")
      set(files "${src}")
      get_filename_component(dir "${src}" DIRECTORY)
    else()
      message(FATAL_ERROR "tkexport_add_package(${TKP_NAME}): '${src}' does not exist")
    endif()
    list(APPEND paths "${src}")
    list(APPEND deps ${files})
    if(NOT base)
      set(base "${dir}")
    endif()
    string(FIND "${dir}/" "${base}/" at)
    while(NOT at EQUAL 0 AND NOT base STREQUAL "/")
      get_filename_component(base "${base}" DIRECTORY)
      string(FIND "${dir}/" "${base}/" at)
    endwhile()
  endforeach()

  set(weights_args "")
  if(TKP_WEIGHTS)
    get_filename_component(weights "${TKP_WEIGHTS}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    set(weights_args --weights "${weights}")
    list(APPEND deps "${weights}")
  endif()
  set(arch_args "")
  foreach(arch IN LISTS TKP_ARCH)
    list(APPEND arch_args --arch ${arch})
  endforeach()

  set(tkprog "${CMAKE_CURRENT_BINARY_DIR}/${TKP_NAME}.tkprog")
  if(TKP_OUTPUT)
    get_filename_component(output "${TKP_OUTPUT}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  else()
    set(output "${CMAKE_CURRENT_BINARY_DIR}/${TKP_NAME}.tkpkg")
  endif()
  get_filename_component(output_dir "${output}" DIRECTORY)
  get_filename_component(output_name "${output}" NAME)

  add_custom_command(OUTPUT "${tkprog}"
    COMMAND ${tool} export ${paths} --program ${TKP_PROGRAM} ${weights_args} -o "${tkprog}"
    DEPENDS ${deps} ${tool} ${TKP_DEPENDS}
    WORKING_DIRECTORY "${base}"
    COMMENT "tkexport export: program '${TKP_PROGRAM}' -> ${TKP_NAME}.tkprog"
    VERBATIM)
  add_custom_command(OUTPUT "${output}"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${output_dir}"
    COMMAND ${tool} compile "${tkprog}" -o "${output}" ${arch_args}
    DEPENDS "${tkprog}" ${tool}
    COMMENT "tkexport compile: ${TKP_NAME}.tkprog -> ${output_name}"
    VERBATIM)
  add_custom_target(${TKP_NAME} ALL DEPENDS "${output}")
  set_target_properties(${TKP_NAME} PROPERTIES
    TKEXPORT_PACKAGE "${output}"
    TKEXPORT_PROGRAM_FILE "${tkprog}")
  set(${TKP_NAME}_PACKAGE "${output}" PARENT_SCOPE)
endfunction()
