/* The AOT stage: a .tkprog compiled into a .tkpkg (docs/formats/tkpkg.md). The kernels of the
 * program's source closure become fatbins (nvcc, in parallel, cached by the digest of their
 * inputs), its host code one shared object (the system C compiler), and both are packed with
 * the program and its weights into a reproducible, signed zip by runtime/pkgfile.c. Needs no libclang: it reads .tkprog files
 * through libtkrt. Used by `tkexport compile`. */
#ifndef TK_AOTI_H
#define TK_AOTI_H

#include <stddef.h>

#include <tk/op.h>

#include "progmodel.h"
#include "sign.h"

#define TK_AOTI_MAX_ARCHS 16

typedef struct tk_aoti_options {
    const char *archs[TK_AOTI_MAX_ARCHS]; /* "sm_90"...; none: the GPUs present, else sm_90 */
    size_t narchs;
    int jobs;              /* concurrent compiler processes; <= 0: the number of processors */
    const char *cache_dir; /* NULL: tk_default_cache_dir()/aoti */
    int no_cache;
    int progress; /* a progress line on stderr */
    int autotune; /* measure the TK_AUTOTUNE configurations on the GPU (--autotune) */
    const tk_sign_key *sign_key; /* signs the manifest (docs/security.md); NULL: an unsigned package */
} tk_aoti_options;

/* What a compile did, for the CLI's summary line. */
typedef struct tk_aoti_stats {
    size_t kernel_sources, fatbins, kernels_cached; /* kernel sources, their fatbins (one per tuning
                                                       configuration), how many from the cache */
    int host, host_cached;                 /* a host object was made, from the cache */
    char archs[128];                       /* "sm_80 sm_90" */
    size_t package_bytes;
    size_t tuned, tune_cached; /* kernels measured, and how many from the tuning cache */
    char tune_note[256];       /* why nothing was measured, when --autotune could not measure */
} tk_aoti_stats;

/* "sm_90", "sm_90a", "sm_100f": TK_EINVAL with the one-line message of docs/formats/tkpkg.md
 * for anything else. Checked again against the list nvcc itself reports when it runs. */
int tk_aoti_check_arch(const char *arch);

/* Compiles the .tkprog at in into the .tkpkg at out, written through a temporary file and a
 * rename (a failure leaves out as it was). Compiler messages go to stderr as the compilers
 * print them. Returns 0 or a negative tk_error_code with a one-line message: TK_ENOTFOUND for a
 * missing compiler, TK_EINVAL for an input that does not compile. */
int tk_aoti_compile(const char *in, const char *out, const tk_aoti_options *opts, tk_aoti_stats *stats);

/* --- internals shared by the files of aoti/ ---------------------------------------------------------- */

/* The compilers: path and identification (the output of --version, for cache keys). */
typedef struct tk_toolchain {
    char *nvcc, *nvcc_version, *nvcc_release; /* release: "Cuda compilation tools, release 13.0, V13.0.88" */
    char *nvcc_archs;                         /* `nvcc --list-gpu-code`: "sm_75 sm_80 ..." */
    char *cc, *cc_version, *cc_line;          /* cc_line: the first line of --version */
} tk_toolchain;

/* Finds nvcc (TKEXPORT_NVCC, CUDA_HOME/bin, /usr/local/cuda/bin, PATH) and asks its version. */
int tk_toolchain_nvcc(tk_toolchain *tc);
/* Finds the C compiler ($CC, else cc on PATH) and asks its version. */
int tk_toolchain_cc(tk_toolchain *tc);
void tk_toolchain_release(tk_toolchain *tc);

/* One compiler process: argv run in cwd, its stdout and stderr collected in log. */
typedef struct tk_job {
    char **argv; /* NULL-terminated, owned */
    const char *cwd;
    const char *label; /* "examples/mlp/silu.cu", for progress and messages */
    int status;        /* exit status once run; -1 when it could not start */
    char *log;         /* what it printed (malloc'd) */
} tk_job;

/* Runs the jobs, at most jobs at a time, with a progress line when asked. Returns 0 once all
 * have run (each job's status says how it went), or an error when one could not be started. */
int tk_jobs_run(tk_job *jobs, size_t n, int parallel, int progress);

/* --- autotuning (aoti/tune.c) ------------------------------------------------------------- */


/* One measured key bucket: the key the op computed, each configuration's median time (us,
 * negative when it failed to run) and the winner. */
typedef struct tk_aoti_tune_row {
    int bucket;
    int64_t key;
    int winner;
    double times_us[TK_TUNE_MAX_CONFIGS];
} tk_aoti_tune_row;

/* A TK_AUTOTUNE declaration of a kernel the program launches, read from the host sources, and
 * what tuning found. */
typedef struct tk_aoti_tune {
    char *kernel, *key, *file;
    int line;
    int nparams, nconfigs;
    char *params[TK_TUNE_MAX_PARAMS];
    int values[TK_TUNE_MAX_CONFIGS][TK_TUNE_MAX_PARAMS];
    const char *source; /* the .cu defining the kernel */
    char *hparam;       /* TK_HEURISTIC's parameter, or NULL */
    int nh;             /* its values (1 without a heuristic): variant v is config v / nh, value v % nh */
    int hvalues[TK_TUNE_MAX_CONFIGS];
    int measured, cached;
    char device[128], driver[32];
    size_t nrows;
    tk_aoti_tune_row rows[TK_TUNE_BUCKETS];
} tk_aoti_tune;

/* The TK_AUTOTUNE declarations program.json records for the kernels of m (see docs/autotune.md). A
 * program exported before they were recorded whose sources use TK_AUTOTUNE is TK_EFORMAT. */
int tk_aoti_find_tunes(const tk_program_model *m, tk_aoti_tune **out, size_t *n);
void tk_aoti_tunes_free(tk_aoti_tune *t, size_t n);

/* A compiled piece the tuner loads: a fatbin (config >= 0: the variant index, "@cN") or the host
 * object (config -1). */
typedef struct tk_aoti_blob {
    const char *entry;
    const unsigned char *bytes;
    size_t len;
    int config;
} tk_aoti_blob;

/* Measures every configuration of each tune on the first GPU at sizes spread over the program's
 * symbol ranges, loading the compiled blobs into this process; fills rows and winners. Results
 * are cached in cache_dir (NULL: none) by device, driver, the blobs' digests and the
 * declaration. Without a usable GPU returns TK_EDEVICE with the reason and measures nothing. */
int tk_aoti_measure(const tk_program_model *m, tk_aoti_tune *tunes, size_t ntunes, const tk_aoti_blob *blobs,
                    size_t nblobs, const char *cache_dir, int progress);

/* Runs argv and collects its standard output (stderr discarded); TK_ENOTFOUND when it cannot run. */
int tk_run_capture(char *const *argv, char **out);

#endif
