/* Lint: the rule table, --checks lists and NOLINT comments that filter the analyzer's
 * diagnostics, and their renderings as compiler-style text and as SARIF 2.1.0. */
#define _XOPEN_SOURCE 700
#include <ctype.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonutil.h"
#include "fsutil.h"
#include "lint.h"
#include "map.h"
#include "sha256.h"
#include "strbuf.h"
#include <tk/error.h>

#ifndef TK_VERSION
#define TK_VERSION "0.0.0"
#endif

/* Source files larger than this are not read for NOLINT comments or source lines. */
#define MAX_SOURCE (64u << 20)

/* --- the rules ---------------------------------------------------------------------------- */

const tk_lint_rule tk_lint_rules[] = {
    {"tk-raw-launch", "RawLaunch", "error",
     "kernel launched inside an op without tk_wrap",
     "An op, or a helper function it reaches, launches a kernel with <<<>>>, cudaLaunchKernel or "
     "cuLaunchKernel (or their Ex and cooperative variants) instead of tk_wrap.",
     "Export and packaging see only launches made through tk_wrap: a raw launch is missing from the "
     "op's kernel map, so its kernel is not compiled into the package and the exported program fails "
     "or skips work at run time (PyTorch's analogue is a Triton kernel launched inside a triton_op "
     "without wrap_triton). Declare the kernel with TK_KERNEL_DECL and launch it with "
     "tk_wrap(ctx, kernel, grid, block, args...). Suppress a deliberate raw launch with "
     "// NOLINT(tk-raw-launch) on its line."},
    {"tk-unresolved-kernel", "UnresolvedKernel", "warning",
     "tk_wrap whose kernel cannot be resolved",
     "The analyzer cannot tell which kernels a tk_wrap launch can denote: the kernel expression comes "
     "from a function with no definition in the scanned sources, an extern variable never assigned in "
     "them, a parameter of a function nobody calls, a local never assigned, memory the analyzer does "
     "not follow, or a call through a pointer it cannot resolve. The message says which; a launch "
     "whose kernel set may be incomplete is reported even when some kernels were found.",
     "Kernels the analyzer does not see are not compiled into packages, so the exported op fails at "
     "run time with an unknown kernel. Make the choice visible: reach TK_KERNEL_DECL handles through "
     "locals, parameters, return values, struct fields, tables or out-parameters defined in the "
     "scanned sources, and include the files that define the helpers in the PATHs (or compile_commands.json). "
     "Suppress with // NOLINT(tk-unresolved-kernel) on the tk_wrap line when the kernels reach the "
     "package another way."},
    {"tk-depth-limit", "DepthLimit", "warning",
     "kernel resolution stopped at the depth bound",
     "Resolving an op's kernels needed more function hops than --max-depth allows (default 5); the "
     "message names the op, the last function reached and the one not entered.",
     "Kernels beyond the bound are missing from the op's map (PyTorch's triton_op analysis stops at a "
     "fixed depth the same way). Raise the bound with --max-depth N, or flatten the helper chain so "
     "that the tk_wrap sits closer to the op. Suppress with // NOLINT(tk-depth-limit) on the reported "
     "line."},
    {"tk-undefined-kernel", "UndefinedKernel", "error",
     "kernel handle with no TK_KERNEL definition",
     "An op launches a kernel handle (TK_KERNEL_DECL(name)) for which no TK_KERNEL function of that "
     "name is defined in the scanned sources.",
     "The runtime finds kernels by name in the compiled modules: a handle whose kernel is not defined "
     "(a typo, a .cu file left out, a plain __global__ function without TK_KERNEL) makes the launch "
     "fail at run time and the package incomplete. Define the kernel with TK_KERNEL in a .cu file "
     "that lint scans, or fix the handle's name. Suppress with // NOLINT(tk-undefined-kernel) on the "
     "tk_wrap line when the kernel is defined outside the scanned sources."},
    {"tk-arg-mismatch", "ArgMismatch", "error",
     "tk_wrap arguments that do not fit the kernel's parameters",
     "The arguments of a tk_wrap launch do not fit the parameters of the kernel it launches: another "
     "count, a tensor or pointer where the kernel takes a scalar (or the reverse), an integer of "
     "another width, or float against double.",
     "tk_wrap boxes each argument by its C type and the launch hands the kernel those bytes: a missing "
     "argument or a 4-byte int read as an 8-byte long long gives the kernel garbage, like a Triton "
     "kernel called with its arguments out of order. Pass exactly the kernel's parameters, tensors "
     "for pointers, and cast scalars to the parameter's type ((long long)n, (float)alpha). Suppress "
     "with // NOLINT(tk-arg-mismatch) on the argument's line."},
    {"tk-undeclared-mutation", "UndeclaredMutation", "warning",
     "kernel writes an op input that the schema does not mark mutated",
     "The kernel launched by an op writes through a pointer parameter (an assignment, an atomic, a "
     "local alias of the pointer; any element type) that receives one of the op's inputs (in[i]), "
     "directly or through helper functions, and the op's schema does not mark that argument "
     "Tensor(a!).",
     "Export and functionalization trust the schema: an input written in place but declared "
     "immutable is taken as unchanged, so a traced program may reorder, reuse or drop the write and "
     "compute wrong results silently, as a PyTorch custom op whose mutates_args misses an argument "
     "does. Mark the input mutated in the schema, as in \"(Tensor(a!) x) -> ()\", or write into an "
     "output instead. Suppress with // NOLINT(tk-undeclared-mutation) on the argument's line."},
    {"tk-duplicate-op", "DuplicateOp", "error",
     "two ops with one name",
     "Two TK_OP definitions in the scanned sources register the same op name; the finding is at the "
     "second one (in path order) and names the first.",
     "The registry keeps one op per name, so which body runs depends on load order, and export "
     "records one op's kernels under the other's name. Rename one of them; for an overload add "
     "'.name' as in 'mylib::add.Scalar'. Suppress with // NOLINT(tk-duplicate-op) on the TK_OP "
     "line."},
    {"tk-bad-op-name", "BadOpName", "error",
     "op name that is not namespace::name",
     "An op name that is not 'namespace::name' with identifier parts, optionally followed by "
     "'.overload'.",
     "Ops are keyed by qualified names, as in PyTorch's torch.ops.namespace.name: a name without a "
     "namespace, or with other characters, cannot be called through tk_call, exported or loaded "
     "next to PyTorch's operators. Use a name such as 'mylib::silu'. Suppress with "
     "// NOLINT(tk-bad-op-name) on the TK_OP line."},
    {"tk-bad-schema", "BadSchema", "error",
     "schema that does not parse, or that does not match the op's use of in and out",
     "The op's schema does not parse as PyTorch schema syntax, or the body reads in[i] or writes "
     "out[j] beyond the arguments or returns that the schema declares.",
     "The schema is the op's contract: export reads argument and return types from it, the runtime "
     "allocates one output per return and tk_call checks the input count against it, so an op whose "
     "body reads an input the schema does not declare reads past its inputs. Fix the syntax (for "
     "example \"(Tensor x, float alpha=1.0) -> Tensor\") and declare one argument per in[i] and one "
     "return per out[j]. Suppress with // NOLINT(tk-bad-schema) on the TK_OP line."},
    {"tk-bad-autotune", "BadAutotune", "error",
     "TK_AUTOTUNE declaration that cannot be tuned as written",
     "A TK_AUTOTUNE declaration lists no configuration, has a configuration without one integer per "
     "parameter, names as its key something that is not a parameter of the kernel, or names a "
     "compile-time parameter that the kernel's source never uses.",
     "tkexport compile builds the kernel's source once per configuration with -DNAME=value and the "
     "runtime picks a configuration from the key's value: a key the kernel does not take cannot "
     "select anything, a parameter the source does not use makes every variant the same kernel (the "
     "tuner then measures noise), and an empty or malformed list leaves nothing to compile. Name a "
     "kernel parameter as the key (e.g. \"n\"), use every parameter in the kernel (usually with a "
     "#ifndef NAME / #define NAME default), and give one string of integers per configuration. "
     "Suppress with // NOLINT(tk-bad-autotune) on the TK_AUTOTUNE line."},
    {"tk-parse-error", "ParseError", "error",
     "file that did not parse",
     "libclang could not parse a file; the finding carries clang's first error at its location. What "
     "clang could still build of the file is analyzed.",
     "Lint sees no more of a file than clang does: ops, kernels and launches after the error may be "
     "missing, and with them other findings. Fix the error; when the code compiles with your build, "
     "the flags are missing (pass -p BUILD_DIR for compile_commands.json, or --extra-arg -DNAME / "
     "-IDIR). Suppress with // NOLINT(tk-parse-error) on the line, or --checks=-tk-parse-error."},
};

const size_t tk_lint_nrules = sizeof(tk_lint_rules) / sizeof(tk_lint_rules[0]);

const tk_lint_rule *tk_lint_rule_find(const char *id)
{
    for (size_t i = 0; id && i < tk_lint_nrules; i++)
        if (strcmp(tk_lint_rules[i].id, id) == 0)
            return &tk_lint_rules[i];
    return NULL;
}

static int rule_index(const char *id)
{
    const tk_lint_rule *r = tk_lint_rule_find(id);
    return r ? (int)(r - tk_lint_rules) : -1;
}

/* --- --checks lists ----------------------------------------------------------------------- */

/* clang-tidy's globs: '*' matches any run of characters, everything else itself. */
static int glob_match(const char *g, size_t glen, const char *s)
{
    const char *star = NULL, *resume = NULL;
    size_t gi = 0, star_gi = 0;
    while (*s) {
        if (gi < glen && g[gi] == '*') {
            star = g;
            star_gi = ++gi;
            resume = s;
        } else if (gi < glen && g[gi] == *s) {
            gi++;
            s++;
        } else if (star) {
            gi = star_gi;
            s = ++resume;
        } else {
            return 0;
        }
    }
    while (gi < glen && g[gi] == '*')
        gi++;
    return gi == glen;
}

static int is_check_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.' || c == '*';
}

/* The next entry of a comma-separated list: [*b, *e) without surrounding blanks; returns the
 * position after it, or NULL at the end. */
static const char *next_entry(const char *p, const char **b, const char **e)
{
    if (!*p)
        return NULL;
    const char *end = strchr(p, ',');
    if (!end)
        end = p + strlen(p);
    const char *s = p, *t = end;
    while (s < t && isspace((unsigned char)*s))
        s++;
    while (t > s && isspace((unsigned char)t[-1]))
        t--;
    *b = s;
    *e = t;
    return *end ? end + 1 : end;
}

static int check_entry_error(const char *b, const char *e, const char *why)
{
    return tk_error_set(TK_EINVAL,
                        "%s '%.*s' in --checks (expected rule ids such as tk-raw-launch, globs, or -prefixed ones)",
                        why, (int)(e - b), b);
}

int tk_lint_checks_validate(const char *checks)
{
    const char *p = checks, *b, *e;
    while (p && (p = next_entry(p, &b, &e))) {
        if (b == e)
            continue;
        const char *g = *b == '-' ? b + 1 : b;
        if (g == e)
            return check_entry_error(b, e, "empty check");
        int glob = 0;
        for (const char *c = g; c < e; c++) {
            if (!is_check_char(*c))
                return check_entry_error(b, e, "malformed check");
            glob |= *c == '*';
        }
        if (glob)
            continue;
        int known = 0;
        for (size_t i = 0; i < tk_lint_nrules && !known; i++)
            known = strlen(tk_lint_rules[i].id) == (size_t)(e - g) && !strncmp(tk_lint_rules[i].id, g, (size_t)(e - g));
        if (!known)
            return check_entry_error(g, e, "unknown check");
    }
    return 0;
}

int tk_lint_rule_enabled(const char *checks, const char *rule)
{
    int on = 1;
    const char *p = checks, *b, *e;
    while (p && (p = next_entry(p, &b, &e))) {
        if (b == e)
            continue;
        int neg = *b == '-';
        if (glob_match(b + neg, (size_t)(e - b - neg), rule))
            on = !neg;
    }
    return on;
}

/* --- source files, read once per call ----------------------------------------------------- */

typedef struct src_file {
    char *key;        /* the path as the diagnostic names it */
    char *text;       /* NULL when it could not be read */
    size_t len;
    size_t *starts;   /* offset of each line's first byte */
    size_t nlines;
    int owned;        /* text was read here (not an editor buffer) */
} src_file;

typedef struct src_cache {
    src_file **files;
    size_t n;
    tk_map by_key;
    const tk_unsaved_file *unsaved;
    size_t n_unsaved;
} src_cache;

/* path made absolute against the current directory and, when it exists, canonical. */
static char *absolute(const char *path)
{
    char buf[PATH_MAX];
    if (realpath(path, buf))
        return strdup(buf);
    if (path[0] == '/')
        return strdup(path);
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof(cwd)))
        return strdup(path);
    tk_strbuf sb = TK_STRBUF_INIT;
    if (tk_strbuf_addf(&sb, "%s/%s", cwd, path)) {
        tk_strbuf_release(&sb);
        return NULL;
    }
    return tk_strbuf_detach(&sb);
}

static int index_lines(src_file *f)
{
    size_t n = 1;
    for (size_t i = 0; i < f->len; i++)
        n += f->text[i] == '\n';
    f->starts = malloc(n * sizeof(*f->starts));
    if (!f->starts)
        return TK_ENOMEM;
    f->starts[0] = 0;
    f->nlines = 1;
    for (size_t i = 0; i < f->len; i++)
        if (f->text[i] == '\n')
            f->starts[f->nlines++] = i + 1;
    if (f->len && f->text[f->len - 1] == '\n')
        f->nlines--; /* no line after the last newline */
    return 0;
}

static void src_load(src_cache *c, src_file *f)
{
    if (c->n_unsaved) {
        char *abs = absolute(f->key);
        for (size_t i = 0; abs && i < c->n_unsaved; i++) {
            char *u = absolute(c->unsaved[i].path);
            int same = u && strcmp(u, abs) == 0;
            free(u);
            if (same) {
                f->text = (char *)c->unsaved[i].contents;
                f->len = c->unsaved[i].length;
                break;
            }
        }
        free(abs);
    }
    if (!f->text) {
        if (tk_file_read(&f->text, &f->len, f->key, MAX_SOURCE) != 0) {
            tk_error_clear(); /* a file gone since the analysis: nothing to show or suppress */
            return;
        }
        f->owned = 1;
    }
    if (index_lines(f)) {
        if (f->owned)
            free(f->text);
        f->text = NULL;
    }
}

/* The file as the diagnostic names it; NULL only when out of memory. */
static src_file *src_get(src_cache *c, const char *key)
{
    src_file *f = tk_map_get(&c->by_key, key);
    if (f)
        return f;
    src_file **files = realloc(c->files, (c->n + 1) * sizeof(*files));
    if (!files)
        return NULL;
    c->files = files;
    f = calloc(1, sizeof(*f));
    if (!f || !(f->key = strdup(key))) {
        free(f);
        return NULL;
    }
    if (tk_map_put(&c->by_key, f->key, f)) {
        free(f->key);
        free(f);
        return NULL;
    }
    c->files[c->n++] = f;
    src_load(c, f);
    return f;
}

/* Line n (1-based) of f without its line break: 0, or -1 when there is no such line. */
static int src_line(const src_file *f, int n, const char **s, size_t *len)
{
    if (!f || !f->text || n < 1 || (size_t)n > f->nlines)
        return -1;
    size_t b = f->starts[n - 1], e = b;
    while (e < f->len && f->text[e] != '\n')
        e++;
    if (e > b && f->text[e - 1] == '\r')
        e--;
    *s = f->text + b;
    *len = e - b;
    return 0;
}

static void src_release(src_cache *c)
{
    for (size_t i = 0; i < c->n; i++) {
        if (c->files[i]->owned)
            free(c->files[i]->text);
        free(c->files[i]->starts);
        free(c->files[i]->key);
        free(c->files[i]);
    }
    free(c->files);
    tk_map_release(&c->by_key);
}

/* --- reading diagnostics ------------------------------------------------------------------ */

/* A diagnostic's range, completed as the analyzer's contract says: a missing end is one
 * character after the start. */
typedef struct range {
    int line, col, eline, ecol;
} range;

static range range_of(const cJSON *d)
{
    range r;
    r.line = tk_json_int(d, "line", 1);
    r.col = tk_json_int(d, "column", 1);
    if (r.line < 1)
        r.line = 1;
    if (r.col < 1)
        r.col = 1;
    r.eline = tk_json_int(d, "end_line", r.line);
    r.ecol = tk_json_int(d, "end_column", r.col + 1);
    if (r.eline < r.line || (r.eline == r.line && r.ecol <= r.col)) {
        r.eline = r.line;
        r.ecol = r.col + 1;
    }
    return r;
}

static int is_warning(const cJSON *d)
{
    const char *s = tk_json_str(d, "severity", NULL);
    return s && strcmp(s, "warning") == 0;
}

/* --- NOLINT ------------------------------------------------------------------------------- */

enum { NOLINT_SAME, NOLINT_NEXT };

/* Whether line [s, s+len) carries a marker of kind (NOLINT or NOLINTNEXTLINE) that covers rule,
 * as clang-tidy reads them: anywhere on the line, bare or with a parenthesized list of rule ids
 * or globs; an unclosed list covers every rule. */
static int nolint_covers(const char *s, size_t len, int kind, const char *rule)
{
    static const char mark[] = "NOLINT";
    const size_t ml = sizeof(mark) - 1;
    for (size_t i = 0; i + ml <= len; i++) {
        if (memcmp(s + i, mark, ml) != 0)
            continue;
        size_t j = i + ml;
        int k;
        if (len - j >= 8 && memcmp(s + j, "NEXTLINE", 8) == 0) {
            k = NOLINT_NEXT;
            j += 8;
        } else {
            k = NOLINT_SAME;
        }
        if (j < len && (isalnum((unsigned char)s[j]) || s[j] == '_'))
            continue; /* NOLINTBEGIN, NOLINTEND or some other word */
        if (k != kind)
            continue;
        if (j >= len || s[j] != '(')
            return 1;
        const char *close = memchr(s + j, ')', len - j);
        if (!close)
            return 1;
        const char *p = s + j + 1;
        while (p < close) {
            const char *c = memchr(p, ',', (size_t)(close - p));
            if (!c)
                c = close;
            const char *b = p, *e = c;
            while (b < e && isspace((unsigned char)*b))
                b++;
            while (e > b && isspace((unsigned char)e[-1]))
                e--;
            if (e > b && glob_match(b, (size_t)(e - b), rule))
                return 1;
            p = c + 1;
        }
    }
    return 0;
}

static int suppressed(src_cache *c, const cJSON *d, int *oom)
{
    const char *file = tk_json_str(d, "file", NULL), *rule = tk_json_str(d, "rule", NULL);
    if (!file)
        return 0;
    src_file *f = src_get(c, file);
    if (!f) {
        *oom = 1;
        return 0;
    }
    int line = range_of(d).line;
    const char *s;
    size_t len;
    if (src_line(f, line, &s, &len) == 0 && nolint_covers(s, len, NOLINT_SAME, rule ? rule : ""))
        return 1;
    if (src_line(f, line - 1, &s, &len) == 0 && nolint_covers(s, len, NOLINT_NEXT, rule ? rule : ""))
        return 1;
    return 0;
}

int tk_lint_filter_unsaved(cJSON *doc, const char *checks, const tk_unsaved_file *unsaved, size_t n_unsaved)
{
    if (!cJSON_IsObject(doc))
        return tk_error_set(TK_EINVAL, "lint: the analysis document is not a JSON object");
    int rc = tk_lint_checks_validate(checks);
    if (rc)
        return rc;
    cJSON *diags = cJSON_GetObjectItemCaseSensitive(doc, "diagnostics");
    if (!cJSON_IsArray(diags))
        return 0;
    src_cache c;
    memset(&c, 0, sizeof(c));
    c.unsaved = unsaved;
    c.n_unsaved = n_unsaved;
    int oom = 0;
    cJSON *d = diags->child;
    while (d && !oom) {
        cJSON *next = d->next;
        const char *rule = tk_json_str(d, "rule", NULL);
        if ((checks && !tk_lint_rule_enabled(checks, rule ? rule : "")) || suppressed(&c, d, &oom))
            cJSON_Delete(cJSON_DetachItemViaPointer(diags, d));
        d = next;
    }
    src_release(&c);
    return oom ? tk_error_set(TK_ENOMEM, "out of memory reading sources for NOLINT comments") : 0;
}

int tk_lint_filter(cJSON *doc, const char *checks)
{
    return tk_lint_filter_unsaved(doc, checks, NULL, 0);
}

/* --- counts and exit status --------------------------------------------------------------- */

void tk_lint_count(const cJSON *doc, int *errors, int *warnings)
{
    int e = 0, w = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(doc, "diagnostics"))
    {
        if (is_warning(d))
            w++;
        else
            e++;
    }
    if (errors)
        *errors = e;
    if (warnings)
        *warnings = w;
}

int tk_lint_exit_status(const cJSON *doc, int werror)
{
    int e, w;
    tk_lint_count(doc, &e, &w);
    return e || (werror && w) ? 1 : 0;
}

/* --- text --------------------------------------------------------------------------------- */

/* clang's colors (clang/lib/Frontend/TextDiagnostic.cpp): bold text, bold red errors, bold
 * magenta warnings, bold green carets. */
#define C_RESET "\033[0m"
#define C_BOLD "\033[1m"
#define C_ERROR "\033[0;1;31m"
#define C_WARNING "\033[0;1;35m"
#define C_CARET "\033[0;1;32m"

static int utf8_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* Whether a source line can be shown as it is: no control bytes but tabs (a UTF-16 file's
 * NULs would go to the terminal raw). */
static int printable(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 && s[i] != '\t' && s[i] != '\r')
            return 0;
    return 1;
}

/* The caret line under [col, ecol) of line s: the columns before it as blanks (tabs kept, so
 * the caret lines up whatever the tab width), '^' under the first character, '~' under the
 * rest; one mark per character, not per byte of UTF-8. */
static int caret_line(tk_strbuf *sb, const char *s, size_t len, int col, int ecol)
{
    size_t b = (size_t)col - 1, e = (size_t)ecol - 1;
    if (b > len)
        b = len;
    if (e > len)
        e = len;
    int rc = 0;
    for (size_t i = 0; i < b && !rc; i++)
        if (!utf8_cont((unsigned char)s[i]))
            rc = tk_strbuf_add(sb, s[i] == '\t' ? "\t" : " ", 1);
    if (!rc)
        rc = tk_strbuf_add(sb, "^", 1);
    for (size_t i = b + 1; i < e && !rc; i++)
        if (!utf8_cont((unsigned char)s[i]))
            rc = tk_strbuf_add(sb, "~", 1);
    return rc;
}

static int render_text(tk_strbuf *sb, src_cache *c, const cJSON *d, int color)
{
    const char *file = tk_json_str(d, "file", NULL), *rule = tk_json_str(d, "rule", NULL), *msg = tk_json_str(d, "message", NULL);
    int warn = is_warning(d);
    range r = range_of(d);
    int rc = 0;
    if (color)
        rc |= tk_strbuf_adds(sb, C_BOLD);
    if (file)
        rc |= tk_strbuf_addf(sb, "%s:%d:%d: ", file, r.line, r.col);
    else
        rc |= tk_strbuf_adds(sb, "tkexport: ");
    if (color)
        rc |= tk_strbuf_adds(sb, warn ? C_WARNING : C_ERROR);
    rc |= tk_strbuf_adds(sb, warn ? "warning: " : "error: ");
    if (color)
        rc |= tk_strbuf_adds(sb, C_RESET C_BOLD);
    rc |= tk_strbuf_adds(sb, msg ? msg : "");
    if (rule)
        rc |= tk_strbuf_addf(sb, " [%s]", rule);
    if (color)
        rc |= tk_strbuf_adds(sb, C_RESET);
    rc |= tk_strbuf_adds(sb, "\n");
    const char *s;
    size_t len;
    src_file *f = file ? src_get(c, file) : NULL;
    if ((file && !f) || rc)
        return tk_error_set(TK_ENOMEM, "out of memory rendering the lint findings");
    if (!f || src_line(f, r.line, &s, &len) != 0 || !printable(s, len))
        return 0;
    rc |= tk_strbuf_add(sb, s, len);
    rc |= tk_strbuf_adds(sb, "\n");
    if (color)
        rc |= tk_strbuf_adds(sb, C_CARET);
    /* a range that goes on to later lines is underlined to the end of this one */
    rc |= caret_line(sb, s, len, r.col, r.eline == r.line ? r.ecol : (int)len + 1);
    if (color)
        rc |= tk_strbuf_adds(sb, C_RESET);
    rc |= tk_strbuf_adds(sb, "\n");
    return rc ? tk_error_set(TK_ENOMEM, "out of memory rendering the lint findings") : 0;
}

int tk_lint_write_text(const cJSON *doc, FILE *out, int color)
{
    src_cache c;
    memset(&c, 0, sizeof(c));
    tk_strbuf sb = TK_STRBUF_INIT;
    int rc = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(doc, "diagnostics"))
    {
        sb.len = 0;
        if ((rc = render_text(&sb, &c, d, color)))
            break;
        if (fwrite(sb.buf, 1, sb.len, out) != sb.len) {
            rc = tk_error_set(TK_EIO, "cannot write the lint findings");
            break;
        }
    }
    if (!rc && fflush(out) != 0)
        rc = tk_error_set(TK_EIO, "cannot write the lint findings");
    tk_strbuf_release(&sb);
    src_release(&c);
    return rc;
}

int tk_lint_write_summary(const cJSON *doc, FILE *f)
{
    int e, w;
    tk_lint_count(doc, &e, &w);
    if (!e && !w)
        return 0;
    /* clang's wording and order: "3 warnings and 1 error generated." */
    int n;
    if (w && e)
        n = fprintf(f, "%d warning%s and %d error%s generated.\n", w, w == 1 ? "" : "s", e, e == 1 ? "" : "s");
    else if (w)
        n = fprintf(f, "%d warning%s generated.\n", w, w == 1 ? "" : "s");
    else
        n = fprintf(f, "%d error%s generated.\n", e, e == 1 ? "" : "s");
    return n < 0 ? tk_error_set(TK_EIO, "cannot write the lint summary") : 0;
}

/* --- SARIF -------------------------------------------------------------------------------- */

/* The UTF-16 column (1-based) of byte column col of line s: a character outside the BMP (four
 * bytes of UTF-8) takes two code units; bytes past the line's end count one each. */
static int utf16_col(const char *s, size_t len, int col)
{
    size_t b = (size_t)col - 1;
    int units = 0;
    for (size_t i = 0; i < b; i++) {
        unsigned char ch = i < len ? (unsigned char)s[i] : 'x';
        if (i < len && utf8_cont(ch))
            continue;
        units += ch >= 0xF0 && ch < 0xF8 ? 2 : 1;
    }
    return units + 1;
}

/* A relative path as a URI reference: '/' separators, everything but RFC 3986's unreserved
 * characters percent-encoded. */
static int uri_encode(tk_strbuf *sb, const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (const unsigned char *p = (const unsigned char *)path; *p && !rc; p++) {
        unsigned char ch = *p == '\\' ? '/' : *p;
        if (isalnum(ch) || strchr("-._~/", ch)) {
            rc = tk_strbuf_add(sb, &ch, 1);
        } else {
            char esc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            rc = tk_strbuf_add(sb, esc, 3);
        }
    }
    return rc;
}

static cJSON *text_obj(const char *text)
{
    cJSON *o = cJSON_CreateObject();
    if (o && !cJSON_AddStringToObject(o, "text", text)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *sarif_rules(void)
{
    cJSON *rules = cJSON_CreateArray();
    tk_strbuf uri = TK_STRBUF_INIT;
    for (size_t i = 0; rules && i < tk_lint_nrules; i++) {
        const tk_lint_rule *r = &tk_lint_rules[i];
        cJSON *o = cJSON_CreateObject();
        cJSON *conf = cJSON_CreateObject();
        uri.len = 0;
        int ok = o && conf && !tk_strbuf_addf(&uri, "%s#%s", TK_LINT_INFO_URI, r->id);
        ok = ok && cJSON_AddItemToArray(rules, o);
        if (!ok) {
            cJSON_Delete(o);
            cJSON_Delete(conf);
            cJSON_Delete(rules);
            rules = NULL;
            break;
        }
        cJSON_AddStringToObject(o, "id", r->id);
        cJSON_AddStringToObject(o, "name", r->name);
        cJSON_AddItemToObject(o, "shortDescription", text_obj(r->short_desc));
        cJSON_AddItemToObject(o, "fullDescription", text_obj(r->full_desc));
        cJSON_AddStringToObject(conf, "level", r->severity);
        cJSON_AddItemToObject(o, "defaultConfiguration", conf);
        cJSON_AddItemToObject(o, "help", text_obj(r->help));
        cJSON_AddStringToObject(o, "helpUri", uri.buf);
    }
    tk_strbuf_release(&uri);
    return rules;
}

/* How many results so far had this rule, file and line text: the fingerprint's occurrence
 * index, so two identical lines in one file keep distinct fingerprints. */
typedef struct occurrences {
    tk_map seen; /* hex digest of (rule, file, text) -> count, as (void *)(uintptr_t) */
    char **keys;
    size_t n;
} occurrences;

static int occurrence(occurrences *o, const char *digest, unsigned *index)
{
    uintptr_t count = (uintptr_t)tk_map_get(&o->seen, digest);
    if (!count) {
        char **keys = realloc(o->keys, (o->n + 1) * sizeof(*keys));
        if (!keys)
            return TK_ENOMEM;
        o->keys = keys;
        if (!(o->keys[o->n] = strdup(digest)))
            return TK_ENOMEM;
        digest = o->keys[o->n++];
    }
    *index = (unsigned)count;
    return tk_map_put(&o->seen, digest, (void *)(count + 1));
}

static int sarif_result(cJSON *results, src_cache *c, occurrences *occ, const cJSON *d)
{
    const char *file = tk_json_str(d, "file", NULL), *rule = tk_json_str(d, "rule", NULL), *msg = tk_json_str(d, "message", NULL);
    range r = range_of(d);
    int idx = rule_index(rule);
    tk_strbuf sb = TK_STRBUF_INIT;
    int rc = 0;
    cJSON *res = cJSON_CreateObject();
    if (!res || !cJSON_AddItemToArray(results, res)) {
        cJSON_Delete(res);
        return TK_ENOMEM;
    }
    cJSON_AddStringToObject(res, "ruleId", rule ? rule : "tk-unknown");
    if (idx >= 0)
        cJSON_AddNumberToObject(res, "ruleIndex", idx);
    cJSON_AddStringToObject(res, "level", is_warning(d) ? "warning" : "error");
    cJSON_AddItemToObject(res, "message", text_obj(msg ? msg : ""));
    if (!file)
        goto done; /* nowhere to point: a result without a location */

    src_file *f = src_get(c, file);
    if (!f) {
        rc = TK_ENOMEM;
        goto done;
    }
    const char *s = NULL, *es = NULL;
    size_t len = 0, elen = 0;
    int have = src_line(f, r.line, &s, &len) == 0;
    int ehave = src_line(f, r.eline, &es, &elen) == 0;

    cJSON *loc = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(res, "locations"), loc);
    cJSON *phys = cJSON_AddObjectToObject(loc, "physicalLocation");
    cJSON *art = cJSON_AddObjectToObject(phys, "artifactLocation");
    if (file[0] == '/') {
        rc |= tk_strbuf_adds(&sb, "file://");
        rc |= uri_encode(&sb, file);
        cJSON_AddStringToObject(art, "uri", sb.buf ? sb.buf : "");
    } else {
        rc |= uri_encode(&sb, file);
        cJSON_AddStringToObject(art, "uri", sb.buf ? sb.buf : "");
        cJSON_AddStringToObject(art, "uriBaseId", "%SRCROOT%");
    }
    cJSON *reg = cJSON_AddObjectToObject(phys, "region");
    cJSON_AddNumberToObject(reg, "startLine", r.line);
    cJSON_AddNumberToObject(reg, "startColumn", have ? utf16_col(s, len, r.col) : r.col);
    cJSON_AddNumberToObject(reg, "endLine", r.eline);
    cJSON_AddNumberToObject(reg, "endColumn", ehave ? utf16_col(es, elen, r.ecol) : r.ecol);

    /* The fingerprint: the line's text rather than its number, so that edits above the finding
     * do not make code scanning see a new alert. A line that cannot be read falls back to the
     * message. */
    const char *t = have ? s : msg ? msg : "";
    size_t tl = have ? len : strlen(t);
    while (tl && isspace((unsigned char)*t)) {
        t++;
        tl--;
    }
    while (tl && isspace((unsigned char)t[tl - 1]))
        tl--;
    tk_sha256 h;
    uint8_t dg[32];
    char hex[65];
    tk_sha256_init(&h);
    tk_sha256_update(&h, rule ? rule : "", rule ? strlen(rule) + 1 : 1);
    tk_sha256_update(&h, file, strlen(file) + 1);
    tk_sha256_update(&h, t, tl);
    tk_sha256_final(&h, dg);
    tk_sha256_to_hex(dg, hex);
    unsigned index = 0;
    if (occurrence(occ, hex, &index)) {
        rc = TK_ENOMEM;
        goto done;
    }
    sb.len = 0;
    rc |= tk_strbuf_addf(&sb, "%s:%u", hex, index);
    if (!rc) {
        tk_sha256_hex(sb.buf, sb.len, hex);
        cJSON_AddStringToObject(cJSON_AddObjectToObject(res, "partialFingerprints"), "primaryLocationLineHash", hex);
    }
done:
    tk_strbuf_release(&sb);
    return rc ? TK_ENOMEM : 0;
}

int tk_lint_to_sarif(cJSON **out, const cJSON *doc)
{
    *out = NULL;
    src_cache c;
    memset(&c, 0, sizeof(c));
    occurrences occ;
    memset(&occ, 0, sizeof(occ));
    int rc = 0;
    cJSON *log = cJSON_CreateObject();
    if (!log)
        return tk_error_set(TK_ENOMEM, "out of memory");
    cJSON_AddStringToObject(log, "$schema", "https://json.schemastore.org/sarif-2.1.0.json");
    cJSON_AddStringToObject(log, "version", "2.1.0");
    cJSON *run = cJSON_CreateObject();
    cJSON_AddItemToArray(cJSON_AddArrayToObject(log, "runs"), run);
    cJSON *driver = cJSON_AddObjectToObject(cJSON_AddObjectToObject(run, "tool"), "driver");
    cJSON_AddStringToObject(driver, "name", "tkexport");
    cJSON_AddStringToObject(driver, "version", TK_VERSION);
    cJSON_AddStringToObject(driver, "informationUri", TK_LINT_INFO_URI);
    cJSON *rules = sarif_rules();
    if (!rules || !cJSON_AddItemToObject(driver, "rules", rules)) {
        cJSON_Delete(rules);
        rc = TK_ENOMEM;
        goto done;
    }
    /* Our columns count UTF-16 code units (utf16_col), the kind GitHub and editors use. */
    cJSON_AddStringToObject(run, "columnKind", "utf16CodeUnits");
    cJSON *results = cJSON_AddArrayToObject(run, "results");
    if (!results) {
        rc = TK_ENOMEM;
        goto done;
    }
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(doc, "diagnostics"))
    {
        if ((rc = sarif_result(results, &c, &occ, d)))
            break;
    }
done:
    src_release(&c);
    for (size_t i = 0; i < occ.n; i++)
        free(occ.keys[i]);
    free(occ.keys);
    tk_map_release(&occ.seen);
    if (rc) {
        cJSON_Delete(log);
        return tk_error_set(TK_ENOMEM, "out of memory rendering SARIF");
    }
    *out = log;
    return 0;
}
