/* The lint checks that need more than the op->kernel map: tk_wrap arguments against the
 * kernel's parameters, and writes through inputs the schema (parsed by common/schema.c) does
 * not mark mutated. resolve.c calls them while it walks ops. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "jsonutil.h"
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
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* one finding per place, rule and message, however many ops reach it; two ops that one
     * X-macro line expands to share a place but not a message, and both are reported */
    for (cJSON *d = diags->child; d; d = d->next) {
        cJSON *f = cJSON_GetObjectItemCaseSensitive(d, "file");
        if (cJSON_GetObjectItemCaseSensitive(d, "line")->valueint == line &&
            cJSON_GetObjectItemCaseSensitive(d, "column")->valueint == col &&
            strcmp(cJSON_GetObjectItemCaseSensitive(d, "rule")->valuestring, rule) == 0 &&
            strcmp(cJSON_GetObjectItemCaseSensitive(d, "message")->valuestring, msg) == 0 &&
            strcmp(cJSON_IsString(f) ? f->valuestring : "", file ? file : "") == 0)
            return;
    }
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

/* "a" or "an" before one of describe's words, by how it is read: "an 8-byte integer", "an integer". */
static const char *article(const char *word)
{
    return word[0] == '8' || word[0] == 'i' || word[0] == 'a' || word[0] == 'e' || word[0] == 'o' || word[0] == 'u'
               ? "an"
               : "a";
}

void tk_check_launch(cJSON *diags, const char *file, const cJSON *launch, const char *kernel, const cJSON *kdef)
{
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(launch, "args");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(kdef, "params");
    int na = cJSON_GetArraySize(args), np = cJSON_GetArraySize(params);
    int line = tk_json_int(launch, "line", 0), col = tk_json_int(launch, "col", 1), ecol = tk_json_int(launch, "ecol", 0);
    int shared = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(launch, "shared")); /* tk_wrap_shared */
    const char *wrap = shared ? "tk_wrap_shared" : "tk_wrap";
    if (na != np) {
        tk_diag_add(diags, file, line, col, ecol, "error", "tk-arg-mismatch",
                    "%s passes %d argument%s to kernel '%s', which takes %d", wrap, na, na == 1 ? "" : "s", kernel, np);
        return;
    }
    for (int i = 0; i < na; i++) {
        const cJSON *a = cJSON_GetArrayItem(args, i), *p = cJSON_GetArrayItem(params, i);
        const char *ak = tk_json_str(a, "kind", ""), *pk = tk_json_str(p, "kind", "");
        int as = tk_json_int(a, "size", 0), ps = tk_json_int(p, "size", 0);
        int aline = tk_json_int(a, "line", line), acol = tk_json_int(a, "col", col), aecol = tk_json_int(a, "ecol", 0);
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
        /* numbered as the user counts the wrap's arguments: ctx, kernel, grid and block (and
         * tk_wrap_shared's bytes) come first */
        const char *what = describe(ak, as);
        if (bad)
            tk_diag_add(diags, file, aline, acol, aecol, "error", "tk-arg-mismatch",
                        "%s's argument %d (the kernel's argument %d) is %s %s, but parameter '%s' of kernel '%s' "
                        "is '%s'%s",
                        wrap, i + 5 + shared, i + 1, article(what), what, tk_json_str(p, "name", ""), kernel,
                        tk_json_str(p, "type", ""),
                        p_ptr && !a_ptr ? " (pass a tensor)" : "");
    }
}

void tk_check_mutation(cJSON *diags, const char *file, const cJSON *arg, const char *kernel, const cJSON *param,
                       int input, const char *op_name, const char *schema, const char *via)
{
    tk_schema sc;
    char why[128];
    if (!schema || tk_schema_parse(schema, &sc, why, sizeof(why)) != 0 || input < 0 || input >= sc.nargs ||
        input >= TK_SCHEMA_MAX || sc.mutated[input])
        return;
    tk_diag_add(diags, file, tk_json_int(arg, "line", 0), tk_json_int(arg, "col", 1), tk_json_int(arg, "ecol", 0),
                "warning", "tk-undeclared-mutation",
                "kernel '%s' writes through parameter '%s', which receives in[%d] of op '%s'%s%s%s, but the schema "
                "does not mark that input mutated (declare it 'Tensor(a!)')",
                kernel, tk_json_str(param, "name", ""), input, op_name, via ? " (passed along " : "", via ? via : "",
                via ? ")" : "");
}
