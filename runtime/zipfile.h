/* The zip archives tkexport writes and reads (.tkprog, .tkpkg), through libzip: a deterministic
 * writer (entries sorted by name, fixed MS-DOS time, Unix mode 0644, no extras or comments) and
 * a bounded, checked reader of single entries. */
#ifndef TK_ZIPFILE_H
#define TK_ZIPFILE_H

#include <stddef.h>
#include <stdint.h>

/* An entry to write: name, bytes, and whether it is stored (read in place) or deflated. */
typedef struct tk_zip_entry {
    const char *name;
    const void *data;
    size_t len;
    int store;
} tk_zip_entry;

/* The archive of the n entries, sorted by name in place, as bytes (*data malloc'd). Equal
 * entries give equal bytes. what names the file kind in messages ("the .tkpkg"). */
int tk_zip_write_mem(void **data, size_t *len, tk_zip_entry *entries, size_t n, const char *what);

/* An archive opened for reading from memory the caller keeps alive. */
typedef struct tk_zip_reader tk_zip_reader;

/* Opens data as a zip (consistency checked); TK_EINVAL "<origin> is not a <kind> (...)" when it
 * is not one, or when it has more than max_entries entries. */
int tk_zip_open(tk_zip_reader **out, const void *data, size_t len, const char *origin, const char *kind,
                size_t max_entries);
void tk_zip_close(tk_zip_reader *z);
size_t tk_zip_count(const tk_zip_reader *z);
/* The name of entry i, or NULL when it has none. */
const char *tk_zip_name(tk_zip_reader *z, size_t i);
/* The uncompressed size the archive declares for entry i; TK_EINVAL when it cannot be read. */
int tk_zip_size(tk_zip_reader *z, size_t i, uint64_t *size);
/* Entry i, at most max bytes (checked before allocating), inflated and CRC-checked, into a
 * malloc'd buffer with one extra NUL byte. TK_EINVAL names the entry. */
int tk_zip_read(tk_zip_reader *z, size_t i, uint64_t max, unsigned char **out, size_t *len);

/* Where stored entry i's bytes lie in the archive's buffer, so that they can be used without a
 * copy (zip64 archives, past 4 GiB, included); TK_ENOTFOUND (no message) for a deflated entry,
 * or an archive whose records this does not find where libzip found them. The span is what the
 * archive says: callers verify it (a digest) before trusting it. */
int tk_zip_stored_span(tk_zip_reader *z, size_t i, const unsigned char **ptr, size_t *len);

#endif
