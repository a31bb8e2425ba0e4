/* File helpers: whole-file reads with a size bound, atomic writes, folders, relative paths. */
#ifndef TK_FSUTIL_H
#define TK_FSUTIL_H

#include <stddef.h>

/* Reads the whole file into a malloc'd, NUL-terminated buffer (*out, length in *len).
 * Fails with TK_EIO for an unreadable file and TK_EINVAL for one larger than max_size. */
int tk_file_read(char **out, size_t *len, const char *path, size_t max_size);

/* Writes data to path through a temporary file in the same folder and a rename, so readers
 * see the old file or the new one, never a half-written one. A path that exists and is not a
 * regular file (/dev/null, a pipe) is written in place. */
int tk_file_write_atomic(const char *path, const void *data, size_t n);

/* tk_file_write_atomic with the permission bits mode (0600 for a private key), which the file has
 * from its first byte on. With keep_existing, a path that already exists is left as it is and the
 * call returns 1 (0 when it wrote the file): of two processes creating the file at once, exactly
 * one writes it. */
int tk_file_write_atomic_mode(const char *path, const void *data, size_t n, unsigned mode, int keep_existing);

/* mkdir -p. */
int tk_mkdirs(const char *path);

/* path relative to the current directory when it lies below it, else path itself; malloc'd. */
char *tk_path_relative_to_cwd(const char *abs_path);

/* 1 for a directory, 0 for anything else that exists, -1 when it does not exist. */
int tk_path_is_dir(const char *path);

/* tkexport's configuration folder (signing key, trusted keys): $XDG_CONFIG_HOME/tkexport, else
 * ~/.config/tkexport; malloc'd, NULL when neither variable is set. */
char *tk_default_config_dir(void);

/* tkexport's cache folder: $TKEXPORT_CACHE_DIR, else $XDG_CACHE_HOME/tkexport, else
 * ~/.cache/tkexport; malloc'd, NULL when none of them is set. */
char *tk_default_cache_dir(void);

/* Removes a file or a folder with everything in it (rm -r); -1 when something stayed. A symbolic
 * link is removed itself: the folder it points to is left alone. */
int tk_remove_tree(const char *path);

/* The one folder walk of tkexport (the analyzer's, the exporter's, the compiler's): the files
 * under dir, recursively, in name order. Hidden entries and, below dir, CMake build trees (a
 * folder holding CMakeCache.txt) are skipped; symbolic links to folders are not followed (no
 * loops), and the depth stops at TK_WALK_MAX_DEPTH; only regular files (or links to one) reach
 * visit(path, arg): never a FIFO, socket or device, which opening could block on. visit returns
 * 0 to go on, anything else to stop (returned). TK_EIO for a folder that cannot be read. */
#define TK_WALK_MAX_DEPTH 64
int tk_walk_files(const char *dir, int (*visit)(const char *path, void *arg), void *arg);

/* A new private folder $TMPDIR/tkexport-XXXXXX (else under /tmp) into out, removed by an
 * interrupt (cleanup.h) until tk_remove_tree removes it. */
int tk_tempdir_new(char *out, size_t n);

/* tkexport's own include folder (the one holding tk/program.h): $TKEXPORT_INCLUDE_DIR, then
 * <prefix>/share/tkexport/include beside the running executable, then the source tree's. */
int tk_tool_include_dir(char *out, size_t n);

#endif
