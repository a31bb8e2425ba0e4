/* Streams of input shapes (cli/shape_stream.h): symbols from a package's inputs, values per call,
 * buffers at the largest shapes with views per call, random fills and call statistics. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tk/half.h>

#include "numarg.h"
#include "shape_stream.h"

int shape_stream_parse(shape_stream_kind *kind, const char **path, const char *text)
{
    *path = NULL;
    if (!strcmp(text, "fixed"))
        *kind = SHAPES_FIXED;
    else if (!strcmp(text, "cycle"))
        *kind = SHAPES_CYCLE;
    else if (!strcmp(text, "uniform"))
        *kind = SHAPES_UNIFORM;
    else if (!strncmp(text, "file:", 5) && text[5])
        *kind = SHAPES_LIST, *path = text + 5;
    else
        return -1;
    return 0;
}

const char *shape_stream_kind_name(shape_stream_kind kind)
{
    switch (kind) {
    case SHAPES_FIXED: return "fixed";
    case SHAPES_CYCLE: return "cycle";
    case SHAPES_UNIFORM: return "uniform";
    case SHAPES_LIST: return "list";
    }
    return "?";
}

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int is_identifier(const char *s)
{
    if (!s || !(isalpha((unsigned char)*s) || *s == '_'))
        return 0;
    for (s++; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_'))
            return 0;
    return 1;
}

static int sym_index(const shape_stream *s, const char *name, size_t len)
{
    for (size_t i = 0; i < s->nsyms; i++)
        if (strlen(s->names[i]) == len && !strncmp(s->names[i], name, len))
            return (int)i;
    return -1;
}

static void sym_list(const shape_stream *s, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < s->nsyms && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "", s->names[i]);
}

/* The rows of a list: NAME=VALUE items separated by spaces or commas, rows by newlines or ';'. */
static int parse_list(shape_stream *s, const char *text, char *err, size_t errlen)
{
    size_t cap = 16, row = 0, line = 1;
    int64_t vals[SHAPES_MAX_SYMS];
    int given[SHAPES_MAX_SYMS];
    char names[256];
    sym_list(s, names, sizeof names);
    s->rows = malloc(cap * (s->nsyms ? s->nsyms : 1) * sizeof *s->rows);
    if (!s->rows)
        return snprintf(err, errlen, "out of memory"), -1;
    const char *p = text;
    while (*p) {
        /* one row: up to a newline or ';' (a comment runs to the end of the line) */
        memset(given, 0, sizeof given);
        int items = 0;
        while (*p && *p != '\n' && *p != ';') {
            if (*p == '#') {
                while (*p && *p != '\n')
                    p++;
                break;
            }
            if (isspace((unsigned char)*p) || *p == ',') {
                p++;
                continue;
            }
            const char *name = p;
            while (*p && *p != '=' && !isspace((unsigned char)*p) && *p != ',' && *p != ';' && *p != '\n')
                p++;
            size_t len = (size_t)(p - name);
            if (*p != '=')
                return snprintf(err, errlen, "line %zu: '%.*s': expected NAME=VALUE (the package's symbols: %s)", line,
                                (int)len, name, names), -1;
            int k = sym_index(s, name, len);
            if (k < 0)
                return snprintf(err, errlen, "line %zu: '%.*s' is not a dynamic dim of the package (its symbols: %s)",
                                line, (int)len, name, names), -1;
            /* the value: up to the next separator, all of it a whole number (common/numarg.h's rules: no
             * spaces after '=', no '+'), so that a row never runs into the next line */
            const char *value = ++p;
            while (*p && !isspace((unsigned char)*p) && *p != ',' && *p != ';' && *p != '#')
                p++;
            char digits[32];
            long long v;
            size_t vlen = (size_t)(p - value);
            if (vlen < sizeof digits)
                memcpy(digits, value, vlen), digits[vlen] = '\0';
            if (vlen >= sizeof digits || tk_parse_whole(digits, LLONG_MIN, LLONG_MAX, &v))
                return snprintf(err, errlen, "line %zu: %.*s=%.*s: the value is not a whole number", line, (int)len,
                                name, (int)(vlen < 24 ? vlen : 24), value), -1;
            if (v < s->min[k] || v > s->max[k])
                return snprintf(err, errlen, "line %zu: %s=%lld is outside [%lld, %lld]", line, s->names[k], v,
                                (long long)s->min[k], (long long)s->max[k]), -1;
            if (given[k])
                return snprintf(err, errlen, "line %zu: '%s' given twice", line, s->names[k]), -1;
            given[k] = 1;
            vals[k] = v;
            items++;
        }
        if (items) {
            for (size_t k = 0; k < s->nsyms; k++)
                if (!given[k])
                    return snprintf(err, errlen, "line %zu: no value for '%s' (each row names %s)", line, s->names[k],
                                    names), -1;
            if (row == cap) {
                int64_t *more = realloc(s->rows, 2 * cap * s->nsyms * sizeof *s->rows);
                if (!more)
                    return snprintf(err, errlen, "out of memory"), -1;
                s->rows = more;
                cap *= 2;
            }
            memcpy(s->rows + row * s->nsyms, vals, s->nsyms * sizeof *vals);
            row++;
        }
        if (*p == '\n')
            line++;
        if (*p)
            p++;
    }
    if (!row)
        return snprintf(err, errlen, "the list has no rows (one call a row: %s=VALUE...)",
                        s->nsyms ? s->names[0] : "NAME"), -1;
    s->nrows = row;
    return 0;
}

/* SHAPES_CYCLE_SIZES values per symbol from its min to its max, spaced geometrically (the sizes
 * a server sees spread over orders of magnitude); row i holds every symbol's i-th value. */
static int make_cycle(shape_stream *s)
{
    s->nrows = SHAPES_CYCLE_SIZES;
    s->rows = calloc(s->nrows * (s->nsyms ? s->nsyms : 1), sizeof *s->rows);
    if (!s->rows)
        return -1;
    for (size_t k = 0; k < s->nsyms; k++) {
        double lo = s->min[k] > 1 ? (double)s->min[k] : 1.0, hi = (double)s->max[k];
        for (size_t i = 0; i < s->nrows; i++) {
            double v = hi > lo ? lo * pow(hi / lo, (double)i / (double)(s->nrows - 1)) : lo;
            int64_t r = i == 0 ? s->min[k] : i + 1 == s->nrows ? s->max[k] : (int64_t)llround(v);
            s->rows[i * s->nsyms + k] = r < s->min[k] ? s->min[k] : r > s->max[k] ? s->max[k] : r;
        }
    }
    return 0;
}

int shape_stream_init(shape_stream *s, const tk_package *pkg, shape_stream_kind kind, const char *list, uint64_t seed,
                      char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->rng = seed ^ 0x5eed5eed5eed5eedull;
    for (size_t i = 0; i < tk_package_num_inputs(pkg); i++) {
        const tk_io_info *io = tk_package_input(pkg, i);
        for (int d = 0; d < io->rank; d++) {
            const char *sym = io->dims[d].sym;
            if (!sym)
                continue;
            if (!is_identifier(sym))
                return snprintf(err, errlen,
                                "input '%s' dim %d is '%s', an expression: a shape stream sets bare symbols only", io->name,
                                d, sym), -1;
            if (sym_index(s, sym, strlen(sym)) >= 0)
                continue;
            if (s->nsyms == SHAPES_MAX_SYMS)
                return snprintf(err, errlen, "more than %d dynamic dims", SHAPES_MAX_SYMS), -1;
            s->names[s->nsyms] = sym;
            s->min[s->nsyms] = io->dims[d].min;
            s->max[s->nsyms] = io->dims[d].max;
            s->nsyms++;
        }
    }
    int rc = 0;
    if (kind == SHAPES_CYCLE && make_cycle(s))
        rc = -1, snprintf(err, errlen, "out of memory");
    else if (kind == SHAPES_LIST)
        rc = parse_list(s, list ? list : "", err, errlen);
    if (rc)
        shape_stream_release(s);
    return rc;
}

void shape_stream_release(shape_stream *s)
{
    free(s->rows);
    free(s->seen);
    s->rows = NULL;
    s->seen = NULL;
    s->nrows = s->seen_cap = s->seen_count = 0;
}

void shape_stream_next(shape_stream *s, int64_t *values)
{
    if (s->kind == SHAPES_UNIFORM) {
        for (size_t k = 0; k < s->nsyms; k++) {
            uint64_t span = (uint64_t)(s->max[k] - s->min[k]) + 1;
            values[k] = s->min[k] + (int64_t)(splitmix64(&s->rng) % span);
        }
        return;
    }
    if (!s->nrows)
        return;
    memcpy(values, s->rows + s->next * s->nsyms, s->nsyms * sizeof *values);
    s->next = (s->next + 1) % s->nrows;
}

static uint64_t values_hash(const shape_stream *s, const int64_t *values)
{
    uint64_t h = 0x243f6a8885a308d3ull;
    for (size_t k = 0; k < s->nsyms; k++) {
        uint64_t x = h ^ (uint64_t)values[k];
        h = splitmix64(&x);
    }
    return h ? h : 1;
}

int shape_stream_first_time(shape_stream *s, const int64_t *values)
{
    uint64_t h = values_hash(s, values);
    if (2 * (s->seen_count + 1) > s->seen_cap) {
        size_t cap = s->seen_cap ? 2 * s->seen_cap : 1024;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t)
            return -1;
        for (size_t i = 0; i < s->seen_cap; i++) {
            if (!s->seen[i])
                continue;
            size_t j = s->seen[i] & (cap - 1);
            while (t[j])
                j = (j + 1) & (cap - 1);
            t[j] = s->seen[i];
        }
        free(s->seen);
        s->seen = t;
        s->seen_cap = cap;
    }
    size_t j = h & (s->seen_cap - 1);
    while (s->seen[j]) {
        if (s->seen[j] == h) /* a 64-bit hash: vectors that collide are too rare to matter here */
            return 0;
        j = (j + 1) & (s->seen_cap - 1);
    }
    s->seen[j] = h;
    s->seen_count++;
    return 1;
}

void shape_stream_describe(const shape_stream *s, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    if (!s->nsyms)
        snprintf(buf, n, "no dynamic dims");
    for (size_t k = 0; k < s->nsyms && at < n; k++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s in [%lld, %lld]", k ? ", " : "", s->names[k],
                               (long long)s->min[k], (long long)s->max[k]);
}

void shape_stream_format(const shape_stream *s, const int64_t *values, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < s->nsyms && at < n; k++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s=%lld", k ? " " : "", s->names[k], (long long)values[k]);
}

int shape_stream_shape(const shape_stream *s, const tk_io_info *io, const int64_t *values, int64_t *shape)
{
    for (int d = 0; d < io->rank; d++) {
        if (!io->dims[d].sym) {
            shape[d] = io->dims[d].value;
            continue;
        }
        int k = sym_index(s, io->dims[d].sym, strlen(io->dims[d].sym));
        if (k < 0)
            return -1;
        shape[d] = values[k];
    }
    return 0;
}

/* --- buffers ------------------------------------------------------------------------------- */

void shape_fill_random(tk_tensor *t, const char *name, uint64_t seed)
{
    uint64_t s = seed;
    for (const char *c = name; *c; c++) /* FNV-1a of the name */
        s = (s ^ (unsigned char)*c) * 0x100000001b3ull;
    void *d = tk_tensor_data(t);
    for (int64_t i = 0; i < tk_numel(t); i++) {
        uint64_t r = splitmix64(&s);
        float f = (float)(r >> 40) * (1.0f / 8388608.0f) - 1.0f; /* 24 bits: exact in float */
        switch (tk_tensor_dtype(t)) {
        case TK_F32: ((float *)d)[i] = f; break;
        case TK_F16: ((uint16_t *)d)[i] = tk_f32_to_f16(f); break;
        case TK_BF16: ((uint16_t *)d)[i] = tk_f32_to_bf16(f); break;
        case TK_I32: ((int32_t *)d)[i] = (int32_t)(r >> 60); break;
        case TK_I64: ((int64_t *)d)[i] = (int64_t)(r >> 60); break;
        }
    }
}

int shape_buffers_init(shape_buffers *b, const shape_stream *s, const tk_package *pkg, tk_session *session,
                       uint64_t seed)
{
    const tk_device cpu = {TK_DEVICE_CPU, 0};
    tk_ctx *ctx = tk_session_ctx(session);
    tk_device dev = tk_ctx_device(ctx);
    int64_t shape[TK_MAX_DIMS];
    int rc = 0;
    memset(b, 0, sizeof *b);
    b->nin = tk_package_num_inputs(pkg);
    b->nout = tk_package_num_outputs(pkg);
    b->in = calloc(b->nin + 1, sizeof *b->in);
    b->out = calloc(b->nout + 1, sizeof *b->out);
    if (!b->in || !b->out) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < b->nin && !rc; i++) {
        const tk_io_info *io = tk_package_input(pkg, i);
        tk_tensor *h = NULL;
        if (shape_stream_shape(s, io, s->max, shape)) {
            rc = tk_error_set(TK_EINVAL, "input '%s': a dim the stream does not set", io->name);
            break;
        }
        if ((rc = tk_tensor_new(&h, NULL, cpu, io->dtype, io->rank, shape)))
            break;
        shape_fill_random(h, io->name, seed);
        if (dev.kind == TK_DEVICE_CPU) {
            b->in[i] = h;
            continue;
        }
        if (!(rc = tk_tensor_new(&b->in[i], ctx, dev, io->dtype, io->rank, shape)))
            rc = tk_tensor_copy(ctx, b->in[i], h);
        tk_tensor_free(h);
    }
    for (size_t i = 0; i < b->nout && !rc; i++) {
        const tk_io_info *io = tk_package_output(pkg, i);
        if (shape_stream_shape(s, io, s->max, shape))
            continue; /* an expression: the runtime allocates this output each call */
        rc = tk_tensor_new(&b->out[i], ctx, dev, io->dtype, io->rank, shape);
    }
done:
    if (rc)
        shape_buffers_release(b);
    return rc;
}

int shape_buffers_bind(const shape_buffers *b, const shape_stream *s, const tk_package *pkg, const int64_t *values,
                       tk_tensor **in, tk_tensor **out)
{
    int64_t shape[TK_MAX_DIMS];
    int rc = 0;
    memset(in, 0, b->nin * sizeof *in);
    memset(out, 0, b->nout * sizeof *out);
    for (size_t i = 0; i < b->nin && !rc; i++) {
        const tk_io_info *io = tk_package_input(pkg, i);
        shape_stream_shape(s, io, values, shape);
        rc = tk_tensor_wrap(&in[i], tk_tensor_device(b->in[i]), io->dtype, io->rank, shape, tk_tensor_data(b->in[i]));
    }
    for (size_t i = 0; i < b->nout && !rc; i++) {
        const tk_io_info *io = tk_package_output(pkg, i);
        if (!b->out[i])
            continue;
        shape_stream_shape(s, io, values, shape);
        rc = tk_tensor_wrap(&out[i], tk_tensor_device(b->out[i]), io->dtype, io->rank, shape,
                            tk_tensor_data(b->out[i]));
    }
    if (rc)
        shape_buffers_unbind(b, in, out);
    return rc;
}

void shape_buffers_unbind(const shape_buffers *b, tk_tensor **in, tk_tensor **out)
{
    for (size_t i = 0; i < b->nin; i++) {
        tk_tensor_free(in[i]);
        in[i] = NULL;
    }
    for (size_t i = 0; i < b->nout; i++) {
        tk_tensor_free(out[i]);
        out[i] = NULL;
    }
}

void shape_buffers_release(shape_buffers *b)
{
    for (size_t i = 0; b->in && i < b->nin; i++)
        tk_tensor_free(b->in[i]);
    for (size_t i = 0; b->out && i < b->nout; i++)
        tk_tensor_free(b->out[i]);
    free(b->in);
    free(b->out);
    memset(b, 0, sizeof *b);
}
