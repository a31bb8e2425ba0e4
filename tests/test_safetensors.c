/* safetensors (runtime/safetensors.c): files written by hand as bytes, good ones read and corrupt
 * ones refused each with its message; the writer's bytes, and write -> read round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tk_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tk/half.h>
#include <tk/runtime.h>

#include "safetensors.h"

static const tk_device CPU = {TK_DEVICE_CPU, 0};

/* A file image: the 8-byte little-endian length of `header`, the header, then `ndata` bytes. */
typedef struct image {
    unsigned char *bytes;
    size_t size;
} image;

static image make_image_len(uint64_t hlen, const char *header, const void *data, size_t ndata)
{
    size_t n = strlen(header);
    image im = {malloc(8 + n + ndata + 1), 8 + n + ndata};
    assert_non_null(im.bytes);
    for (int i = 0; i < 8; i++)
        im.bytes[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(im.bytes + 8, header, n);
    if (ndata)
        memcpy(im.bytes + 8 + n, data, ndata);
    return im;
}

static image make_image(const char *header, const void *data, size_t ndata)
{
    return make_image_len(strlen(header), header, data, ndata);
}

static const float F4[4] = {1.0f, 2.0f, 3.0f, 4.0f};
static const unsigned char ZEROS[64];

static void read__a_good_file_with_metadata(void **state)
{
    (void)state;
    image im = make_image("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                          "\"__metadata__\":{\"format\":\"pt\"}}",
                          F4, sizeof F4);
    tk_safetensors *st;
    tk_assert_ok(tk_safetensors_parse(&st, im.bytes, im.size, "good.safetensors"));
    assert_int_equal(tk_safetensors_count(st), 1);
    const tk_safetensors_entry *e = tk_safetensors_find(st, "w");
    assert_non_null(e);
    assert_ptr_equal(e, tk_safetensors_at(st, 0));
    assert_string_equal(e->name, "w");
    assert_string_equal(e->dtype, "F32");
    assert_true(e->supported);
    assert_int_equal(e->tk_dtype, TK_F32);
    assert_int_equal(e->rank, 2);
    assert_int_equal(e->shape[0], 2);
    assert_int_equal(e->shape[1], 2);
    assert_int_equal(e->begin, 0);
    assert_int_equal(e->end, 16);
    assert_memory_equal(e->data, F4, sizeof F4);
    assert_string_equal(tk_safetensors_metadata(st, "format"), "pt");
    assert_null(tk_safetensors_metadata(st, "nope"));
    assert_null(tk_safetensors_find(st, "__metadata__"));
    assert_null(tk_safetensors_find(st, "x"));
    tk_tensor *t;
    tk_assert_ok(tk_safetensors_load(&t, NULL, CPU, st, e));
    assert_int_equal(tk_tensor_rank(t), 2);
    assert_memory_equal(tk_tensor_data(t), F4, sizeof F4);
    tk_tensor_free(t);
    tk_safetensors_free(st);
    free(im.bytes);
}

/* Several dtypes, a scalar, an empty tensor, spaces after the JSON (the format pads with them),
 * entries in any order in the header, and a gap the reader tolerates. */
static void read__mixed_dtypes_scalars_and_padding(void **state)
{
    (void)state;
    unsigned char data[40];
    const int64_t longs[2] = {-5, 1LL << 40};
    const uint16_t halves[3] = {tk_f32_to_bf16(1.5f), tk_f32_to_bf16(-2.0f), tk_f32_to_bf16(0.25f)};
    const int32_t one = 7;
    memcpy(data, longs, 16);
    memcpy(data + 16, halves, 6);
    memset(data + 22, 0, 2);
    memcpy(data + 24, &one, 4);
    memset(data + 28, 0xab, 12);
    image im = make_image("{\"z.bias\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[16,22]},"
                          "\"a.count\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                          "\"m.scalar\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[24,28]},"
                          "\"e.empty\":{\"dtype\":\"F16\",\"shape\":[0,3],\"data_offsets\":[28,28]},"
                          "\"u.mask\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[28,32]}}      ",
                          data, sizeof data);
    tk_safetensors *st;
    tk_assert_ok(tk_safetensors_parse(&st, im.bytes, im.size, "mixed.safetensors"));
    assert_int_equal(tk_safetensors_count(st), 5);
    /* sorted by name */
    const char *const order[] = {"a.count", "e.empty", "m.scalar", "u.mask", "z.bias"};
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(tk_safetensors_at(st, i)->name, order[i]);
    assert_null(tk_safetensors_at(st, 5));
    tk_tensor *t;
    tk_assert_ok(tk_safetensors_load(&t, NULL, CPU, st, tk_safetensors_find(st, "a.count")));
    assert_int_equal(tk_tensor_dtype(t), TK_I64);
    assert_memory_equal(tk_tensor_data(t), longs, sizeof longs);
    tk_tensor_free(t);
    tk_assert_ok(tk_safetensors_load(&t, NULL, CPU, st, tk_safetensors_find(st, "z.bias")));
    assert_int_equal(tk_tensor_dtype(t), TK_BF16);
    assert_true(tk_bf16_to_f32(((const uint16_t *)tk_tensor_data(t))[1]) == -2.0f);
    tk_tensor_free(t);
    tk_assert_ok(tk_safetensors_load(&t, NULL, CPU, st, tk_safetensors_find(st, "m.scalar")));
    assert_int_equal(tk_tensor_rank(t), 0);
    assert_int_equal(*(const int32_t *)tk_tensor_data(t), 7);
    tk_tensor_free(t);
    tk_assert_ok(tk_safetensors_load(&t, NULL, CPU, st, tk_safetensors_find(st, "e.empty")));
    assert_int_equal(tk_numel(t), 0);
    tk_tensor_free(t);
    /* a dtype of the format that tk_dtype lacks: read, validated, not loadable */
    const tk_safetensors_entry *u = tk_safetensors_find(st, "u.mask");
    assert_false(u->supported);
    assert_int_equal(u->elem_size, 1);
    tk_assert_fails(tk_safetensors_load(&t, NULL, CPU, st, u), TK_EUNSUPPORTED,
                    "'mixed.safetensors': tensor 'u.mask' is U8, which tkexport does not support (F32, F16, BF16, I32 "
                    "or I64)");
    assert_null(t);
    tk_safetensors_free(st);
    free(im.bytes);
}

static void read__an_empty_header_has_no_tensors(void **state)
{
    (void)state;
    image im = make_image("{}", NULL, 0);
    tk_safetensors *st;
    tk_assert_ok(tk_safetensors_parse(&st, im.bytes, im.size, "empty.safetensors"));
    assert_int_equal(tk_safetensors_count(st), 0);
    assert_null(tk_safetensors_find(st, "w"));
    tk_safetensors_free(st);
    free(im.bytes);
}

/* Each corrupt header, refused with one line naming the file, the tensor and the fault. */
static void read__corrupt_headers_are_refused_with_their_message(void **state)
{
    (void)state;
    const struct {
        const char *header;
        size_t ndata;
        const char *want;
    } cases[] = {
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,32]}}", 16,
         "'bad.safetensors': tensor 'w' has data_offsets [0, 32] outside the data section (16 bytes)"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
         24, "'bad.safetensors': tensors 'a' [0, 16] and 'b' [8, 24] overlap"},
        {"{\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]},"
         "\"a\":{\"dtype\":\"I32\",\"shape\":[3],\"data_offsets\":[12,24]}}",
         24, "'bad.safetensors': tensors 'b' [8, 24] and 'a' [12, 24] overlap"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", 16,
         "'bad.safetensors': tensor 'w' has data_offsets [0, 12] (12 bytes) but a F32 tensor of its shape takes 16 "
         "bytes"},
        {"{\"w\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,16]}}", 16,
         "'bad.safetensors': tensor 'w' has data_offsets [0, 16] (16 bytes) but a BF16 tensor of its shape takes 6 "
         "bytes"},
        {"{\"w\":{\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,2]}}", 16,
         "'bad.safetensors': tensor 'w' has an unknown dtype 'Q7'"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 16,
         "'bad.safetensors': tensor 'w' has data_offsets [8, 0] that end before they begin"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 16,
         "'bad.safetensors': tensor 'w' has a shape with a dim that is not a non-negative integer"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 16,
         "'bad.safetensors': tensor 'w' has a shape with a dim that is not a non-negative integer"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 16,
         "'bad.safetensors': tensor 'w' has 9 dims, more than the 8 tkexport supports"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,4]}}", 16,
         "'bad.safetensors': tensor 'w' has a shape with a dim that is not a non-negative integer"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[4503599627370496,4096],\"data_offsets\":[0,4]}}", 16,
         "'bad.safetensors': tensor 'w' is too large (its byte count overflows)"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2]}}", 16,
         "'bad.safetensors': tensor 'w' has no \"data_offsets\" pair of non-negative integers"},
        {"{\"w\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 16, "'bad.safetensors': tensor 'w' has no \"dtype\" string"},
        {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 16, "'bad.safetensors': tensor 'w' has no \"shape\" array"},
        {"{\"w\":[1,2]}", 16, "'bad.safetensors': tensor 'w' is not a JSON object"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
         16, "'bad.safetensors': tensor 'w' appears twice in the header"},
        {"{\"__metadata__\":{\"format\":1}}", 0, "'bad.safetensors': \"__metadata__\" value 'format' is not a string"},
        {"{\"__metadata__\":[]}", 0, "'bad.safetensors': \"__metadata__\" is not a JSON object"},
        {"{\"w\": {\"dtype\": }", 16, "'bad.safetensors': the header is not valid JSON (at byte 16 of 17)"},
        {"[1, 2]", 0, "'bad.safetensors': the header is not a JSON object (it starts with something else than '{')"},
        {"{} x", 0, "'bad.safetensors': the header has bytes after its JSON object (at byte 3 of 4)"},
        {"   ", 0, "'bad.safetensors': the header is not a JSON object (it starts with nothing)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        image im = make_image(cases[i].header, ZEROS, cases[i].ndata);
        tk_safetensors *st = (tk_safetensors *)1;
        int rc = tk_safetensors_parse(&st, im.bytes, im.size, "bad.safetensors");
        if (rc != TK_EFORMAT)
            fail_msg("case %zu (%s) gave %d: %s", i, cases[i].header, rc, tk_error_last());
        if (strcmp(tk_error_last(), cases[i].want) != 0)
            fail_msg("case %zu (%s):\n  error    '%s'\n  expected '%s'", i, cases[i].header, tk_error_last(),
                     cases[i].want);
        assert_null(st);
        free(im.bytes);
    }
}

static void read__truncated_files_and_header_lengths_are_refused(void **state)
{
    (void)state;
    tk_safetensors *st;
    const unsigned char five[5] = {2, 0, 0, 0, 0};
    tk_assert_fails(tk_safetensors_parse(&st, five, sizeof five, "t.safetensors"), TK_EFORMAT,
                    "'t.safetensors' is truncated: 5 bytes, where a safetensors file starts with an 8-byte header "
                    "length");
    assert_string_equal(tk_error_last(), "'t.safetensors' is truncated: 5 bytes, where a safetensors file starts "
                                         "with an 8-byte header length");
    tk_assert_fails(tk_safetensors_parse(&st, NULL, 0, "t.safetensors"), TK_EFORMAT, "truncated: 0 bytes");
    /* a length past the end of the file */
    image im = make_image_len(100, "{}", NULL, 0);
    tk_assert_fails(tk_safetensors_parse(&st, im.bytes, im.size, "t.safetensors"), TK_EFORMAT,
                    "'t.safetensors' is truncated: its header is 100 bytes but only 2 follow the length");
    free(im.bytes);
    /* more than the 100 MiB any header may have (e.g. not a safetensors file at all) */
    im = make_image_len(200u << 20, "{}", NULL, 0);
    tk_assert_fails(tk_safetensors_parse(&st, im.bytes, im.size, "t.safetensors"), TK_EFORMAT,
                    "'t.safetensors': header length 209715200 is more than the 104857600 bytes allowed");
    free(im.bytes);
    im = make_image_len(UINT64_MAX, "{}", NULL, 0);
    tk_assert_fails(tk_safetensors_parse(&st, im.bytes, im.size, "t.safetensors"), TK_EFORMAT,
                    "header length 18446744073709551615 is more than");
    free(im.bytes);
    /* a good file cut short in its data: the offsets no longer fit */
    im = make_image("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", F4, 10);
    tk_assert_fails(tk_safetensors_parse(&st, im.bytes, im.size, "t.safetensors"), TK_EFORMAT,
                    "'t.safetensors': tensor 'w' has data_offsets [0, 16] outside the data section (10 bytes)");
    free(im.bytes);
}

static char *tmp_path(const char *name)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "%s/%s", TK_TEST_TMPDIR, name);
    return buf;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void open__maps_a_file_and_names_it_in_errors(void **state)
{
    (void)state;
    image im = make_image("{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", F4, sizeof F4);
    const char *path = tmp_path("st_open.safetensors");
    write_bytes(path, im.bytes, im.size);
    tk_safetensors *st;
    tk_assert_ok(tk_safetensors_open(&st, path));
    assert_string_equal(tk_safetensors_name(st), path);
    assert_memory_equal(tk_safetensors_find(st, "w")->data, F4, sizeof F4);
    tk_safetensors_free(st);
    /* the same file truncated on disk */
    write_bytes(path, im.bytes, im.size - 4);
    tk_assert_fails(tk_safetensors_open(&st, path), TK_EFORMAT, "tensor 'w' has data_offsets [0, 16] outside");
    assert_non_null(strstr(tk_error_last(), path));
    write_bytes(path, "", 0);
    tk_assert_fails(tk_safetensors_open(&st, path), TK_EFORMAT, "is truncated: 0 bytes");
    remove(path);
    tk_assert_fails(tk_safetensors_open(&st, tmp_path("no_such.safetensors")), TK_EIO, "cannot read '");
    assert_null(st);
    free(im.bytes);
}

/* --- the writer ---------------------------------------------------------------------------------- */

static tk_tensor *tensor_of(tk_dtype dtype, int rank, const int64_t *shape, const void *data)
{
    tk_tensor *t;
    tk_assert_ok(tk_tensor_new(&t, NULL, CPU, dtype, rank, shape));
    if (tk_tensor_nbytes(t))
        memcpy(tk_tensor_data(t), data, tk_tensor_nbytes(t));
    return t;
}

/* The exact bytes for a small case, written out by hand. */
static void write__exact_bytes_of_a_small_file(void **state)
{
    (void)state;
    const int64_t s2[] = {2}, s1[] = {1};
    const uint16_t h = tk_f32_to_bf16(3.0f);
    tk_tensor *x = tensor_of(TK_F32, 1, s2, F4), *y = tensor_of(TK_BF16, 1, s1, &h);
    const char *names[] = {"y", "x"};
    tk_tensor *tensors[] = {y, x};
    void *buf;
    size_t size;
    tk_assert_ok(tk_safetensors_write_mem(&buf, &size, 2, names, tensors));
    const char *hdr = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"y\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[8,10]}}";
    size_t hlen = strlen(hdr), padded = (8 + hlen + 7) / 8 * 8 - 8;
    assert_int_equal(size, 8 + padded + 10);
    const unsigned char *b = buf;
    uint64_t len = 0;
    for (int i = 7; i >= 0; i--)
        len = len << 8 | b[i];
    assert_int_equal(len, padded);
    assert_memory_equal(b + 8, hdr, hlen);
    for (size_t i = hlen; i < padded; i++)
        assert_int_equal(b[8 + i], ' ');
    assert_memory_equal(b + 8 + padded, F4, 8);
    assert_memory_equal(b + 8 + padded + 8, &h, 2);
    free(buf);
    tk_tensor_free(x);
    tk_tensor_free(y);
}

static void write__round_trips_and_is_deterministic(void **state)
{
    (void)state;
    const int64_t s3[] = {3}, s23[] = {2, 3}, s2[] = {2}, s0[] = {0, 5};
    const float fb[3] = {0.5f, -1.0f, 2.0f};
    const uint16_t w[6] = {1, 2, 3, 4, 5, 6};
    const int64_t c[2] = {INT64_MIN, 99};
    const uint16_t sc = tk_f32_to_f16(1.0f);
    const int32_t iv = -3;
    tk_tensor *t[] = {tensor_of(TK_F32, 1, s3, fb), tensor_of(TK_BF16, 2, s23, w), tensor_of(TK_I64, 1, s2, c),
                      tensor_of(TK_F16, 0, NULL, &sc), tensor_of(TK_I32, 1, (const int64_t[]){1}, &iv),
                      tensor_of(TK_F32, 2, s0, NULL)};
    const char *names[] = {"b.bias", "a.weight", "c.count", "s", "a.i", "empty"};
    enum { N = 6 };
    void *buf, *buf2;
    size_t size, size2;
    tk_assert_ok(tk_safetensors_write_mem(&buf, &size, N, names, t));
    /* the same tensors given in another order: the same bytes */
    const char *rnames[N];
    tk_tensor *rt[N];
    for (int i = 0; i < N; i++)
        rnames[i] = names[N - 1 - i], rt[i] = t[N - 1 - i];
    tk_assert_ok(tk_safetensors_write_mem(&buf2, &size2, N, rnames, rt));
    assert_int_equal(size, size2);
    assert_memory_equal(buf, buf2, size);
    free(buf2);

    tk_safetensors *st;
    tk_assert_ok(tk_safetensors_parse(&st, buf, size, "mem"));
    assert_int_equal(tk_safetensors_count(st), N);
    const unsigned char *b = buf;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | b[i];
    assert_int_equal((8 + hlen) % 8, 0); /* the data section starts 8-byte aligned */
    /* header keys in name order */
    const char *prev = NULL;
    const char *sorted[] = {"\"a.i\"", "\"a.weight\"", "\"b.bias\"", "\"c.count\"", "\"empty\"", "\"s\""};
    for (int i = 0; i < N; i++) {
        const char *at = strstr((const char *)b + 8, sorted[i]);
        assert_non_null(at);
        assert_true(!prev || at > prev);
        prev = at;
    }
    uint64_t total = 0;
    for (int i = 0; i < N; i++) {
        const tk_safetensors_entry *e = tk_safetensors_find(st, names[i]);
        assert_non_null(e);
        assert_int_equal(e->begin % e->elem_size, 0); /* aligned to its element size */
        total += e->end - e->begin;
        tk_tensor *back;
        tk_assert_ok(tk_safetensors_load(&back, NULL, CPU, st, e));
        assert_int_equal(tk_tensor_dtype(back), tk_tensor_dtype(t[i]));
        assert_int_equal(tk_tensor_rank(back), tk_tensor_rank(t[i]));
        if (tk_tensor_rank(t[i]))
            assert_memory_equal(tk_tensor_shape(back), tk_tensor_shape(t[i]), sizeof(int64_t) * (size_t)tk_tensor_rank(t[i]));
        assert_int_equal(tk_tensor_nbytes(back), tk_tensor_nbytes(t[i]));
        if (tk_tensor_nbytes(back))
            assert_memory_equal(tk_tensor_data(back), tk_tensor_data(t[i]), tk_tensor_nbytes(back));
        tk_tensor_free(back);
    }
    /* packed without gaps, larger elements first */
    assert_int_equal(total, size - 8 - hlen);
    assert_int_equal(tk_safetensors_find(st, "c.count")->begin, 0);
    tk_safetensors_free(st);

    /* to a file: the same bytes */
    const char *path = tmp_path("st_write.safetensors");
    tk_assert_ok(tk_safetensors_write(path, N, names, t));
    tk_assert_ok(tk_safetensors_open(&st, path));
    assert_int_equal(tk_safetensors_count(st), N);
    tk_safetensors_free(st);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *disk = malloc(size + 1);
    assert_int_equal(fread(disk, 1, size + 1, f), size);
    fclose(f);
    assert_memory_equal(disk, buf, size);
    free(disk);
    remove(path);
    free(buf);
    for (int i = 0; i < N; i++)
        tk_tensor_free(t[i]);
}

static void write__refuses_bad_names_and_tensors(void **state)
{
    (void)state;
    const int64_t s2[] = {2};
    tk_tensor *x = tensor_of(TK_F32, 1, s2, F4);
    void *buf = (void *)1;
    size_t size = 1;
    const char *dup[] = {"x", "x"};
    tk_tensor *two[] = {x, x};
    tk_assert_fails(tk_safetensors_write_mem(&buf, &size, 2, dup, two), TK_EINVAL,
                    "tk_safetensors_write: tensor name 'x' is given twice");
    assert_null(buf);
    const char *meta[] = {"__metadata__"};
    tk_assert_fails(tk_safetensors_write_mem(&buf, &size, 1, meta, two), TK_EINVAL,
                    "tensor 0 has the name '__metadata__', which safetensors cannot hold");
    const char *one[] = {"x"};
    tk_tensor *none[] = {NULL};
    tk_assert_fails(tk_safetensors_write_mem(&buf, &size, 1, one, none), TK_EINVAL, "tensor 'x' is NULL");
    tk_assert_fails(tk_safetensors_write(tmp_path("no_dir/x.safetensors"), 1, one, two), TK_EIO, "cannot write");
    /* nothing at all is a valid file: "{}" padded */
    tk_assert_ok(tk_safetensors_write_mem(&buf, &size, 0, NULL, NULL));
    assert_int_equal(size, 16);
    assert_memory_equal((const char *)buf + 8, "{}      ", 8);
    free(buf);
    tk_tensor_free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(read__a_good_file_with_metadata),
        cmocka_unit_test(read__mixed_dtypes_scalars_and_padding),
        cmocka_unit_test(read__an_empty_header_has_no_tensors),
        cmocka_unit_test(read__corrupt_headers_are_refused_with_their_message),
        cmocka_unit_test(read__truncated_files_and_header_lengths_are_refused),
        cmocka_unit_test(open__maps_a_file_and_names_it_in_errors),
        cmocka_unit_test(write__exact_bytes_of_a_small_file),
        cmocka_unit_test(write__round_trips_and_is_deterministic),
        cmocka_unit_test(write__refuses_bad_names_and_tensors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
