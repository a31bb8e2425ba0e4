/* What the analyzer's files share: translation-unit inputs, the per-file summary (a cJSON
 * document, the unit that is cached and linked) and the stages that make and use it.
 *
 * A summary records, for one file, only what its own text defines (never what it includes):
 *   {"v":SUMMARY_VERSION, "path":ABS, "diags":[{file,line,col,severity,rule,message}],
 *    "kernels":[{name,line,params:[{name,type,kind,size}],writes:[index]}], TK_KERNEL definitions
 *    "handles":[{name,line}],                                            TK_KERNEL_DECL
 *    "funcs":[{usr,name,line,static,op?,schema?,params:[names],
 *              launches:[{line,col,ecol,shared?:true,k:EXPR,kpos:{line,col,ecol},
 *                         args:[{kind,size,line,col,ecol,e?:EXPR}]}],   tk_wrap (tk_wrap_shared) sites
 *              calls:[{line,col,f:EXPR,a:[EXPR]}],                       other calls
 *              opcalls:[{line,col,name|null}],                           tk_call sites
 *              rets:[EXPR], locals:{id:[EXPR]}, raw:[{line,col,kind,kernel}],
 *              stores:[{line,col,t:EXPR,e:EXPR}],                        *p = e, s->f = e, a[i] = e
 *              escapes:[{line,v:id,into}]}],     &local kept in memory, a global, an initializer
 *    "globals":[{usr,name,line,fn:USR|null,e:EXPR}],                    initializers, assignments
 *    "idents":[name]}                 identifiers a kernel file's code uses (outside directives)
 * EXPR is a small array tree, evaluated by resolve.c:
 *   ["k",name] kernel handle      ["f",usr,name] function     ["g",usr,name] file-scope variable
 *   ["l",id,name] local variable  ["p",index] parameter       ["c",EXPR,[EXPR...],line,col] call
 *   ["u",[EXPR...]] any of        ["m",EXPR,field] member     ["i",EXPR,K?] element K (any without K)
 *   ["rec",{field:EXPR}] struct initializer   ["arr",[EXPR...],[K...]] array initializer, indices
 *   ["0"] null / not a pointer    ["x"] a value that is not a kernel    ["?",reason,line,col] unknown
 * Pointers are looked through: &x, *x and x are one EXPR, p->f is ["m",p,f], p + 1 is ["i",p,1]. */
#ifndef TK_ANALYZER_INTERNAL_H
#define TK_ANALYZER_INTERNAL_H

#include <clang-c/Index.h>
#include <cjson/cJSON.h>
#include <pthread.h>

#include "analyzer.h"
#include "map.h"
#include "schema.h"

#define TK_SUMMARY_VERSION 7

/* Where the analyzer finds its own headers, its CUDA shim folder and the CUDA toolkit. */
typedef struct tk_env {
    char *include_dir;   /* tkexport's include/ (tk/op.h, tk/kernel.h) */
    char *shim_dir;      /* holds the empty texture_fetch_functions.h */
    char *cuda_home;     /* toolkit root, NULL when none was found */
    char *resource_dir;  /* libclang's builtin headers (lib/clang/<major>), NULL when not found */
} tk_env;

int tk_env_init(tk_env *env);
void tk_env_release(tk_env *env);

/* One translation unit to summarize: an absolute path and the full clang argument list. */
typedef struct tk_tu {
    char *path;
    char **args;
    int nargs;
    char *own_include; /* tkexport's include/: its headers are never summarized */
} tk_tu;

void tk_tu_release(tk_tu *tu);

/* Clang arguments for a file: compdb_args (already translated, may be NULL), then the
 * analyzer's own (language, include paths, CUDA mode), then extra. lang: "cuda", "c++" or "c",
 * or NULL for the one the file's extension says (.c, .cu/.cuh; else clang decides). */
int tk_tu_make(tk_tu *out, const char *abs_path, const char *lang, const char *const *compdb_args, int n_compdb,
               const tk_env *env, const char *const *extra, size_t n_extra);

/* "cuda", "c++" or "c": the language a header is parsed in when no analyzed file includes it:
 * that of the files that include it (includers: the strongest of their languages, "" or NULL
 * when none is known) unless that is C and its own text says more. */
const char *tk_header_language(const char *path, const char *includers);

/* compile_commands.json in dir: one tk_tu per entry (first entry of a file wins), arguments
 * translated for clang (nvcc-only flags dropped, relative include paths made absolute). */
int tk_compdb_load(tk_tu **out, size_t *n, const char *dir, const tk_env *env,
                   const char *const *extra, size_t n_extra);

/* Parses tu with idx and returns its summary in *summary and, in *deps, the non-system headers
 * it included as an array of absolute paths. Never fails on bad source: parse failures become
 * tk-parse-error diagnostics in the summary. Returns TK_ENOMEM only. */
int tk_frontend_summarize(cJSON **summary, cJSON **deps, CXIndex idx, const tk_tu *tu,
                          struct CXUnsavedFile *unsaved, unsigned n_unsaved);

/* The summary cache, on disk, keyed by the file's content, its arguments and the analyzer and
 * clang versions; an entry also lists the headers the file included with their digests, and is
 * used only while they are unchanged. */
typedef struct tk_cache {
    char *dir;                 /* NULL: disabled */
    pthread_mutex_t lock;
    tk_map digests;            /* header path -> digest, computed once per run */
    cJSON *digest_store;       /* owns the strings in digests */
} tk_cache;

int tk_cache_init(tk_cache *c, const char *dir);
void tk_cache_release(tk_cache *c);
/* The key of tu with content (the file's bytes): 64 hex digits. */
void tk_cache_key(const tk_tu *tu, const char *content, size_t len, char key[65]);
/* Makes the digest of path that of an editor's unsaved buffer for this run. */
void tk_cache_override(tk_cache *c, const char *path, const char *contents, size_t len);
/* A cached summary (caller frees) or NULL on a miss. */
cJSON *tk_cache_get(tk_cache *c, const char *key);
/* Stores summary under key with the digests of deps and the paths that must stay absent for
 * the includes of tu (content: its bytes) and of deps to find the same files; failures to write
 * are ignored. */
void tk_cache_put(tk_cache *c, const char *key, const tk_tu *tu, const char *content, size_t len,
                  const cJSON *summary, const cJSON *deps);

/* Links the summaries (sorted by path) and resolves every op's kernels. Returns the JSON
 * document of analyzer.h in *out; with lint, its diagnostics hold every rule's findings. */
int tk_resolve(cJSON **out, cJSON *const *summaries, size_t n, int max_depth, int lint);

/* --- checks.c: the lint rules beyond the op->kernel map ------------------------------------ */

/* Schemas and op names: tk_schema_parse and tk_op_name_valid live in common/schema.h. */
/* Appends a diagnostic unless one of the same rule and message is already at that place. */
void tk_diag_add(cJSON *diags, const char *file, int line, int col, int ecol, const char *severity,
                 const char *rule, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 8, 9)))
#endif
    ;
/* tk-arg-mismatch for one launch of one resolved kernel. */
void tk_check_launch(cJSON *diags, const char *file, const cJSON *launch, const char *kernel, const cJSON *kdef);
/* tk-undeclared-mutation: the kernel writes through `param`, whose argument `arg` of a launch in
 * `file` denotes in[input] of op op_name; a finding unless its schema marks that input mutated.
 * via: the call path from the op to the launch when the launch is in a helper, else NULL. */
void tk_check_mutation(cJSON *diags, const char *file, const cJSON *arg, const char *kernel, const cJSON *param,
                       int input, const char *op_name, const char *schema, const char *via);

/* Rewrites every "file" string in the result document relative to the current directory and
 * sorts its lists. */
int tk_output_finish(cJSON *doc);

#endif
