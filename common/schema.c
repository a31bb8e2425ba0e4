/* A small parser of PyTorch's op schema syntax and of op names (common/schema.h). */
#include <ctype.h>
#include <stdio.h>
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
                const char *name = p;
                if (!ident(&p))
                    FAIL("expected an argument name");
                if (out->nargs < TK_SCHEMA_MAX && name - schema <= 0xffff && p - name <= 0xff) {
                    out->name_at[out->nargs] = (unsigned short)(name - schema);
                    out->name_len[out->nargs] = (unsigned char)(p - name);
                }
                ws(&p);
                if (*p == '=') {
                    p++;
                    ws(&p);
                    if (!skip_default(&p))
                        FAIL("expected a default value");
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

const char *tk_schema_arg_name(const char *schema, const tk_schema *sc, int i, char *buf, size_t n)
{
    if (!schema || !sc || i < 0 || i >= sc->nargs || i >= TK_SCHEMA_MAX || !sc->name_len[i] || n == 0)
        return "?";
    snprintf(buf, n, "%.*s", (int)sc->name_len[i], schema + sc->name_at[i]);
    return buf;
}
