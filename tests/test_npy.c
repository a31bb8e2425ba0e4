/* .npy files (cli/npy.c): files written here byte by byte (no numpy needed) read with each
 * conversion, checked against values computed in the test; every refusal with its message; the
 * writer's bytes and write -> read round trips. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/half.h>
#include <tk/runtime.h>

#include "npy.h"

static const tk_device CPU = {TK_DEVICE_CPU, 0};
static const tk_dtype F32 = TK_F32, F16 = TK_F16, BF16 = TK_BF16, I32 = TK_I32, I64 = TK_I64;

/* A scratch folder of its own under the build's test folder. */
static char g_dir[1024];

static const char *tmp_path(const char *name)
{
    static char buf[4][1100];
    static int next;
    char *p = buf[next++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", g_dir, name);
    return p;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* A .npy file: magic, version major.0, the header length as that version stores it (hlen, or the
 * header's padded length when hlen is -1), the header padded with spaces and a newline to a
 * multiple of 64 as numpy does, then ndata bytes of data. */
static const char *npy_file_len(const char *name, int major, long long hlen, const char *header, const void *data,
                                size_t ndata)
{
    size_t lenbytes = major == 1 ? 2 : 4, n = strlen(header);
    size_t pre = 8 + lenbytes, total = (pre + n + 1 + 63) / 64 * 64, padded = total - pre;
    unsigned char *img = malloc(total + ndata);
    assert_non_null(img);
    memcpy(img, "\x93NUMPY", 6);
    img[6] = (unsigned char)major;
    img[7] = 0;
    uint64_t len = hlen < 0 ? padded : (uint64_t)hlen;
    for (size_t i = 0; i < lenbytes; i++)
        img[8 + i] = (unsigned char)(len >> (8 * i));
    memcpy(img + pre, header, n);
    memset(img + pre + n, ' ', padded - n - 1);
    img[total - 1] = '\n';
    if (ndata)
        memcpy(img + total, data, ndata);
    const char *path = tmp_path(name);
    write_bytes(path, img, total + ndata);
    free(img);
    return path;
}

static const char *npy_file(const char *name, const char *header, const void *data, size_t ndata)
{
    return npy_file_len(name, 1, -1, header, data, ndata);
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* --- reading, with conversions -------------------------------------------------------------- */

static void read__f32_as_f32_keeps_the_values(void **state)
{
    (void)state;
    const float v[6] = {1.0f, -2.5f, 0.0f, 3.25e-3f, 1e30f, -0.0f};
    const char *p = npy_file("f32.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v, sizeof v);
    tk_tensor *t;
    tk_assert_ok(tk_npy_read(&t, p, &F32));
    assert_int_equal(tk_tensor_dtype(t), TK_F32);
    assert_int_equal(tk_tensor_rank(t), 2);
    assert_int_equal(tk_tensor_dim(t, 0), 2);
    assert_int_equal(tk_tensor_dim(t, 1), 3);
    assert_memory_equal(tk_tensor_data(t), v, sizeof v);
    tk_tensor_free(t);
    /* want NULL: the file's own dtype */
    tk_assert_ok(tk_npy_read(&t, p, NULL));
    assert_int_equal(tk_tensor_dtype(t), TK_F32);
    tk_tensor_free(t);
}

/* float32 -> bf16 rounds to nearest, ties to even, on the upper 16 bits (computed here by hand). */
static void read__f32_as_bf16_rounds_to_nearest_even(void **state)
{
    (void)state;
    const uint32_t bits[8] = {
        0x3f808000u, /* 1 + 2^-8: a tie between 0x3f80 (even) and 0x3f81 -> 0x3f80 */
        0x3f818000u, /* a tie between 0x3f81 (odd) and 0x3f82 -> 0x3f82 */
        0x3f808001u, /* just above the tie -> 0x3f81 */
        0x3f807fffu, /* just below -> 0x3f80 */
        0xc0200000u, /* -2.5 exactly -> 0xc020 */
        0x7f7fffffu, /* FLT_MAX rounds up past bf16's largest: inf 0x7f80 */
        0x00000000u, /* 0 */
        0xbf7f8000u, /* -0.99805: a tie between 0xbf7f (odd) and 0xbf80 -> 0xbf80 (-1.0) */
    };
    const uint16_t want[8] = {0x3f80, 0x3f82, 0x3f81, 0x3f80, 0xc020, 0x7f80, 0x0000, 0xbf80};
    const char *p = npy_file("bf16.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (8,), }", bits, sizeof bits);
    tk_tensor *t;
    tk_assert_ok(tk_npy_read(&t, p, &BF16));
    assert_int_equal(tk_tensor_dtype(t), TK_BF16);
    assert_int_equal(tk_tensor_rank(t), 1);
    assert_int_equal(tk_tensor_dim(t, 0), 8);
    const uint16_t *got = tk_tensor_data(t);
    for (int i = 0; i < 8; i++)
        if (got[i] != want[i])
            fail_msg("element %d (0x%08x): got bf16 0x%04x, expected 0x%04x", i, bits[i], got[i], want[i]);
    tk_tensor_free(t);
}

static void read__f32_as_f16_rounds_and_saturates_to_inf(void **state)
{
    (void)state;
    const float v[5] = {1.0f, -2.0f, 65520.0f, 1.0f / 3.0f, 5.9604644775390625e-08f /* 2^-24 */};
    /* 1/3 = 0x3eaaaaab: f16 mantissa 0x155 plus a remainder below half -> 0x3555 */
    const uint16_t want[5] = {0x3c00, 0xc000, 0x7c00, 0x3555, 0x0001};
    const char *p = npy_file("f16.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }", v, sizeof v);
    tk_tensor *t;
    tk_assert_ok(tk_npy_read(&t, p, &F16));
    const uint16_t *got = tk_tensor_data(t);
    for (int i = 0; i < 5; i++)
        if (got[i] != want[i])
            fail_msg("element %d (%g): got f16 0x%04x, expected 0x%04x", i, (double)v[i], got[i], want[i]);
    tk_tensor_free(t);
}

static void read__f16_as_f32_bf16_and_f16(void **state)
{
    (void)state;
    /* 1.0, -2.0, 2^-24 (smallest subnormal), 65504 (largest), 1 + 2^-10, -inf */
    const uint16_t h[6] = {0x3c00, 0xc000, 0x0001, 0x7bff, 0x3c01, 0xfc00};
    const float as_f32[6] = {1.0f, -2.0f, ldexpf(1.0f, -24), 65504.0f, 1.0f + ldexpf(1.0f, -10), -INFINITY};
    /* bf16 of each (8 mantissa bits): 2^-24 = 0x33800000 -> 0x3380; 65504 = 0x477fe000 rounds up
     * to 0x4780 (65536); 1 + 2^-10 = 0x3f802000 rounds down to 0x3f80 */
    const uint16_t as_bf16[6] = {0x3f80, 0xc000, 0x3380, 0x4780, 0x3f80, 0xff80};
    const char *p = npy_file("h.npy", "{'descr': '<f2', 'fortran_order': False, 'shape': (3, 2), }", h, sizeof h);
    tk_tensor *t;
    tk_assert_ok(tk_npy_read(&t, p, &F32));
    for (int i = 0; i < 6; i++)
        assert_int_equal(f32_bits(((float *)tk_tensor_data(t))[i]), f32_bits(as_f32[i]));
    tk_tensor_free(t);
    tk_assert_ok(tk_npy_read(&t, p, &BF16));
    for (int i = 0; i < 6; i++)
        assert_int_equal(((uint16_t *)tk_tensor_data(t))[i], as_bf16[i]);
    tk_tensor_free(t);
    tk_assert_ok(tk_npy_read(&t, p, &F16));
    assert_memory_equal(tk_tensor_data(t), h, sizeof h);
    tk_tensor_free(t);
}

static void read__integers_widen_and_narrow(void **state)
{
    (void)state;
    const int32_t i4[3] = {-7, 0, INT32_MAX};
    const int64_t i8[3] = {-7, 1000, INT32_MIN};
    tk_tensor *t;
    const char *p4 = npy_file("i4.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", i4, sizeof i4);
    tk_assert_ok(tk_npy_read(&t, p4, &I64));
    assert_int_equal(tk_tensor_dtype(t), TK_I64);
    for (int i = 0; i < 3; i++)
        assert_int_equal(((int64_t *)tk_tensor_data(t))[i], i4[i]);
    tk_tensor_free(t);
    tk_assert_ok(tk_npy_read(&t, p4, &I32));
    assert_memory_equal(tk_tensor_data(t), i4, sizeof i4);
    tk_tensor_free(t);
    const char *p8 = npy_file("i8.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", i8, sizeof i8);
    tk_assert_ok(tk_npy_read(&t, p8, &I32));
    for (int i = 0; i < 3; i++)
        assert_int_equal(((int32_t *)tk_tensor_data(t))[i], i8[i]);
    tk_tensor_free(t);
    tk_assert_ok(tk_npy_read(&t, p8, &I64));
    assert_memory_equal(tk_tensor_data(t), i8, sizeof i8);
    tk_tensor_free(t);
}

static void read__int64_outside_int32_is_refused(void **state)
{
    (void)state;
    const int64_t i8[2] = {1, (int64_t)INT32_MAX + 1};
    const char *p = npy_file("big.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", i8, sizeof i8);
    tk_tensor *t = (tk_tensor *)1;
    tk_assert_fails(tk_npy_read(&t, p, &I32), TK_EINVAL, "element 1 is 2147483648, outside the range of i32");
    assert_null(t);
}

static void read__floats_and_integers_do_not_mix(void **state)
{
    (void)state;
    const float v[2] = {1, 2};
    const int32_t i[2] = {1, 2};
    tk_tensor *t;
    const char *pf = npy_file("mixf.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", v, sizeof v);
    const char *pi = npy_file("mixi.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", i, sizeof i);
    tk_assert_fails(tk_npy_read(&t, pf, &I64), TK_EINVAL, "holds float32, which does not convert to i64");
    tk_assert_fails(tk_npy_read(&t, pi, &BF16), TK_EINVAL, "holds int32, which does not convert to bf16");
}

static void read__versions_2_and_3_have_4_byte_header_lengths(void **state)
{
    (void)state;
    const float v[2] = {0.5f, -0.25f};
    for (int major = 2; major <= 3; major++) {
        char name[32];
        snprintf(name, sizeof name, "v%d.npy", major);
        const char *p = npy_file_len(name, major, -1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2), }",
                                     v, sizeof v);
        tk_npy_info info;
        tk_assert_ok(tk_npy_read_info(&info, p));
        assert_int_equal(info.major, major);
        assert_int_equal(info.data_offset, 128); /* 12 + 60 + the newline, padded to 64 */
        tk_tensor *t;
        tk_assert_ok(tk_npy_read(&t, p, &F32));
        assert_memory_equal(tk_tensor_data(t), v, sizeof v);
        tk_tensor_free(t);
    }
}

static void read__header_variants_numpy_and_python_allow(void **state)
{
    (void)state;
    const float v[6] = {1, 2, 3, 4, 5, 6};
    tk_npy_info info;
    /* other key order, double quotes, no trailing comma, Python 2 longs, spaces inside */
    const char *p = npy_file("var.npy", "{\"shape\": ( 3L , 2L ), \"fortran_order\": False, \"descr\": \"<f4\"}", v,
                             sizeof v);
    tk_assert_ok(tk_npy_read_info(&info, p));
    assert_int_equal(info.rank, 2);
    assert_int_equal(info.shape[0], 3);
    assert_int_equal(info.shape[1], 2);
    assert_int_equal(info.dtype, TK_F32);
    /* a scalar: shape () */
    p = npy_file("scalar.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", v, 4);
    tk_tensor *t;
    tk_assert_ok(tk_npy_read(&t, p, &F32));
    assert_int_equal(tk_tensor_rank(t), 0);
    assert_int_equal(tk_numel(t), 1);
    assert_true(((float *)tk_tensor_data(t))[0] == 1.0f);
    tk_tensor_free(t);
    /* an empty array: no data */
    p = npy_file("empty.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 128), }", NULL, 0);
    tk_assert_ok(tk_npy_read(&t, p, &BF16));
    assert_int_equal(tk_numel(t), 0);
    assert_int_equal(tk_tensor_dim(t, 1), 128);
    tk_tensor_free(t);
}

/* --- refusals --------------------------------------------------------------------------------- */

#define HDR(descr, order, shape) "{'descr': '" descr "', 'fortran_order': " order ", 'shape': " shape ", }"

/* Every refusal names the file and says what is wrong. */
static void refuse(const char *name, const char *path, int code, const char *text)
{
    tk_tensor *t = (tk_tensor *)1;
    int rc = tk_npy_read(&t, path, &F32);
    if (rc != code)
        fail_msg("%s: tk_npy_read returned %d (expected %d): %s", name, rc, code, tk_error_last());
    if (!strstr(tk_error_last(), text))
        fail_msg("%s: error '%s' does not contain '%s'", name, tk_error_last(), text);
    if (!strstr(tk_error_last(), path))
        fail_msg("%s: error '%s' does not name the file", name, tk_error_last());
    if (strchr(tk_error_last(), '\n'))
        fail_msg("%s: error '%s' is more than one line", name, tk_error_last());
    assert_null(t);
}

static void refuse__bad_magic_and_versions(void **state)
{
    (void)state;
    static const float v[4];
    const char *p = tmp_path("magic.npy");
    write_bytes(p, "PK\x03\x04 not numpy at all", 22);
    refuse("magic", p, TK_EFORMAT, "not a .npy file");
    write_bytes(p, "\x93NUMPY", 6);
    refuse("magic only", p, TK_EFORMAT, "truncated .npy file (6 bytes, no version)");
    write_bytes(p, "\x93NUMPY\x01\x00\x40", 9);
    refuse("no header length", p, TK_EFORMAT, "truncated .npy file");
    p = npy_file_len("v4.npy", 4, -1, HDR("<f4", "False", "(4,)"), v, sizeof v);
    refuse("version 4", p, TK_EFORMAT, ".npy version 4.0 is not supported (expected 1.0, 2.0 or 3.0)");
    p = npy_file_len("v0.npy", 0, -1, HDR("<f4", "False", "(4,)"), v, sizeof v);
    refuse("version 0", p, TK_EFORMAT, ".npy version 0.0 is not supported");
}

static void refuse__absurd_or_truncated_header_lengths(void **state)
{
    (void)state;
    static const float v[4];
    const char *p = npy_file_len("hlong.npy", 2, 0xfffffff0ll, HDR("<f4", "False", "(4,)"), v, sizeof v);
    refuse("4 GiB header", p, TK_EFORMAT, "header length 4294967280 is more than the 10000 bytes allowed");
    p = npy_file_len("hpast.npy", 1, 9000, HDR("<f4", "False", "(4,)"), v, sizeof v);
    refuse("header past the end", p, TK_EFORMAT, "the header of 9000 bytes runs past its end");
}

static void refuse__what_tkexport_does_not_read(void **state)
{
    (void)state;
    static const float v[8];
    struct {
        const char *name, *header, *text;
    } cases[] = {
        {"fortran.npy", HDR("<f4", "True", "(2, 2)"), "fortran_order arrays are not supported"},
        {"big_endian.npy", HDR(">f4", "False", "(2, 2)"), "dtype '>f4' is big-endian"},
        {"big_endian_int.npy", HDR(">i8", "False", "(2,)"), "dtype '>i8' is big-endian"},
        {"object.npy", HDR("|O", "False", "(2,)"), "object arrays (dtype '|O') are not supported"},
        {"f8.npy", HDR("<f8", "False", "(2,)"), "dtype '<f8' is not supported; expected '<f4', '<f2', '<i4' or '<i8'"},
        {"bool.npy", HDR("|b1", "False", "(2,)"), "dtype '|b1' is not supported"},
        {"structured.npy", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
         "structured arrays (a list 'descr') are not supported"},
        {"rank9.npy", HDR("<f4", "False", "(1, 1, 1, 1, 1, 1, 1, 1, 1)"), "more than the 8 dimensions supported"},
        {"overflow.npy", HDR("<f4", "False", "(4611686018427387904, 4611686018427387904)"),
         "is too large (its byte count overflows)"},
        {"huge_dim.npy", HDR("<f4", "False", "(99999999999999999999999,)"), "a dimension too large to be real"},
        {"negative.npy", HDR("<f4", "False", "(-2,)"), "'shape' is not a tuple of whole numbers"},
        {"no_shape.npy", "{'descr': '<f4', 'fortran_order': False}", "no 'shape' key"},
        {"no_descr.npy", "{'fortran_order': False, 'shape': (2,)}", "no 'descr' key"},
        {"unknown_key.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", "unknown key 'x'"},
        {"twice.npy", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}",
         "key 'descr' given twice"},
        {"order_word.npy", HDR("<f4", "0", "(2,)"), "'fortran_order' is neither True nor False"},
        {"not_dict.npy", "['<f4', False, (2,)]", "expected a dict"},
        {"unterminated.npy", "{'descr': '<f4", "malformed .npy header"},
        {"after.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} extra", "text after the dict"},
        {"noquote.npy", "{descr: '<f4', 'fortran_order': False, 'shape': (2,)}", "expected a quoted key"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        refuse(cases[i].name, npy_file(cases[i].name, cases[i].header, v, sizeof v), TK_EFORMAT, cases[i].text);
}

static void refuse__truncated_or_trailing_data(void **state)
{
    (void)state;
    static const float v[8];
    const char *p = npy_file("trunc.npy", HDR("<f4", "False", "(2, 128)"), v, sizeof v);
    refuse("truncated", p, TK_EFORMAT, "truncated .npy file: shape (2, 128) of float32 needs 1024 bytes of data, the file has 32");
    p = npy_file("trail.npy", HDR("<f4", "False", "(2, 3)"), v, sizeof v);
    refuse("trailing", p, TK_EFORMAT, "8 bytes after the data of shape (2, 3) of float32");
    refuse("missing", tmp_path("no_such_file.npy"), TK_EIO, "cannot read");
}

/* --- writing ---------------------------------------------------------------------------------- */

/* The writer's bytes are numpy's: version 1.0, this exact header, padded to 64 with a newline. */
static void write__bytes_are_what_numpy_writes(void **state)
{
    (void)state;
    const int64_t shape[2] = {2, 3};
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_F32, 2, shape));
    for (int i = 0; i < 6; i++)
        ((float *)tk_tensor_data(t))[i] = (float)i - 2.5f;
    void *img;
    size_t len;
    tk_assert_ok(tk_npy_encode(&img, &len, t));
    const char *header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    size_t wn = 10 + strlen(header);
    assert_int_equal(len, 128 + 24);
    assert_memory_equal(img, "\x93NUMPY\x01\x00\x76\x00", 10); /* version 1.0, 118 header bytes */
    assert_memory_equal((char *)img + 10, header, strlen(header));
    for (size_t i = wn; i < 127; i++)
        assert_int_equal(((unsigned char *)img)[i], ' ');
    assert_int_equal(((unsigned char *)img)[127], '\n');
    assert_memory_equal((unsigned char *)img + 128, tk_tensor_data(t), 24);
    free(img);
    tk_tensor_free(t);

    /* rank 1 is "(n,)", rank 0 "()" */
    const int64_t one[1] = {5};
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_I64, 1, one));
    memset(tk_tensor_data(t), 0, 40);
    tk_assert_ok(tk_npy_encode(&img, &len, t));
    assert_non_null(strstr((char *)img + 10, "{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }"));
    assert_int_equal(len, 128 + 40);
    free(img);
    tk_tensor_free(t);
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_I32, 0, NULL));
    tk_assert_ok(tk_npy_encode(&img, &len, t));
    assert_non_null(strstr((char *)img + 10, "'shape': (), }"));
    free(img);
    tk_tensor_free(t);
}

static int count_files(const char *dir, const char *containing)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, containing) != NULL;
    closedir(d);
    return n;
}

static void write__round_trips_every_dtype(void **state)
{
    (void)state;
    const int64_t shape[3] = {2, 3, 4};
    const tk_dtype dtypes[5] = {TK_F32, TK_F16, TK_BF16, TK_I32, TK_I64};
    for (int k = 0; k < 5; k++) {
        tk_tensor *t, *back, *raw;
        tk_assert_ok(tk_tensor_new(&t, NULL, CPU, dtypes[k], 3, shape));
        for (int i = 0; i < 24; i++) {
            float f = (float)(i * 37 % 24) * 0.125f - 1.0f;
            switch (dtypes[k]) {
            case TK_F32: ((float *)tk_tensor_data(t))[i] = f; break;
            /* exact in both 16-bit formats: multiples of 1/8 below 2 */
            case TK_F16: ((uint16_t *)tk_tensor_data(t))[i] = tk_f32_to_f16(f); break;
            case TK_BF16: ((uint16_t *)tk_tensor_data(t))[i] = (uint16_t)(f32_bits(f) >> 16); break;
            case TK_I32: ((int32_t *)tk_tensor_data(t))[i] = i * 1000 - 7; break;
            case TK_I64: ((int64_t *)tk_tensor_data(t))[i] = (int64_t)i << 40; break;
            }
        }
        char name[32];
        snprintf(name, sizeof name, "rt_%s.npy", tk_dtype_name(dtypes[k]));
        const char *p = tmp_path(name);
        tk_assert_ok(tk_npy_write(p, t));
        /* f16 and bf16 come back as float32 files, exactly */
        tk_npy_info info;
        tk_assert_ok(tk_npy_read_info(&info, p));
        assert_int_equal(info.dtype, dtypes[k] == TK_F16 || dtypes[k] == TK_BF16 ? TK_F32 : dtypes[k]);
        assert_int_equal(info.rank, 3);
        assert_int_equal(info.shape[2], 4);
        tk_assert_ok(tk_npy_read(&raw, p, NULL));
        for (int i = 0; i < 24 && dtypes[k] == TK_BF16; i++)
            assert_int_equal(f32_bits(((float *)tk_tensor_data(raw))[i]),
                             (uint32_t)((uint16_t *)tk_tensor_data(t))[i] << 16);
        tk_tensor_free(raw);
        tk_assert_ok(tk_npy_read(&back, p, &dtypes[k]));
        assert_int_equal(tk_tensor_dtype(back), dtypes[k]);
        assert_memory_equal(tk_tensor_data(back), tk_tensor_data(t), tk_tensor_nbytes(t));
        tk_tensor_free(back);
        tk_tensor_free(t);
    }
    /* written through a temporary file and a rename: nothing is left beside the outputs */
    assert_int_equal(count_files(g_dir, ".tmp"), 0);
}

static void write__replaces_a_file_and_refuses_a_bad_path(void **state)
{
    (void)state;
    const int64_t shape[1] = {3};
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, TK_F32, 1, shape));
    float *d = tk_tensor_data(t);
    d[0] = 1, d[1] = 2, d[2] = 3;
    const char *p = tmp_path("replace.npy");
    write_bytes(p, "old", 3);
    tk_assert_ok(tk_npy_write(p, t));
    tk_tensor *back;
    tk_assert_ok(tk_npy_read(&back, p, &F32));
    assert_memory_equal(tk_tensor_data(back), d, 12);
    tk_tensor_free(back);
    assert_int_not_equal(tk_npy_write(tmp_path("no/such/folder/x.npy"), t), 0);
    assert_non_null(strstr(tk_error_last(), "no/such/folder/x.npy"));
    tk_tensor_free(t);
}

static int setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "%s/npy-XXXXXX", TK_TEST_TMPDIR);
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(read__f32_as_f32_keeps_the_values),
        cmocka_unit_test(read__f32_as_bf16_rounds_to_nearest_even),
        cmocka_unit_test(read__f32_as_f16_rounds_and_saturates_to_inf),
        cmocka_unit_test(read__f16_as_f32_bf16_and_f16),
        cmocka_unit_test(read__integers_widen_and_narrow),
        cmocka_unit_test(read__int64_outside_int32_is_refused),
        cmocka_unit_test(read__floats_and_integers_do_not_mix),
        cmocka_unit_test(read__versions_2_and_3_have_4_byte_header_lengths),
        cmocka_unit_test(read__header_variants_numpy_and_python_allow),
        cmocka_unit_test(refuse__bad_magic_and_versions),
        cmocka_unit_test(refuse__absurd_or_truncated_header_lengths),
        cmocka_unit_test(refuse__what_tkexport_does_not_read),
        cmocka_unit_test(refuse__truncated_or_trailing_data),
        cmocka_unit_test(write__bytes_are_what_numpy_writes),
        cmocka_unit_test(write__round_trips_every_dtype),
        cmocka_unit_test(write__replaces_a_file_and_refuses_a_bad_path),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
