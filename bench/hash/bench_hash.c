/* bench_hash: SHA-256 throughput of common/sha256.h (what tk_package_open spends on every entry's
 * digest): one buffer hashed whole, the best of several rounds, in MB/s (10^6 bytes per second).
 *   bench_hash [MIB] [ROUNDS]      defaults: 256 MiB, 5 rounds
 * Prints the digest too, so that two builds (bench/hash/run.sh) can be seen to agree. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sha256.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 256, rounds = argc > 2 ? atol(argv[2]) : 5;
    if (mib <= 0 || mib > 16384 || rounds <= 0 || rounds > 1000) {
        fprintf(stderr, "usage: bench_hash [MIB (1..16384)] [ROUNDS (1..1000)]\n");
        return 2;
    }
    size_t n = (size_t)mib << 20;
    unsigned char *buf = malloc(n);
    if (!buf) {
        fprintf(stderr, "bench_hash: out of memory for %ld MiB\n", mib);
        return 1;
    }
    unsigned x = 12345u; /* deterministic bytes, every page touched before timing */
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 24);
    }
    char hex[65];
    double best = 1e30;
    for (long r = 0; r < rounds; r++) {
        double t0 = now();
        tk_sha256_hex(buf, n, hex);
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    printf("sha256 of %ld MiB: best of %ld rounds %.4f s, %.0f MB/s (digest %.16s...)\n", mib, rounds, best,
           (double)n / best / 1e6, hex);
    free(buf);
    return 0;
}
