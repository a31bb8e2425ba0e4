/* The on-disk summary cache: <dir>/analyzer/<key[0..1]>/<key>.json holds
 * {"deps":[[header, sha256]...], "absent":[path...], "summary":{...}}. The key covers the
 * file's bytes, its arguments and the analyzer and libclang versions; the deps cover the headers
 * it includes, so an edited header invalidates every file that includes it (ccache's "direct
 * mode"); "absent" lists, for every #include and __has_include of the file and its headers, the
 * places searched before the one that answered (or all of them, when none did), so a new header
 * that would shadow an included one, or satisfy a __has_include, invalidates the entry too. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "internal.h"
#include <tk/error.h>
#include "sha256.h"

#define MAX_SOURCE_SIZE (64u << 20)

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

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
    cJSON *absent = cJSON_GetObjectItemCaseSensitive(entry, "absent");
    cJSON *summary = cJSON_DetachItemFromObjectCaseSensitive(entry, "summary");
    int ok = cJSON_IsArray(deps) && cJSON_IsArray(absent) && cJSON_IsObject(summary);
    for (cJSON *d = ok ? deps->child : NULL; d && ok; d = d->next) {
        cJSON *p = cJSON_GetArrayItem(d, 0), *h = cJSON_GetArrayItem(d, 1);
        ok = cJSON_IsString(p) && cJSON_IsString(h) && strcmp(dep_digest(c, p->valuestring), h->valuestring) == 0;
    }
    for (cJSON *a = ok ? absent->child : NULL; a && ok; a = a->next)
        ok = cJSON_IsString(a) && !exists(a->valuestring); /* a new file there: another header */
    cJSON_Delete(entry);
    if (!ok) {
        cJSON_Delete(summary);
        return NULL;
    }
    return summary;
}

/* --- absent paths ------------------------------------------------------------------------ */

typedef struct search {
    const char *quote[64], *angle[64]; /* -iquote dirs; then -I, -isystem, system, -idirafter */
    int nquote, nangle;
    char storage[8][PATH_MAX];         /* dirs made from --cuda-path */
    int nstorage;
} search;

static void add_dir(const char **v, int *n, const char *dir)
{
    if (*n < 64 && dir && *dir)
        v[(*n)++] = dir;
}

/* The include search order clang follows with tu's arguments (the part the cache can see). */
static void search_of(const tk_tu *tu, search *s)
{
    memset(s, 0, sizeof(*s));
    const char *after[64];
    int nafter = 0, nsys = 0;
    const char *sys[64];
    for (int i = 0; i < tu->nargs; i++) {
        const char *a = tu->args[i], *next = i + 1 < tu->nargs ? tu->args[i + 1] : NULL;
        static const char *const opts[] = {"-iquote", "-isystem", "-idirafter", "-I"};
        for (int o = 0; o < 4; o++) {
            size_t n = strlen(opts[o]);
            if (strncmp(a, opts[o], n) != 0)
                continue;
            const char *dir = a[n] ? a + n : next;
            if (!a[n])
                i++;
            if (o == 0)
                add_dir(s->quote, &s->nquote, dir);
            else if (o == 1)
                add_dir(sys, &nsys, dir);
            else if (o == 2)
                add_dir(after, &nafter, dir);
            else
                add_dir(s->angle, &s->nangle, dir);
            break;
        }
        if (strncmp(a, "--cuda-path=", 12) == 0 && s->nstorage < 8) {
            snprintf(s->storage[s->nstorage], PATH_MAX, "%s/include", a + 12);
            add_dir(sys, &nsys, s->storage[s->nstorage++]);
        }
    }
    for (int i = 0; i < nsys; i++)
        add_dir(s->angle, &s->nangle, sys[i]);
    add_dir(s->angle, &s->nangle, "/usr/local/include");
    add_dir(s->angle, &s->nangle, "/usr/include");
    for (int i = 0; i < nafter; i++)
        add_dir(s->angle, &s->nangle, after[i]);
}

static void add_absent(cJSON *absent, tk_map *seen, const char *path)
{
    if (tk_map_get(seen, path))
        return;
    cJSON *p = cJSON_CreateString(path);
    if (!p)
        return;
    cJSON_AddItemToArray(absent, p);
    tk_map_put(seen, p->valuestring, p);
}

/* Records where a lookup of name (quoted or not) from a file in dir searched in vain. */
static void probe(const search *s, const char *dir, const char *name, int quoted, cJSON *absent, tk_map *seen)
{
    char path[2 * PATH_MAX];
    if (name[0] == '/')
        return;
    if (quoted) {
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        if (exists(path))
            return;
        add_absent(absent, seen, path);
        for (int i = 0; i < s->nquote; i++) {
            snprintf(path, sizeof(path), "%s/%s", s->quote[i], name);
            if (exists(path))
                return;
            add_absent(absent, seen, path);
        }
    }
    for (int i = 0; i < s->nangle; i++) {
        snprintf(path, sizeof(path), "%s/%s", s->angle[i], name);
        if (exists(path))
            return;
        add_absent(absent, seen, path);
    }
}

/* The names text includes or asks __has_include about, each probed from the file's folder. */
static void probe_text(const search *s, const char *file, const char *text, size_t len, cJSON *absent, tk_map *seen)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    for (size_t i = 0; i < len; i++) {
        size_t skip = 0;
        if (text[i] == '#') {
            size_t j = i + 1;
            while (j < len && (text[j] == ' ' || text[j] == '\t'))
                j++;
            if (len - j >= 7 && strncmp(text + j, "include", 7) == 0)
                skip = j + 7 - i;
        } else if (len - i >= 13 && strncmp(text + i, "__has_include", 13) == 0 &&
                   (i == 0 || !(isalnum((unsigned char)text[i - 1]) || text[i - 1] == '_'))) {
            skip = 13;
        }
        if (!skip)
            continue;
        size_t j = i + skip;
        while (j < len && (isalnum((unsigned char)text[j]) || text[j] == '_'))
            j++; /* include_next, __has_include_next */
        while (j < len && (text[j] == ' ' || text[j] == '\t' || text[j] == '('))
            j++;
        if (j >= len || (text[j] != '"' && text[j] != '<'))
            continue;
        char close = text[j] == '"' ? '"' : '>';
        size_t k = j + 1;
        while (k < len && text[k] != close && text[k] != '\n')
            k++;
        if (k >= len || text[k] != close || k - j - 1 >= PATH_MAX / 2)
            continue;
        char name[PATH_MAX / 2];
        memcpy(name, text + j + 1, k - j - 1);
        name[k - j - 1] = '\0';
        probe(s, dir, name, close == '"', absent, seen);
        i = k;
    }
}

static cJSON *absent_paths(const tk_tu *tu, const char *content, size_t len, const cJSON *deps)
{
    cJSON *absent = cJSON_CreateArray();
    search *s = malloc(sizeof(*s));
    tk_map seen = TK_MAP_INIT;
    if (!absent || !s) {
        free(s);
        return absent;
    }
    search_of(tu, s);
    probe_text(s, tu->path, content, len, absent, &seen);
    for (const cJSON *d = deps ? deps->child : NULL; d; d = d->next) {
        char *text = NULL;
        size_t n = 0;
        if (tk_file_read(&text, &n, d->valuestring, MAX_SOURCE_SIZE) == 0)
            probe_text(s, d->valuestring, text, n, absent, &seen);
        else
            tk_error_clear();
        free(text);
    }
    tk_map_release(&seen);
    free(s);
    return absent;
}

void tk_cache_put(tk_cache *c, const char *key, const tk_tu *tu, const char *content, size_t len,
                  const cJSON *summary, const cJSON *deps)
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
    cJSON_AddItemToObject(entry, "absent", absent_paths(tu, content, len, deps));
    cJSON_AddItemReferenceToObject(entry, "summary", (cJSON *)summary);
    char *text = cJSON_PrintUnformatted(entry);
    cJSON_Delete(entry);
    if (text && tk_file_write_atomic(path, text, strlen(text)) != 0)
        tk_error_clear();
    free(text);
}
