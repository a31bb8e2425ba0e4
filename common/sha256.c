/* SHA-256 through OpenSSL's EVP interface: libcrypto picks the fastest code for the CPU (SHA-NI,
 * AVX2, ARMv8 crypto extensions). */
#define _POSIX_C_SOURCE 200809L
#include "sha256.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <tk/error.h>

int tk_sha256_init(tk_sha256 *s)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1) {
        EVP_MD_CTX_free(ctx);
        ctx = NULL;
    }
    s->ctx = ctx;
    return ctx ? 0 : tk_error_set(TK_ENOMEM, "out of memory starting a SHA-256 digest");
}

void tk_sha256_update(tk_sha256 *s, const void *data, size_t n)
{
    /* a failed update leaves the context unusable, and final reports it */
    if (s->ctx && n && EVP_DigestUpdate(s->ctx, data, n) != 1) {
        EVP_MD_CTX_free(s->ctx);
        s->ctx = NULL;
    }
}

int tk_sha256_final(tk_sha256 *s, uint8_t out[32])
{
    unsigned len = 0;
    int ok = s->ctx && EVP_DigestFinal_ex(s->ctx, out, &len) == 1 && len == 32;
    EVP_MD_CTX_free(s->ctx);
    s->ctx = NULL;
    if (ok)
        return 0;
    memset(out, 0, 32);
    return tk_error_set(TK_ENOMEM, "out of memory computing a SHA-256 digest");
}

void tk_sha256_to_hex(const uint8_t digest[32], char out[65])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[digest[i] >> 4];
        out[2 * i + 1] = hex[digest[i] & 15];
    }
    out[64] = '\0';
}

int tk_sha256_hex(const void *data, size_t n, char out[65])
{
    uint8_t d[32];
    unsigned len = 0;
    if (EVP_Digest(n ? data : "", n, d, &len, EVP_sha256(), NULL) != 1 || len != 32) {
        out[0] = '\0';
        return tk_error_set(TK_ENOMEM, "out of memory computing a SHA-256 digest");
    }
    tk_sha256_to_hex(d, out);
    return 0;
}

/* --- many digests at once ---------------------------------------------------------------------- */

typedef struct many {
    tk_sha256_job *jobs;
    size_t njobs;
    atomic_size_t next;
    atomic_int failed;
} many;

static void *many_worker(void *arg)
{
    many *m = arg;
    for (size_t i; (i = atomic_fetch_add(&m->next, 1)) < m->njobs;) {
        tk_sha256_job *j = &m->jobs[i];
        if (tk_sha256_hex(j->data, j->n, j->hex)) /* its message stays on this worker's thread */
            atomic_store(&m->failed, 1);
    }
    return NULL;
}

int tk_sha256_hex_many(tk_sha256_job *jobs, size_t njobs, int threads)
{
    many m = {jobs, njobs, 0, 0};
    pthread_t th[TK_SHA256_MAX_THREADS];
    size_t bytes = 0;
    for (size_t i = 0; i < njobs; i++)
        bytes += jobs[i].n;
    if (threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus > 0 ? (int)cpus : 1;
    }
    /* below a few chunks' worth, threads cost more than they save */
    if (bytes < ((size_t)8 << 20))
        threads = 1;
    if ((size_t)threads > njobs)
        threads = (int)njobs;
    if (threads > TK_SHA256_MAX_THREADS)
        threads = TK_SHA256_MAX_THREADS;
    int started = 0;
    for (; started < threads - 1; started++)
        if (pthread_create(&th[started], NULL, many_worker, &m) != 0)
            break; /* fewer threads: the calling one does the rest */
    many_worker(&m);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return atomic_load(&m.failed) ? tk_error_set(TK_ENOMEM, "out of memory computing SHA-256 digests") : 0;
}
