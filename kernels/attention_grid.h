/* Which head and query block a block of the causal attention kernel computes (kernels/attention.cu),
 * in one place for the kernel and for the host tests that check it covers every block once.
 *
 * Blocks start in the order of their linear index. A causal grid is B*H heads by nq query blocks,
 * read as groups of heads, each group's longest blocks (its last queries, which read the most
 * keys) first and its short ones filling in at the end. Where the k and v of every head fit in L2
 * together (up to TK_SDPA_L2_WHOLE bytes) the group is every head: the longest blocks of all heads
 * go first. Past that the heads running together would evict each other's k and v, and a group is
 * as many heads as TK_SDPA_L2_GROUP bytes hold (at least 8). Measured on an H200 (50 MB of L2),
 * bench/kernels/README.md: B H 96, S 4096, D 128 causal 1166 us in one group, 839 in groups of 16;
 * at 48 MB (B H 96, S 2048, D 64) one group is 8% faster than groups of 64. */
#ifndef TK_ATTENTION_GRID_H
#define TK_ATTENTION_GRID_H

#ifdef __CUDACC__
#define TK_SDPA_HD __host__ __device__ __forceinline__
#else
#define TK_SDPA_HD static inline
#endif

#define TK_SDPA_L2_WHOLE (64ll << 20)
#define TK_SDPA_L2_GROUP (32ll << 20)

/* heads a group holds: nheads heads whose k and v take head_bytes each */
TK_SDPA_HD int tk_sdpa_causal_group(long long head_bytes, int nheads)
{
    if (head_bytes <= 0 || head_bytes * nheads <= TK_SDPA_L2_WHOLE)
        return nheads;
    long long g = TK_SDPA_L2_GROUP / head_bytes;
    g = g < 8 ? 8 : g;
    return g < nheads ? (int)g : nheads;
}

/* block lin of nheads * nq (group from tk_sdpa_causal_group) -> its head and query block */
TK_SDPA_HD void tk_sdpa_causal_block(int lin, int nheads, int nq, int group, int *head, int *qblock)
{
    const int grp = lin / (group * nq), r = lin - grp * group * nq;
    const int size = nheads - grp * group < group ? nheads - grp * group : group;
    *head = grp * group + r % size;
    *qblock = nq - 1 - r / size;
}

#endif
