/* SHA-256 (FIPS 180-4): digests of sources, cache keys and package entries. Computed by OpenSSL's
 * libcrypto (EVP), which uses the CPU's SHA instructions where it has them (SHA-NI on x86-64,
 * the ARMv8 crypto extensions): bench/hash measures it. */
#ifndef TK_SHA256_H
#define TK_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* A digest in progress. Every tk_sha256_init must be followed by tk_sha256_final, which frees
 * what init allocated. */
typedef struct tk_sha256 {
    void *ctx; /* libcrypto's EVP_MD_CTX; NULL when init failed */
} tk_sha256;

/* 0, or TK_ENOMEM (with a message) when libcrypto could not start a digest: then update does
 * nothing and final fails too. */
int tk_sha256_init(tk_sha256 *s);
void tk_sha256_update(tk_sha256 *s, const void *data, size_t n);
/* The digest into out, and the state released. 0, or TK_ENOMEM with out zeroed. */
int tk_sha256_final(tk_sha256 *s, uint8_t out[32]);

/* The digest of data as 64 lower-case hex characters plus a NUL. 0, or TK_ENOMEM with out ""
 * (which equals no digest). */
int tk_sha256_hex(const void *data, size_t n, char out[65]);
void tk_sha256_to_hex(const uint8_t digest[32], char out[65]);

/* Many digests at once, spread over threads: job i gets the digest of its data[0..n) in hex.
 * threads 0 means the number of online CPUs (at most TK_SHA256_MAX_THREADS); small totals run on
 * the calling thread alone. 0, or TK_ENOMEM with the failed jobs' hex "". */
#define TK_SHA256_MAX_THREADS 64
typedef struct tk_sha256_job {
    const void *data;
    size_t n;
    char hex[65];
} tk_sha256_job;
int tk_sha256_hex_many(tk_sha256_job *jobs, size_t njobs, int threads);

#endif
