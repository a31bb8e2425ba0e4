/* The lint checks that need more than the op->kernel map: op names, schemas (a small parser of
 * PyTorch's schema syntax), tk_wrap arguments against the kernel's parameters, and writes
 * through inputs the schema does not mark mutated. resolve.c calls them while it walks ops. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include <tk/error.h>

void tk_diag_add(cJSON *diags, const char *file, int line, int col, int ecol, const char *severity,
                 const char *rule, const char *fmt, ...)
{
    if (!diags)
        return;
    if (col <= 0)
        col = 1;
    if (ecol <= col)
        ecol = col + 1;
    /* one finding per place and rule, however many ops reach it */
    for (cJSON *d = diags->child; d; d = d->next) {
        cJSON *f = cJSON_GetObjectItemCaseSensitive(d, "file");
        if (cJSON_GetObjectItemCaseSensitive(d, "line")->valueint == line &&
            cJSON_GetObjectItemCaseSensitive(d, "column")->valueint == col &&
            strcmp(cJSON_GetObjectItemCaseSensitive(d, "rule")->valuestring, rule) == 0 &&
            strcmp(cJSON_IsString(f) ? f->valuestring : "", file ? file : "") == 0)
            return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddItemToObject(d, "file", file ? cJSON_CreateString(file) : cJSON_CreateNull());
    cJSON_AddNumberToObject(d, "line", line);
    cJSON_AddNumberToObject(d, "column", col);
    cJSON_AddNumberToObject(d, "end_line", line);
    cJSON_AddNumberToObject(d, "end_column", ecol);
    cJSON_AddStringToObject(d, "severity", severity);
    cJSON_AddStringToObject(d, "rule", rule);
    cJSON_AddStringToObject(d, "message", msg);
    cJSON_AddItemToArray(diags, d);
}

static int ident(const char **p)
{
    const char *s = *p;
    if (!isalpha((unsigned char)*s) && *s != '_')
        return 0;
    while (isalnum((unsigned char)*s) || *s == '_')
        s++;
    *p = s;
    return 1;
}

int tk_op_name_valid(const char *name)
{
    const char *p = name;
    if (!ident(&p) || strncmp(p, "::", 2) != 0)
        return 0;
    p += 2;
    if (!ident(&p))
        return 0;
    if (*p == '.') { /* an overload name, as in aten::add.Tensor */
        p++;
        if (!ident(&p))
            return 0;
    }
    return *p == '\0';
}

static void ws(const char **p)
{
    while (isspace((unsigned char)**p))
        (*p)++;
}

/* type: Ident ['(' alias ['!'] ')'] ['[' digits ']'] ['?'], e.g. Tensor(a!), int[2], Tensor? */
static int parse_type(const char **p, int *mutated)
{
    *mutated = 0;
    if (!ident(p))
        return 0;
    if (**p == '(') {
        (*p)++;
        if (!ident(p))
            return 0;
        if (**p == '!') {
            *mutated = 1;
            (*p)++;
        }
        if (**p != ')')
            return 0;
        (*p)++;
    }
    if (**p == '[') {
        (*p)++;
        while (isdigit((unsigned char)**p))
            (*p)++;
        if (**p != ']')
            return 0;
        (*p)++;
    }
    if (**p == '?')
        (*p)++;
    return 1;
}

/* A default value: anything up to a ',' or ')' outside brackets and quotes. */
static int skip_default(const char **p)
{
    int depth = 0;
    const char *s = *p;
    for (; *s; s++) {
        if (*s == '"' || *s == '\'') {
            char q = *s++;
            while (*s && *s != q)
                s++;
            if (!*s)
                return 0;
        } else if (*s == '[' || *s == '(') {
            depth++;
        } else if ((*s == ']' || *s == ')') && depth) {
            depth--;
        } else if ((*s == ',' || *s == ')') && !depth) {
            break;
        }
    }
    if (s == *p)
        return 0;
    *p = s;
    return 1;
}

int tk_schema_parse(const char *schema, tk_schema *out, char *why, size_t nwhy)
{
    memset(out, 0, sizeof(*out));
    const char *p = schema;
    int mut;
#define FAIL(msg)                                                                                  \
    do {                                                                                           \
        snprintf(why, nwhy, "%s at column %d of the schema", msg, (int)(p - schema) + 1);         \
        return -1;                                                                                 \
    } while (0)
    ws(&p);
    if (*p != '(')
        FAIL("expected '('");
    p++;
    ws(&p);
    if (*p != ')') {
        for (;;) {
            ws(&p);
            if (*p == '*') { /* keyword-only marker */
                p++;
            } else {
                if (!parse_type(&p, &mut))
                    FAIL("expected an argument type such as 'Tensor' or 'int'");
                ws(&p);
                if (!ident(&p))
                    FAIL("expected an argument name");
                ws(&p);
                if (*p == '=') {
                    p++;
                    ws(&p);
                    if (!skip_default(&p))
                        FAIL("expected a default value");
                }
                if (out->nargs < TK_SCHEMA_MAX)
                    out->mutated[out->nargs] = (unsigned char)mut;
                out->nargs++;
            }
            ws(&p);
            if (*p == ',') {
                p++;
                continue;
            }
            if (*p == ')')
                break;
            FAIL("expected ',' or ')'");
        }
    }
    p++;
    ws(&p);
    if (strncmp(p, "->", 2) != 0)
        FAIL("expected '->'");
    p += 2;
    ws(&p);
    if (*p == '(') {
        p++;
        ws(&p);
        if (*p != ')') {
            for (;;) {
                ws(&p);
                if (!parse_type(&p, &mut))
                    FAIL("expected a return type");
                ws(&p);
                ident(&p); /* an optional name */
                out->nrets++;
                ws(&p);
                if (*p == ',') {
                    p++;
                    continue;
                }
                if (*p == ')')
                    break;
                FAIL("expected ',' or ')' in the returns");
            }
        }
        p++;
    } else {
        if (!parse_type(&p, &mut))
            FAIL("expected a return type or '()'");
        out->nrets = 1;
    }
    ws(&p);
    if (*p)
        FAIL("unexpected text after the returns");
#undef FAIL
    return 0;
}

static const char *describe(const char *kind, int size)
{
    if (!strcmp(kind, "tensor"))
        return "tensor";
    if (!strcmp(kind, "ptr"))
        return "pointer";
    if (!strcmp(kind, "float"))
        return size == 8 ? "double" : size == 2 ? "half" : "float";
    if (!strcmp(kind, "int") || !strcmp(kind, "uint")) {
        static const char *const names[] = {"", "1-byte integer", "2-byte integer", "", "4-byte integer", "", "", "", "8-byte integer"};
        return size > 0 && size <= 8 && names[size][0] ? names[size] : "integer";
    }
    return "value";
}

static const char *js(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

static int ji(const cJSON *o, const char *k, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valueint : dflt;
}

void tk_check_launch(cJSON *diags, const char *file, const cJSON *launch, const char *kernel, const cJSON *kdef,
                     const char *op_name, const char *schema)
{
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(launch, "args");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(kdef, "params");
    int na = cJSON_GetArraySize(args), np = cJSON_GetArraySize(params);
    int line = ji(launch, "line", 0), col = ji(launch, "col", 1), ecol = ji(launch, "ecol", 0);
    if (na != np) {
        tk_diag_add(diags, file, line, col, ecol, "error", "tk-arg-mismatch",
                    "tk_wrap passes %d argument%s to kernel '%s', which takes %d", na, na == 1 ? "" : "s", kernel, np);
        return;
    }
    tk_schema sc;
    char why[128];
    int have_schema = schema && tk_schema_parse(schema, &sc, why, sizeof(why)) == 0;
    const cJSON *writes = cJSON_GetObjectItemCaseSensitive(kdef, "writes");
    for (int i = 0; i < na; i++) {
        const cJSON *a = cJSON_GetArrayItem(args, i), *p = cJSON_GetArrayItem(params, i);
        const char *ak = js(a, "kind"), *pk = js(p, "kind");
        int as = ji(a, "size", 0), ps = ji(p, "size", 0);
        int aline = ji(a, "line", line), acol = ji(a, "col", col), aecol = ji(a, "ecol", 0);
        int a_ptr = !strcmp(ak, "tensor") || !strcmp(ak, "ptr"), p_ptr = !strcmp(pk, "ptr");
        int a_int = !strcmp(ak, "int") || !strcmp(ak, "uint"), p_int = !strcmp(pk, "int") || !strcmp(pk, "uint");
        int a_flt = !strcmp(ak, "float"), p_flt = !strcmp(pk, "float");
        const char *bad = NULL;
        if (a_ptr != p_ptr && strcmp(pk, "other") != 0)
            bad = "kind";
        else if ((a_int && p_flt) || (a_flt && p_int))
            bad = "kind";
        else if (((a_int && p_int) || (a_flt && p_flt) || !strcmp(pk, "other")) && as != ps && as && ps)
            bad = "size";
        if (bad)
            tk_diag_add(diags, file, aline, acol, aecol, "error", "tk-arg-mismatch",
                        "argument %d of tk_wrap is a %s, but parameter '%s' of kernel '%s' is '%s'%s", i + 1,
                        describe(ak, as), js(p, "name"), kernel, js(p, "type"),
                        p_ptr && !a_ptr ? " (pass a tensor)" : "");
        /* a kernel writing through a parameter that receives an input the schema keeps constant */
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(a, "in");
        if (!have_schema || !cJSON_IsNumber(in) || in->valueint >= sc.nargs || in->valueint >= TK_SCHEMA_MAX ||
            sc.mutated[in->valueint])
            continue;
        for (const cJSON *w = writes ? writes->child : NULL; w; w = w->next) {
            if (w->valueint == i) {
                tk_diag_add(diags, file, aline, acol, aecol, "warning", "tk-undeclared-mutation",
                            "kernel '%s' writes through parameter '%s', which receives in[%d] of op '%s', but the "
                            "schema does not mark that input mutated (declare it 'Tensor(a!)')",
                            kernel, js(p, "name"), in->valueint, op_name);
                break;
            }
        }
    }
}
