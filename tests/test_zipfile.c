/* The zip reader's stored entries in place (runtime/zipfile.c, tk_zip_stored_span): archives of
 * the deterministic writer, and a zip64 archive (what a package past 4 GiB of weights is) built
 * byte by byte, its 32-bit fields saturated so that only the zip64 records say where things are. */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <stdlib.h>
#include <string.h>

#include "zipfile.h"

static void zipfile__stored_entries_are_found_in_place(void **state)
{
    (void)state;
    static const char weights[] = "0123456789abcdef0123456789abcdef", json[] = "{\"a\": [1, 2, 3, 4, 5, 6, 7, 8]}";
    tk_zip_entry entries[] = {{"weights.safetensors", weights, sizeof weights, 1}, {"program.json", json, sizeof json, 0}};
    void *data;
    size_t len, n;
    const unsigned char *span;
    tk_assert_ok(tk_zip_write_mem(&data, &len, entries, 2, "the test archive"));
    tk_zip_reader *z;
    tk_assert_ok(tk_zip_open(&z, data, len, "test.zip", "zip", 16));
    for (size_t i = 0; i < tk_zip_count(z); i++) {
        if (!strcmp(tk_zip_name(z, i), "weights.safetensors")) {
            assert_int_equal(tk_zip_stored_span(z, i, &span, &n), 0);
            assert_int_equal(n, sizeof weights);
            assert_memory_equal(span, weights, n);
            assert_true(span > (const unsigned char *)data && span + n <= (const unsigned char *)data + len);
        } else {
            assert_int_equal(tk_zip_stored_span(z, i, &span, &n), TK_ENOTFOUND); /* deflated */
        }
    }
    tk_zip_close(z);
    free(data);
}

/* --- a zip64 archive by hand (APPNOTE.TXT 4.3.6, 4.3.12, 4.3.14 to 4.3.16, 4.5.3) -------------- */

typedef struct buf {
    unsigned char b[4096];
    size_t n;
} buf;

static void put(buf *o, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        o->b[o->n++] = (unsigned char)(v >> (8 * i));
}

static void put_bytes(buf *o, const void *p, size_t n)
{
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
    }
    return ~c;
}

/* Stored entries whose local and central headers carry their sizes (and the central one its
 * offset) only in zip64 extra fields, and an end record that defers to the zip64 one. */
static size_t zip64_archive(buf *o, const char *const *names, const char *const *contents, int n)
{
    uint64_t offsets[8];
    o->n = 0;
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(names[i]), len = strlen(contents[i]);
        offsets[i] = o->n;
        put(o, 0x04034b50u, 4);
        put(o, 45, 2); /* version needed: 4.5, zip64 */
        put(o, 0, 2);  /* flags */
        put(o, 0, 2);  /* stored */
        put(o, 0, 2);  /* time */
        put(o, 0x21, 2); /* date: 1980-01-01 */
        put(o, crc32_of((const unsigned char *)contents[i], len), 4);
        put(o, 0xffffffffu, 4);
        put(o, 0xffffffffu, 4);
        put(o, nl, 2);
        put(o, 20, 2); /* extra: zip64 with both sizes */
        put_bytes(o, names[i], nl);
        put(o, 0x0001, 2);
        put(o, 16, 2);
        put(o, len, 8);
        put(o, len, 8);
        put_bytes(o, contents[i], len);
    }
    uint64_t cd = o->n;
    for (int i = 0; i < n; i++) {
        size_t nl = strlen(names[i]), len = strlen(contents[i]);
        put(o, 0x02014b50u, 4);
        put(o, 45 | 3 << 8, 2); /* made by: Unix, 4.5 */
        put(o, 45, 2);
        put(o, 0, 2);
        put(o, 0, 2);
        put(o, 0, 2);
        put(o, 0x21, 2);
        put(o, crc32_of((const unsigned char *)contents[i], len), 4);
        put(o, 0xffffffffu, 4);
        put(o, 0xffffffffu, 4);
        put(o, nl, 2);
        put(o, 28, 2); /* extra: zip64 with both sizes and the offset */
        put(o, 0, 2);  /* comment */
        put(o, 0, 2);  /* disk */
        put(o, 0, 2);  /* internal attributes */
        put(o, 0100644u << 16, 4);
        put(o, 0xffffffffu, 4);
        put_bytes(o, names[i], nl);
        put(o, 0x0001, 2);
        put(o, 24, 2);
        put(o, len, 8);
        put(o, len, 8);
        put(o, offsets[i], 8);
    }
    uint64_t cd_size = o->n - cd, rec = o->n;
    put(o, 0x06064b50u, 4); /* zip64 end of central directory record */
    put(o, 44, 8);
    put(o, 45 | 3 << 8, 2);
    put(o, 45, 2);
    put(o, 0, 4);
    put(o, 0, 4);
    put(o, (uint64_t)n, 8);
    put(o, (uint64_t)n, 8);
    put(o, cd_size, 8);
    put(o, cd, 8);
    put(o, 0x07064b50u, 4); /* its locator */
    put(o, 0, 4);
    put(o, rec, 8);
    put(o, 1, 4);
    put(o, 0x06054b50u, 4); /* the end record, every field saturated */
    put(o, 0, 2);
    put(o, 0, 2);
    put(o, 0xffff, 2);
    put(o, 0xffff, 2);
    put(o, 0xffffffffu, 4);
    put(o, 0xffffffffu, 4);
    put(o, 0, 2);
    return o->n;
}

static void zipfile__zip64_stored_entries_are_found_in_place(void **state)
{
    (void)state;
    static const char *const names[] = {"manifest.json", "program.json", "weights.safetensors"};
    static const char *const contents[] = {"{\"m\": 1}", "{\"p\": 2}", "0123456789 the weights 0123456789"};
    static buf o;
    size_t len = zip64_archive(&o, names, contents, 3), n;
    const unsigned char *span;
    tk_zip_reader *z;
    tk_assert_ok(tk_zip_open(&z, o.b, len, "zip64.zip", "zip", 16));
    assert_int_equal(tk_zip_count(z), 3);
    for (size_t i = 0; i < 3; i++) {
        int k = -1;
        for (int j = 0; j < 3; j++)
            if (!strcmp(tk_zip_name(z, i), names[j]))
                k = j;
        assert_true(k >= 0);
        assert_int_equal(tk_zip_stored_span(z, i, &span, &n), 0);
        assert_int_equal(n, strlen(contents[k]));
        assert_memory_equal(span, contents[k], n);
        /* libzip reads the same bytes */
        unsigned char *copy;
        size_t clen;
        tk_assert_ok(tk_zip_read(z, i, 1024, &copy, &clen));
        assert_int_equal(clen, n);
        assert_memory_equal(copy, span, n);
        free(copy);
    }
    tk_zip_close(z);
}

/* A zip64 end record whose locator points outside the archive is not walked (a copy instead). */
static void zipfile__a_broken_zip64_locator_is_not_walked(void **state)
{
    (void)state;
    static const char *const names[] = {"weights.safetensors"};
    static const char *const contents[] = {"the weights"};
    static buf o;
    size_t len = zip64_archive(&o, names, contents, 1), n;
    const unsigned char *span;
    tk_zip_reader *z;
    tk_assert_ok(tk_zip_open(&z, o.b, len, "zip64.zip", "zip", 16));
    /* the locator's record offset (8 bytes at end - 22 - 20 + 8) past the end: libzip has read
       the archive already, the walk must refuse rather than read outside it */
    unsigned char *loc = o.b + len - 22 - 20 + 8;
    memset(loc, 0x7f, 8);
    assert_int_equal(tk_zip_stored_span(z, 0, &span, &n), TK_ENOTFOUND);
    tk_zip_close(z);
}

/* A deflated entry damaged anywhere: every read that fails says why in words of its own, never
 * libzip's "No error" (a stream that ends early or runs long sets no libzip error). */
static void zipfile__a_damaged_entry_says_what_is_wrong(void **state)
{
    (void)state;
    char text[4096];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = "the quick brown fox jumps over the lazy dog "[i % 44];
    tk_zip_entry entries[] = {{"program.json", text, sizeof text, 0}};
    void *data;
    size_t len, failed = 0, said = 0;
    tk_assert_ok(tk_zip_write_mem(&data, &len, entries, 1, "the test archive"));
    unsigned char *copy = malloc(len);
    assert_non_null(copy);
    for (size_t at = 0; at < len; at++) {
        memcpy(copy, data, len);
        copy[at] ^= 0xff;
        tk_zip_reader *z;
        if (tk_zip_open(&z, copy, len, "damaged.zip", "zip", 16))
            continue; /* a damaged directory: the archive itself refused */
        unsigned char *out = NULL;
        size_t n = 0;
        if (tk_zip_count(z) == 1 && tk_zip_read(z, 0, 1 << 20, &out, &n)) {
            failed++;
            const char *e = tk_error_last();
            assert_null(strstr(e, "No error"));
            if (strstr(e, "is corrupt or truncated (its data"))
                said++;
        }
        free(out);
        tk_zip_close(z);
    }
    assert_true(failed > 0);
    assert_true(said > 0); /* the damage libzip does not name was met, and named */
    free(copy);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(zipfile__stored_entries_are_found_in_place),
        cmocka_unit_test(zipfile__zip64_stored_entries_are_found_in_place),
        cmocka_unit_test(zipfile__a_broken_zip64_locator_is_not_walked),
        cmocka_unit_test(zipfile__a_damaged_entry_says_what_is_wrong),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
