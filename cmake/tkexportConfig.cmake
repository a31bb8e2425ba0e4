# find_package(tkexport CONFIG) for an installed tkexport (cmake/tkexport_install.cmake):
#   tkexport::tkrt      libtkrt and include/tk/: what a program that runs packages links
#   tkexport::tkexport  the tkexport command
#   tkexport_add_package(NAME ... PROGRAM ... SOURCES ...)  build steps that export and compile a
#                       model into a .tkpkg (tkexport_package.cmake says how)
include("${CMAKE_CURRENT_LIST_DIR}/tkexportTargets.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/tkexport_package.cmake")
