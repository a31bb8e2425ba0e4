/* Graph families (runtime/cuda_family.c) on the CPU, against a driver of the test's own: the
 * graphs are small structures the test builds, and the driver's graph calls in the runtime's table
 * (tk_cu) answer from them, record what the family code sets on an instantiated graph and count
 * instantiations and destructions. What a GPU does with the graphs is test_package_gpu's (its
 * families test, with a mutant that never sets a member's arguments failing there); this suite
 * holds the bookkeeping: which graphs share a family, which kernels a launch sets, what leaving
 * frees, what a failed setting leaves behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_driver.h"
#include "tk_test.h"

enum { MAXN = 4, NPARAMS = 3 };
#define FN_A ((CUfunction)(uintptr_t)0x1000) /* three 8-byte arguments */
#define FN_B ((CUfunction)(uintptr_t)0x2000) /* two */
#define FN_C ((CUfunction)(uintptr_t)0x3000) /* three counted, the third not described */

typedef struct fnode {
    int kernel, cluster;
    CUfunction fn;
    unsigned grid, block, shared;
    uint64_t args[NPARAMS];
    void *argv[NPARAMS];
} fnode;

typedef struct fgraph {
    size_t n, ne;
    fnode nodes[MAXN];
    size_t from[MAXN], to[MAXN];
    unsigned char type[MAXN]; /* the edge's type (CU_GRAPH_DEPENDENCY_TYPE_*) */
} fgraph;

typedef struct fexec {
    fgraph *g; /* its template: the nodes it was instantiated from */
    unsigned grid[MAXN];
    uint64_t args[MAXN][NPARAMS];
} fexec;

static struct {
    int instantiated, exec_destroyed, graph_destroyed, sets, fail_set;
} drv;

static int nparams(CUfunction f)
{
    return f == FN_A ? 3 : f == FN_B ? 2 : f == FN_C ? 3 : -1;
}

static CUresult f_param_count(CUfunction f, size_t *n)
{
    *n = (size_t)nparams(f);
    return CUDA_SUCCESS;
}

static CUresult f_param_info(CUfunction f, size_t i, size_t *off, size_t *size)
{
    if ((int)i >= nparams(f) || (f == FN_C && i == 2))
        return CUDA_ERROR_INVALID_VALUE;
    *off = 8 * i, *size = 8;
    return CUDA_SUCCESS;
}

static CUresult f_get_nodes(CUgraph h, CUgraphNode *nodes, size_t *n)
{
    fgraph *g = (fgraph *)h;
    if (nodes)
        for (size_t i = 0; i < g->n && i < *n; i++)
            nodes[i] = (CUgraphNode)&g->nodes[i];
    *n = g->n;
    return CUDA_SUCCESS;
}

static CUresult f_node_type(CUgraphNode h, CUgraphNodeType *t)
{
    *t = ((fnode *)h)->kernel ? CU_GRAPH_NODE_TYPE_KERNEL : CU_GRAPH_NODE_TYPE_MEMCPY;
    return CUDA_SUCCESS;
}

static CUresult f_kernel_params(CUgraphNode h, CUDA_KERNEL_NODE_PARAMS *kp)
{
    fnode *n = (fnode *)h;
    memset(kp, 0, sizeof *kp);
    kp->func = n->fn;
    kp->gridDimX = n->grid, kp->gridDimY = kp->gridDimZ = 1;
    kp->blockDimX = n->block, kp->blockDimY = kp->blockDimZ = 1;
    kp->sharedMemBytes = n->shared;
    for (int i = 0; i < NPARAMS; i++)
        n->argv[i] = &n->args[i];
    kp->kernelParams = n->argv;
    return CUDA_SUCCESS;
}

static CUresult f_attribute(CUgraphNode h, CUkernelNodeAttrID id, CUkernelNodeAttrValue *v)
{
    memset(v, 0, sizeof *v);
    if (id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
        v->clusterDim.x = (unsigned)((fnode *)h)->cluster;
    return CUDA_SUCCESS;
}

static CUresult f_edges(CUgraph h, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *data, size_t *n)
{
    fgraph *g = (fgraph *)h;
    if (from)
        for (size_t e = 0; e < g->ne && e < *n; e++) {
            from[e] = (CUgraphNode)&g->nodes[g->from[e]];
            to[e] = (CUgraphNode)&g->nodes[g->to[e]];
            memset(&data[e], 0, sizeof data[e]);
            data[e].type = g->type[e];
        }
    *n = g->ne;
    return CUDA_SUCCESS;
}

static CUresult f_instantiate(CUgraphExec *out, CUgraph h, unsigned long long flags)
{
    (void)flags;
    fgraph *g = (fgraph *)h;
    fexec *x = calloc(1, sizeof *x);
    x->g = g;
    for (size_t i = 0; i < g->n; i++) {
        x->grid[i] = g->nodes[i].grid;
        memcpy(x->args[i], g->nodes[i].args, sizeof x->args[i]);
    }
    drv.instantiated++;
    *out = (CUgraphExec)x;
    return CUDA_SUCCESS;
}

static CUresult f_set(CUgraphExec h, CUgraphNode node, const CUDA_KERNEL_NODE_PARAMS *kp)
{
    fexec *x = (fexec *)h;
    ptrdiff_t i = (fnode *)node - x->g->nodes;
    assert_true(i >= 0 && (size_t)i < x->g->n); /* a node of the graph it was instantiated from */
    assert_ptr_equal(kp->func, x->g->nodes[i].fn);
    if (drv.fail_set)
        return CUDA_ERROR_INVALID_VALUE;
    x->grid[i] = kp->gridDimX;
    for (int k = 0; k < nparams(kp->func); k++)
        memcpy(&x->args[i][k], kp->kernelParams[k], 8);
    drv.sets++;
    return CUDA_SUCCESS;
}

static CUresult f_exec_destroy(CUgraphExec h)
{
    free(h);
    drv.exec_destroyed++;
    return CUDA_SUCCESS;
}

static CUresult f_graph_destroy(CUgraph h)
{
    (void)h;
    drv.graph_destroyed++;
    return CUDA_SUCCESS;
}

static CUresult f_ok_stream(CUstream s)
{
    (void)s;
    return CUDA_SUCCESS;
}

static CUresult f_upload(CUgraphExec x, CUstream s)
{
    (void)x, (void)s;
    return CUDA_SUCCESS;
}

static CUresult f_error_name(CUresult r, const char **s)
{
    *s = r == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_UNKNOWN";
    return CUDA_SUCCESS;
}

static CUresult f_error_string(CUresult r, const char **s)
{
    (void)r;
    *s = "invalid argument";
    return CUDA_SUCCESS;
}

static int setup(void **state)
{
    (void)state;
    memset(&drv, 0, sizeof drv);
    tk_cu.FuncGetParamCount = f_param_count;
    tk_cu.FuncGetParamInfo = f_param_info;
    tk_cu.GraphGetNodes = f_get_nodes;
    tk_cu.GraphNodeGetType = f_node_type;
    tk_cu.GraphKernelNodeGetParams = f_kernel_params;
    tk_cu.GraphKernelNodeGetAttribute = f_attribute;
    tk_cu.GraphGetEdges = f_edges;
    tk_cu.GraphInstantiateWithFlags = f_instantiate;
    tk_cu.GraphExecKernelNodeSetParams = f_set;
    tk_cu.GraphExecDestroy = f_exec_destroy;
    tk_cu.GraphDestroy = f_graph_destroy;
    tk_cu.StreamSynchronize = f_ok_stream;
    tk_cu.GraphUpload = f_upload;
    tk_cu.GetErrorName = f_error_name;
    tk_cu.GetErrorString = f_error_string;
    return 0;
}

/* tk::_mlp-like: a kernel (FN_A: x, M, y), then the signal (FN_B) as its programmatic dependent */
static fgraph *mlp_graph(unsigned grid, uint64_t m, uint64_t y)
{
    fgraph *g = calloc(1, sizeof *g);
    g->n = 2, g->ne = 1;
    g->nodes[0] = (fnode){.kernel = 1, .cluster = 2, .fn = FN_A, .grid = grid, .block = 256, .shared = 200 << 10,
                          .args = {0xa000, m, y}};
    g->nodes[1] = (fnode){.kernel = 1, .fn = FN_B, .grid = 1, .block = 1, .args = {0xc000, 0xd000}};
    g->from[0] = 0, g->to[0] = 1, g->type[0] = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
    return g;
}

typedef struct joined {
    tk_cu_family *f;
    tk_cu_member *m;
    int kept; /* the family keeps the graph (its first member's, the template of its nodes) */
} joined;

/* graph into sg's families (the test frees the graphs' memory at its end, kept or not) */
static joined join(tk_cu_signal *sg, fgraph *g)
{
    joined j;
    CUgraph h = (CUgraph)g;
    tk_assert_ok(tk_cu_family_join(sg, &h, NULL, &j.f, &j.m));
    assert_true(h == NULL || h == (CUgraph)g);
    j.kept = h == NULL;
    return j;
}

static void families_of(tk_cu_signal *sg, size_t want_families, size_t want_members)
{
    size_t f = 0, m = 0;
    tk_cu_families_count(sg, &f, &m);
    assert_int_equal(f, want_families);
    assert_int_equal(m, want_members);
}

static void family__graphs_of_one_form_share_one_instantiated_graph(void **state)
{
    (void)state;
    tk_cu_signal sg = {0};
    pthread_mutex_init(&sg.lock, NULL);
    fgraph *g1 = mlp_graph(132, 32768, 0xb000), *g2 = mlp_graph(132, 28000, 0xb000), *g3 = mlp_graph(66, 64, 0xb000);
    joined a = join(&sg, g1), b = join(&sg, g2), c = join(&sg, g3);
    assert_non_null(a.f);
    assert_ptr_equal(b.f, a.f); /* other arguments: the same family */
    assert_ptr_equal(c.f, a.f); /* another grid too */
    assert_int_equal(drv.instantiated, 1);
    assert_true(a.kept); /* the caller destroys the others, not the family's template */
    assert_false(b.kept);
    assert_false(c.kept);
    families_of(&sg, 1, 3);
    /* the first member's launches are the instantiated graph's */
    CUgraphExec x;
    tk_assert_ok(tk_cu_family_select(&sg, a.f, a.m, &x));
    assert_int_equal(drv.sets, 0);
    fexec *fx = (fexec *)x;
    assert_ptr_equal(fx->g, g1);
    /* another member: only the kernel that differs is set, with its grid and every argument */
    tk_assert_ok(tk_cu_family_select(&sg, b.f, b.m, &x));
    assert_int_equal(drv.sets, 1);
    assert_int_equal(fx->args[0][1], 28000);
    assert_int_equal(fx->grid[0], 132);
    tk_assert_ok(tk_cu_family_select(&sg, b.f, b.m, &x)); /* again: nothing to set */
    assert_int_equal(drv.sets, 1);
    tk_assert_ok(tk_cu_family_select(&sg, c.f, c.m, &x));
    assert_int_equal(drv.sets, 2);
    assert_int_equal(fx->grid[0], 66);
    assert_int_equal(fx->args[0][1], 64);
    assert_int_equal(fx->args[1][0], 0xc000);
    tk_assert_ok(tk_cu_family_select(&sg, a.f, a.m, &x)); /* back to the first */
    assert_int_equal(fx->grid[0], 132);
    assert_int_equal(fx->args[0][1], 32768);
    /* leaving: the family and its graphs end with the last member */
    tk_cu_family_leave(&sg, b.f, b.m);
    tk_cu_family_leave(&sg, a.f, a.m);
    families_of(&sg, 1, 1);
    assert_int_equal(drv.exec_destroyed, 0);
    tk_cu_family_leave(&sg, c.f, c.m);
    families_of(&sg, 0, 0);
    assert_int_equal(drv.exec_destroyed, 1);
    assert_int_equal(drv.graph_destroyed, 1); /* the template, g1 */
    free(g1), free(g2), free(g3);
    pthread_mutex_destroy(&sg.lock);
}

static void family__another_kernel_block_attribute_or_edge_is_another_form(void **state)
{
    (void)state;
    tk_cu_signal sg = {0};
    pthread_mutex_init(&sg.lock, NULL);
    fgraph *g[6];
    for (int i = 0; i < 6; i++)
        g[i] = mlp_graph(132, 100 + (uint64_t)i, 0xb000);
    g[1]->nodes[0].block = 128;                               /* another block */
    g[2]->nodes[0].cluster = 4;                               /* another cluster attribute */
    g[3]->type[0] = CU_GRAPH_DEPENDENCY_TYPE_DEFAULT;         /* the signal an ordinary dependent */
    g[4]->nodes[0].shared = 100 << 10;                        /* other shared memory */
    g[5]->nodes[1].fn = FN_A, g[5]->nodes[1].args[2] = 0xe000; /* another kernel */
    joined j[6];
    for (int i = 0; i < 6; i++) {
        j[i] = join(&sg, g[i]);
        assert_non_null(j[i].f);
        for (int k = 0; k < i; k++)
            assert_ptr_not_equal(j[i].f, j[k].f);
    }
    assert_int_equal(drv.instantiated, 6);
    families_of(&sg, 6, 6);
    /* a graph with a node that is not a kernel joins none: the caller instantiates it alone */
    fgraph *copy = mlp_graph(132, 7, 0xb000);
    copy->nodes[1].kernel = 0;
    joined none = join(&sg, copy);
    assert_null(none.f);
    assert_null(none.m);
    assert_false(none.kept);
    families_of(&sg, 6, 6);
    for (int i = 0; i < 6; i++)
        tk_cu_family_leave(&sg, j[i].f, j[i].m);
    families_of(&sg, 0, 0);
    assert_int_equal(drv.exec_destroyed, 6);
    for (int i = 0; i < 6; i++)
        free(g[i]);
    free(copy);
    pthread_mutex_destroy(&sg.lock);
}

/* A member whose arguments the driver refused to set fails its launch with the driver's error; the
 * next launch of any member sets every kernel again (the instantiated graph may hold part of each). */
static void family__a_failed_setting_is_reported_and_set_again_next_time(void **state)
{
    (void)state;
    tk_cu_signal sg = {0};
    pthread_mutex_init(&sg.lock, NULL);
    fgraph *g1 = mlp_graph(132, 1000, 0xb000), *g2 = mlp_graph(132, 2000, 0xb001);
    joined a = join(&sg, g1), b = join(&sg, g2);
    CUgraphExec x;
    drv.fail_set = 1;
    assert_int_equal(tk_cu_family_select(&sg, b.f, b.m, &x), TK_EDEVICE);
    assert_non_null(strstr(tk_error_last(), "cuGraphExecKernelNodeSetParams"));
    assert_non_null(strstr(tk_error_last(), "CUDA_ERROR_INVALID_VALUE"));
    drv.fail_set = 0;
    /* the first again, though the graph had its arguments before: both kernels set */
    tk_assert_ok(tk_cu_family_select(&sg, a.f, a.m, &x));
    assert_int_equal(drv.sets, 2);
    tk_assert_ok(tk_cu_family_select(&sg, b.f, b.m, &x)); /* then only the one that differs */
    assert_int_equal(drv.sets, 3);
    assert_int_equal(((fexec *)x)->args[0][2], 0xb001);
    /* the member whose arguments the graph has leaves: the next launch sets every kernel */
    tk_cu_family_leave(&sg, b.f, b.m);
    tk_assert_ok(tk_cu_family_select(&sg, a.f, a.m, &x));
    assert_int_equal(drv.sets, 5);
    assert_int_equal(((fexec *)x)->args[0][1], 1000);
    tk_cu_family_leave(&sg, a.f, a.m);
    assert_int_equal(drv.exec_destroyed, 1);
    free(g1), free(g2);
    pthread_mutex_destroy(&sg.lock);
}

/* A member's arguments are copied by its kernels' layouts: a kernel whose layout is not whole (a
 * parameter the driver counts but does not describe) puts its graph in no family, and without the
 * calls that read graphs there are no families at all. (CUDA 13.0's driver has no
 * cuFuncGetParamCount: the layout is then read until cuFuncGetParamInfo says the index is past
 * the last parameter, as its documentation has it.) */
static void family__a_kernel_without_a_whole_layout_joins_none(void **state)
{
    (void)state;
    size_t sizes[8], offsets[8];
    assert_int_equal(tk_cu_param_layout(FN_A, offsets, sizes, 8), 3);
    assert_int_equal(tk_cu_param_layout(FN_C, offsets, sizes, 8), -1);
    tk_cu.FuncGetParamCount = NULL; /* probing: the first parameter not described ends the list */
    assert_int_equal(tk_cu_param_layout(FN_A, offsets, sizes, 8), 3);
    assert_int_equal(tk_cu_param_layout(FN_C, offsets, sizes, 8), 2);
    assert_true(tk_cu_families_on());
    tk_cu.FuncGetParamCount = f_param_count;
    tk_cu.GraphNodeGetType = NULL;
    assert_false(tk_cu_families_on());
    tk_cu.GraphNodeGetType = f_node_type;
    assert_true(tk_cu_families_on());

    tk_cu_signal sg = {0};
    pthread_mutex_init(&sg.lock, NULL);
    fgraph *g = mlp_graph(132, 5, 0xb000);
    g->nodes[0].fn = FN_C;
    joined none = join(&sg, g);
    assert_null(none.f);
    assert_null(none.m);
    assert_false(none.kept);
    assert_int_equal(drv.instantiated, 0);
    families_of(&sg, 0, 0);
    free(g);
    pthread_mutex_destroy(&sg.lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(family__graphs_of_one_form_share_one_instantiated_graph, setup),
        cmocka_unit_test_setup(family__another_kernel_block_attribute_or_edge_is_another_form, setup),
        cmocka_unit_test_setup(family__a_failed_setting_is_reported_and_set_again_next_time, setup),
        cmocka_unit_test_setup(family__a_kernel_without_a_whole_layout_joins_none, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
