/* Graph families: the graphs of one form that replay on one context share one instantiated graph,
 * each member keeping only its kernels' grids and arguments (cuda_driver.h says why). Read by
 * cuda.c's capture, launch and free of a graph; a family is reached through the signal of the
 * context its graphs replay on, under that signal's lock. */
#ifdef TK_HAVE_CUDA_HEADERS
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"

enum { MAX_NODES = 64, MAX_EDGES = 128, MAX_PARAMS = 256 };

/* The launch attributes a kernel node may carry, which members must share (the driver sets a
 * node's attributes apart from its parameters). */
static const CUkernelNodeAttrID attr_ids[] = {
    CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,  CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
    CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,     CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
    CU_LAUNCH_ATTRIBUTE_PRIORITY,              CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP,
    CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,       CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION,
    CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE,
};
#define NATTRS (sizeof attr_ids / sizeof attr_ids[0])

/* What every member of a family has at a kernel node. */
typedef struct kform {
    CUfunction func;
    unsigned block[3], shared;
    int nparams;
    size_t *offset; /* nparams: where each argument lies in a launch's args */
    struct {
        CUresult r;
        CUkernelNodeAttrValue v;
    } attr[NATTRS];
} kform;

/* What a member has of its own at a kernel node. */
typedef struct klaunch {
    unsigned grid[3];
    size_t size;
    unsigned char *args; /* the arguments' values at their offsets */
} klaunch;

struct tk_cu_member {
    size_t n;
    klaunch *l;
};

typedef struct edge {
    size_t from, to;
    CUgraphEdgeData data;
} edge;

struct tk_cu_family {
    struct tk_cu_family *next;
    CUgraph graph; /* the first member's: its nodes name the instantiated graph's */
    CUgraphExec exec;
    size_t nnodes, nedges;
    CUgraphNode *nodes;
    kform *forms;
    edge *edges;
    const tk_cu_member *applied; /* whose grids and arguments exec has now; NULL: unknown */
    size_t members;
};

/* A graph as read: its nodes' forms, a member's launches, its edges. */
typedef struct reading {
    size_t nnodes, nedges;
    CUgraphNode nodes[MAX_NODES];
    kform forms[MAX_NODES];
    klaunch launches[MAX_NODES];
    edge edges[MAX_EDGES];
} reading;

int tk_cu_families_on(void)
{
    return tk_cu.GraphGetNodes && tk_cu.GraphNodeGetType && tk_cu.GraphGetEdges && tk_cu.GraphKernelNodeGetParams &&
           tk_cu.GraphKernelNodeGetAttribute && tk_cu.GraphExecKernelNodeSetParams && tk_cu.FuncGetParamInfo;
}

static void forms_free(kform *f, size_t n)
{
    for (size_t i = 0; f && i < n; i++)
        free(f[i].offset);
}

static void launches_free(klaunch *l, size_t n)
{
    for (size_t i = 0; l && i < n; i++)
        free(l[i].args);
}

static void reading_free(reading *rd)
{
    if (rd) {
        forms_free(rd->forms, rd->nnodes);
        launches_free(rd->launches, rd->nnodes);
        free(rd);
    }
}

static size_t node_index(const reading *rd, CUgraphNode n)
{
    for (size_t i = 0; i < rd->nnodes; i++)
        if (rd->nodes[i] == n)
            return i;
    return (size_t)-1;
}

/* One kernel node into its form and launch: 0, or -1 where a family cannot take it. */
static int read_kernel(CUgraphNode node, kform *f, klaunch *l)
{
    CUDA_KERNEL_NODE_PARAMS kp;
    size_t sizes[MAX_PARAMS], offsets[MAX_PARAMS];
    memset(&kp, 0, sizeof kp);
    if (cuGraphKernelNodeGetParams_v2(node, &kp) != CUDA_SUCCESS || !kp.func || kp.extra)
        return -1;
    int n = tk_cu_param_layout(kp.func, offsets, sizes, MAX_PARAMS);
    if (n < 0 || (n > 0 && !kp.kernelParams))
        return -1;
    size_t size = 0;
    for (int i = 0; i < n; i++)
        if (offsets[i] + sizes[i] > size)
            size = offsets[i] + sizes[i];
    f->func = kp.func;
    f->block[0] = kp.blockDimX, f->block[1] = kp.blockDimY, f->block[2] = kp.blockDimZ;
    f->shared = kp.sharedMemBytes;
    f->nparams = n;
    l->grid[0] = kp.gridDimX, l->grid[1] = kp.gridDimY, l->grid[2] = kp.gridDimZ;
    l->size = size;
    if (!(f->offset = malloc(sizeof(size_t) * (size_t)(n ? n : 1))) || !(l->args = calloc(size ? size : 1, 1)))
        return -1;
    for (int i = 0; i < n; i++) {
        f->offset[i] = offsets[i];
        memcpy(l->args + offsets[i], kp.kernelParams[i], sizes[i]);
    }
    memset(f->attr, 0, sizeof f->attr);
    for (size_t a = 0; a < NATTRS; a++)
        f->attr[a].r = cuGraphKernelNodeGetAttribute(node, attr_ids[a], &f->attr[a].v);
    return 0;
}

/* graph's nodes and edges; NULL where a family cannot take it (or memory ran out: alone, then) */
static reading *read_graph(CUgraph graph)
{
    reading *rd = calloc(1, sizeof *rd);
    size_t n = 0, ne = 0;
    CUgraphNode from[MAX_EDGES], to[MAX_EDGES];
    if (!rd || cuGraphGetNodes(graph, NULL, &n) != CUDA_SUCCESS || n == 0 || n > MAX_NODES ||
        cuGraphGetNodes(graph, rd->nodes, &n) != CUDA_SUCCESS)
        goto no;
    for (; rd->nnodes < n; rd->nnodes++) {
        CUgraphNodeType type;
        size_t i = rd->nnodes;
        if (cuGraphNodeGetType(rd->nodes[i], &type) != CUDA_SUCCESS || type != CU_GRAPH_NODE_TYPE_KERNEL ||
            read_kernel(rd->nodes[i], &rd->forms[i], &rd->launches[i])) {
            rd->nnodes++; /* what read_kernel allocated is freed with the rest */
            goto no;
        }
    }
    CUgraphEdgeData data[MAX_EDGES];
    memset(data, 0, sizeof data);
    if (cuGraphGetEdges_v2(graph, NULL, NULL, NULL, &ne) != CUDA_SUCCESS || ne > MAX_EDGES ||
        (ne && cuGraphGetEdges_v2(graph, from, to, data, &ne) != CUDA_SUCCESS))
        goto no;
    for (size_t e = 0; e < ne; e++) {
        edge *ed = &rd->edges[e];
        ed->from = node_index(rd, from[e]);
        ed->to = node_index(rd, to[e]);
        ed->data = data[e];
        if (ed->from == (size_t)-1 || ed->to == (size_t)-1)
            goto no;
    }
    rd->nedges = ne;
    return rd;
no:
    reading_free(rd);
    return NULL;
}

static int same_form(const tk_cu_family *f, const reading *rd)
{
    if (f->nnodes != rd->nnodes || f->nedges != rd->nedges)
        return 0;
    for (size_t i = 0; i < rd->nnodes; i++) {
        const kform *a = &f->forms[i], *b = &rd->forms[i];
        if (a->func != b->func || memcmp(a->block, b->block, sizeof a->block) || a->shared != b->shared ||
            a->nparams != b->nparams || memcmp(a->attr, b->attr, sizeof a->attr))
            return 0;
    }
    for (size_t e = 0; e < rd->nedges; e++) {
        const edge *a = &f->edges[e], *b = &rd->edges[e];
        if (a->from != b->from || a->to != b->to || memcmp(&a->data, &b->data, sizeof a->data))
            return 0;
    }
    return 1;
}

static void member_free(tk_cu_member *m)
{
    if (m) {
        launches_free(m->l, m->n);
        free(m->l);
        free(m);
    }
}

static void family_free(tk_cu_family *f)
{
    if (f->exec)
        cuGraphExecDestroy(f->exec);
    if (f->graph)
        cuGraphDestroy(f->graph);
    forms_free(f->forms, f->nnodes);
    free(f->forms);
    free(f->nodes);
    free(f->edges);
    free(f);
}

int tk_cu_family_join(tk_cu_signal *sg, CUgraph *graph, CUstream stream, tk_cu_family **family, tk_cu_member **member)
{
    int rc = 0;
    tk_cu_family *f = NULL;
    tk_cu_member *m = NULL;
    CUgraphExec ge = NULL;
    *family = NULL;
    *member = NULL;
    reading *rd = read_graph(*graph);
    if (!rd)
        return 0; /* alone */
    if (!(m = calloc(1, sizeof *m)) || !(m->l = calloc(rd->nnodes, sizeof *m->l))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    m->n = rd->nnodes;
    memcpy(m->l, rd->launches, sizeof *m->l * rd->nnodes);
    memset(rd->launches, 0, sizeof rd->launches); /* the member's now */
    pthread_mutex_lock(&sg->lock);
    for (f = sg->families; f && !same_form(f, rd); f = f->next)
        ;
    if (f)
        f->members++;
    pthread_mutex_unlock(&sg->lock);
    if (f)
        goto done;
    /* the first of its form: instantiated (and uploaded) */
    if (!(f = calloc(1, sizeof *f)) || !(f->nodes = malloc(sizeof *f->nodes * rd->nnodes)) ||
        !(f->forms = malloc(sizeof *f->forms * rd->nnodes)) ||
        !(f->edges = malloc(sizeof *f->edges * (rd->nedges ? rd->nedges : 1)))) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    if ((rc = tk_cu_instantiate(*graph, stream, &ge)))
        goto done;
    f->graph = *graph;
    f->exec = ge;
    ge = NULL;
    *graph = NULL;
    f->nnodes = rd->nnodes;
    f->nedges = rd->nedges;
    memcpy(f->nodes, rd->nodes, sizeof *f->nodes * rd->nnodes);
    memcpy(f->forms, rd->forms, sizeof *f->forms * rd->nnodes);
    memset(rd->forms, 0, sizeof rd->forms); /* the family's now */
    memcpy(f->edges, rd->edges, sizeof *f->edges * rd->nedges);
    f->applied = m;
    f->members = 1;
    pthread_mutex_lock(&sg->lock);
    f->next = sg->families;
    sg->families = f;
    pthread_mutex_unlock(&sg->lock);
done:
    if (rc) {
        if (ge)
            cuGraphExecDestroy(ge);
        if (f && !f->exec) {
            free(f->nodes);
            free(f->forms);
            free(f->edges);
            free(f);
        }
        f = NULL;
        member_free(m);
        m = NULL;
    }
    reading_free(rd);
    *family = f;
    *member = m;
    return rc;
}

static int same_launch(const klaunch *a, const klaunch *b)
{
    return !memcmp(a->grid, b->grid, sizeof a->grid) && a->size == b->size && !memcmp(a->args, b->args, a->size);
}

int tk_cu_family_select(tk_cu_signal *sg, tk_cu_family *f, const tk_cu_member *m, CUgraphExec *exec)
{
    int rc = 0;
    pthread_mutex_lock(&sg->lock);
    if (f->applied != m) {
        const tk_cu_member *was = f->applied;
        f->applied = NULL; /* until every node has m's */
        for (size_t i = 0; i < f->nnodes; i++) {
            const kform *k = &f->forms[i];
            const klaunch *l = &m->l[i];
            if (was && same_launch(l, &was->l[i]))
                continue;
            void *argv[MAX_PARAMS];
            for (int j = 0; j < k->nparams; j++)
                argv[j] = l->args + k->offset[j];
            CUDA_KERNEL_NODE_PARAMS kp = {.func = k->func,
                                          .gridDimX = l->grid[0],
                                          .gridDimY = l->grid[1],
                                          .gridDimZ = l->grid[2],
                                          .blockDimX = k->block[0],
                                          .blockDimY = k->block[1],
                                          .blockDimZ = k->block[2],
                                          .sharedMemBytes = k->shared,
                                          .kernelParams = argv};
            TK_CU_CHECK(cuGraphExecKernelNodeSetParams_v2(f->exec, f->nodes[i], &kp));
        }
        f->applied = m;
    }
    *exec = f->exec;
done:
    pthread_mutex_unlock(&sg->lock);
    return rc;
}

void tk_cu_family_leave(tk_cu_signal *sg, tk_cu_family *f, tk_cu_member *m)
{
    pthread_mutex_lock(&sg->lock);
    if (f->applied == m)
        f->applied = NULL;
    int last = --f->members == 0;
    if (last)
        for (tk_cu_family **p = &sg->families; *p; p = &(*p)->next)
            if (*p == f) {
                *p = f->next;
                break;
            }
    pthread_mutex_unlock(&sg->lock);
    if (last)
        family_free(f);
    member_free(m);
}

void tk_cu_families_count(tk_cu_signal *sg, size_t *families, size_t *members)
{
    pthread_mutex_lock(&sg->lock);
    for (const tk_cu_family *f = sg->families; f; f = f->next) {
        ++*families;
        *members += f->members;
    }
    pthread_mutex_unlock(&sg->lock);
}

void tk_cu_families_free(tk_cu_signal *sg)
{
    while (sg->families) {
        tk_cu_family *f = sg->families;
        sg->families = f->next;
        family_free(f);
    }
}

#else
typedef int tk_cu_families_none; /* built without the CUDA headers: no graphs, so no families */
#endif
