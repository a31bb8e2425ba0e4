/* The flash attention kernel's geometry (kernels/attention.cu), in one place for the kernel, the op
 * that launches it (attention_ops.c) and the host tests: its two forms and their shared memory,
 * which form a call takes, and which head and query block a block of the causal grid computes.
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

/* The flash kernel's two forms: a block of wg warpgroups (4 warps each) takes 64 * wg queries and
 * walks the keys in tiles of 64, with TK_SDPA_NBUF(d) buffers each of k and v (two at D 64: the
 * next tile's loading while this one is read; one at D 128: k's next tile loading while this
 * one's v is read). TK_SDPA_TILES: the bytes of q's rows and the k and v tiles (16-bit values).
 * Up to 48 KiB they are static shared memory; past it (D 128 with two warpgroups) dynamic, of
 * TK_SDPA_DYNAMIC bytes: 1 KiB more to align them to 1024 bytes (what wgmma's swizzled tiles need). */
#define TK_SDPA_NBUF(d) ((d) == 128 ? 1 : 2)
#define TK_SDPA_TILES(d, wg) ((64 * (wg) + 2 * TK_SDPA_NBUF(d) * 64) * (d) * 2)
#define TK_SDPA_DYNAMIC(d, wg) (TK_SDPA_TILES(d, wg) <= 48 * 1024 ? 0 : TK_SDPA_TILES(d, wg) + 1024)

/* Two warpgroups a block (128 queries) where a block reads 1024 keys or more on average (causal:
 * half of them): k and v then come through L2 once for twice the queries, which is what long
 * sequences are bound by. Shorter ones keep one warpgroup: more, smaller blocks fill the GPU.
 * Measured on an H200 (bench/kernels/README.md): at S 4096, D 128, 575 -> 516 us (B H 32); at
 * S 512 one warpgroup is 4% to 12% faster, and causal at S 1024 6%. */
TK_SDPA_HD int tk_sdpa_warpgroups(long long S, long long Sk, int causal)
{
    long long keys = causal ? (S < Sk ? S : Sk) / 2 : Sk;
    return keys >= 1024 ? 2 : 1;
}

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
