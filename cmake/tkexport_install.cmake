# What `cmake --install` puts under the prefix, and the names other projects use:
#   bin/tkexport                       the tool (its runtime linked in, tkrt_internal)
#   lib/libtkrt.so*, include/tk/*.h    the runtime a deployment links, and the public headers
#                                      (libtkrt exports what they declare and nothing else)
#   share/tkexport/include, /shim      tkexport's own copies of its headers and the analyzer's
#                                      CUDA shim (where exporter/compile.c and analyzer/compdb.c
#                                      look beside the executable)
#   lib/pkgconfig/tkrt.pc              pkg-config: cc main.c $(pkg-config --cflags --libs tkrt)
#   lib/cmake/tkexport/                find_package(tkexport CONFIG): tkexport::tkrt,
#                                      tkexport::tkexport, tkexport_add_package and
#                                      tk_add_kernels
# Included by the top CMakeLists.txt once tkrt and tkexport exist.
include_guard(GLOBAL)
include(CMakePackageConfigHelpers)

# The names find_package gives, inside this build too (tkexport_add_package runs
# tkexport::tkexport).
add_library(tkexport::tkrt ALIAS tkrt)
add_executable(tkexport::tkexport ALIAS tkexport)
set(TKEXPORT_CAN_EXPORT ${TK_WITH_ANALYZER})

# A sanitized libtkrt only loads into programs linked with the sanitizers' runtimes (ASan must
# come first in the initial library list): pass the flags on to everything that links it.
set(TK__SANITIZE_LINK "")
if(TK_SANITIZE)
  set(TK__SANITIZE_LINK -fsanitize=address,undefined)
  target_link_options(tkrt INTERFACE ${TK__SANITIZE_LINK})
endif()

target_include_directories(tkrt PUBLIC $<INSTALL_INTERFACE:include>)
# libclang wherever the build found it, when that is outside the system's paths
set_target_properties(tkexport PROPERTIES INSTALL_RPATH "$ORIGIN/../lib" INSTALL_RPATH_USE_LINK_PATH ON)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tk DESTINATION include FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tk DESTINATION share/tkexport/include
        FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/analyzer/shim/ DESTINATION share/tkexport/shim)

# pkg-config, relocatable: the prefix is found from the .pc file's own folder.
list(JOIN TK__SANITIZE_LINK " " sanitize)
string(STRIP "-L\${libdir} -ltkrt ${sanitize}" TK_PC_LIBS)
configure_file(${CMAKE_CURRENT_LIST_DIR}/tkrt.pc.in ${PROJECT_BINARY_DIR}/tkrt.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tkrt.pc DESTINATION lib/pkgconfig)
# the manual page and the bash completion, written by hand (docs/tkexport.1, scripts/completion)
install(FILES ${PROJECT_SOURCE_DIR}/docs/tkexport.1 DESTINATION share/man/man1)
install(FILES ${PROJECT_SOURCE_DIR}/scripts/completion/tkexport.bash DESTINATION share/bash-completion/completions
        RENAME tkexport)

# The CMake package.
install(EXPORT tkexportTargets NAMESPACE tkexport:: DESTINATION lib/cmake/tkexport)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tkexportConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
configure_file(${CMAKE_CURRENT_LIST_DIR}/tkexportConfig.cmake.in ${PROJECT_BINARY_DIR}/tkexportConfig.cmake @ONLY)
install(FILES
  ${PROJECT_BINARY_DIR}/tkexportConfig.cmake
  ${CMAKE_CURRENT_LIST_DIR}/tkexport_package.cmake
  ${CMAKE_CURRENT_LIST_DIR}/tkexport_kernels.cmake
  ${PROJECT_BINARY_DIR}/tkexportConfigVersion.cmake
  DESTINATION lib/cmake/tkexport)
