/* bench_hash: SHA-256 throughput of common/sha256.h (what tk_package_open spends on every entry's
 * digest): one buffer hashed whole, the best of several rounds, in MB/s (10^6 bytes per second).
 *   bench_hash [MIB] [ROUNDS]      defaults: 256 MiB, 5 rounds
 * Prints the digest too, so that two builds (bench/hash/run.sh) can be seen to agree. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "numarg.h"
#include "sha256.h"

static const char usage[] = "usage: bench_hash [MIB (1..16384)] [ROUNDS (1..1000)]\n";

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("%sSHA-256 throughput of common/sha256.c as built: one buffer of MIB MiB (default 256) hashed\n"
               "whole, the best of ROUNDS rounds (default 5), in MB/s, with the digest. Exit status: 0 done,\n"
               "1 out of memory, 2 usage.\n",
               usage);
        return 0;
    }
    long long mib = 256, rounds = 5;
    if (argc > 3 || (argc > 1 && tk_parse_whole(argv[1], 1, 16384, &mib)) ||
        (argc > 2 && tk_parse_whole(argv[2], 1, 1000, &rounds))) {
        fprintf(stderr, "bench_hash: expected up to two whole numbers; %s", usage);
        return 2;
    }
    size_t n = (size_t)mib << 20;
    unsigned char *buf = malloc(n);
    if (!buf) {
        fprintf(stderr, "bench_hash: out of memory for %lld MiB\n", mib);
        return 1;
    }
    unsigned x = 12345u; /* deterministic bytes, every page touched before timing */
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 24);
    }
    char hex[65];
    double best = 1e30;
    for (long long r = 0; r < rounds; r++) {
        double t0 = now();
        tk_sha256_hex(buf, n, hex);
        double t = now() - t0;
        if (t < best)
            best = t;
    }
    printf("sha256 of %lld MiB: best of %lld rounds %.4f s, %.0f MB/s (digest %.16s...)\n", mib, rounds, best,
           (double)n / best / 1e6, hex);
    free(buf);
    return 0;
}
