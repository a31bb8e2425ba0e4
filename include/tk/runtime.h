/* The runtime a program links (libtkrt): devices, contexts, tensors, the op registry and eager
 * calls. Packages (.tkpkg) are opened and run through sessions. No CUDA type appears here:
 * the CUDA driver is loaded with dlopen at first GPU use. */
#ifndef TK_RUNTIME_H
#define TK_RUNTIME_H

#include <stddef.h>
#include <stdint.h>
#include <tk/error.h>
#include <tk/export.h>
#include <tk/op.h>

#ifdef __cplusplus
extern "C" {
#endif
TK_API_BEGIN

#define TK_MAX_DIMS 8

typedef enum tk_device_kind { TK_DEVICE_CPU, TK_DEVICE_CUDA } tk_device_kind;

typedef struct tk_device {
    tk_device_kind kind;
    int index; /* the GPU ordinal for TK_DEVICE_CUDA, 0 for the CPU */
} tk_device;

/* "cpu", "cuda" (= cuda:0) or "cuda:N". TK_EINVAL with a message for anything else. */
int tk_device_parse(tk_device *out, const char *text);
/* "cpu" or "cuda:N" into buf (at least 16 bytes); returns buf. */
const char *tk_device_name(tk_device dev, char *buf, size_t n);

/* 0 when the CUDA driver loaded and has at least one device; otherwise TK_EDEVICE with the
 * reason ("no CUDA driver: ...") in tk_error_last(). Never aborts. */
int tk_cuda_available(void);

/* The GPU's product name ("NVIDIA H100 80GB HBM3") and the driver's CUDA version (13000 for
 * 13.0), for reports; TK_EDEVICE without a driver or for an ordinal that does not exist. */
int tk_cuda_device_info(int ordinal, char *name, size_t n, int *driver_version);

/* Element size in bytes, and the short name ("f32", "f16", "bf16", "i32", "i64"). */
size_t tk_dtype_size(tk_dtype dtype);
const char *tk_dtype_name(tk_dtype dtype);
/* Parses a short name; TK_EINVAL for an unknown one. */
int tk_dtype_parse(tk_dtype *out, const char *name);

/* --- contexts ---------------------------------------------------------------------------- */

/* A context: device, stream (its own, on a GPU), mode (eager) and the last error of calls made
 * through it. One context is used by one thread at a time; contexts of one device may run in
 * parallel from different threads. */
int tk_ctx_new(tk_ctx **out, tk_device dev);
void tk_ctx_free(tk_ctx *ctx);
tk_device tk_ctx_device(const tk_ctx *ctx);
/* Waits for everything queued on the context's stream. */
int tk_ctx_sync(tk_ctx *ctx);

/* --- tensors ----------------------------------------------------------------------------- */

/* A new contiguous tensor on dev (owned storage, uninitialized; host storage is 64-byte aligned).
 * rank 0..8, dims >= 0; TK_EINVAL for a bad shape or a byte count that overflows. A tensor on a
 * GPU needs ctx on that GPU (ctx may be NULL for the CPU) and must be freed before ctx is. */
int tk_tensor_new(tk_tensor **out, tk_ctx *ctx, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape);
/* A tensor over memory the caller owns (host memory for the CPU, a device pointer for a GPU);
 * tk_tensor_free leaves that memory alone. */
int tk_tensor_wrap(tk_tensor **out, tk_device dev, tk_dtype dtype, int rank, const int64_t *shape, void *data);
void tk_tensor_free(tk_tensor *t);

tk_device tk_tensor_device(const tk_tensor *t);
const int64_t *tk_tensor_shape(const tk_tensor *t);
/* The bytes of its elements (dtype size times element count). */
size_t tk_tensor_nbytes(const tk_tensor *t);
/* Strides in elements, one per dim. Every tensor is contiguous (row-major, nothing between the
 * elements) except the outputs a session with output views allocates (tk_session_options): one
 * the program cuts out of a larger value, e.g. logits narrowed out of padded rows, is then a
 * strided view of that value's storage. Read such a tensor through its strides, or copy it into
 * a contiguous one with tk_tensor_copy; ops and tk_session_run refuse it as an input. */
const int64_t *tk_tensor_strides(const tk_tensor *t);
int tk_tensor_is_contiguous(const tk_tensor *t);

/* Copies src into dst (same dtype and element count; any devices), on ctx's stream, and waits
 * when either side is host memory. Either may be a strided output view (then both have the
 * same shape); element order is row-major. */
int tk_tensor_copy(tk_ctx *ctx, tk_tensor *dst, const tk_tensor *src);

/* --- ops --------------------------------------------------------------------------------- */

/* The registered ops (those of the executable and of every loaded shared object). The pointer
 * stays valid while the object that defines the op is loaded. */
size_t tk_op_count(void);
const tk_op_def *tk_op_at(size_t i);
const tk_op_def *tk_op_find(const char *name);

/* Loads a shared object (dlopen) and with it the ops (and tk_add_kernels fatbins) it defines;
 * *handle for tk_ops_unload. TK_EIO with dlerror()'s words when it cannot be loaded. Unloading
 * removes them again: nothing of the object may be running or in use then. An op name defined
 * twice keeps its first definition (with a warning on stderr). */
int tk_ops_load(void **handle, const char *path);
void tk_ops_unload(void *handle);

/* Runs op `name` on ctx's device: the op's body on a GPU, its CPU fallback on the CPU. out has
 * nout slots; NULL slots are allocated on ctx's device from the op's meta function (the caller
 * frees them). The numbers of inputs and outputs must match the op's schema. */
int tk_op_run(tk_ctx *ctx, const char *name, tk_tensor *const *in, int nin, tk_tensor **out, int nout);

/* --- packages (docs/formats/tkpkg.md) ------------------------------------------------------ */

/* A package opened for running: its manifest's signature checked against the trusted keys and
 * its manifest and program checked, every entry verified against its SHA-256 before any is used,
 * the kernels each op needs present, the weights mapped once, the host object loaded last.
 * Shared by every session that runs it; thread-safe. docs/security.md says what this protects
 * against and what it does not.
 *
 * A package is a namespace: the ops, kernels, tuning tables and heuristics it brings are resolved
 * inside it, so any number of packages may be open at once, two versions of one model included,
 * each running exactly its own code; the application's own ops (built-in tk:: ops, eager use) are
 * visible to every package, a package's ops to no one else (tk_op_find does not list them). */
typedef struct tk_package tk_package;

/* Opens and verifies a .tkpkg with the default options: an unsigned package is refused, and the
 * trusted keys are those of the trust file ($TKEXPORT_TRUST_FILE, else
 * $XDG_CONFIG_HOME/tkexport/trusted_keys) and of TKEXPORT_TRUSTED_KEYS. Each failure is one line
 * naming the entry, kernel, op, key or architecture at fault: TK_ENOTFOUND (no such file),
 * TK_EFORMAT (not a package, another format or version, a signature that does not match the
 * manifest, a digest mismatch, a hostile entry, malformed JSON, a missing kernel), TK_EINVAL
 * (unsigned, or signed by a key not trusted), TK_EIO. */
int tk_package_open(tk_package **out, const char *path);

/* How tk_package_open_ex verifies a package's signature. Initialize with
 * TK_PACKAGE_OPTIONS_INIT, then set what differs from the defaults. */
#define TK_PACKAGE_OPTIONS_VERSION 1
typedef struct tk_package_options {
    unsigned version;                 /* TK_PACKAGE_OPTIONS_VERSION */
    int allow_unsigned;               /* open packages that carry no signature (explicit opt-in) */
    const char *const *trusted_keys;  /* extra trusted public keys "ed25519:BASE64", NULL-terminated, or NULL */
    int ignore_default_trust;         /* do not read the trust file nor TKEXPORT_TRUSTED_KEYS */
} tk_package_options;
#define TK_PACKAGE_OPTIONS_INIT {TK_PACKAGE_OPTIONS_VERSION, 0, NULL, 0}
/* tk_package_open with options (NULL: the defaults). A malformed trusted key, in the options, the
 * trust file (named with its line) or TKEXPORT_TRUSTED_KEYS, is TK_EINVAL; so is an options
 * version this libtkrt does not know. No environment variable allows unsigned packages: only
 * allow_unsigned does. */
int tk_package_open_ex(tk_package **out, const char *path, const tk_package_options *opts);
/* Gives up the opener's hold on a package. Sessions hold it too: the package (its host object,
 * modules and weights) goes away when the last of them is freed, so a service can swap versions
 * under load: open version 2, send new requests to it, close version 1 at once, and version 1's
 * running sessions finish undisturbed. No tk_session_new on a package after its close. */
void tk_package_close(tk_package *pkg);

/* One dimension of an input or output: static (sym NULL, value) or symbolic (sym is the
 * printed expression, "batch" or "2*batch"; min and max the range it can take). */
typedef struct tk_io_dim {
    const char *sym;
    int64_t value, min, max;
} tk_io_dim;

typedef struct tk_io_info {
    const char *name; /* inputs: the declared name; outputs: "out0", "out1"... */
    tk_dtype dtype;
    int rank;
    tk_io_dim dims[TK_MAX_DIMS];
} tk_io_info;

/* The program's name, its inputs and outputs in order, and the architectures the package holds
 * cubins for ("sm_90"...). Strings live as long as the package. */
const char *tk_package_program(const tk_package *pkg);
size_t tk_package_num_inputs(const tk_package *pkg);
size_t tk_package_num_outputs(const tk_package *pkg);
const tk_io_info *tk_package_input(const tk_package *pkg, size_t i);
const tk_io_info *tk_package_output(const tk_package *pkg, size_t i);
/* The key id and public key that signed the package, NULL for an unsigned one opened with allow_unsigned. */
const char *tk_package_signer(const tk_package *pkg);

/* A session runs a package on one device (cpu or cuda:N) with its own context and stream; the
 * package's weights are uploaded once per device and shared by the sessions on it. One session
 * is used by one thread at a time; sessions may run in parallel from different threads. On a
 * GPU, TK_EDEVICE when the device has neither a matching cubin nor PTX it can compile. */
typedef struct tk_session tk_session;
int tk_session_new(tk_session **out, tk_package *pkg, tk_device dev);
void tk_session_free(tk_session *s);

/* How a GPU session prepares for input shapes it has not run yet. A session replays a CUDA graph
 * per input-shape signature (the values of the program's symbols); a signature's first run is
 * eager while its graph is captured on a thread of the session's own. The prefill captures every
 * signature of the program's symbol space ahead of requests when the space has at most
 * max_shapes signatures, so that no request, a size never seen included, waits for planning,
 * cuBLASLt heuristics or a capture:
 *   TK_PREFILL_AUTO  once requests have brought 16 different signatures (its shapes vary);
 *                    and from tk_session_new_ex on, a warm-up: each symbol at its minimum, the
 *                    powers of two above it and its maximum (at most 256 signatures, and half
 *                    of max_shapes), whatever the space's size, so that what a size bucket's
 *                    first run does once per device (cuBLASLt's heuristic: milliseconds) is
 *                    done before requests
 *   TK_PREFILL_NOW   from tk_session_new_ex on, in the background: a service creates its
 *                    sessions at start-up and calls tk_session_wait_ready before traffic
 *   TK_PREFILL_OFF   never, no warm-up either (graphs are still captured for signatures as
 *                    they come)
 * Under traffic the capture thread waits 5 ms after a capture before the next ($TK_CAPTURE_PACE_US
 * sets another pause, 0 none; the warm-up is never paced): a capture holds the driver's locks for
 * hundreds of microseconds, and a request that needs the driver meanwhile waits for them.
 * max_shapes bounds the signatures (plans and graphs) the session keeps, the least recently used
 * going first; 0 is 1024. Each costs a few hundred bytes of host memory plus its graph (host and
 * device memory of the driver's, about 40 KB); above 4096 (and a symbol space as large), graphs of
 * the same kernels share one instantiated graph, each keeping its own grids and arguments
 * (docs/runtime.md, "Graph families", gives measured figures). CPU sessions ignore the prefill.
 * Initialize with TK_SESSION_OPTIONS_INIT. */
#define TK_SESSION_OPTIONS_VERSION 2
#define TK_SESSION_MAX_SHAPES (1u << 20)
typedef enum tk_prefill { TK_PREFILL_AUTO, TK_PREFILL_NOW, TK_PREFILL_OFF } tk_prefill;
typedef struct tk_session_options {
    unsigned version;  /* TK_SESSION_OPTIONS_VERSION */
    tk_prefill prefill;
    size_t max_shapes; /* 0: 1024; at most TK_SESSION_MAX_SHAPES */
    /* Version 2. 1: an output the program cuts out of a larger value with tk::narrow (GPT-2's
     * logits narrowed out of rows padded to a multiple of 64) is allocated, where tk_session_run
     * allocates it, as a strided view of storage the size of that value: the program computes
     * the value in place there and copies nothing (PyTorch's compiled models return such views).
     * Passing that tensor again for the same shapes keeps it so; tk_tensor_strides reads it. 0
     * (the default): every output is contiguous. */
    int output_views;
} tk_session_options;
#define TK_SESSION_OPTIONS_INIT {TK_SESSION_OPTIONS_VERSION, TK_PREFILL_AUTO, 0, 0}
/* tk_session_new with options (NULL: the defaults); TK_EINVAL for an options version this libtkrt
 * does not know or a value out of range. */
int tk_session_new_ex(tk_session **out, tk_package *pkg, tk_device dev, const tk_session_options *opts);
/* Waits until the session's prefill is over. Returns 1 when every signature of the symbol space
 * has its graph, 0 when the session has no prefill (a CPU session, graphs unavailable, a space
 * larger than max_shapes, TK_PREFILL_OFF, or AUTO not started yet: it then waits for the warm-up
 * only) or some signature could not be captured (an op that allocates or synchronizes: those run
 * eagerly), or a negative tk_error_code. */
int tk_session_wait_ready(tk_session *s);
/* The session's context, for tensors on its device (tk_tensor_new) and tk_ctx_sync. */
tk_ctx *tk_session_ctx(tk_session *s);

/* Binds the device buffers a service passes every call's inputs and outputs in: one per input and
 * output, on the session's device, of its dtype, large enough for its largest shape (every
 * symbol at its maximum); each call then passes views of its shape at the start of them (the
 * same data pointers). The session's prefill (TK_PREFILL_NOW or AUTO, a symbol space within
 * max_shapes) captures every signature's graph on those very buffers, from now on and again for
 * signatures captured before, so that a call on them, of a shape never run before included,
 * replays its graph with no staging copies; tk_session_wait_ready waits for it. Calls on other
 * tensors still run (staged graphs, or eagerly). The buffers must outlive the session or a later
 * bind. TK_EINVAL for a buffer missing, on another device, of another dtype or too small;
 * TK_EUNSUPPORTED for a CPU session or a program whose outputs are not values of their own. */
int tk_session_bind(tk_session *s, tk_tensor *const *in, size_t nin, tk_tensor *const *out, size_t nout);

/* Runs the program: the inputs are checked before anything is launched (dtype, rank, static
 * dims, symbolic dims inside their ranges and consistent across inputs; errors name the input,
 * the dim, the symbol and the range). out has nout >= tk_package_num_outputs slots: NULL slots
 * are allocated on the session's device (the caller frees them), others are written in place and
 * must have the output's dtype and shape. Inputs may be on the session's device or, for a GPU
 * session, on the CPU (copied). Returns once the work is queued on the session's stream (a CPU
 * session returns when it is done): tk_ctx_sync(tk_session_ctx(s)) before reading outputs. */
int tk_session_run(tk_session *s, tk_tensor *const *in, size_t nin, tk_tensor **out, size_t nout);

/* Per-op times of the last tk_session_run made with profiling on, for tkexport run --profile:
 * node i (program order) is nodes[i]. A profiled run is eager (host times per node); on a GPU the
 * nodes are then captured into a CUDA graph with events around each and replayed, so time_us is
 * each node's kernels with no host gaps (the eager event times when the nodes cannot be
 * captured). A node run inside the one before it (tk::linear fused with the tk::gelu or tk::add
 * after it) shows as "tk::gelu (fused into node N)" with no time. */
int tk_session_set_profiling(tk_session *s, int on);
typedef struct tk_node_profile {
    const char *op;
    double time_us;      /* on a GPU the device time between events around the node on the stream;
                            on the CPU the wall time of the node */
    double flops, bytes; /* 0 when the op does not declare them */
    double host_us;      /* the wall time the host spent dispatching the node (tk_op_run: checks,
                            meta function, launches queued), whatever the device; 0 when not
                            measured */
} tk_node_profile;
size_t tk_session_profile(const tk_session *s, const tk_node_profile **nodes);

TK_API_END
#ifdef __cplusplus
}
#endif
#endif
