/* Op authoring: TK_OP, TK_KERNEL_DECL, tk_wrap, tk_call and what an op body reads off tensors.
 * An op is a C function that launches CUDA kernels only through tk_wrap, so that the analyzer
 * sees which kernels it needs and the runtime can launch them from a program or a package. */
#ifndef TK_OP_H
#define TK_OP_H

#include <stddef.h>
#include <stdint.h>
#include <tk/error.h>
#include <tk/export.h>

#ifdef __cplusplus
extern "C" {
#endif
TK_API_BEGIN

/* Element types. The short names are fixed: users and tests rely on them. */
typedef enum tk_dtype { TK_F32, TK_F16, TK_BF16, TK_I32, TK_I64 } tk_dtype;

/* The execution context an op body receives: device, stream, mode (eager, trace, package) and
 * the last error. Opaque; created by the runtime. */
typedef struct tk_ctx tk_ctx;

/* An n-dimensional tensor (dtype, shape, strides, device, storage). Opaque. */
typedef struct tk_tensor tk_tensor;

/* What an op's meta function fills in for each output: dtype and shape (concrete now; symbolic
 * shapes come with the exporter). Opaque; set it with tk_spec_set or tk_spec_like. */
typedef struct tk_tensor_spec tk_tensor_spec;

/* A kernel handle: the name of a TK_KERNEL function. Kernels are resolved by name at launch,
 * from the kernels built into the executable in eager mode or from a package's modules. */
typedef struct tk_kernel {
    const char *name;
} tk_kernel;

/* A CUDA launch dimension; TK_DIM3(x), TK_DIM3(x, y), TK_DIM3(x, y, z), missing ones are 1. */
typedef struct tk_dim3 {
    uint32_t x, y, z;
} tk_dim3;

#define TK_DIM3(...) TK__DIM3_PICK(__VA_ARGS__, TK__DIM3_3, TK__DIM3_2, TK__DIM3_1, _)(__VA_ARGS__)
#define TK__DIM3_PICK(_1, _2, _3, NAME, ...) NAME
#ifdef __cplusplus /* no compound literals in C++ */
#define TK__DIM3_1(x) (tk_dim3{(uint32_t)(x), 1u, 1u})
#define TK__DIM3_2(x, y) (tk_dim3{(uint32_t)(x), (uint32_t)(y), 1u})
#define TK__DIM3_3(x, y, z) (tk_dim3{(uint32_t)(x), (uint32_t)(y), (uint32_t)(z)})
#else
#define TK__DIM3_1(x) ((tk_dim3){(uint32_t)(x), 1u, 1u})
#define TK__DIM3_2(x, y) ((tk_dim3){(uint32_t)(x), (uint32_t)(y), 1u})
#define TK__DIM3_3(x, y, z) ((tk_dim3){(uint32_t)(x), (uint32_t)(y), (uint32_t)(z)})
#endif

/* --- symbolic shapes -------------------------------------------------------------------------
 * A meta function computes its outputs' shapes from its inputs' with tk_sym values: in eager mode
 * every tk_sym is a constant; when a program is traced for export (tk/program.h) dimensions
 * declared dynamic (TK_DIM) are symbols with ranges, and the same code computes expressions over
 * them. Expressions: sums, products by constants, floor division and modulo by constants, min,
 * max. Expression nodes belong to the context and live as long as it. */
typedef struct tk_sym_expr tk_sym_expr;
typedef struct tk_sym {
    int64_t value;            /* the value when expr is NULL; TK_SYM_DYNAMIC_VALUE otherwise */
    const tk_sym_expr *expr;  /* NULL: a constant */
} tk_sym;

/* What a dynamic dim reads as a number: its tk_sym's .value, tk_tensor_dim and tk_tensor_shape
 * of a traced tensor. Negative and odd, so that a shape computed from it (x.value * 2,
 * x.value + 64, x.value / 4) is refused at export, naming the op and its line, instead of
 * exporting a constant: compute dims with tk_tensor_sym and the tk_sym_* functions. */
#define TK_SYM_DYNAMIC_VALUE (-1099511627777LL)

#define TK_SYM(v) ((tk_sym){(int64_t)(v), 0})
static inline int tk_sym_is_const(tk_sym s) { return s.expr == 0; }

/* Dimension i of t (negative i counts from the end) as a tk_sym; TK_SYM(-1) with the error set
 * when i is out of range. */
tk_sym tk_tensor_sym(const tk_tensor *t, int i);

/* Arithmetic. Results are simplified (constants folded, linear terms collected). On failure
 * (out of memory, division by k <= 0) they return TK_SYM(-1) and set the error. */
tk_sym tk_sym_add(tk_ctx *ctx, tk_sym a, tk_sym b);
tk_sym tk_sym_sub(tk_ctx *ctx, tk_sym a, tk_sym b);
tk_sym tk_sym_mul(tk_ctx *ctx, tk_sym a, int64_t k);
/* a * b for any two: a product of two dynamic dims ("batch*seq") is an atom of its own (ranges from
 * its factors' ranges; it divides by neither factor symbolically). */
tk_sym tk_sym_mul_sym(tk_ctx *ctx, tk_sym a, tk_sym b);
tk_sym tk_sym_floordiv(tk_ctx *ctx, tk_sym a, int64_t k);
tk_sym tk_sym_mod(tk_ctx *ctx, tk_sym a, int64_t k);
tk_sym tk_sym_min(tk_ctx *ctx, tk_sym a, tk_sym b);
tk_sym tk_sym_max(tk_ctx *ctx, tk_sym a, tk_sym b);

/* Requirements a meta function states about its inputs. Eagerly they are checked at once and
 * fail with a one-line message that includes `what` (e.g. "x dim 1 == weight dim 1"); in trace
 * mode they become guards, simplified against the symbols' ranges (docs/formats/tkprog.md).
 * Return 0 or a negative tk_error_code. */
int tk_require_eq(tk_ctx *ctx, tk_sym a, tk_sym b, const char *what);
int tk_require_range(tk_ctx *ctx, tk_sym a, int64_t min, int64_t max, const char *what);
int tk_require_divisible(tk_ctx *ctx, tk_sym a, int64_t k, const char *what);

/* Meta functions: output i gets dtype and shape (rank <= 8). Return 0 or a tk_error_code. */
int tk_spec_set(tk_tensor_spec *spec, tk_dtype dtype, int rank, const int64_t *shape);
int tk_spec_set_sym(tk_tensor_spec *spec, tk_dtype dtype, int rank, const tk_sym *shape);
/* Output gets t's dtype and shape (symbolic or not). */
int tk_spec_like(tk_tensor_spec *spec, const tk_tensor *t);

/* The number of streaming multiprocessors of the context's GPU (1 on the CPU), to size grids. */
int tk_ctx_sm_count(tk_ctx *ctx);

/* ceil(a / b) for positive b: the grid size that covers a elements with blocks of b. */
static inline int64_t tk_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Tensor accessors an op body needs. tk_tensor_data is the device pointer of a CUDA tensor and
 * the host pointer of a CPU tensor; the tensor keeps ownership. tk_tensor_dim takes negative
 * indices from the end as PyTorch does (-1 is the last dim); out of range it returns -1 and sets
 * the last error. */
int64_t tk_numel(const tk_tensor *t);
tk_dtype tk_tensor_dtype(const tk_tensor *t);
int tk_tensor_rank(const tk_tensor *t);
int64_t tk_tensor_dim(const tk_tensor *t, int i);
void *tk_tensor_data(const tk_tensor *t);

/* A kernel argument, boxed by tk_wrap: a tensor becomes its device pointer at launch, integers
 * and floats keep their C type (kind and size), so the launch can check them against the
 * kernel's parameters. */
typedef enum tk_arg_kind { TK_ARG_TENSOR, TK_ARG_INT, TK_ARG_UINT, TK_ARG_FLOAT, TK_ARG_PTR } tk_arg_kind;

typedef struct tk_arg {
    tk_arg_kind kind;
    uint32_t size; /* bytes the kernel parameter takes */
    union {
        const tk_tensor *tensor;
        int64_t i;
        uint64_t u;
        double f;
        const void *ptr;
    } v;
} tk_arg;

static inline tk_arg tk__arg_tensor(const tk_tensor *t) { tk_arg a = {TK_ARG_TENSOR, 8u, {0}}; a.v.tensor = t; return a; }
static inline tk_arg tk__arg_i8(int8_t x) { tk_arg a = {TK_ARG_INT, 1u, {0}}; a.v.i = x; return a; }
static inline tk_arg tk__arg_i16(int16_t x) { tk_arg a = {TK_ARG_INT, 2u, {0}}; a.v.i = x; return a; }
static inline tk_arg tk__arg_i32(int32_t x) { tk_arg a = {TK_ARG_INT, 4u, {0}}; a.v.i = x; return a; }
static inline tk_arg tk__arg_i64(int64_t x) { tk_arg a = {TK_ARG_INT, 8u, {0}}; a.v.i = x; return a; }
static inline tk_arg tk__arg_u8(uint8_t x) { tk_arg a = {TK_ARG_UINT, 1u, {0}}; a.v.u = x; return a; }
static inline tk_arg tk__arg_u16(uint16_t x) { tk_arg a = {TK_ARG_UINT, 2u, {0}}; a.v.u = x; return a; }
static inline tk_arg tk__arg_u32(uint32_t x) { tk_arg a = {TK_ARG_UINT, 4u, {0}}; a.v.u = x; return a; }
static inline tk_arg tk__arg_u64(uint64_t x) { tk_arg a = {TK_ARG_UINT, 8u, {0}}; a.v.u = x; return a; }
static inline tk_arg tk__arg_f32(float x) { tk_arg a = {TK_ARG_FLOAT, 4u, {0}}; a.v.f = x; return a; }
static inline tk_arg tk__arg_f64(double x) { tk_arg a = {TK_ARG_FLOAT, 8u, {0}}; a.v.f = x; return a; }
static inline tk_arg tk__arg_ptr(const void *p) { tk_arg a = {TK_ARG_PTR, (uint32_t)sizeof(void *), {0}}; a.v.ptr = p; return a; }

#ifndef __cplusplus /* C++ boxes arguments by overloading: below, after the C declarations */
#define TK_ARG(x) _Generic((x),                                                    \
    tk_tensor *: tk__arg_tensor, const tk_tensor *: tk__arg_tensor,                \
    _Bool: tk__arg_u8, char: tk__arg_i8, signed char: tk__arg_i8,                   \
    unsigned char: tk__arg_u8, short: tk__arg_i16, unsigned short: tk__arg_u16,      \
    int: tk__arg_i32, unsigned int: tk__arg_u32,                                    \
    long: tk__arg_i64, unsigned long: tk__arg_u64,                                  \
    long long: tk__arg_i64, unsigned long long: tk__arg_u64,                        \
    float: tk__arg_f32, double: tk__arg_f64,                                        \
    default: tk__arg_ptr)(x)
#endif

#define TK__NARG(...) TK__NARG_(__VA_ARGS__, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0)
#define TK__NARG_(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, _21, _22, _23, _24, N, ...) N
#define TK__MAP_1(f, a) f(a)
#define TK__MAP_2(f, a, ...) f(a), TK__MAP_1(f, __VA_ARGS__)
#define TK__MAP_3(f, a, ...) f(a), TK__MAP_2(f, __VA_ARGS__)
#define TK__MAP_4(f, a, ...) f(a), TK__MAP_3(f, __VA_ARGS__)
#define TK__MAP_5(f, a, ...) f(a), TK__MAP_4(f, __VA_ARGS__)
#define TK__MAP_6(f, a, ...) f(a), TK__MAP_5(f, __VA_ARGS__)
#define TK__MAP_7(f, a, ...) f(a), TK__MAP_6(f, __VA_ARGS__)
#define TK__MAP_8(f, a, ...) f(a), TK__MAP_7(f, __VA_ARGS__)
#define TK__MAP_9(f, a, ...) f(a), TK__MAP_8(f, __VA_ARGS__)
#define TK__MAP_10(f, a, ...) f(a), TK__MAP_9(f, __VA_ARGS__)
#define TK__MAP_11(f, a, ...) f(a), TK__MAP_10(f, __VA_ARGS__)
#define TK__MAP_12(f, a, ...) f(a), TK__MAP_11(f, __VA_ARGS__)
#define TK__MAP_13(f, a, ...) f(a), TK__MAP_12(f, __VA_ARGS__)
#define TK__MAP_14(f, a, ...) f(a), TK__MAP_13(f, __VA_ARGS__)
#define TK__MAP_15(f, a, ...) f(a), TK__MAP_14(f, __VA_ARGS__)
#define TK__MAP_16(f, a, ...) f(a), TK__MAP_15(f, __VA_ARGS__)
#define TK__MAP_17(f, a, ...) f(a), TK__MAP_16(f, __VA_ARGS__)
#define TK__MAP_18(f, a, ...) f(a), TK__MAP_17(f, __VA_ARGS__)
#define TK__MAP_19(f, a, ...) f(a), TK__MAP_18(f, __VA_ARGS__)
#define TK__MAP_20(f, a, ...) f(a), TK__MAP_19(f, __VA_ARGS__)
#define TK__MAP_21(f, a, ...) f(a), TK__MAP_20(f, __VA_ARGS__)
#define TK__MAP_22(f, a, ...) f(a), TK__MAP_21(f, __VA_ARGS__)
#define TK__MAP_23(f, a, ...) f(a), TK__MAP_22(f, __VA_ARGS__)
#define TK__MAP_24(f, a, ...) f(a), TK__MAP_23(f, __VA_ARGS__)
#define TK__CAT(a, b) TK__CAT_(a, b)
#define TK__CAT_(a, b) a##b
#define TK__MAP(f, ...) TK__CAT(TK__MAP_, TK__NARG(__VA_ARGS__))(f, __VA_ARGS__)

/* Launches `kernel` (an expression of type const tk_kernel *, usually a TK_KERNEL_DECL name)
 * on the context's stream: tk_wrap(ctx, kernel, grid, block, args...), at most 24 arguments.
 * The only launch the tools can see: a raw <<<>>>, cudaLaunchKernel or cuLaunchKernel inside an
 * op is invisible to export and packaging. Returns 0 or a negative tk_error_code. */
#ifndef __cplusplus
#define tk_wrap(ctx, kernel, grid, block, ...)                                      \
    tk_wrap_launch((ctx), (kernel), (grid), (block), TK__NARG(__VA_ARGS__),         \
                   (const tk_arg[]){TK__MAP(TK_ARG, __VA_ARGS__)})
#endif
int tk_wrap_launch(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block,
                   int nargs, const tk_arg *args);

/* tk_wrap with dynamic shared memory: the kernel's `extern __shared__` array has `shared` bytes.
 * Past the 48 KiB every kernel may have, the runtime opts the kernel in (once per kernel and
 * device, cuFuncSetAttribute) up to what the device gives a block (227 KiB on sm_90, 163 on
 * sm_80); more is TK_EINVAL with one line naming the kernel, the bytes and the limit. The
 * analyzer sees it as it sees tk_wrap. */
#ifndef __cplusplus
#define tk_wrap_shared(ctx, kernel, grid, block, shared, ...)                       \
    tk_wrap_launch_shared((ctx), (kernel), (grid), (block), (shared),               \
                          TK__NARG(__VA_ARGS__), (const tk_arg[]){TK__MAP(TK_ARG, __VA_ARGS__)})
#endif
int tk_wrap_launch_shared(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block,
                          size_t shared, int nargs, const tk_arg *args);

/* --- calling ops, with tensors and scalar arguments ----------------------------------------
 * A schema's arguments are tensors ("Tensor x", "Tensor? bias=None": NULL allowed) and scalars:
 *   int n=4      float eps=1e-05      bool causal=False      str mode="tanh"      int[] dims=[0, 2]
 * A call passes them in the schema's order, each boxed in a tk_value by its C type (tk_call does
 * it): a tk_tensor * (or NULL) is a tensor, an integer type an int, float and double a float,
 * _Bool a bool, a string a str, TK_INTS(0, 2) an int[]. An int is accepted for a float, 0 or 1
 * for a bool. Trailing arguments left out take their schema defaults. Each argument is checked
 * against the schema's type (one-line error naming it: "argument 'eps' (in[2]) of op 'ns::rms'
 * is a float, got a str"). The op's body, meta function and CPU fallback find tensor argument i
 * at in[i] (NULL at a scalar's index) and scalar argument i with tk_arg_int(ctx, i) and the
 * others below: one numbering for both. A traced program records the scalars of every node in
 * program.json ("attrs"), and a package's run passes them again. */
typedef enum tk_value_kind {
    TK_VALUE_TENSOR, /* u.tensor: may be NULL */
    TK_VALUE_INT,    /* u.i */
    TK_VALUE_FLOAT,  /* u.f */
    TK_VALUE_BOOL,   /* u.i: 0 or 1 */
    TK_VALUE_STR,    /* u.s */
    TK_VALUE_INTS    /* u.ints: n values at v */
} tk_value_kind;

typedef struct tk_value {
    tk_value_kind kind;
    union {
        tk_tensor *tensor;
        int64_t i;
        double f;
        const char *s;
        struct {
            const int64_t *v;
            int64_t n;
        } ints;
    } u;
} tk_value;

static inline tk_value tk__val_tensor(const tk_tensor *t) { tk_value v; v.kind = TK_VALUE_TENSOR; v.u.tensor = (tk_tensor *)t; return v; }
static inline tk_value tk__val_null(const void *p) { tk_value v; (void)p; v.kind = TK_VALUE_TENSOR; v.u.tensor = 0; return v; }
static inline tk_value tk__val_int(long long x) { tk_value v; v.kind = TK_VALUE_INT; v.u.i = x; return v; }
static inline tk_value tk__val_uint(unsigned long long x) { tk_value v; v.kind = TK_VALUE_INT; v.u.i = (int64_t)x; return v; }
static inline tk_value tk__val_float(double x) { tk_value v; v.kind = TK_VALUE_FLOAT; v.u.f = x; return v; }
static inline tk_value tk__val_bool(int x) { tk_value v; v.kind = TK_VALUE_BOOL; v.u.i = x != 0; return v; }
static inline tk_value tk__val_str(const char *s) { tk_value v; v.kind = TK_VALUE_STR; v.u.s = s; return v; }
static inline tk_value tk__val_same(tk_value v) { return v; }
static inline tk_value tk__val_ints(const int64_t *p, int64_t n) { tk_value v; v.kind = TK_VALUE_INTS; v.u.ints.v = p; v.u.ints.n = n; return v; }

/* TK_BOOL(x): a bool, whatever x's C type; TK_INTS(1, 2): an int[] (TK_INTS_N(ptr, n) from an
 * array). */
#define TK_BOOL(x) tk__val_bool(!!(x))
#define TK_INTS_N(ptr, n) tk__val_ints((ptr), (n))
#ifndef __cplusplus
#define TK_INTS(...) tk__val_ints((const int64_t[]){__VA_ARGS__}, TK__NARG(__VA_ARGS__))
#define TK_VALUE(x) _Generic((x),                                                  \
    tk_tensor *: tk__val_tensor, const tk_tensor *: tk__val_tensor, void *: tk__val_null, \
    _Bool: tk__val_bool, char: tk__val_int, signed char: tk__val_int,               \
    unsigned char: tk__val_uint, short: tk__val_int, unsigned short: tk__val_uint,   \
    int: tk__val_int, unsigned int: tk__val_uint, long: tk__val_int,                \
    unsigned long: tk__val_uint, long long: tk__val_int, unsigned long long: tk__val_uint, \
    float: tk__val_float, double: tk__val_float,                                    \
    char *: tk__val_str, const char *: tk__val_str, tk_value: tk__val_same)(x)

/* Calls another op through the registry: tk_call(ctx, "ns::name", args...). Outputs are
 * allocated from the callee's meta function; returns its first output (owned by the caller),
 * or NULL with the error in tk_error_last(). */
#define tk_call(ctx, name, ...)                                                     \
    tk_call_at((ctx), (name), __FILE__, __LINE__, TK__NARG(__VA_ARGS__),            \
               (const tk_value[]){TK__MAP(TK_VALUE, __VA_ARGS__)})

/* An op with any number of outputs: tk_call_outs(ctx, "ns::name", outs, n, args...) fills
 * outs[0..n-1] in the schema's order of returns (owned by the caller; n must be the op's count)
 * and returns 0, or a negative tk_error_code with every outs[i] NULL. The model's line is
 * recorded per node, as tk_call's. */
#define tk_call_outs(ctx, name, outs, n, ...)                                       \
    tk_call_outs_at((ctx), (name), __FILE__, __LINE__, TK__NARG(__VA_ARGS__),       \
                    (const tk_value[]){TK__MAP(TK_VALUE, __VA_ARGS__)}, (n), (outs))
#endif
tk_tensor *tk_call_at(tk_ctx *ctx, const char *name, const char *file, int line, int nargs, const tk_value *args);
int tk_call_outs_at(tk_ctx *ctx, const char *name, const char *file, int line, int nargs, const tk_value *args,
                    int noutputs, tk_tensor **outputs);

/* Tensors only (the calls of earlier releases): tk_call_at with every argument a tensor. */
tk_tensor *tk_call_op(tk_ctx *ctx, const char *name, int ninputs, tk_tensor *const *inputs);
tk_tensor *tk_call_op_at(tk_ctx *ctx, const char *name, const char *file, int line, int ninputs,
                         tk_tensor *const *inputs);

/* Scalar argument i of the op being run (its body, meta function or CPU fallback), checked by
 * dispatch against the schema. Asked of another kind, of a tensor, or outside a call: 0 (NULL)
 * with the error set. tk_arg_ints gives the count in *n. */
int64_t tk_arg_int(tk_ctx *ctx, int i);
double tk_arg_float(tk_ctx *ctx, int i);
int tk_arg_bool(tk_ctx *ctx, int i);
const char *tk_arg_str(tk_ctx *ctx, int i);
const int64_t *tk_arg_ints(tk_ctx *ctx, int i, int64_t *n);

/* The three functions an op may have: the body (CUDA launches through tk_wrap), the CPU
 * fallback (same signature, CPU tensors) and the meta function (the shape rule). */
typedef int (*tk_op_fn)(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out);
typedef int (*tk_meta_fn)(tk_ctx *ctx, tk_tensor *const *in, tk_tensor_spec *const *out);

/* What one call of an op moves and computes, for profiles (tkexport run --profile reports the
 * achieved fraction of the GPU's peak from it): floating-point operations and bytes read from and
 * written to device memory. */
typedef struct tk_op_cost {
    double flops, bytes;
} tk_op_cost;
typedef int (*tk_cost_fn)(tk_tensor *const *in, tk_tensor *const *out, tk_op_cost *cost);

#define TK_OP_DEF_VERSION 2

/* The registration record TK_OP emits for each op. A constructor adds it to the runtime's
 * registry when the executable starts or a shared object is loaded (and a destructor removes
 * it when that object is unloaded); the record also sits in the `tk_ops` section. */
typedef struct tk_op_def {
    unsigned version;   /* TK_OP_DEF_VERSION */
    const char *name;   /* "namespace::name" */
    const char *schema; /* PyTorch schema syntax: "(Tensor x, Tensor(a!) y, int n=4) -> Tensor" */
    tk_op_fn body;      /* the function TK_OP defines */
    const char *file;
    int line;
    tk_meta_fn meta;    /* .meta = fn: required by export (tkexport export refuses an op without one);
                           eagerly, without it, every output is like in[0] */
    tk_op_fn cpu;       /* optional: .cpu = fn */
    tk_cost_fn cost;    /* optional: .cost = fn (version 2) */
} tk_op_def;

/* A registry link, one per op, owned by the object that defines the op. */
typedef struct tk_op_node {
    const tk_op_def *def;
    struct tk_op_node *next;
} tk_op_node;

/* Called by TK_OP's constructor and destructor; not for direct use. */
void tk_op_register(tk_op_node *node);
void tk_op_unregister(tk_op_node *node);

/* The registration record of a kernel fatbin that a binary embeds (tk_add_kernels in CMake
 * generates one per .cu and registers it from a constructor, like TK_OP). Kernels registered by
 * the application itself are found by the application's ops; a package's fatbins are registered
 * inside the package (docs/formats/tkpkg.md) and found only by that package's ops. */
#define TK_FATBIN_RECORD_VERSION 1
typedef struct tk_fatbin_node {
    unsigned version;  /* TK_FATBIN_RECORD_VERSION */
    const void *image; /* the fatbin's bytes, alive while registered */
    size_t size;
    const char *name;  /* for messages; a name ending in "@cN" holds the variants of tuning
                          configuration N (packages) */
    struct tk_fatbin_node *next;         /* set by the runtime */
    unsigned long long serial;           /* set by the runtime: which registration this is */
} tk_fatbin_node;

/* Called by the generated constructor and destructor; not for direct use. A record of another
 * version is refused with a warning through the log. */
void tk_fatbin_register(tk_fatbin_node *node);
void tk_fatbin_unregister(tk_fatbin_node *node);

#if defined(__clang__)
/* What the analyzer finds: the op's name and schema as annotate attributes on its function. */
#define TK__OP_ANNOTATE(name, schema) __attribute__((annotate("tk.op:" name), annotate("tk.schema:" schema)))
#define TK__KDECL_ANNOTATE __attribute__((annotate("tk.kernel_decl")))
#else
#define TK__OP_ANNOTATE(name, schema)
#define TK__KDECL_ANNOTATE
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TK__OP_SECTION __attribute__((used, section("tk_ops"), aligned(sizeof(void *))))
#define TK__UNUSED __attribute__((unused))
#define TK__CTOR __attribute__((constructor))
#define TK__DTOR __attribute__((destructor))
#else
#error "tkexport ops need GCC or Clang (constructor attributes register them)"
#endif

/* Defines an op: TK_OP(fn, "ns::name", "schema", .meta = m, .cpu = c, .cost = k) { body }.
 * The body sees tk_ctx *ctx, tk_tensor *const *in and tk_tensor *const *out, and returns 0 or
 * a negative tk_error_code. `fn` is an ordinary external function other ops may call. */
#define TK_OP(fn, op_name, op_schema, ...)                                                \
    int fn(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out);              \
    static const tk_op_def tk__op_def_##fn = {                                     \
        .version = TK_OP_DEF_VERSION, .name = op_name, .schema = op_schema, .body = fn,\
        .file = __FILE__, .line = __LINE__, __VA_ARGS__};                           \
    static const tk_op_def *const tk__op_reg_##fn TK__OP_SECTION = &tk__op_def_##fn; \
    static tk_op_node tk__op_node_##fn = {&tk__op_def_##fn, 0};                    \
    TK__CTOR static void tk__op_ctor_##fn(void) { tk_op_register(&tk__op_node_##fn); } \
    TK__DTOR static void tk__op_dtor_##fn(void) { tk_op_unregister(&tk__op_node_##fn); } \
    TK__OP_ANNOTATE(op_name, op_schema)                                             \
    int fn(tk_ctx *ctx, tk_tensor *const *in, tk_tensor *const *out)

/* Declares a kernel handle: after TK_KERNEL_DECL(silu_kernel); the name `silu_kernel` is an
 * expression of type const tk_kernel * (an address constant, so it may appear in static tables
 * and initializers) that names the TK_KERNEL function silu_kernel. */
#define TK_KERNEL_DECL(kname)                                                       \
    TK__KDECL_ANNOTATE static const tk_kernel kname[1] TK__UNUSED = {{#kname}}

/* --- autotuning (docs/autotune.md) ---------------------------------------------------------
 * A kernel's configuration space, declared next to its TK_KERNEL_DECL:
 *
 *   TK_AUTOTUNE(silu_kernel, "n", "BLOCK ITEMS", "256 4", "128 8", "512 2", "1024 1");
 *
 * "n" is the key: the kernel parameter whose value selects a configuration at run time,
 * bucketed by powers of two (bucket b holds 2^(b-1) < n <= 2^b). "BLOCK ITEMS" are the
 * compile-time parameters: `tkexport compile` builds the kernel's source once per configuration
 * with -DBLOCK=... -DITEMS=...; the kernel source gives the first configuration's values as
 * defaults (#ifndef BLOCK / #define BLOCK 256) for builds without tuning. Each further string is
 * one configuration, a value per parameter; the first is the default. `tkexport compile
 * --autotune` measures them on the GPU and records the winner per bucket in the package.
 *
 * The op reads the configuration for this call from tk_tune and launches with it:
 *
 *   const int *cfg = tk_tune(ctx, silu_kernel, n);      (cfg[0] is BLOCK, cfg[1] ITEMS)
 *   return tk_wrap(ctx, silu_kernel, TK_DIM3(tk_cdiv(n, cfg[0] * cfg[1])), TK_DIM3(cfg[0]), ...);
 *
 * tk_wrap of that kernel then launches the variant compiled for that configuration. */
#define TK_TUNE_MAX_PARAMS 8
#define TK_TUNE_MAX_CONFIGS 64
#define TK_TUNE_BUCKETS 64

#define TK_TUNE_DECL_VERSION 1

typedef struct tk_tune_decl {
    unsigned version;   /* TK_TUNE_DECL_VERSION */
    const tk_kernel *kernel;
    const char *key;    /* the kernel parameter that selects */
    const char *params; /* the compile-time parameters' names, space-separated */
    int nconfigs;
    const char *const *configs; /* each a value per parameter, space-separated */
    const char *file;
    int line;
} tk_tune_decl;

typedef struct tk_tune_node {
    const tk_tune_decl *decl;
    struct tk_tune_node *next;
} tk_tune_node;

/* Called by TK_AUTOTUNE's constructor and destructor; not for direct use. */
void tk_tune_register(tk_tune_node *node);
void tk_tune_unregister(tk_tune_node *node);

#if defined(__clang__)
#define TK__TUNE_ANNOTATE __attribute__((annotate("tk.autotune")))
#define TK__HEUR_ANNOTATE __attribute__((annotate("tk.heuristic")))
#else
#define TK__TUNE_ANNOTATE
#define TK__HEUR_ANNOTATE
#endif

#define TK_AUTOTUNE(kname, key_name, param_names, ...)                                  \
    static const char *const tk__tune_configs_##kname[] = {__VA_ARGS__};               \
    TK__TUNE_ANNOTATE static const tk_tune_decl tk__tune_decl_##kname = {              \
        TK_TUNE_DECL_VERSION, kname, key_name, param_names,                             \
        (int)(sizeof(tk__tune_configs_##kname) / sizeof(tk__tune_configs_##kname[0])), \
        tk__tune_configs_##kname, __FILE__, __LINE__};                                  \
    static tk_tune_node tk__tune_node_##kname = {&tk__tune_decl_##kname, 0};            \
    TK__CTOR static void tk__tune_ctor_##kname(void) { tk_tune_register(&tk__tune_node_##kname); } \
    TK__DTOR static void tk__tune_dtor_##kname(void) { tk_tune_unregister(&tk__tune_node_##kname); } \
    typedef int tk__tune_semicolon_##kname

/* A heuristic parameter of a tuned kernel (Triton's triton.heuristics): a compile-time
 * parameter the op derives from the arguments on every call, after tk_tune, such as a variant
 * without bounds checks when n is a multiple of the tile:
 *
 *   TK_HEURISTIC(silu_kernel, "EVEN", "0 1");
 *   ...
 *   const int *cfg = tk_tune(ctx, silu_kernel, n);
 *   tk_tune_set(ctx, silu_kernel, "EVEN", n % ((int64_t)cfg[0] * cfg[1]) == 0);
 *
 * Every configuration is compiled once per listed value (-DEVEN=0, -DEVEN=1); the tuner measures
 * the op, so the heuristic is applied before tuning, as Triton orders them. At most one per
 * kernel; outside a package (builds without tuning) the kernel runs with its source's default. */
#define TK_HEURISTIC_DECL_VERSION 1

typedef struct tk_heuristic_decl {
    unsigned version;   /* TK_HEURISTIC_DECL_VERSION */
    const tk_kernel *kernel;
    const char *param;
    const char *values; /* the values compiled, space-separated integers */
    const char *file;
    int line;
} tk_heuristic_decl;

typedef struct tk_heuristic_node {
    const tk_heuristic_decl *decl;
    struct tk_heuristic_node *next;
} tk_heuristic_node;

void tk_heuristic_register(tk_heuristic_node *node);
void tk_heuristic_unregister(tk_heuristic_node *node);

#define TK_HEURISTIC(kname, param_name, value_list)                                      \
    TK__HEUR_ANNOTATE static const tk_heuristic_decl tk__heur_decl_##kname = {           \
        TK_HEURISTIC_DECL_VERSION, kname, param_name, value_list, __FILE__, __LINE__};    \
    static tk_heuristic_node tk__heur_node_##kname = {&tk__heur_decl_##kname, 0};         \
    TK__CTOR static void tk__heur_ctor_##kname(void) { tk_heuristic_register(&tk__heur_node_##kname); } \
    TK__DTOR static void tk__heur_dtor_##kname(void) { tk_heuristic_unregister(&tk__heur_node_##kname); } \
    typedef int tk__heur_semicolon_##kname

/* Sets the heuristic parameter of `kernel` for the launch tk_tune prepared: the next tk_wrap of
 * it launches the variant compiled with param = value. TK_EINVAL when the kernel declares no
 * such parameter or value. */
int tk_tune_set(tk_ctx *ctx, const tk_kernel *kernel, const char *param, int value);

/* The configuration to launch `kernel` with when its key is `key`: the parameters' values in
 * declaration order. The package's measured choice for key's bucket when it has one, else the
 * default (first) configuration. tk_wrap of `kernel` on ctx then launches that configuration's
 * variant. NULL with the error set when the kernel has no TK_AUTOTUNE declaration. */
const int *tk_tune(tk_ctx *ctx, const tk_kernel *kernel, int64_t key);

/* The bucket of a key: the smallest b with key <= 2^b (0 for key <= 1). */
int tk_tune_bucket(int64_t key);

TK_API_END
#ifdef __cplusplus
}

/* tk_wrap in C++ (host code of .cu files, templates included): the same boxing as C's
 * _Generic, by overloading, and the same tk_wrap_launch. */
static inline tk_arg tk__arg(tk_tensor *t) { return tk__arg_tensor(t); }
static inline tk_arg tk__arg(const tk_tensor *t) { return tk__arg_tensor(t); }
static inline tk_arg tk__arg(bool x) { return tk__arg_u8(x); }
static inline tk_arg tk__arg(char x) { return tk__arg_i8((int8_t)x); }
static inline tk_arg tk__arg(signed char x) { return tk__arg_i8(x); }
static inline tk_arg tk__arg(unsigned char x) { return tk__arg_u8(x); }
static inline tk_arg tk__arg(short x) { return tk__arg_i16(x); }
static inline tk_arg tk__arg(unsigned short x) { return tk__arg_u16(x); }
static inline tk_arg tk__arg(int x) { return tk__arg_i32(x); }
static inline tk_arg tk__arg(unsigned int x) { return tk__arg_u32(x); }
static inline tk_arg tk__arg(long x) { return tk__arg_i64(x); }
static inline tk_arg tk__arg(unsigned long x) { return tk__arg_u64(x); }
static inline tk_arg tk__arg(long long x) { return tk__arg_i64(x); }
static inline tk_arg tk__arg(unsigned long long x) { return tk__arg_u64(x); }
static inline tk_arg tk__arg(float x) { return tk__arg_f32(x); }
static inline tk_arg tk__arg(double x) { return tk__arg_f64(x); }
template <typename T> static inline tk_arg tk__arg(T *p) { return tk__arg_ptr((const void *)p); }

template <typename... A>
static inline int tk__wrap(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block, A... a)
{
    const tk_arg args[sizeof...(A) ? sizeof...(A) : 1] = {tk__arg(a)...};
    return tk_wrap_launch(ctx, kernel, grid, block, (int)sizeof...(A), args);
}
#define tk_wrap(ctx, kernel, grid, block, ...) tk__wrap((ctx), (kernel), (grid), (block), __VA_ARGS__)
template <typename... A>
static inline int tk__wrap_shared(tk_ctx *ctx, const tk_kernel *kernel, tk_dim3 grid, tk_dim3 block, size_t shared,
                                  A... a)
{
    const tk_arg args[sizeof...(A) ? sizeof...(A) : 1] = {tk__arg(a)...};
    return tk_wrap_launch_shared(ctx, kernel, grid, block, shared, (int)sizeof...(A), args);
}
#define tk_wrap_shared(ctx, kernel, grid, block, shared, ...)                                                        \
    tk__wrap_shared((ctx), (kernel), (grid), (block), (shared), __VA_ARGS__)

/* tk_call and tk_call_outs in C++: the same boxing by overloading. */
static inline tk_value tk__val(tk_tensor *t) { return tk__val_tensor(t); }
static inline tk_value tk__val(const tk_tensor *t) { return tk__val_tensor(t); }
static inline tk_value tk__val(decltype(nullptr)) { return tk__val_null(0); }
static inline tk_value tk__val(bool x) { return tk__val_bool(x); }
static inline tk_value tk__val(char x) { return tk__val_int(x); }
static inline tk_value tk__val(signed char x) { return tk__val_int(x); }
static inline tk_value tk__val(unsigned char x) { return tk__val_uint(x); }
static inline tk_value tk__val(short x) { return tk__val_int(x); }
static inline tk_value tk__val(unsigned short x) { return tk__val_uint(x); }
static inline tk_value tk__val(int x) { return tk__val_int(x); }
static inline tk_value tk__val(unsigned int x) { return tk__val_uint(x); }
static inline tk_value tk__val(long x) { return tk__val_int(x); }
static inline tk_value tk__val(unsigned long x) { return tk__val_uint(x); }
static inline tk_value tk__val(long long x) { return tk__val_int(x); }
static inline tk_value tk__val(unsigned long long x) { return tk__val_uint(x); }
static inline tk_value tk__val(float x) { return tk__val_float(x); }
static inline tk_value tk__val(double x) { return tk__val_float(x); }
static inline tk_value tk__val(const char *s) { return tk__val_str(s); }
static inline tk_value tk__val(tk_value v) { return v; }

template <typename... A>
static inline tk_tensor *tk__call(tk_ctx *ctx, const char *name, const char *file, int line, A... a)
{
    const tk_value args[sizeof...(A) ? sizeof...(A) : 1] = {tk__val(a)...};
    return tk_call_at(ctx, name, file, line, (int)sizeof...(A), args);
}
template <typename... A>
static inline int tk__call_outs(tk_ctx *ctx, const char *name, const char *file, int line, tk_tensor **outs, int n,
                                A... a)
{
    const tk_value args[sizeof...(A) ? sizeof...(A) : 1] = {tk__val(a)...};
    return tk_call_outs_at(ctx, name, file, line, (int)sizeof...(A), args, n, outs);
}
#define tk_call(ctx, name, ...) tk__call((ctx), (name), __FILE__, __LINE__, __VA_ARGS__)
#define tk_call_outs(ctx, name, outs, n, ...) tk__call_outs((ctx), (name), __FILE__, __LINE__, (outs), (n), __VA_ARGS__)
#endif

#endif
