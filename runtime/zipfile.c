/* Deterministic zip writing and bounded zip reading over libzip, shared by the .tkprog and .tkpkg
 * formats. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "rt_internal.h"
#include "zipfile.h"

/* Every entry carries the same MS-DOS time: 1980-01-01 00:00, the format's first day. Set as a
 * DOS date directly (not through time_t, which libzip converts in the local time zone), so the
 * bytes do not depend on where or when the file is written. */
#define ZIP_DOS_TIME 0u
#define ZIP_DOS_DATE ((0u << 9) | (1u << 5) | 1u)
/* deflate level of compressed entries (zlib is deterministic for a given version) */
#define ZIP_DEFLATE_LEVEL 9

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const tk_zip_entry *)a)->name, ((const tk_zip_entry *)b)->name);
}

static int zip_fail(zip_t *za, const char *what, const char *entry)
{
    return tk_error_set(TK_EIO, "writing %s: %s: %s", what, entry, za ? zip_strerror(za) : "libzip failed");
}

/* The bytes of a closed in-memory archive. */
static int read_back(zip_source_t *src, void **data, size_t *len, const char *what)
{
    if (zip_source_open(src) != 0 || zip_source_seek(src, 0, SEEK_END) != 0)
        return tk_error_set(TK_EIO, "writing %s: reading the archive back failed", what);
    zip_int64_t size = zip_source_tell(src);
    unsigned char *buf = NULL;
    int rc = 0;
    if (size < 0 || zip_source_seek(src, 0, SEEK_SET) != 0)
        rc = tk_error_set(TK_EIO, "writing %s: reading the archive back failed", what);
    else if (!(buf = malloc((size_t)size ? (size_t)size : 1)))
        rc = tk_error_set(TK_ENOMEM, "out of memory");
    else if (zip_source_read(src, buf, (zip_uint64_t)size) != size)
        rc = tk_error_set(TK_EIO, "writing %s: reading the archive back failed", what);
    zip_source_close(src);
    if (rc) {
        free(buf);
        return rc;
    }
    *data = buf;
    *len = (size_t)size;
    return 0;
}

int tk_zip_write_mem(void **data, size_t *len, tk_zip_entry *entries, size_t n, const char *what)
{
    static const char empty[1] = {0};
    *data = NULL;
    *len = 0;
    zip_error_t ze;
    zip_error_init(&ze);
    zip_t *za = NULL;
    int rc = 0;
    qsort(entries, n, sizeof(*entries), cmp_entry);
    zip_source_t *src = zip_source_buffer_create(NULL, 0, 0, &ze);
    if (!src) {
        rc = tk_error_set(TK_ENOMEM, "writing %s: %s", what, zip_error_strerror(&ze));
        goto done;
    }
    zip_source_keep(src); /* zip_close releases it once; we read the archive out of it after */
    if (!(za = zip_open_from_source(src, ZIP_TRUNCATE, &ze))) {
        rc = tk_error_set(TK_EIO, "writing %s: %s", what, zip_error_strerror(&ze));
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const tk_zip_entry *e = &entries[i];
        zip_source_t *s = zip_source_buffer(za, e->len ? e->data : empty, e->len, 0);
        if (!s) {
            rc = zip_fail(za, what, e->name);
            goto done;
        }
        zip_int64_t idx = zip_file_add(za, e->name, s, ZIP_FL_ENC_UTF_8);
        if (idx < 0) {
            zip_source_free(s); /* still ours after a failed zip_file_add */
            rc = zip_fail(za, what, e->name);
            goto done;
        }
        if (zip_set_file_compression(za, (zip_uint64_t)idx, e->store ? ZIP_CM_STORE : ZIP_CM_DEFLATE,
                                     e->store ? 0 : ZIP_DEFLATE_LEVEL) ||
            zip_file_set_dostime(za, (zip_uint64_t)idx, ZIP_DOS_TIME, ZIP_DOS_DATE, 0) ||
            zip_file_set_external_attributes(za, (zip_uint64_t)idx, 0, ZIP_OPSYS_UNIX, 0100644u << 16)) {
            rc = zip_fail(za, what, e->name);
            goto done;
        }
    }
    if (zip_close(za) != 0) {
        rc = zip_fail(za, what, "closing the archive");
        goto done;
    }
    za = NULL;
    rc = read_back(src, data, len, what);
done:
    if (za)
        zip_discard(za);
    zip_source_free(src);
    zip_error_fini(&ze);
    return rc;
}

/* --- reading ------------------------------------------------------------------------------- */

struct tk_zip_reader {
    zip_t *za;
    size_t n;
    const char *origin;
    const unsigned char *data; /* the archive's bytes, for stored entries read in place */
    size_t len;
};

int tk_zip_open(tk_zip_reader **out, const void *data, size_t len, const char *origin, const char *kind,
                size_t max_entries)
{
    *out = NULL;
    zip_error_t ze;
    zip_error_init(&ze);
    tk_zip_reader *z = calloc(1, sizeof(*z));
    zip_source_t *src = z ? zip_source_buffer_create(len ? data : "", len, 0, &ze) : NULL;
    if (!src) {
        free(z);
        zip_error_fini(&ze);
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", origin);
    }
    if (!(z->za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze))) {
        zip_source_free(src); /* still ours when the open fails */
        int rc = tk_error_set(TK_EFORMAT, "%s is not a %s (not a readable zip archive: %s)", origin, kind,
                              zip_error_strerror(&ze));
        zip_error_fini(&ze);
        free(z);
        return rc;
    }
    zip_error_fini(&ze);
    zip_int64_t n = zip_get_num_entries(z->za, 0);
    if (n < 0 || (uint64_t)n > max_entries) {
        int rc = tk_error_set(TK_EFORMAT, "%s has %lld entries, more than the %zu a %s may hold", origin,
                              (long long)n, max_entries, kind);
        tk_zip_close(z);
        return rc;
    }
    z->n = (size_t)n;
    z->origin = origin;
    z->data = data;
    z->len = len;
    *out = z;
    return 0;
}

void tk_zip_close(tk_zip_reader *z)
{
    if (!z)
        return;
    zip_discard(z->za);
    free(z);
}

size_t tk_zip_count(const tk_zip_reader *z) { return z->n; }

const char *tk_zip_name(tk_zip_reader *z, size_t i) { return zip_get_name(z->za, i, ZIP_FL_ENC_RAW); }

int tk_zip_size(tk_zip_reader *z, size_t i, uint64_t *size)
{
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z->za, i, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE))
        return tk_error_set(TK_EFORMAT, "%s: entry '%s' is unreadable: %s", z->origin, tk_zip_name(z, i),
                            zip_strerror(z->za));
    /* deflate cannot expand more than 1032 to 1: a larger declared size is a lie (or a bomb),
     * refused before anything is allocated for it */
    if ((st.valid & ZIP_STAT_COMP_SIZE) && st.comp_size < st.size / 1032 - 1 && st.size > 4096)
        return tk_error_set(TK_EFORMAT, "%s: entry '%s' declares %llu bytes from %llu compressed, more than deflate "
                            "can produce", z->origin, tk_zip_name(z, i), (unsigned long long)st.size,
                            (unsigned long long)st.comp_size);
    *size = st.size;
    return 0;
}

int tk_zip_read(tk_zip_reader *z, size_t i, uint64_t max, unsigned char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    uint64_t size;
    const char *name = tk_zip_name(z, i);
    int rc = tk_zip_size(z, i, &size);
    if (rc)
        return rc;
    if (size > max || size >= SIZE_MAX)
        return tk_error_set(TK_EFORMAT, "%s: entry '%s' is %llu bytes, more than the %llu allowed", z->origin, name,
                            (unsigned long long)size, (unsigned long long)max);
    unsigned char *buf = malloc((size_t)size + 1);
    if (!buf)
        return tk_error_set(TK_ENOMEM, "out of memory reading %s", z->origin);
    zip_file_t *f = zip_fopen_index(z->za, i, 0);
    if (!f) {
        free(buf);
        return tk_error_set(TK_EFORMAT, "%s: entry '%s' cannot be opened: %s", z->origin, name, zip_strerror(z->za));
    }
    zip_int64_t got = zip_fread(f, buf, size);
    /* one more read reaches the end and checks the CRC */
    unsigned char extra;
    zip_int64_t more = got == (zip_int64_t)size ? zip_fread(f, &extra, 1) : -1;
    int bad = got != (zip_int64_t)size || more != 0;
    char why[256];
    if (zip_error_code_zip(zip_file_get_error(f)) != ZIP_ER_OK)
        snprintf(why, sizeof why, "%s", zip_file_strerror(f));
    else if (got >= 0 && got < (zip_int64_t)size) /* a stream that ended early, libzip saying nothing */
        snprintf(why, sizeof why, "its data ends after %lld of its %llu bytes", (long long)got,
                 (unsigned long long)size);
    else
        snprintf(why, sizeof why, "its data goes on past its %llu bytes", (unsigned long long)size);
    zip_fclose(f);
    if (bad) {
        free(buf);
        return tk_error_set(TK_EFORMAT, "%s: entry '%s' is corrupt or truncated (%s)", z->origin, name, why);
    }
    buf[size] = '\0';
    *out = buf;
    *len = (size_t)size;
    return 0;
}

/* --- stored entries in place ------------------------------------------------------------------ */

static uint32_t le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const unsigned char *p) { return le16(p) | le16(p + 2) << 16; }
static uint64_t le64(const unsigned char *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

/* A central directory entry's zip64 values (APPNOTE 4.5.3: the "Zip64 extended information"
 * extra field, header 0x0001): it holds, in this order, only the fields whose 32-bit value in
 * the entry is 0xFFFFFFFF. -1 when one is needed and missing. */
static int zip64_fields(const unsigned char *extra, size_t xl, uint64_t *usize, uint64_t *csize, uint64_t *lho)
{
    for (size_t at = 0; at + 4 <= xl;) {
        size_t id = le16(extra + at), sz = le16(extra + at + 2);
        if (xl - at - 4 < sz)
            return -1;
        if (id == 0x0001) {
            const unsigned char *f = extra + at + 4;
            size_t k = 0;
            uint64_t *fields[] = {usize, csize, lho};
            for (int i = 0; i < 3; i++) {
                if (*fields[i] != 0xffffffffu)
                    continue;
                if (sz - k < 8)
                    return -1;
                *fields[i] = le64(f + k);
                k += 8;
            }
            return 0;
        }
        at += 4 + sz;
    }
    return *usize == 0xffffffffu || *csize == 0xffffffffu || *lho == 0xffffffffu ? -1 : 0;
}

int tk_zip_stored_span(tk_zip_reader *z, size_t i, const unsigned char **ptr, size_t *len)
{
    const unsigned char *d = z->data;
    size_t n = z->len;
    zip_stat_t st;
    zip_stat_init(&st);
    const char *name = tk_zip_name(z, i);
    if (!name || zip_stat_index(z->za, i, 0, &st) != 0 || !(st.valid & ZIP_STAT_COMP_METHOD) ||
        st.comp_method != ZIP_CM_STORE || !(st.valid & ZIP_STAT_SIZE) || st.size >= n)
        return TK_ENOTFOUND;
    /* the end of central directory record: the last signature within 64 KiB + 22 of the end */
    size_t eocd = SIZE_MAX;
    for (size_t k = n >= 22 ? n - 22 : 0; n >= 22 && n - k <= 65557; k--) {
        if (le32(d + k) == 0x06054b50u) {
            eocd = k;
            break;
        }
        if (k == 0)
            break;
    }
    if (eocd == SIZE_MAX)
        return TK_ENOTFOUND;
    uint64_t cd = le32(d + eocd + 16), count = le16(d + eocd + 10);
    if (cd == 0xffffffffu || count == 0xffffu) {
        /* zip64 (past 4 GiB or 65535 entries): the locator just before the record points at the
           zip64 end of central directory record, which holds the 64-bit count and offset */
        if (eocd < 20 || le32(d + eocd - 20) != 0x07064b50u)
            return TK_ENOTFOUND;
        uint64_t rec = le64(d + eocd - 20 + 8);
        if (rec > n || n - rec < 56 || le32(d + rec) != 0x06064b50u)
            return TK_ENOTFOUND;
        count = le64(d + rec + 32);
        cd = le64(d + rec + 48);
    }
    size_t nl = strlen(name);
    for (uint64_t e = 0; e < count; e++) {
        if (cd > n || n - cd < 46 || le32(d + cd) != 0x02014b50u)
            return TK_ENOTFOUND;
        size_t fl = le16(d + cd + 28), xl = le16(d + cd + 30), cl = le16(d + cd + 32);
        if (n - cd - 46 < fl + xl + cl)
            return TK_ENOTFOUND;
        if (fl == nl && !memcmp(d + cd + 46, name, nl)) {
            uint64_t csize = le32(d + cd + 20), usize = le32(d + cd + 24), lho = le32(d + cd + 42);
            if (zip64_fields(d + cd + 46 + fl, xl, &usize, &csize, &lho) || usize != st.size || csize != st.size)
                return TK_ENOTFOUND;
            if (lho > n || n - lho < 30 || le32(d + lho) != 0x04034b50u)
                return TK_ENOTFOUND;
            uint64_t at = lho + 30 + le16(d + lho + 26) + le16(d + lho + 28);
            if (at > n || n - at < st.size)
                return TK_ENOTFOUND;
            *ptr = d + at;
            *len = (size_t)st.size;
            return 0;
        }
        cd += 46 + fl + xl + cl;
    }
    return TK_ENOTFOUND;
}
