/* Autotuning at AOT time: the TK_AUTOTUNE declarations program.json records (read once, by the
 * analyzer at export), and their measurement on the GPU: every configuration's variant timed with device events on random
 * inputs at sizes spread over the program's symbol ranges (rotating buffers, warm-up, median of
 * repeats), the winner recorded per key bucket, the results cached by device, driver, the
 * compiled code's digests and the declaration. */
#define _DEFAULT_SOURCE
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "aoti.h"
#include "fsutil.h"
#include "pkgfile.h"
#include "rt_internal.h"
#include "sha256.h"
#include "strbuf.h"
#include "sym.h"
#include <tk/half.h>
#include <tk/runtime.h>

/* --- the declarations --------------------------------------------------------------------- */

static void tune_release(tk_aoti_tune *t)
{
    free(t->hparam);
    free(t->kernel);
    free(t->key);
    free(t->file);
    for (int i = 0; i < t->nparams; i++)
        free(t->params[i]);
    memset(t, 0, sizeof(*t));
}

void tk_aoti_tunes_free(tk_aoti_tune *t, size_t n)
{
    for (size_t i = 0; t && i < n; i++)
        tune_release(&t[i]);
    free(t);
}

static int contains(const unsigned char *data, size_t len, const char *word)
{
    size_t n = strlen(word);
    for (size_t i = 0; i + n <= len; i++)
        if (!memcmp(data + i, word, n))
            return 1;
    return 0;
}

/* Whether a host source of m mentions TK_AUTOTUNE: an export from before program.json recorded
 * the declarations may need them. */
static const char *mentions_autotune(const tk_program_model *m)
{
    for (size_t s = 0; s < m->nsources; s++)
        if (tk_ends_with(m->sources[s].path, ".c") &&
            contains(m->sources[s].data, m->sources[s].len, "TK_AUTOTUNE"))
            return m->sources[s].path;
    return NULL;
}

int tk_aoti_find_tunes(const tk_program_model *m, tk_aoti_tune **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!m->has_tuning) {
        const char *src = mentions_autotune(m);
        if (src)
            return tk_error_set(TK_EFORMAT, "program '%s' was exported before program.json recorded TK_AUTOTUNE "
                                "declarations, and %s has some: export it again with this tkexport", m->name, src);
        return 0;
    }
    tk_aoti_tune *v = calloc(m->ntunes + 1, sizeof(*v));
    if (!v)
        return tk_error_set(TK_ENOMEM, "out of memory");
    for (size_t i = 0; i < m->ntunes; i++) {
        const tk_pm_tune *pt = &m->tunes[i];
        tk_aoti_tune *t = &v[i];
        t->kernel = strdup(pt->kernel);
        t->key = strdup(pt->key);
        t->file = strdup(pt->file);
        t->line = pt->line;
        t->nconfigs = pt->nconfigs;
        memcpy(t->values, pt->values, sizeof(t->values));
        int ok = t->kernel && t->key && t->file;
        for (int k = 0; k < pt->nparams; k++)
            ok &= (t->params[t->nparams++] = strdup(pt->params[k])) != NULL;
        t->nh = 1;
        if (pt->hparam) {
            ok &= (t->hparam = strdup(pt->hparam)) != NULL;
            t->nh = pt->nh;
            memcpy(t->hvalues, pt->hvalues, sizeof(t->hvalues));
        }
        if (!ok) {
            tk_aoti_tunes_free(v, i + 1);
            return tk_error_set(TK_ENOMEM, "out of memory");
        }
    }
    *out = v;
    *n = m->ntunes;
    return 0;
}

/* --- measuring ----------------------------------------------------------------------------- */

#define TUNE_WARMUP 3
#define TUNE_REPS 21
#define TUNE_ROTATE_BYTES ((size_t)192 << 20) /* rotated buffers exceed any L2 (H100: 50 MB) */
#define TUNE_MAX_ROTATE 8

static uint32_t g_rand = 0x9e3779b9u;
static float uniform(void)
{
    g_rand ^= g_rand << 13;
    g_rand ^= g_rand >> 17;
    g_rand ^= g_rand << 5;
    return (float)(g_rand >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

/* A device tensor of random values in [-1, 1) (integers: 0..3). */
static int random_tensor(tk_tensor **out, tk_ctx *ctx, tk_dtype dtype, int rank, const int64_t *shape)
{
    tk_device cpu = {TK_DEVICE_CPU, 0};
    tk_tensor *h = NULL;
    int rc = tk_tensor_new(&h, NULL, cpu, dtype, rank, shape);
    if (rc)
        return rc;
    int64_t n = tk_numel(h);
    void *p = tk_tensor_data(h);
    for (int64_t i = 0; i < n; i++) {
        float v = uniform();
        switch (dtype) {
        case TK_F32: ((float *)p)[i] = v; break;
        case TK_F16: ((uint16_t *)p)[i] = tk_f32_to_f16(v); break;
        case TK_BF16: ((uint16_t *)p)[i] = tk_f32_to_bf16(v); break;
        case TK_I32: ((int32_t *)p)[i] = (int32_t)(g_rand & 3); break;
        default: ((int64_t *)p)[i] = (int64_t)(g_rand & 3); break;
        }
    }
    if (!(rc = tk_tensor_new(out, ctx, tk_ctx_device(ctx), dtype, rank, shape)) && (rc = tk_tensor_copy(ctx, *out, h))) {
        tk_tensor_free(*out);
        *out = NULL;
    }
    tk_tensor_free(h);
    return rc;
}

/* One node's inputs at one point of the symbol space, in `rot` rotating copies, and its outputs. */
typedef struct bench_call {
    tk_ctx *ctx;
    const char *op;
    int nin, nout, rot;
    tk_tensor *in[TUNE_MAX_ROTATE][16];
    tk_tensor *out[16];
} bench_call;

static int run_once(void *arg, int rep)
{
    bench_call *b = arg;
    return tk_op_run(b->ctx, b->op, b->in[rep % b->rot], b->nin, b->out, b->nout);
}

static void bench_release(bench_call *b)
{
    for (int r = 0; r < TUNE_MAX_ROTATE; r++)
        for (int i = 0; i < 16; i++)
            tk_tensor_free(b->in[r][i]);
    for (int i = 0; i < 16; i++)
        tk_tensor_free(b->out[i]);
    memset(b->in, 0, sizeof b->in);
    memset(b->out, 0, sizeof b->out);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The symbol values of sample k: per symbol, its min, the powers of two inside its range, its
 * max; sample k takes the k-th of each list (the last once a list is exhausted). */
static int sample_values(const tk_program_model *m, size_t k, int64_t *values, size_t *count)
{
    size_t longest = 0;
    for (size_t s = 0; s < m->nsymbols; s++) {
        int64_t lo = m->symbols[s].min < 1 ? 1 : m->symbols[s].min, hi = m->symbols[s].max;
        int64_t list[130];
        size_t n = 0;
        list[n++] = lo;
        for (int64_t p = 1; p > 0 && p < hi && n < 128; p <<= 1)
            if (p > lo)
                list[n++] = p;
        if (hi > lo)
            list[n++] = hi;
        values[s] = list[k < n ? k : n - 1];
        if (n > longest)
            longest = n;
    }
    *count = longest ? longest : 1;
    return 0;
}

/* The node of m that calls an op launching kernel. */
static const tk_pm_node *node_for(const tk_program_model *m, const char *kernel)
{
    for (size_t i = 0; i < m->nnodes; i++) {
        const tk_pm_op *op = tk_pm_find_op(m, m->nodes[i].op);
        for (size_t k = 0; op && k < op->nkernels; k++)
            if (!strcmp(op->kernels[k], kernel))
                return &m->nodes[i];
    }
    return NULL;
}

/* Sets up b for node at symbol values `values`: shapes evaluated, random inputs, outputs from a
 * first (untimed) run. */
static int bench_setup(bench_call *b, const tk_program_model *m, const tk_pm_node *node, const int64_t *values)
{
    const char *names[64];
    tk_sym vars[64];
    int ns = (int)(m->nsymbols < 64 ? m->nsymbols : 64), rc = 0;
    for (int s = 0; s < ns; s++) {
        names[s] = m->symbols[s].name;
        vars[s] = tk_sym_var(b->ctx, names[s], m->symbols[s].min, m->symbols[s].max);
    }
    b->op = node->op;
    b->nin = node->nin;
    b->nout = node->nout;
    if (b->nin > 16 || b->nout > 16)
        return tk_error_set(TK_EUNSUPPORTED, "op '%s' has more than 16 inputs or outputs: not tuned", node->op);
    size_t bytes = 0;
    int64_t shapes[16][TK_MAX_DIMS];
    for (int i = 0; i < b->nin && !rc; i++) {
        const tk_pm_value *v = tk_pm_find_value(m, node->inputs[i]);
        if (!v)
            return tk_error_set(TK_EUNSUPPORTED, "op '%s': an optional input left out: not tuned", node->op);
        size_t n = tk_dtype_size(v->dtype);
        for (int d = 0; d < v->rank && !rc; d++) {
            shapes[i][d] = v->dims[d].value;
            if (v->dims[d].expr) {
                tk_sym e;
                rc = tk_sym_parse(b->ctx, v->dims[d].expr, names, vars, ns, &e);
                if (!rc)
                    rc = tk_sym_eval(e, names, values, ns, &shapes[i][d]);
            }
            n *= (size_t)shapes[i][d];
        }
        bytes += n;
    }
    if (rc)
        return rc;
    b->rot = (int)(bytes ? (TUNE_ROTATE_BYTES + bytes - 1) / bytes : 1);
    if (b->rot > TUNE_MAX_ROTATE)
        b->rot = TUNE_MAX_ROTATE;
    for (int r = 0; r < b->rot && !rc; r++)
        for (int i = 0; i < b->nin && !rc; i++) {
            const tk_pm_value *v = tk_pm_find_value(m, node->inputs[i]);
            rc = random_tensor(&b->in[r][i], b->ctx, v->dtype, v->rank, shapes[i]);
        }
    if (!rc)
        rc = tk_op_run(b->ctx, b->op, b->in[0], b->nin, b->out, b->nout);
    if (!rc)
        rc = tk_ctx_sync(b->ctx);
    return rc;
}

/* Times every configuration of t on b; the row of the key bucket the op chose. */
/* Times every configuration of t on b; the row of the key bucket the op chose. The fastest
 * median wins only when it beats the default beyond noise: its upper quartile below the
 * default's lower quartile. Where every configuration finishes within the launch's own jitter
 * (small sizes) the default stays, so tuning cannot make a size slower by chance. */
static int measure_point(bench_call *b, tk_aoti_tune *t, tk_aoti_tune_row *row)
{
    double times[TUNE_REPS], q1[TK_TUNE_MAX_CONFIGS], q3[TK_TUNE_MAX_CONFIGS];
    int any = 0;
    row->winner = -1;
    for (int c = 0; c < t->nconfigs; c++) {
        b->ctx->tune_force_kernel = t->kernel;
        b->ctx->tune_force_config = c;
        int rc = tk_cuda_time(b->ctx, run_once, b, TUNE_WARMUP, TUNE_REPS, times);
        if (rc) {
            /* a configuration that cannot run here (too many threads, too many registers) */
            tk_error_clear();
            tk_ctx_sync(b->ctx);
            tk_error_clear();
            row->times_us[c] = -1;
            continue;
        }
        qsort(times, TUNE_REPS, sizeof(double), cmp_double);
        row->times_us[c] = times[TUNE_REPS / 2];
        q1[c] = times[TUNE_REPS / 4];
        q3[c] = times[3 * TUNE_REPS / 4];
        if (!any || row->times_us[c] < row->times_us[row->winner])
            row->winner = c;
        any = 1;
    }
    b->ctx->tune_force_kernel = NULL;
    row->key = b->ctx->tune_key;
    row->bucket = tk_tune_bucket(row->key);
    if (!any)
        return tk_error_set(TK_EINVAL, "no configuration of kernel '%s' runs (key %lld): %s", t->kernel,
                            (long long)row->key, tk_error_last());
    if (row->winner > 0 && row->times_us[0] >= 0 && !(q3[row->winner] < q1[0]))
        row->winner = 0;
    return 0;
}

/* --- the tuning cache ---------------------------------------------------------------------- */

static int cache_key(const tk_aoti_tune *t, const char *device, int driver, const tk_aoti_blob *blobs, size_t nblobs,
                     char key[65])
{
    tk_strbuf sb = {0};
    int rc = tk_strbuf_addf(&sb, "tkexport-tune 2\n%s\n%d\n%s %s", device, driver, t->kernel, t->key);
    for (int i = 0; i < t->nparams && !rc; i++)
        rc = tk_strbuf_addf(&sb, " %s", t->params[i]);
    for (int c = 0; c < t->nconfigs && !rc; c++)
        for (int k = 0; k < t->nparams && !rc; k++)
            rc = tk_strbuf_addf(&sb, "%s%d", k ? "," : "\n", t->values[c][k]);
    for (int h = 0; t->hparam && h < t->nh && !rc; h++)
        rc = tk_strbuf_addf(&sb, "%s%d", h ? "," : "\nheuristic ", t->hvalues[h]);
    for (size_t i = 0; i < nblobs && !rc; i++) {
        char hex[65];
        tk_sha256_hex(blobs[i].bytes, blobs[i].len, hex);
        rc = tk_strbuf_addf(&sb, "\n%s %s", blobs[i].entry, hex);
    }
    if (!rc)
        tk_sha256_hex(sb.buf, sb.len, key);
    tk_strbuf_release(&sb);
    return rc;
}

static int cache_read(tk_aoti_tune *t, const char *path)
{
    char *text = NULL;
    size_t len;
    if (access(path, R_OK) != 0 || tk_file_read(&text, &len, path, 1u << 22) != 0) {
        tk_error_clear();
        return 0;
    }
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    const cJSON *rows = cJSON_GetObjectItem(doc, "rows"), *r;
    size_t n = 0;
    int ok = cJSON_IsArray(rows);
    cJSON_ArrayForEach(r, rows)
    {
        const cJSON *times = cJSON_GetObjectItem(r, "times_us");
        if (n == TK_TUNE_BUCKETS || cJSON_GetArraySize(times) != t->nconfigs) {
            ok = 0;
            break;
        }
        tk_aoti_tune_row *row = &t->rows[n++];
        row->bucket = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(r, "bucket"));
        row->key = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(r, "key"));
        row->winner = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(r, "winner"));
        ok &= row->winner >= 0 && row->winner < t->nconfigs && row->bucket >= 0 && row->bucket < TK_TUNE_BUCKETS;
        for (int c = 0; c < t->nconfigs; c++)
            row->times_us[c] = cJSON_GetNumberValue(cJSON_GetArrayItem(times, c));
    }
    cJSON_Delete(doc);
    if (!ok || !n)
        return 0;
    t->nrows = n;
    return 1;
}

static void cache_write(const tk_aoti_tune *t, const char *path)
{
    cJSON *doc = cJSON_CreateObject(), *rows = cJSON_AddArrayToObject(doc, "rows");
    for (size_t i = 0; i < t->nrows; i++) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "bucket", t->rows[i].bucket);
        cJSON_AddNumberToObject(r, "key", (double)t->rows[i].key);
        cJSON_AddNumberToObject(r, "winner", t->rows[i].winner);
        cJSON *times = cJSON_AddArrayToObject(r, "times_us");
        for (int c = 0; c < t->nconfigs; c++)
            cJSON_AddItemToArray(times, cJSON_CreateNumber(t->rows[i].times_us[c]));
        cJSON_AddItemToArray(rows, r);
    }
    char *text = cJSON_PrintUnformatted(doc);
    if (text && tk_file_write_atomic(path, text, strlen(text)) != 0)
        tk_error_clear(); /* a cache that cannot be written costs time only */
    cJSON_free(text);
    cJSON_Delete(doc);
}

/* --- the whole ------------------------------------------------------------------------------- */

typedef struct loaded {
    tk_registry *reg; /* a namespace of the tuner's own, as a package's */
    tk_fatbin_node nodes[2 * TK_TUNE_MAX_CONFIGS + 16];
    char names[2 * TK_TUNE_MAX_CONFIGS + 16][300];
    size_t nnodes;
    void *host;
    char host_path[PATH_MAX + 16];
} loaded;

/* The compiled code in this process, in a registry of its own as in a package: fatbins added
 * (variants tagged "@cN"), the host object loaded from a private temporary file, and the tuned
 * kernels as program.json records them, so the op's tk_tune hands out the configurations the
 * variants were compiled with, whatever the host object's strings say. */
static int load_blobs(loaded *l, const tk_aoti_tune *tunes, size_t ntunes, const tk_aoti_blob *blobs, size_t nblobs)
{
    int rc = tk_registry_new(&l->reg, "the program being tuned");
    for (size_t i = 0; i < nblobs && !rc; i++) {
        if (blobs[i].config < 0) {
            char dir[PATH_MAX];
            if ((rc = tk_tempdir_new(dir, sizeof dir)))
                break;
            snprintf(l->host_path, sizeof l->host_path, "%s/ops.so", dir);
            if (!(rc = tk_file_write_atomic(l->host_path, blobs[i].bytes, blobs[i].len)))
                rc = tk_registry_load(l->reg, &l->host, l->host_path);
            continue;
        }
        if (l->nnodes == sizeof l->nodes / sizeof l->nodes[0])
            return tk_error_set(TK_EUNSUPPORTED, "too many fatbins to tune at once");
        tk_fatbin_node *node = &l->nodes[l->nnodes];
        char *name = l->names[l->nnodes++];
        if (blobs[i].config > 0)
            snprintf(name, sizeof l->names[0], "tune/%s@c%d", blobs[i].entry, blobs[i].config);
        else
            snprintf(name, sizeof l->names[0], "tune/%s", blobs[i].entry);
        *node = (tk_fatbin_node){TK_FATBIN_RECORD_VERSION, blobs[i].bytes, blobs[i].len, name, NULL, 0};
        tk_registry_add_fatbin(l->reg, node);
    }
    for (size_t i = 0; i < ntunes && !rc; i++) {
        const tk_aoti_tune *t = &tunes[i];
        tk_pkg_tune rec;
        memset(&rec, 0, sizeof rec); /* its table: the default everywhere, until the tuner forces one */
        rec.kernel = t->kernel;
        rec.key = t->key;
        rec.nparams = t->nparams;
        rec.nconfigs = t->nconfigs;
        memcpy(rec.values, t->values, sizeof rec.values);
        rec.hparam = t->hparam;
        rec.nh = t->nh;
        memcpy(rec.hvalues, t->hvalues, sizeof rec.hvalues);
        rc = tk_tune_set_recorded(l->reg, &rec);
    }
    if (!rc)
        tk_tune_prepare(l->reg);
    return rc;
}

static void unload_blobs(loaded *l)
{
    tk_registry_unload(l->reg, l->host);
    tk_registry_free(l->reg); /* its fatbins (l->nodes) with it */
    if (l->host_path[0]) {
        unlink(l->host_path);
        char *slash = strrchr(l->host_path, '/');
        *slash = '\0';
        rmdir(l->host_path);
    }
}

static int tune_one(tk_ctx *ctx, const tk_program_model *m, tk_aoti_tune *t, int progress)
{
    const tk_pm_node *node = node_for(m, t->kernel);
    if (!node)
        return tk_error_set(TK_EINVAL, "kernel '%s': no node of the program calls an op that launches it", t->kernel);
    int64_t values[64] = {0};
    size_t count = 1;
    sample_values(m, 0, values, &count);
    int rc = 0;
    t->nrows = 0;
    for (size_t k = 0; k < count && !rc; k++) {
        sample_values(m, k, values, &count);
        bench_call b = {.ctx = ctx};
        if (progress) {
            fprintf(stderr, "\r\033[Ktkexport compile: tuning %s: size %zu of %zu", t->kernel, k + 1, count);
            fflush(stderr);
        }
        tk_aoti_tune_row row;
        memset(&row, 0, sizeof row);
        if (!(rc = bench_setup(&b, m, node, values)) && !(rc = measure_point(&b, t, &row))) {
            size_t i = 0;
            while (i < t->nrows && t->rows[i].bucket != row.bucket)
                i++;
            if (i < TK_TUNE_BUCKETS) {
                t->rows[i] = row; /* a later sample of the same bucket replaces an earlier one */
                if (i == t->nrows)
                    t->nrows++;
            }
        }
        bench_release(&b);
    }
    if (progress)
        fputs("\r\033[K", stderr);
    return rc;
}

int tk_aoti_measure(const tk_program_model *m, tk_aoti_tune *tunes, size_t ntunes, const tk_aoti_blob *blobs,
                    size_t nblobs, const char *cache_dir, int progress)
{
    char device[128];
    int driver = 0, rc = tk_cuda_available();
    if (rc || (rc = tk_cuda_device_info(0, device, sizeof device, &driver)))
        return rc;
    char keys[TK_TUNE_MAX_CONFIGS][65], paths[TK_TUNE_MAX_CONFIGS][PATH_MAX];
    size_t todo = 0;
    for (size_t i = 0; i < ntunes && i < TK_TUNE_MAX_CONFIGS && !rc; i++) {
        tk_aoti_tune *t = &tunes[i];
        snprintf(t->device, sizeof t->device, "%s", device);
        snprintf(t->driver, sizeof t->driver, "%d.%d", driver / 1000, driver % 1000 / 10);
        paths[i][0] = '\0';
        if ((rc = cache_key(t, device, driver, blobs, nblobs, keys[i])))
            break;
        if (cache_dir) {
            snprintf(paths[i], sizeof paths[i], "%s/%s.tune.json", cache_dir, keys[i]);
            if (cache_read(t, paths[i])) {
                t->measured = t->cached = 1;
                continue;
            }
        }
        todo++;
    }
    if (rc || !todo)
        return rc;
    loaded l;
    memset(&l, 0, sizeof l);
    tk_ctx *ctx = NULL;
    tk_device gpu = {TK_DEVICE_CUDA, 0};
    if (!(rc = load_blobs(&l, tunes, ntunes, blobs, nblobs)) && !(rc = tk_ctx_new(&ctx, gpu))) {
        ctx->scope = l.reg; /* the program's ops, kernels and tuning are there */
        for (size_t i = 0; i < ntunes && !rc; i++) {
            if (tunes[i].measured)
                continue;
            if (!(rc = tune_one(ctx, m, &tunes[i], progress))) {
                tunes[i].measured = 1;
                if (paths[i][0])
                    cache_write(&tunes[i], paths[i]);
            }
        }
    }
    tk_ctx_free(ctx);
    unload_blobs(&l);
    return rc;
}
