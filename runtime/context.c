/* Contexts: the device, the mode (eager or trace), on a GPU the CUDA state of runtime/cuda.c, and
 * what a context owns: its symbolic expressions and the weights and parameters of tk_param. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "numarg.h"
#include "rt_internal.h"

int tk_ctx_new(tk_ctx **out, tk_device dev)
{
    char name[32];
    int rc;
    *out = NULL;
    if (dev.kind != TK_DEVICE_CPU && dev.kind != TK_DEVICE_CUDA)
        return tk_error_set(TK_EINVAL, "unknown device kind %d", (int)dev.kind);
    if (dev.kind == TK_DEVICE_CUDA && dev.index < 0)
        return tk_error_set(TK_EINVAL, "unknown device '%s' (expected cpu, cuda or cuda:N)",
                            tk_device_name(dev, name, sizeof(name)));
    tk_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return tk_error_set(TK_ENOMEM, "out of memory");
    ctx->device = dev.kind == TK_DEVICE_CPU ? (tk_device){TK_DEVICE_CPU, 0} : dev;
    ctx->mode = TK_MODE_EAGER;
    if (dev.kind == TK_DEVICE_CUDA && (rc = tk_cuda_ctx_init(ctx, dev.index))) {
        free(ctx);
        return rc;
    }
    *out = ctx;
    return 0;
}

void tk_ctx_free(tk_ctx *ctx)
{
    if (!ctx)
        return;
    /* parameters may live on the GPU: before the CUDA state goes */
    tk_weights_free(ctx->weights);
    tk_cuda_ctx_release(ctx);
    tk_sym_pool_free(ctx->syms);
    free(ctx->first_failure);
    free(ctx);
}

void tk_ctx_note_failure(tk_ctx *ctx)
{
    if (ctx && !ctx->first_failure && tk_error_last()[0])
        ctx->first_failure = strdup(tk_error_last());
}

void tk_ctx_reset_failures(tk_ctx *ctx)
{
    if (!ctx)
        return;
    free(ctx->first_failure);
    ctx->first_failure = NULL;
}

tk_device tk_ctx_device(const tk_ctx *ctx)
{
    return ctx ? ctx->device : (tk_device){TK_DEVICE_CPU, 0};
}

int tk_ctx_sync(tk_ctx *ctx)
{
    if (!ctx)
        return tk_error_set(TK_EINVAL, "tk_ctx_sync: no context");
    return ctx->device.kind == TK_DEVICE_CUDA ? tk_cuda_sync(ctx) : 0;
}

int tk_ctx_sm_count(tk_ctx *ctx)
{
    return ctx && ctx->device.kind == TK_DEVICE_CUDA ? tk_cuda_sm_count_of(ctx) : 1;
}

int tk_env_on(const char *name)
{
    const char *e = getenv(name);
    return !(e && !strcmp(e, "0"));
}

int tk_env_force(const char *name)
{
    const char *e = getenv(name);
    return e && !strcmp(e, "0") ? 0 : e && !strcmp(e, "1") ? 1 : -1;
}

int64_t tk_env_count(const char *name, int64_t dflt)
{
    const char *e = getenv(name);
    if (!e || !*e)
        return dflt;
    long long n;
    if (tk_parse_whole(e, 0, INT64_MAX, &n) == 0)
        return (int64_t)n;
    tk_log(TK_LOG_WARN, "%s='%s' is not a whole number >= 0; using %lld", name, e, (long long)dflt);
    return dflt;
}
