/* Translation-unit inputs: where the analyzer's own headers and the CUDA toolkit are, the clang
 * arguments of a file, and compile_commands.json read through libclang (nvcc flags translated
 * or dropped, as clangd does). */
#define _GNU_SOURCE /* dladdr */
#include <clang-c/CXCompilationDatabase.h>
#include <dlfcn.h>
#include <limits.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"
#include "internal.h"
#include "strbuf.h"
#include <tk/error.h>

static int file_exists(const char *dir, const char *rel)
{
    char p[2 * PATH_MAX + 64];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    return stat(p, &st) == 0;
}

/* The first candidate folder that holds probe, as a malloc'd absolute path, or NULL. */
static char *pick_dir(const char *const *candidates, int n, const char *probe)
{
    for (int i = 0; i < n; i++) {
        if (candidates[i] && *candidates[i] && file_exists(candidates[i], probe)) {
            char *r = realpath(candidates[i], NULL);
            return r ? r : strdup(candidates[i]);
        }
    }
    return NULL;
}

/* The resource folder of the libclang in use (builtin headers, cuda_wrappers): beside the
 * library, lib/clang/<major>. libclang gives it to the front end but not to the driver, which
 * then misses include/cuda_wrappers (<new> for CUDA: CUB's placement new fails), so the analyzer
 * passes it itself. NULL when not found. */
static char *resource_dir(void)
{
    const char *env = getenv("TKEXPORT_CLANG_RESOURCE_DIR");
    if (env && *env)
        return strdup(env);
    CXString v = clang_getClangVersion();
    const char *vs = strstr(clang_getCString(v), "version ");
    int major = vs ? atoi(vs + 8) : 0;
    clang_disposeString(v);
    Dl_info info;
    char lib[PATH_MAX], dir[PATH_MAX + 32];
    if (major > 0 && dladdr((void *)clang_getClangVersion, &info) && info.dli_fname &&
        realpath(info.dli_fname, lib)) {
        char *slash = strrchr(lib, '/');
        if (slash) {
            *slash = '\0';
            snprintf(dir, sizeof(dir), "%s/clang/%d", lib, major);
            if (file_exists(dir, "include/stddef.h"))
                return realpath(dir, NULL);
        }
    }
    snprintf(dir, sizeof(dir), "/usr/lib/llvm-%d/lib/clang/%d", major, major);
    return major > 0 && file_exists(dir, "include/stddef.h") ? strdup(dir) : NULL;
}

int tk_env_init(tk_env *env)
{
    memset(env, 0, sizeof(*env));
    /* an installed tkexport finds its headers beside the executable: <prefix>/share/tkexport */
    char exe[PATH_MAX], share_inc[PATH_MAX + 32], share_shim[PATH_MAX + 32];
    share_inc[0] = share_shim[0] = '\0';
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(share_inc, sizeof(share_inc), "%s/../share/tkexport/include", exe);
            snprintf(share_shim, sizeof(share_shim), "%s/../share/tkexport/shim", exe);
        }
    }
    const char *inc[] = {getenv("TKEXPORT_INCLUDE_DIR"), share_inc, TK_SOURCE_INCLUDE_DIR};
    const char *shim[] = {getenv("TKEXPORT_SHIM_DIR"), share_shim, TK_SOURCE_SHIM_DIR};
    const char *cuda[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), TK_DEFAULT_CUDA_HOME, "/usr/local/cuda"};
    env->include_dir = pick_dir(inc, 3, "tk/op.h");
    env->shim_dir = pick_dir(shim, 3, "texture_fetch_functions.h");
    env->cuda_home = pick_dir(cuda, 4, "include/cuda.h");
    env->resource_dir = resource_dir();
    if (!env->include_dir || !env->shim_dir) {
        tk_env_release(env);
        return tk_error_set(TK_ENOTFOUND, "cannot find tkexport's own headers (tk/op.h); set TKEXPORT_INCLUDE_DIR");
    }
    return 0;
}

void tk_env_release(tk_env *env)
{
    free(env->include_dir);
    free(env->shim_dir);
    free(env->cuda_home);
    free(env->resource_dir);
    memset(env, 0, sizeof(*env));
}

void tk_tu_release(tk_tu *tu)
{
    for (int i = 0; i < tu->nargs; i++)
        free(tu->args[i]);
    free(tu->args);
    free(tu->path);
    free(tu->own_include);
    memset(tu, 0, sizeof(*tu));
}

typedef struct argv_b {
    char **v;
    int n, cap;
    int oom;
} argv_b;

static void push(argv_b *a, const char *s)
{
    if (a->oom)
        return;
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 32;
        char **v = realloc(a->v, (size_t)cap * sizeof(*v));
        if (!v) {
            a->oom = 1;
            return;
        }
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n] = strdup(s);
    if (!a->v[a->n])
        a->oom = 1;
    else
        a->n++;
}

static void pushf(argv_b *a, const char *fmt, const char *x)
{
    char buf[PATH_MAX + 64];
    snprintf(buf, sizeof(buf), fmt, x);
    push(a, buf);
}

/* CUDA 13 keeps CUB, Thrust and libcu++ in include/cccl, which nvcc searches and clang's
 * --cuda-path does not. */
static void push_cccl(argv_b *a, const tk_env *env)
{
    char dir[PATH_MAX];
    struct stat st;
    if (!env->cuda_home || snprintf(dir, sizeof(dir), "%s/include/cccl", env->cuda_home) >= (int)sizeof(dir) ||
        stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return;
    push(a, "-isystem");
    push(a, dir);
}

/* What a header's own text says of its language: an editor mode line (-*- C++ -*-, -*- cuda
 * -*-), else what its code uses: CUDA's execution space keywords, launch syntax or headers make
 * it CUDA, templates, namespaces, classes or C++ headers make it C++, and so do the headers it
 * includes with quotes; anything else is C. */
static const char *content_language(const char *path, int depth);

/* The strongest language among the headers text includes with quotes, found beside path. */
static const char *included_language(const char *path, const char *text, int depth)
{
    const char *lang = "c";
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    for (const char *p = strstr(text, "#include"); p && strcmp(lang, "cuda") != 0; p = strstr(p + 8, "#include")) {
        const char *q = p + 8;
        while (*q == ' ' || *q == '\t')
            q++;
        const char *end = *q == '"' ? strchr(q + 1, '"') : NULL;
        const char *eol = strchr(q, '\n');
        if (!end || (eol && end > eol) || end - q - 1 <= 0 || end - q - 1 >= PATH_MAX / 2)
            continue;
        char inc[2 * PATH_MAX];
        snprintf(inc, sizeof(inc), "%s/%.*s", dir, (int)(end - q - 1), q + 1);
        struct stat st;
        if (stat(inc, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        const char *l = content_language(inc, depth + 1);
        if (strcmp(l, "c") != 0)
            lang = l;
    }
    return lang;
}

const char *tk_header_language(const char *path, const char *includers)
{
    if (tk_ends_with(path, ".cuh"))
        return "cuda";
    if (includers && *includers && strcmp(includers, "c") != 0)
        return includers;
    const char *own = content_language(path, 0);
    return strcmp(own, "c") == 0 && includers && *includers ? includers : own;
}

static const char *content_language(const char *path, int depth)
{
    char *text = NULL;
    size_t len = 0;
    if (depth > 3 || tk_file_read(&text, &len, path, 64u << 20) != 0) {
        tk_error_clear();
        return "c"; /* the parse reports that it cannot be read */
    }
    const char *lang = "c";
    const char *mode = strstr(text, "-*-");
    const char *eol = mode ? strchr(mode, '\n') : NULL;
    if (mode && (size_t)(mode - text) < 4096) {
        size_t n = eol ? (size_t)(eol - mode) : strlen(mode);
        char line[256];
        snprintf(line, sizeof(line), "%.*s", (int)(n < sizeof(line) - 1 ? n : sizeof(line) - 1), mode);
        for (char *c = line; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        if (strstr(line, "cuda")) {
            free(text);
            return "cuda";
        }
        if (strstr(line, "c++")) {
            free(text);
            return "c++";
        }
    }
    /* comments say nothing about the language */
    for (char *c = text; *c; c++) {
        char *end = c[0] == '/' && c[1] == '/' ? strchr(c, '\n') : c[0] == '/' && c[1] == '*' ? strstr(c + 2, "*/") : NULL;
        if (c[0] == '/' && (c[1] == '/' || c[1] == '*')) {
            char *stop = end ? end + (c[1] == '*' ? 2 : 0) : c + strlen(c);
            memset(c, ' ', (size_t)(stop - c));
            c = stop - 1;
        }
    }
    static const char *const cuda[] = {"__global__", "__device__", "__shared__", "__host__", "<<<",
                                       "cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h", "<cub/", "<thrust/", NULL};
    static const char *const cxx[] = {"template <", "template<", "namespace ", "class ", "constexpr ", "nullptr",
                                      "static_cast<", "<vector>", "<string>", "<cstdint>", "<cstddef>",
                                      "<type_traits>", NULL};
    for (int i = 0; cuda[i] && !strcmp(lang, "c"); i++)
        if (strstr(text, cuda[i]))
            lang = "cuda";
    for (int i = 0; cxx[i] && !strcmp(lang, "c"); i++)
        if (strstr(text, cxx[i]))
            lang = "c++";
    if (strcmp(lang, "cuda") != 0) { /* a C++ header that includes a CUDA one is CUDA */
        const char *inc = included_language(path, text, depth);
        if (strcmp(inc, "c") != 0)
            lang = inc;
    }
    free(text);
    return lang;
}

int tk_tu_make(tk_tu *out, const char *abs_path, const char *lang, const char *const *compdb_args, int n_compdb,
               const tk_env *env, const char *const *extra, size_t n_extra)
{
    argv_b a = {0};
    int has_std = 0;
    for (int i = 0; i < n_compdb; i++) {
        push(&a, compdb_args[i]);
        if (strncmp(compdb_args[i], "-std=", 5) == 0 || strncmp(compdb_args[i], "--std=", 6) == 0)
            has_std = 1;
    }
    if (!lang)
        lang = tk_ends_with(abs_path, ".cu") || tk_ends_with(abs_path, ".cuh") ? "cuda"
               : tk_ends_with(abs_path, ".c") ? "c" : NULL;
    if (env->resource_dir)
        pushf(&a, "-resource-dir=%s", env->resource_dir);
    pushf(&a, "-I%s", env->include_dir);
    if (lang && strcmp(lang, "cuda") == 0) {
        push(&a, "-x");
        push(&a, "cuda");
        push(&a, "--cuda-host-only");
        push(&a, "--cuda-gpu-arch=sm_90");
        if (env->cuda_home) {
            pushf(&a, "--cuda-path=%s", env->cuda_home);
        } else {
            push(&a, "-nocudainc");
            push(&a, "-nocudalib");
        }
        /* CUDA 13 removed texture_fetch_functions.h; clang 19's CUDA wrapper still includes it */
        pushf(&a, "-I%s", env->shim_dir);
        push_cccl(&a, env);
        if (!has_std)
            push(&a, "-std=c++17");
    } else {
        if (env->cuda_home) {
            push(&a, "-isystem");
            pushf(&a, "%s/include", env->cuda_home);
        }
        if (lang && strcmp(lang, "c++") == 0) {
            push(&a, "-x");
            push(&a, "c++");
            push_cccl(&a, env);
            if (!has_std)
                push(&a, "-std=c++17");
        } else if (lang) {
            push(&a, "-x");
            push(&a, "c");
            if (!has_std)
                push(&a, "-std=gnu11");
        }
    }
    /* only errors matter to the analyzer; warnings cost time and libclang reports
       unknown-cuda-version regardless (frontend.c filters it) */
    push(&a, "-w");
    push(&a, "-Wno-unknown-cuda-version");
    for (size_t i = 0; i < n_extra; i++)
        push(&a, extra[i]);
    out->path = strdup(abs_path);
    out->own_include = strdup(env->include_dir);
    if (a.oom || !out->path || !out->own_include) {
        for (int i = 0; i < a.n; i++)
            free(a.v[i]);
        free(a.v);
        free(out->path);
        free(out->own_include);
        out->path = out->own_include = NULL;
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    out->args = a.v;
    out->nargs = a.n;
    return 0;
}

/* gcc/clang/nvcc options that take the next argument as their value. */
static int takes_value(const char *o)
{
    static const char *const names[] = {
        "-o", "-MF", "-MT", "-MQ", "-x", "-arch", "-code", "-gencode", "--generate-code",
        "-Xcompiler", "-Xptxas", "-Xlinker", "-Xnvlink", "-Xarchive", "-ccbin", "--compiler-bindir",
        "--options-file", "-optf", "-rdc", "--relocatable-device-code", "-maxrregcount",
        "--maxrregcount", "-t", "--threads", "-Xclang", "--output-file", "-odir", "-MJ", NULL};
    for (int i = 0; names[i]; i++)
        if (strcmp(o, names[i]) == 0)
            return 1;
    return 0;
}

/* Options whose value is a path, to make absolute against the entry's directory. */
static const char *path_prefix(const char *o)
{
    static const char *const p[] = {"-I", "-isystem", "-iquote", "-idirafter", "-include", NULL};
    for (int i = 0; p[i]; i++)
        if (strncmp(o, p[i], strlen(p[i])) == 0)
            return p[i];
    return NULL;
}

static void push_path_opt(argv_b *a, const char *prefix, const char *value, const char *dir)
{
    char buf[PATH_MAX];
    if (value[0] == '/' || !dir)
        snprintf(buf, sizeof(buf), "%s", value);
    else
        snprintf(buf, sizeof(buf), "%s/%s", dir, value);
    if (strcmp(prefix, "-I") == 0) {
        pushf(a, "-I%s", buf);
    } else {
        push(a, prefix);
        push(a, buf);
    }
}

/* Translates one compile command to the arguments clang needs to parse the file. */
static void translate(argv_b *a, CXCompileCommand cmd, const char *file, const char *dir)
{
    unsigned n = clang_CompileCommand_getNumArgs(cmd);
    if (n == 0)
        return;
    CXString a0 = clang_CompileCommand_getArg(cmd, 0);
    const char *slash = strrchr(clang_getCString(a0), '/');
    int nvcc = strstr(slash ? slash + 1 : clang_getCString(a0), "nvcc") != NULL;
    clang_disposeString(a0);
    for (unsigned i = 1; i < n; i++) {
        CXString s = clang_CompileCommand_getArg(cmd, i);
        const char *o = clang_getCString(s);
        const char *pp = path_prefix(o);
        char *next = NULL;
        if (takes_value(o) || (pp && strcmp(o, pp) == 0)) {
            if (i + 1 < n) {
                CXString v = clang_CompileCommand_getArg(cmd, ++i);
                next = strdup(clang_getCString(v));
                clang_disposeString(v);
            }
        }
        if (pp) {
            push_path_opt(a, pp, next ? next : o + strlen(pp), dir);
        } else if (strncmp(o, "-D", 2) == 0 || strncmp(o, "-U", 2) == 0) {
            if (strlen(o) == 2 && i + 1 < n) {
                CXString v = clang_CompileCommand_getArg(cmd, ++i);
                char buf[4096];
                snprintf(buf, sizeof(buf), "%s%s", o, clang_getCString(v));
                push(a, buf);
                clang_disposeString(v);
            } else {
                push(a, o);
            }
        } else if (strncmp(o, "-std=", 5) == 0 || strncmp(o, "--std=", 6) == 0) {
            push(a, o[1] == '-' ? o + 1 : o);
        } else if (nvcc || takes_value(o) || strcmp(o, "-c") == 0 || strncmp(o, "-M", 2) == 0 ||
                   strncmp(o, "-o", 2) == 0 || strcmp(o, file) == 0 || o[0] != '-') {
            /* nvcc-only options, output and dependency options, and the input itself */
        } else {
            push(a, o);
        }
        free(next);
        clang_disposeString(s);
    }
}

int tk_compdb_load(tk_tu **out, size_t *n_out, const char *dir, const tk_env *env,
                   const char *const *extra, size_t n_extra)
{
    *out = NULL;
    *n_out = 0;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/compile_commands.json", dir);
    if (access(path, R_OK) != 0)
        return tk_error_set(TK_ENOTFOUND, "'%s' not found (expected a build folder with compile_commands.json)", path);
    CXCompilationDatabase_Error err;
    CXCompilationDatabase db = clang_CompilationDatabase_fromDirectory(dir, &err);
    if (err != CXCompilationDatabase_NoError || !db)
        return tk_error_set(TK_EINVAL, "cannot read '%s': not a valid compilation database", path);
    CXCompileCommands cmds = clang_CompilationDatabase_getAllCompileCommands(db);
    unsigned n = cmds ? clang_CompileCommands_getSize(cmds) : 0;
    int rc = 0;
    tk_tu *tus = calloc(n ? n : 1, sizeof(*tus));
    size_t count = 0;
    if (!tus) {
        rc = tk_error_set(TK_ENOMEM, "out of memory");
        goto done;
    }
    for (unsigned i = 0; i < n; i++) {
        CXCompileCommand cmd = clang_CompileCommands_getCommand(cmds, i);
        CXString d = clang_CompileCommand_getDirectory(cmd), f = clang_CompileCommand_getFilename(cmd);
        char file[PATH_MAX * 2];
        const char *fs = clang_getCString(f);
        if (fs[0] == '/')
            snprintf(file, sizeof(file), "%s", fs);
        else
            snprintf(file, sizeof(file), "%s/%s", clang_getCString(d), fs);
        char *real = realpath(file, NULL);
        int dup = 0;
        for (size_t j = 0; real && j < count; j++)
            dup |= strcmp(tus[j].path, real) == 0;
        if (real && !dup) {
            argv_b a = {0};
            translate(&a, cmd, fs, clang_getCString(d));
            rc = a.oom ? tk_error_set(TK_ENOMEM, "out of memory")
                       : tk_tu_make(&tus[count], real, NULL, (const char *const *)a.v, a.n, env, extra, n_extra);
            for (int k = 0; k < a.n; k++)
                free(a.v[k]);
            free(a.v);
            if (rc == 0)
                count++;
        }
        free(real);
        clang_disposeString(d);
        clang_disposeString(f);
        if (rc)
            break;
    }
    if (rc) {
        for (size_t j = 0; j < count; j++)
            tk_tu_release(&tus[j]);
        free(tus);
    } else {
        *out = tus;
        *n_out = count;
    }
done:
    if (cmds)
        clang_CompileCommands_dispose(cmds);
    clang_CompilationDatabase_dispose(db);
    return rc;
}
