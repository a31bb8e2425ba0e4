/* SHA-256 (FIPS 180-4): digests of sources, cache keys and package entries. */
#ifndef TK_SHA256_H
#define TK_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct tk_sha256 {
    uint32_t h[8];
    uint64_t len;      /* bytes hashed so far */
    uint8_t block[64];
    size_t used;       /* bytes waiting in block */
} tk_sha256;

void tk_sha256_init(tk_sha256 *s);
void tk_sha256_update(tk_sha256 *s, const void *data, size_t n);
void tk_sha256_final(tk_sha256 *s, uint8_t out[32]);

/* The digest of data as 64 lower-case hex characters plus a NUL. */
void tk_sha256_hex(const void *data, size_t n, char out[65]);
void tk_sha256_to_hex(const uint8_t digest[32], char out[65]);

#endif
