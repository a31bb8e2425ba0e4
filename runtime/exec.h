/* The executor behind tk_session (runtime/exec.c): a program model prepared for running (every
 * shape expression parsed, the values' lifetimes known, the parameters checked against the
 * weights), its weights uploaded once per device, and sessions that plan the intermediates of
 * each input-shape signature in one allocation and run every node through the op registry, on
 * a GPU replaying a CUDA graph from the second run of a signature. Internal to libtkrt and its
 * tests; the package (runtime/package.c) is one user, a test's hand-built model another. */
#ifndef TK_EXEC_H
#define TK_EXEC_H

#include <stddef.h>
#include <tk/runtime.h>

#include "progmodel.h"
#include "rt_internal.h"

typedef struct tk_exec_program tk_exec_program;

/* Prepares m for running. m and the safetensors image (weights, len) are borrowed: both must
 * outlive the program. origin names it in messages ("'mlp.tkpkg'"). Every node's op is resolved
 * now, in reg (a package's registry; NULL: the application's), then among the application's
 * ops: runs touch only the resolved definitions. TK_EINVAL with one line for an expression that
 * does not parse, a node input that is not an earlier value, a guard that cannot be read, or a
 * parameter missing from the weights or of another dtype or shape; TK_ENOTFOUND for an op that
 * is not registered. */
int tk_exec_program_new(tk_exec_program **out, const tk_program_model *m, const void *weights, size_t len,
                        const char *origin, tk_registry *reg);
/* Frees the program and the weights it uploaded; every session on it must be freed first. */
void tk_exec_program_free(tk_exec_program *p);

/* A session on dev over p, with its own context: the public tk_session (its run, profile and
 * free are those of include/tk/runtime.h), with opts (NULL: the defaults; checked here). No
 * architecture check: tk_session_new does that for packages before it calls this. */
int tk_exec_session_new(tk_session **out, tk_exec_program *p, tk_device dev, const tk_session_options *opts);
/* Calls release(arg) when s is freed (a package counts its sessions this way). */
void tk_exec_session_set_owner(tk_session *s, void (*release)(void *arg), void *arg);

/* How the last tk_session_run executed its nodes. */
typedef enum tk_exec_mode {
    TK_EXEC_EAGER,    /* node by node, on the caller's tensors where they are on the device */
    TK_EXEC_REPLAYED  /* a graph the capture thread made launched: the staged graph of the
                         signature or, for the caller's own tensors, its direct graph */
} tk_exec_mode;

/* What a session holds, for tests: plans cached (one per input-shape signature), the size of
 * its one intermediate allocation, how often that allocation grew, the last run's mode, and the
 * staged graphs the capture thread made. */
typedef struct tk_exec_stats {
    size_t plans;
    size_t planned; /* plans made for requests: a signature's first run, or its first since its plan was evicted */
    size_t arena_bytes;
    size_t arena_grows;
    tk_exec_mode last_mode;
    int last_direct;        /* the last run replayed a direct graph */
    size_t captures;        /* staged graphs */
    size_t direct_captures; /* direct graphs */
    size_t fused;           /* node pairs the program runs as one (tk::linear + tk::gelu or tk::add) */
    size_t folded;          /* nodes computed once with the weights (their inputs are parameters) */
    size_t families;        /* instantiated graphs shared by the session's graphs of one form */
    size_t family_members;  /* the session's graphs in those families (runtime/cuda_family.c) */
} tk_exec_stats;
void tk_exec_session_stats(const tk_session *s, tk_exec_stats *st);

/* Waits until the capture thread has no signature left to capture, the prefill included (tests,
 * benchmarks). */
void tk_exec_session_wait_captures(tk_session *s);

/* Turns CUDA graph replay off (0) or on (1, the default on a GPU), for comparisons. */
void tk_exec_session_set_graphs(tk_session *s, int on);

#endif
