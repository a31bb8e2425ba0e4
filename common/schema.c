/* A small parser of PyTorch's op schema syntax and of op names (common/schema.h). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema.h"

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

/* type: Ident ['(' alias ['!'] ')'] ['[' digits ']'] ['?'], e.g. Tensor(a!), int[2], Tensor?;
 * *kind as tk_schema_kind */
static int parse_type(const char **p, int *mutated, int *kind)
{
    *mutated = 0;
    const char *t = *p;
    if (!ident(p))
        return 0;
    size_t tlen = (size_t)(*p - t);
    int list = 0, opt = 0;
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
        list = 1;
        while (isdigit((unsigned char)**p))
            (*p)++;
        if (**p != ']')
            return 0;
        (*p)++;
    }
    if (**p == '?') {
        opt = 1;
        (*p)++;
    }
#define IS(name) (tlen == sizeof(name) - 1 && !strncmp(t, name, tlen))
    if (IS("Tensor"))
        *kind = list ? TK_SCHEMA_OTHER : opt ? TK_SCHEMA_TENSOR_OPT : TK_SCHEMA_TENSOR;
    else if (opt)
        *kind = TK_SCHEMA_OTHER;
    else if (IS("int") || IS("SymInt"))
        *kind = list ? TK_SCHEMA_INTS : TK_SCHEMA_INT;
    else if (list)
        *kind = TK_SCHEMA_OTHER;
    else if (IS("float"))
        *kind = TK_SCHEMA_FLOAT;
    else if (IS("bool"))
        *kind = TK_SCHEMA_BOOL;
    else if (IS("str"))
        *kind = TK_SCHEMA_STR;
    else
        *kind = TK_SCHEMA_OTHER;
#undef IS
    return 1;
}

const char *tk_schema_kind_name(int kind)
{
    static const char *const names[] = {"Tensor", "Tensor?", "int", "float", "bool", "str", "int[]", "other"};
    return kind >= 0 && kind <= TK_SCHEMA_OTHER ? names[kind] : "?";
}

/* An integer literal, all of [s, e): 0 on success. */
static int int_literal(const char *s, const char *e, int64_t *out)
{
    char buf[32];
    size_t n = (size_t)(e - s);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (*end || errno)
        return -1;
    *out = v;
    return 0;
}

int tk_schema_literal(int kind, const char *text, size_t len, int64_t *i, double *f, const char **s, size_t *slen,
                      int64_t *ints, int cap, int *n, char *why, size_t nwhy)
{
    const char *e = text + len;
    while (text < e && isspace((unsigned char)*text))
        text++;
    while (e > text && isspace((unsigned char)e[-1]))
        e--;
    len = (size_t)(e - text);
#define NOPE(what)                                                                                  \
    do {                                                                                            \
        snprintf(why, nwhy, "default '%.*s' is not %s", (int)len, text, what);                     \
        return -1;                                                                                  \
    } while (0)
    switch (kind) {
    case TK_SCHEMA_TENSOR:
    case TK_SCHEMA_TENSOR_OPT:
        if (len != 4 || strncmp(text, "None", 4))
            NOPE("None (a tensor's only default)");
        return 0;
    case TK_SCHEMA_INT:
        if (int_literal(text, e, i))
            NOPE("an integer");
        return 0;
    case TK_SCHEMA_FLOAT: {
        char buf[64];
        if (len == 0 || len >= sizeof buf)
            NOPE("a number");
        memcpy(buf, text, len);
        buf[len] = '\0';
        char *end;
        errno = 0;
        *f = strtod(buf, &end);
        if (*end || errno || !isfinite(*f))
            NOPE("a finite number");
        return 0;
    }
    case TK_SCHEMA_BOOL:
        if (len == 4 && !strncmp(text, "True", 4))
            *i = 1;
        else if (len == 5 && !strncmp(text, "False", 5))
            *i = 0;
        else
            NOPE("True or False");
        return 0;
    case TK_SCHEMA_STR:
        if (len < 2 || (text[0] != '"' && text[0] != '\'') || e[-1] != text[0] || memchr(text + 1, '\\', len - 2))
            NOPE("a quoted string without escapes");
        *s = text + 1;
        *slen = len - 2;
        return 0;
    case TK_SCHEMA_INTS: {
        if (len < 2 || text[0] != '[' || e[-1] != ']')
            NOPE("a list of integers such as [0, 1]");
        const char *p = text + 1, *end = e - 1;
        *n = 0;
        while (p < end && isspace((unsigned char)*p))
            p++;
        while (p < end) {
            const char *q = p;
            while (q < end && *q != ',')
                q++;
            const char *a = p, *b = q;
            while (b > a && isspace((unsigned char)b[-1]))
                b--;
            int64_t v;
            if (int_literal(a, b, &v))
                NOPE("a list of integers such as [0, 1]");
            if (*n >= cap)
                NOPE("a list this short (too many integers)");
            ints[(*n)++] = v;
            p = q < end ? q + 1 : q;
            while (p < end && isspace((unsigned char)*p))
                p++;
        }
        return 0;
    }
    default:
        return 0; /* other types: not read */
    }
#undef NOPE
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
                int kind;
                if (!parse_type(&p, &mut, &kind))
                    FAIL("expected an argument type such as 'Tensor' or 'int'");
                ws(&p);
                const char *name = p;
                if (!ident(&p))
                    FAIL("expected an argument name");
                if (out->nargs < TK_SCHEMA_MAX) {
                    out->kind[out->nargs] = (unsigned char)kind;
                    if (name - schema <= 0xffff && p - name <= 0xff) {
                        out->name_at[out->nargs] = (unsigned short)(name - schema);
                        out->name_len[out->nargs] = (unsigned char)(p - name);
                    }
                }
                ws(&p);
                if (*p == '=') {
                    p++;
                    ws(&p);
                    const char *d = p;
                    if (!skip_default(&p))
                        FAIL("expected a default value");
                    if (out->nargs < TK_SCHEMA_MAX && kind != TK_SCHEMA_OTHER) {
                        int64_t iv, ints[TK_SCHEMA_MAX];
                        double fv;
                        const char *sv;
                        size_t slen;
                        int n;
                        char lit[160];
                        if (d - schema > 0xffff || p - d > 0xff) {
                            p = d;
                            FAIL("a default too long or too far into the schema");
                        }
                        if (tk_schema_literal(kind, d, (size_t)(p - d), &iv, &fv, &sv, &slen, ints, TK_SCHEMA_MAX, &n,
                                              lit, sizeof lit)) {
                            snprintf(why, nwhy, "%s (argument '%.*s', %s) at column %d of the schema", lit,
                                     (int)out->name_len[out->nargs], schema + out->name_at[out->nargs],
                                     tk_schema_kind_name(kind), (int)(d - schema) + 1);
                            return -1;
                        }
                        out->def_at[out->nargs] = (unsigned short)(d - schema);
                        out->def_len[out->nargs] = (unsigned char)(p - d);
                    }
                } else {
                    out->nrequired = out->nargs + 1;
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
                int rkind;
                if (!parse_type(&p, &mut, &rkind))
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
        int rkind;
        if (!parse_type(&p, &mut, &rkind))
            FAIL("expected a return type or '()'");
        out->nrets = 1;
    }
    ws(&p);
    if (*p)
        FAIL("unexpected text after the returns");
#undef FAIL
    return 0;
}

const char *tk_schema_arg_name(const char *schema, const tk_schema *sc, int i, char *buf, size_t n)
{
    if (!schema || !sc || i < 0 || i >= sc->nargs || i >= TK_SCHEMA_MAX || !sc->name_len[i] || n == 0)
        return "?";
    snprintf(buf, n, "%.*s", (int)sc->name_len[i], schema + sc->name_at[i]);
    return buf;
}
