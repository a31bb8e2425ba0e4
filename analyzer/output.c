/* Output of the analysis: the JSON document made deterministic (sorted lists, paths relative
 * to the current directory) and the text form for people. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "jsonutil.h"
#include "fsutil.h"
#include "internal.h"
#include <tk/error.h>

static void relativize(cJSON *item)
{
    for (cJSON *c = item ? item->child : NULL; c; c = c->next) {
        if (c->string && strcmp(c->string, "file") == 0 && cJSON_IsString(c)) {
            char *rel = tk_path_relative_to_cwd(c->valuestring);
            if (rel) {
                cJSON_SetValuestring(c, rel);
                free(rel);
            }
        } else if (cJSON_IsArray(c) || cJSON_IsObject(c)) {
            relativize(c);
        }
    }
}

/* Sort keys: name, file, line, column, then the remaining text fields. */
static int compare(const void *pa, const void *pb)
{
    const cJSON *a = *(const cJSON *const *)pa, *b = *(const cJSON *const *)pb;
    int r = strcmp(tk_json_str(a, "name", ""), tk_json_str(b, "name", ""));
    if (!r)
        r = strcmp(tk_json_str(a, "file", ""), tk_json_str(b, "file", ""));
    if (!r)
        r = tk_json_int(a, "line", 0) - tk_json_int(b, "line", 0);
    if (!r)
        r = tk_json_int(a, "column", 0) - tk_json_int(b, "column", 0);
    if (!r)
        r = strcmp(tk_json_str(a, "reason", ""), tk_json_str(b, "reason", ""));
    if (!r)
        r = strcmp(tk_json_str(a, "message", ""), tk_json_str(b, "message", ""));
    return r;
}

static int sort_array(cJSON *arr)
{
    int n = cJSON_GetArraySize(arr);
    if (n < 2)
        return 0;
    cJSON **items = malloc((size_t)n * sizeof(*items));
    if (!items)
        return tk_error_set(TK_ENOMEM, "out of memory");
    int i = 0;
    for (cJSON *c = arr->child; c; c = c->next)
        items[i++] = c;
    qsort(items, (size_t)n, sizeof(*items), compare);
    arr->child = items[0];
    for (i = 0; i < n; i++) {
        items[i]->prev = i ? items[i - 1] : items[n - 1]; /* cJSON keeps child->prev = last */
        items[i]->next = i + 1 < n ? items[i + 1] : NULL;
    }
    free(items);
    return 0;
}

int tk_output_finish(cJSON *doc)
{
    relativize(doc);
    int rc = 0;
    cJSON *op;
    cJSON_ArrayForEach(op, cJSON_GetObjectItemCaseSensitive(doc, "ops"))
    {
        rc |= sort_array(cJSON_GetObjectItemCaseSensitive(op, "kernels"));
        rc |= sort_array(cJSON_GetObjectItemCaseSensitive(op, "unresolved"));
        rc |= sort_array(cJSON_GetObjectItemCaseSensitive(op, "reached"));
    }
    rc |= sort_array(cJSON_GetObjectItemCaseSensitive(doc, "ops"));
    rc |= sort_array(cJSON_GetObjectItemCaseSensitive(doc, "kernels"));
    rc |= sort_array(cJSON_GetObjectItemCaseSensitive(doc, "diagnostics"));
    return rc ? TK_ENOMEM : 0;
}
