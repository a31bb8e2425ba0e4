/* The on-disk summary cache: <dir>/analyzer/<key[0..1]>/<key>.json holds
 * {"deps":[[header, sha256]...], "summary":{...}}. The key covers the file's bytes, its
 * arguments and the analyzer and libclang versions; the deps cover the headers it includes, so
 * an edited header invalidates every file that includes it (ccache's "direct mode"). */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "internal.h"
#include <tk/error.h>
#include "sha256.h"

#define MAX_SOURCE_SIZE (64u << 20)

int tk_cache_init(tk_cache *c, const char *dir)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    c->digest_store = cJSON_CreateArray();
    if (!dir)
        return 0;
    char sub[PATH_MAX];
    snprintf(sub, sizeof(sub), "%s/analyzer", dir);
    if (tk_mkdirs(sub) != 0)
        return 0; /* an unwritable cache is no cache, not an error */
    c->dir = strdup(sub);
    return 0;
}

void tk_cache_release(tk_cache *c)
{
    free(c->dir);
    tk_map_release(&c->digests);
    cJSON_Delete(c->digest_store);
    pthread_mutex_destroy(&c->lock);
    memset(c, 0, sizeof(*c));
}

void tk_cache_key(const tk_tu *tu, const char *content, size_t len, char key[65])
{
    tk_sha256 s;
    uint8_t d[32];
    tk_sha256_init(&s);
    CXString v = clang_getClangVersion();
    const char *vs = clang_getCString(v);
    char head[64];
    snprintf(head, sizeof(head), "tkexport-analyzer %s summary %d", TK_VERSION, TK_SUMMARY_VERSION);
    tk_sha256_update(&s, head, strlen(head) + 1);
    tk_sha256_update(&s, vs, strlen(vs) + 1);
    clang_disposeString(v);
    tk_sha256_update(&s, tu->path, strlen(tu->path) + 1);
    for (int i = 0; i < tu->nargs; i++)
        tk_sha256_update(&s, tu->args[i], strlen(tu->args[i]) + 1);
    tk_sha256_update(&s, content, len);
    tk_sha256_final(&s, d);
    tk_sha256_to_hex(d, key);
}

/* The digest of a header, computed once per run; "" when it cannot be read. */
static const char *dep_digest(tk_cache *c, const char *path)
{
    pthread_mutex_lock(&c->lock);
    const char *known = tk_map_get(&c->digests, path);
    pthread_mutex_unlock(&c->lock);
    if (known)
        return known;
    char *buf = NULL;
    size_t len = 0;
    char hex[65] = "";
    if (tk_file_read(&buf, &len, path, MAX_SOURCE_SIZE) == 0)
        tk_sha256_hex(buf, len, hex);
    free(buf);
    pthread_mutex_lock(&c->lock);
    known = tk_map_get(&c->digests, path);
    if (!known) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(path));
        cJSON_AddItemToArray(pair, cJSON_CreateString(hex));
        cJSON_AddItemToArray(c->digest_store, pair);
        known = cJSON_GetArrayItem(pair, 1)->valuestring;
        tk_map_put(&c->digests, cJSON_GetArrayItem(pair, 0)->valuestring, (void *)known);
    }
    pthread_mutex_unlock(&c->lock);
    return known;
}

void tk_cache_override(tk_cache *c, const char *path, const char *contents, size_t len)
{
    char hex[65];
    tk_sha256_hex(contents, len, hex);
    pthread_mutex_lock(&c->lock);
    cJSON *pair = cJSON_CreateArray();
    cJSON_AddItemToArray(pair, cJSON_CreateString(path));
    cJSON_AddItemToArray(pair, cJSON_CreateString(hex));
    cJSON_AddItemToArray(c->digest_store, pair);
    tk_map_put(&c->digests, cJSON_GetArrayItem(pair, 0)->valuestring, cJSON_GetArrayItem(pair, 1)->valuestring);
    pthread_mutex_unlock(&c->lock);
}

static void entry_path(const tk_cache *c, const char *key, char *out, size_t n)
{
    snprintf(out, n, "%s/%.2s/%s.json", c->dir, key, key);
}

cJSON *tk_cache_get(tk_cache *c, const char *key)
{
    if (!c->dir)
        return NULL;
    char path[PATH_MAX];
    entry_path(c, key, path, sizeof(path));
    char *text = NULL;
    if (tk_file_read(&text, NULL, path, MAX_SOURCE_SIZE) != 0) {
        tk_error_clear();
        return NULL;
    }
    cJSON *entry = cJSON_Parse(text);
    free(text);
    cJSON *deps = cJSON_GetObjectItemCaseSensitive(entry, "deps");
    cJSON *summary = cJSON_DetachItemFromObjectCaseSensitive(entry, "summary");
    int ok = cJSON_IsArray(deps) && cJSON_IsObject(summary);
    for (cJSON *d = ok ? deps->child : NULL; d && ok; d = d->next) {
        cJSON *p = cJSON_GetArrayItem(d, 0), *h = cJSON_GetArrayItem(d, 1);
        ok = cJSON_IsString(p) && cJSON_IsString(h) && strcmp(dep_digest(c, p->valuestring), h->valuestring) == 0;
    }
    cJSON_Delete(entry);
    if (!ok) {
        cJSON_Delete(summary);
        return NULL;
    }
    return summary;
}

void tk_cache_put(tk_cache *c, const char *key, const cJSON *summary, const cJSON *deps)
{
    if (!c->dir)
        return;
    char path[PATH_MAX], sub[PATH_MAX];
    snprintf(sub, sizeof(sub), "%s/%.2s", c->dir, key);
    if (tk_mkdirs(sub) != 0) {
        tk_error_clear();
        return;
    }
    entry_path(c, key, path, sizeof(path));
    cJSON *entry = cJSON_CreateObject();
    cJSON *dl = cJSON_AddArrayToObject(entry, "deps");
    for (const cJSON *d = deps ? deps->child : NULL; d; d = d->next) {
        cJSON *pair = cJSON_CreateArray();
        cJSON_AddItemToArray(pair, cJSON_CreateString(d->valuestring));
        cJSON_AddItemToArray(pair, cJSON_CreateString(dep_digest(c, d->valuestring)));
        cJSON_AddItemToArray(dl, pair);
    }
    cJSON_AddItemReferenceToObject(entry, "summary", (cJSON *)summary);
    char *text = cJSON_PrintUnformatted(entry);
    cJSON_Delete(entry);
    if (text && tk_file_write_atomic(path, text, strlen(text)) != 0)
        tk_error_clear();
    free(text);
}
