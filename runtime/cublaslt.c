/* cuBLASLt through dlopen: the library found on the loader path or under the CUDA toolkit, its
 * functions in a table (runtime/cublaslt.h), one handle per GPU. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cublaslt.h"

#ifdef TK_HAVE_CUDA_HEADERS
#include "cuda_driver.h"
#include "strbuf.h"

#ifndef TK_DEFAULT_CUDA_HOME
#define TK_DEFAULT_CUDA_HOME "/usr/local/cuda"
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int load_rc;
static char load_msg[1024];
static void *lib;
static tk_cublaslt api;

/* libcublasLt.so.N needs a driver of CUDA N or newer: try the one of the driver's major first. */
static void load(void)
{
    const char *names[] = {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"};
    int version = 0;
    if (tk_cu_load() == 0)
        cuDriverGetVersion(&version);
    if (version && version < 13000) {
        names[0] = "libcublasLt.so.12";
        names[1] = "libcublasLt.so.13";
    }
    const char *homes[] = {getenv("CUDA_HOME"), TK_DEFAULT_CUDA_HOME};
    tk_strbuf tried = TK_STRBUF_INIT;
    char path[4096], last[512] = "";
    const char *found = NULL;
    for (size_t h = 0; h <= 2 && !lib; h++) {
        for (size_t i = 0; i < 3 && !lib; i++) {
            if (h == 0) {
                snprintf(path, sizeof(path), "%s", names[i]);
            } else {
                if (!homes[h - 1] || !homes[h - 1][0])
                    break;
                snprintf(path, sizeof(path), "%s/lib64/%s", homes[h - 1], names[i]);
            }
            lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (lib) {
                found = path;
            } else {
                const char *why = dlerror();
                snprintf(last, sizeof(last), "%s", why ? why : "?");
                tk_strbuf_addf(&tried, "%s%s", tried.len ? ", " : "", path);
            }
        }
    }
    if (!lib) {
        snprintf(load_msg, sizeof(load_msg), "no cuBLASLt: could not load %s (%s)", tried.buf ? tried.buf : "it",
                 last);
        load_rc = TK_EDEVICE;
        goto done;
    }
#define SYM(field)                                                                           \
    do {                                                                                     \
        void *sym = dlsym(lib, "cublasLt" #field);                                           \
        if (!sym) {                                                                          \
            snprintf(load_msg, sizeof(load_msg), "no cuBLASLt: %.400s has no cublasLt" #field, found); \
            load_rc = TK_EDEVICE;                                                            \
            goto done;                                                                       \
        }                                                                                    \
        memcpy(&api.field, &sym, sizeof(sym));                                               \
    } while (0)
    SYM(Create);
    SYM(Destroy);
    SYM(MatmulDescCreate);
    SYM(MatmulDescDestroy);
    SYM(MatmulDescSetAttribute);
    SYM(MatrixLayoutCreate);
    SYM(MatrixLayoutDestroy);
    SYM(MatrixLayoutSetAttribute);
    SYM(Matmul);
    SYM(MatmulPreferenceCreate);
    SYM(MatmulPreferenceSetAttribute);
    SYM(MatmulPreferenceDestroy);
    SYM(MatmulAlgoGetHeuristic);
    SYM(GetStatusString);
#undef SYM
done:
    tk_strbuf_release(&tried);
}

int tk_cublaslt_get(tk_ctx *ctx, const tk_cublaslt **out, void **handle)
{
    char name[32];
    tk_cu_device *d;
    int rc = 0;
    *out = NULL;
    *handle = NULL;
    if (!ctx || ctx->device.kind != TK_DEVICE_CUDA)
        return tk_error_set(TK_EUNSUPPORTED, "cuBLASLt needs a context on a CUDA device, got %s%s%s",
                            ctx ? "one on '" : "none", ctx ? tk_device_name(ctx->device, name, sizeof(name)) : "",
                            ctx ? "'" : "");
    if ((rc = tk_cu_enter(ctx, &d)))
        return rc;
    pthread_once(&load_once, load);
    if (load_rc)
        return tk_error_set(load_rc, "%s", load_msg);
    pthread_mutex_lock(&d->lock);
    if (!d->cublaslt) {
        cublasLtHandle_t h = NULL;
        cublasStatus_t st = api.Create(&h);
        if (st != CUBLAS_STATUS_SUCCESS)
            rc = tk_error_set(TK_EDEVICE, "cublasLtCreate(&handle) failed on 'cuda:%d': %s", d->ordinal,
                              api.GetStatusString(st));
        else
            d->cublaslt = h;
    }
    pthread_mutex_unlock(&d->lock);
    if (rc)
        return rc;
    *out = &api;
    *handle = d->cublaslt;
    return 0;
}

#else /* built without the CUDA headers */
int tk_cublaslt_get(tk_ctx *ctx, const tk_cublaslt **out, void **handle)
{
    (void)ctx;
    *out = NULL;
    *handle = NULL;
    return tk_error_set(TK_EDEVICE, "no cuBLASLt: libtkrt was built without the CUDA toolkit's headers");
}
#endif
