/* Models: a C function declared with TK_PROGRAM runs eagerly on real tensors or is traced, with
 * symbolic shapes, into a program that `tkexport export` writes as a .tkprog. */
#ifndef TK_PROGRAM_H
#define TK_PROGRAM_H

#include <stddef.h>
#include <stdint.h>
#include <tk/op.h>
#include <tk/export.h>

#ifdef __cplusplus
extern "C" {
#endif
TK_API_BEGIN

#define TK_PROGRAM_MAX_INPUTS 16
#define TK_PROGRAM_MAX_OUTPUTS 16

/* One dimension of a program input: static (sym NULL, value) or dynamic (sym, [min, max]). */
typedef struct tk_dim_spec {
    int64_t value;
    const char *sym;
    int64_t min, max;
} tk_dim_spec;

/* A dynamic dimension: TK_DIM("batch", 1, 1024). */
#define TK_DIM(name, lo, hi) ((tk_dim_spec){0, (name), (lo), (hi)})

typedef struct tk_input_spec {
    const char *name;
    tk_dtype dtype;
    int rank;
    tk_dim_spec dims[8];
} tk_input_spec;

/* An input: TK_INPUT("x", TK_BF16, TK_DIM("batch", 1, 1024), 128). Dims are integers or TK_DIM. */
#define TK_INPUT(name, dtype, ...)                                                        \
    tk__input((name), (dtype), TK__NARG(__VA_ARGS__), (const tk_dim_spec[]){TK__MAP(TK__DIMARG, __VA_ARGS__)})
#define TK__DIMARG(d) _Generic((d), tk_dim_spec: tk__dim_same, default: tk__dim_static)(d)
static inline tk_dim_spec tk__dim_same(tk_dim_spec d) { return d; }
static inline tk_dim_spec tk__dim_static(int64_t v) { tk_dim_spec d = {v, 0, v, v}; return d; }
tk_input_spec tk__input(const char *name, tk_dtype dtype, int rank, const tk_dim_spec *dims);

/* A model's body: the inputs in declaration order; it sets out[i] (tensors it got from ops) and
 * returns 0 or a negative tk_error_code. */
typedef int (*tk_program_fn)(tk_ctx *ctx, tk_tensor *const *in, tk_tensor **out);

#define TK_PROGRAM_DEF_VERSION 1

typedef struct tk_program_def {
    unsigned version; /* TK_PROGRAM_DEF_VERSION */
    const char *name;
    tk_program_fn body;
    const char *file;
    int line;
    int ninputs;
    tk_input_spec inputs[TK_PROGRAM_MAX_INPUTS];
} tk_program_def;

typedef struct tk_program_node {
    tk_program_def def;
    struct tk_program_node *next;
} tk_program_node;

/* Called by TK_PROGRAM's constructor and destructor; not for direct use. */
void tk_program_register(tk_program_node *node);
void tk_program_unregister(tk_program_node *node);

/* Declares a model: TK_PROGRAM(mlp, "mlp", TK_INPUT("x", TK_BF16, TK_DIM("batch", 1, 1024), 128))
 * { ... body sees ctx, in, out ... }. */
#define TK_PROGRAM(fn, prog_name, ...)                                                   \
    int fn(tk_ctx *ctx, tk_tensor *const *in, tk_tensor **out);                           \
    static tk_program_node tk__prog_node_##fn;                                            \
    TK__CTOR static void tk__prog_ctor_##fn(void)                                         \
    {                                                                                     \
        const tk_input_spec ins[] = {__VA_ARGS__};                                        \
        tk_program_def *d = &tk__prog_node_##fn.def;                                      \
        d->version = TK_PROGRAM_DEF_VERSION;                                              \
        d->name = (prog_name);                                                            \
        d->body = fn;                                                                     \
        d->file = __FILE__;                                                               \
        d->line = __LINE__;                                                               \
        d->ninputs = (int)(sizeof(ins) / sizeof(ins[0]));                                 \
        for (int i = 0; i < d->ninputs && i < TK_PROGRAM_MAX_INPUTS; i++)                 \
            d->inputs[i] = ins[i];                                                        \
        tk_program_register(&tk__prog_node_##fn);                                         \
    }                                                                                     \
    TK__DTOR static void tk__prog_dtor_##fn(void) { tk_program_unregister(&tk__prog_node_##fn); } \
    int fn(tk_ctx *ctx, tk_tensor *const *in, tk_tensor **out)

/* The registered programs (the executable's and those of loaded shared objects). */
const tk_program_def *tk_program_find(const char *name);
size_t tk_program_count(void);
const tk_program_def *tk_program_at(size_t i);

/* A parameter of the model by its state_dict name ("linear1.weight"): in eager mode the tensor
 * loaded from the context's weights (tk_ctx_set_weights), on the context's device, owned by the
 * context; in trace mode a placeholder recorded as a program parameter. NULL with the error set
 * when the weights have no such name. */
tk_tensor *tk_param(tk_ctx *ctx, const char *name);

/* Weights for eager runs: a safetensors file, mapped and validated once (TK_EFORMAT naming the
 * file and the fault for a corrupt one); tensors are copied to the context's device on first use
 * by tk_param. Set once per context (TK_EINVAL the second time: tk_param's tensors live as long
 * as the context). */
int tk_ctx_set_weights(tk_ctx *ctx, const char *safetensors_path);

/* Runs a program eagerly: inputs checked against its declaration (dtype, rank, static dims,
 * dynamic dims inside their ranges and equal wherever they share a symbol), then the body, which
 * sets out[0..k-1]; out has room for the program's outputs, filled with tensors the caller frees
 * (an output the body did not own, an input or a parameter, comes back as a copy); *nout is k.
 * On failure nothing is left in out and what the body made is freed. */
int tk_program_run(tk_ctx *ctx, const char *name, tk_tensor *const *in, int nin, tk_tensor **out, int *nout);

TK_API_END
#ifdef __cplusplus
}
#endif
#endif
