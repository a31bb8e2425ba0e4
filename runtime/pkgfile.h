/* The .tkpkg file (docs/formats/tkpkg.md, docs/security.md): the one module that knows the
 * format. It writes packages (tkexport compile, the tests) and reads and verifies them (the
 * runtime's tk_package_open, tkexport inspect), through one set of structs. Reading loads nothing
 * (no host object, no module): it checks the manifest's signature against the trusted keys,
 * parses manifest.json, checks every entry's size and SHA-256 against it, refuses anything
 * hostile, and parses program.json into a program model. */
#ifndef TK_PKGFILE_H
#define TK_PKGFILE_H

#include <stddef.h>
#include <stdint.h>

#include <tk/op.h>
#include <tk/runtime.h>

#include "progmodel.h"
#include "sign.h"

#define TK_TKPKG_FORMAT "tkpkg"
#define TK_TKPKG_VERSION 2
#define TK_TKPKG_MANIFEST "manifest.json"
#define TK_TKPKG_SIGNATURE "manifest.sig"
/* manifest.sig: {"format": "tkpkg-signature", "version": 1, "algorithm": "ed25519", ...} */
#define TK_TKPKG_SIG_FORMAT "tkpkg-signature"
#define TK_TKPKG_SIG_VERSION 1
/* What is signed: these bytes, then manifest.json's exact bytes. The prefix keeps a signature of
 * a manifest from passing for a signature of anything else the key signs. */
#define TK_TKPKG_SIG_DOMAIN "tkpkg manifest v2\n"

/* Bounds a reader enforces before allocating anything a file declares. */
#define TK_TKPKG_MAX_ENTRIES 4096
#define TK_TKPKG_MAX_JSON (16u << 20)         /* manifest.json, program.json */
#define TK_TKPKG_MAX_ENTRY (UINT64_C(1) << 36) /* 64 GiB: any single entry */
#define TK_TKPKG_MAX_SIG 4096                  /* manifest.sig */
/* Entries larger than this carry a SHA-256 per chunk of this size as well ("chunks"), which
 * readers verify in parallel instead of the whole entry's digest. */
#define TK_TKPKG_CHUNK (UINT64_C(64) << 20)

/* An entry of the archive, verified: data holds its size bytes, owned by the file (malloc'd, or
 * for a stored entry of a file read with tk_pkgfile_read, inside its read-only mapping). For
 * tk_pkgfile_write: path, data and size are what to write (size and sha256 are computed). */
typedef struct tk_pkg_entry {
    char *path;
    uint64_t size;
    char sha256[65];
    unsigned char *data;
    int mapped; /* data lies in the file's mapping */
    /* read: the manifest's per-chunk digests (NULL when it has none); the writer ignores them
     * and makes its own for every entry larger than TK_TKPKG_CHUNK */
    uint64_t chunk_size;
    size_t nchunks;
    char (*chunk_sha256)[65];
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

/* A package: what tk_pkgfile_read found, or what tk_pkgfile_write is to write (filled by the
 * caller, who owns everything it points to; only the fields marked "read" are ignored). */
typedef struct tk_pkgfile {
    char *origin;   /* read: "'mlp.tkpkg'", for messages */
    char *manifest_json; /* read: manifest.json as stored */
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
    tk_pkg_entry *entries; /* sorted by path; manifest.json and manifest.sig are not among them */
    size_t ntunes;
    tk_pkg_tune *tunes;
    tk_program_model *program; /* read: program.json, parsed and checked */
    void *map; /* read: tk_pkgfile_read's mapping of the file (stored entries are read in place) */
    size_t map_len;
    /* read: who signed manifest.json (NULL for an unsigned package), and whether the keys the
     * reader trusts include that key (always 1 unless read with report_only) */
    char *signer;            /* "ed25519:BASE64 (key id 0123456789abcdef)" */
    char signer_key[TK_SIGN_TEXT_MAX]; /* "ed25519:BASE64", "" when unsigned */
    char signer_id[TK_SIGN_ID_MAX];    /* "0123456789abcdef", "" when unsigned */
    int trusted;
} tk_pkgfile;

/* How a reader treats the signature. opts as tk_package_open_ex takes them (NULL: the defaults:
 * an unsigned package refused; the trust file and TKEXPORT_TRUSTED_KEYS trusted). With
 * report_only (tkexport inspect), an unsigned package or one signed by a key the reader does not
 * trust is read anyway, and f->signer and f->trusted say how it stands. A signature that does
 * not match the manifest, or a malformed manifest.sig, is refused either way. */
typedef struct tk_pkgfile_trust {
    const tk_package_options *opts;
    int report_only;
} tk_pkgfile_trust;

/* Reads a package from path or memory. First the signature: manifest.sig's Ed25519 signature of
 * manifest.json's bytes must verify, and its key be trusted (trust; NULL: the defaults), before
 * anything of the manifest is parsed or any other entry read; a package without manifest.sig is
 * refused unless unsigned packages are allowed. Then the archive's entries must be exactly
 * manifest.json, manifest.sig (when signed) and the entries the manifest lists, each of its
 * declared size and SHA-256 (every digest is checked before the call returns), with safe relative
 * names; program.json must parse, its op table must match the manifest's, and every op's kernels
 * must be in a fatbin entry. Returns 0 and a new file, or a negative tk_error_code (TK_EFORMAT for
 * anything wrong with the file, a signature that does not verify included; TK_EINVAL for a package
 * refused by the trust policy: unsigned, or a key not trusted) with a one-line message naming the
 * file and the entry or key at fault. */
/* tk_pkgfile_read maps the file read-only (read into memory where it cannot be mapped) and uses
 * its stored entries, weights and fatbins, in place: they are read once, by the digest check, and
 * the file must not be truncated in place while it is open (tkexport replaces files by rename,
 * which leaves an open mapping alone). tk_pkgfile_read_mem copies what it keeps. */
int tk_pkgfile_read(tk_pkgfile **out, const char *path, const tk_pkgfile_trust *trust);
int tk_pkgfile_read_mem(tk_pkgfile **out, const void *data, size_t len, const char *origin,
                        const tk_pkgfile_trust *trust);
/* Frees a file tk_pkgfile_read made (not one a caller filled for tk_pkgfile_write). */
void tk_pkgfile_free(tk_pkgfile *f);

/* The package f describes as zip bytes (*data malloc'd): f's entries (stored or deflated as
 * docs/formats/tkpkg.md says), manifest.json made from f's fields with every entry's size and
 * SHA-256, and, unless key is NULL, manifest.sig signing it. The same f and key give the same
 * bytes (Ed25519 signatures are deterministic). TK_EINVAL for an entry name that is not a safe
 * relative path, is reserved or given twice. */
int tk_pkgfile_write_mem(void **data, size_t *len, const tk_pkgfile *f, const tk_sign_key *key);
/* tk_pkgfile_write_mem into path, through a temporary file and a rename; *written (may be NULL)
 * is the file's size. */
int tk_pkgfile_write(const char *path, const tk_pkgfile *f, const tk_sign_key *key, size_t *written);

/* The entry with this path, or NULL. */
const tk_pkg_entry *tk_pkgfile_entry(const tk_pkgfile *f, const char *path);
const tk_pkg_kernel *tk_pkgfile_kernel(const tk_pkgfile *f, const char *name);

#endif
