/* The .tkpkg file (docs/formats/tkpkg.md): reading and verifying one, for the runtime's
 * tk_package_open and for tkexport inspect. Reading loads nothing (no host object, no module):
 * it parses manifest.json, checks every entry's size and SHA-256 against it, refuses anything
 * hostile, and parses program.json into a program model. */
#ifndef TK_PKGFILE_H
#define TK_PKGFILE_H

#include <stddef.h>
#include <stdint.h>

#include <tk/op.h>

#include "progmodel.h"

#define TK_TKPKG_FORMAT "tkpkg"
#define TK_TKPKG_VERSION 1

/* Bounds a reader enforces before allocating anything a file declares. */
#define TK_TKPKG_MAX_ENTRIES 4096
#define TK_TKPKG_MAX_JSON (16u << 20)         /* manifest.json, program.json */
#define TK_TKPKG_MAX_ENTRY (UINT64_C(1) << 36) /* 64 GiB: any single entry */

/* An entry of the archive, verified: data holds its size bytes, owned by the file (malloc'd, or
 * for a stored entry of a file read with tk_pkgfile_read, inside its read-only mapping). */
typedef struct tk_pkg_entry {
    char *path;
    uint64_t size;
    char sha256[65];
    unsigned char *data;
    int mapped; /* data lies in the file's mapping */
} tk_pkg_entry;

/* A kernel the program's ops launch, and the fatbin entry holding it. */
typedef struct tk_pkg_kernel {
    char *name;
    char *fatbin; /* "kernels/examples/mlp/silu.fatbin" */
    char *source; /* "examples/mlp/silu.cu" */
} tk_pkg_kernel;

typedef struct tk_pkg_op {
    char *name;
    int builtin;
    size_t nkernels;
    char **kernels; /* names, each in the file's kernel table */
} tk_pkg_op;

/* One measured key bucket of a tuned kernel. */
typedef struct tk_pkg_tune_row {
    int bucket;
    int64_t key;
    int winner;
    double times_us[TK_TUNE_MAX_CONFIGS]; /* negative: the configuration could not run */
} tk_pkg_tune_row;

/* A tuned kernel (manifest "tuning"): its declaration, the fatbin of each compiled variant
 * (fatbins[0] the default; the others named "...@cN.fatbin"), and what measuring found. */
typedef struct tk_pkg_tune {
    char *kernel, *key;
    int nparams, nconfigs;
    char *params[TK_TUNE_MAX_PARAMS];
    int values[TK_TUNE_MAX_CONFIGS][TK_TUNE_MAX_PARAMS];
    char *hparam; /* the TK_HEURISTIC parameter, or NULL */
    int nh;       /* its values (1 without one) */
    int hvalues[TK_TUNE_MAX_CONFIGS];
    size_t nfatbins;
    char *fatbins[TK_TUNE_MAX_CONFIGS]; /* variant v: configuration v / nh, heuristic value v % nh */
    int measured;
    char *device, *driver;
    size_t nrows;
    tk_pkg_tune_row *rows;
    /* the configuration per bucket: the winner of the nearest measured bucket (the smaller one on
     * a tie), 0 everywhere when nothing was measured */
    signed char table[TK_TUNE_BUCKETS];
} tk_pkg_tune;

typedef struct tk_pkgfile {
    char *origin;   /* "'mlp.tkpkg'", for messages */
    char *manifest_json; /* manifest.json as stored */
    char *tkexport; /* the version that wrote it */
    char *program_name;
    size_t narchs;
    char **archs; /* "sm_90"..., sorted */
    char *ptx;    /* "compute_90": PTX embedded in every fatbin, or NULL */
    char *nvcc;   /* compiler identification lines, or NULL */
    char *cc;
    char *host;   /* the host object's entry path, or NULL when no op has host code */
    size_t nkernels;
    tk_pkg_kernel *kernels; /* sorted by name */
    size_t nops;
    tk_pkg_op *ops; /* sorted by name */
    size_t nentries;
    tk_pkg_entry *entries; /* sorted by path; manifest.json itself is not one of them */
    size_t ntunes;
    tk_pkg_tune *tunes;
    tk_program_model *program; /* program.json, parsed and checked */
    void *map; /* tk_pkgfile_read's mapping of the file (stored entries are read in place) */
    size_t map_len;
} tk_pkgfile;

/* Reads a package from path or memory: the archive's entries must be exactly manifest.json and
 * the entries it lists, each of its declared size and SHA-256 (every digest is checked before
 * the call returns), with safe relative names; program.json must parse, its op table must match
 * the manifest's, and every op's kernels must be in a fatbin entry. Returns 0 and a new file, or
 * a negative tk_error_code with a one-line message naming the file and the entry at fault. */
/* tk_pkgfile_read maps the file read-only (read into memory where it cannot be mapped) and uses
 * its stored entries, weights and fatbins, in place: they are read once, by the digest check, and
 * the file must not be truncated in place while it is open (tkexport replaces files by rename,
 * which leaves an open mapping alone). tk_pkgfile_read_mem copies what it keeps. */
int tk_pkgfile_read(tk_pkgfile **out, const char *path);
int tk_pkgfile_read_mem(tk_pkgfile **out, const void *data, size_t len, const char *origin);
void tk_pkgfile_free(tk_pkgfile *f);

/* The entry with this path, or NULL. */
const tk_pkg_entry *tk_pkgfile_entry(const tk_pkgfile *f, const char *path);
const tk_pkg_kernel *tk_pkgfile_kernel(const tk_pkgfile *f, const char *name);

#endif
