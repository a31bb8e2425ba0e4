/* tkexport lsp: a language server on stdio (LSP 3.17, full text sync) that lints the workspace
 * as the user types: open buffers replace their files, the rest comes from the summary cache. */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "jsonutil.h"
#include "analyzer.h"
#include "cli.h"
#include "fsutil.h"
#include "lint.h"
#include "options.h"
#include "strbuf.h"
#include <tk/error.h>

#define DEFAULT_DEBOUNCE_MS 150
#define MAX_HEADER_LINE 8192
#define MAX_BODY (256u << 20)    /* larger messages are skipped, not buffered */
#define MAX_LINE_SOURCE (64u << 20)

/* JSON-RPC and LSP error codes (LSP 3.17, "Response Message"). */
enum {
    RPC_INVALID_REQUEST = -32600,
    RPC_METHOD_NOT_FOUND = -32601,
    RPC_INVALID_PARAMS = -32602,
    LSP_SERVER_NOT_INITIALIZED = -32002,
};

/* An open editor buffer. */
typedef struct doc {
    char *uri;  /* as the client spelled it: its diagnostics go back under the same URI */
    char *path; /* absolute, decoded from the URI */
    char *real; /* the analyzer's name for it: realpath, or path when not on disk */
    char *text;
    size_t len;
} doc;

/* A file whose diagnostics the client currently holds (a non-empty list, or an open buffer). */
typedef struct published {
    char *path; /* absolute, as the analyzer names it */
    char *uri;
    char *json; /* the diagnostics array last sent, to skip unchanged re-sends */
} published;

typedef struct server {
    int in_fd, out_fd;
    /* input: a buffer of bytes read, consumed from pos */
    char *in;
    size_t in_len, in_pos, in_cap;
    long body_len;      /* Content-Length of the header block being read, -1 before one */
    int in_body;        /* the header block ended: waiting for body_len bytes */
    int header_lines;   /* lines in the current header block */
    size_t skip;        /* bytes still to discard of an oversized message */
    int eof;
    /* protocol state */
    int initialized, shutdown;
    char *root; /* the workspace, also the current directory */
    doc *docs;
    size_t ndocs, docs_cap;
    published *pubs;
    size_t npubs, pubs_cap;
    int dirty;            /* a lint is due at deadline */
    struct timespec deadline;
    /* options */
    int debounce_ms, verbose, max_depth;
    const char *compdb_arg; /* -p as given: a relative one is taken in the workspace */
    char *compdb_dir;       /* its realpath, set at initialize */
    const char *checks; /* --checks, NULL for every rule */
    char *last_error;   /* the last failed lint's message */
    /* the lint runs on a thread of its own, so the message loop keeps answering (shutdown within a
     * second, however large the workspace): it works on copies of the buffers, and a change while
     * it runs cancels it (its result would be stale) and schedules the next */
    struct lint_job *job;
    int wake[2];        /* the lint thread writes a byte here when it is done */
    pid_t parent;       /* our parent at start: when it goes, so do we */
    long client_pid;    /* initialize's processId, 0 when not given */
} server;

typedef struct lint_job {
    pthread_t thread;
    volatile int cancel;
    int wake_fd;
    tk_unsaved_file *unsaved; /* copies: the buffers as they were when the lint started */
    size_t n;
    tk_analyze_options opts;
    const char *paths[1];
    const char *checks;
    tk_analysis *a;
    int err;
    char msg[1024], filter_msg[1024];
    double ms;
} lint_job;

static void lsp_log(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

static void lsp_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("tkexport lsp: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void *xrealloc(void *p, size_t n)
{
    void *r = realloc(p, n ? n : 1);
    if (!r) {
        lsp_log("out of memory");
        exit(TK_EXIT_INTERNAL);
    }
    return r;
}

static char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xrealloc(NULL, n), s, n);
}

/* --- URIs --------------------------------------------------------------------------------- */

/* file:// URI of an absolute path, every byte outside RFC 3986's unreserved set and '/' as %XX. */
static char *path_to_uri(const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    tk_strbuf sb = TK_STRBUF_INIT;
    tk_strbuf_adds(&sb, "file://");
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
            tk_strbuf_add(&sb, p, 1);
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            tk_strbuf_add(&sb, e, 3);
        }
    }
    char *r = tk_strbuf_detach(&sb);
    if (!r) {
        lsp_log("out of memory");
        exit(TK_EXIT_INTERNAL);
    }
    return r;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The absolute path a file: URI names (malloc'd), or NULL for another scheme or a remote host. */
static char *uri_to_path(const char *uri)
{
    if (strncasecmp(uri, "file://", 7) != 0)
        return NULL;
    const char *p = uri + 7;
    if (strncasecmp(p, "localhost/", 10) == 0)
        p += 9;
    if (*p != '/')
        return NULL;
    size_t n = strlen(p);
    char *out = xrealloc(NULL, n + 1), *o = out;
    for (; *p && *p != '?' && *p != '#'; p++) {
        int h, l;
        if (*p == '%' && (h = hexval(p[1])) >= 0 && (l = hexval(p[2])) >= 0) {
            *o++ = (char)(h << 4 | l);
            p += 2;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    if (strlen(out) != (size_t)(o - out)) {
        free(out); /* a %00 */
        return NULL;
    }
    return out;
}

/* realpath of a file that may not exist yet: its folder's realpath plus its name. */
static char *real_name(const char *path)
{
    char *r = realpath(path, NULL);
    if (r)
        return r;
    const char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        char *dir = xrealloc(NULL, (size_t)(slash - path) + 1);
        memcpy(dir, path, (size_t)(slash - path));
        dir[slash - path] = '\0';
        char *rd = realpath(dir, NULL);
        free(dir);
        if (rd) {
            tk_strbuf sb = TK_STRBUF_INIT;
            tk_strbuf_addf(&sb, "%s%s", rd, slash);
            free(rd);
            if ((r = tk_strbuf_detach(&sb)))
                return r;
        }
    }
    return xstrdup(path);
}

/* --- positions ---------------------------------------------------------------------------- */

/* UTF-16 code units of n bytes of UTF-8: one per character, two for a character outside the
 * BMP (a 4-byte sequence). Continuation bytes count nothing, so bad UTF-8 cannot overcount. */
static unsigned utf16_units(const char *s, size_t n)
{
    unsigned u = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c & 0xC0) == 0x80)
            continue;
        u += c >= 0xF0 ? 2 : 1;
    }
    return u;
}

/* The LSP character offset of a 1-based byte column on a 1-based line of text (NULL when the
 * text is unknown: then bytes are taken for characters). */
static int lsp_character(const char *text, size_t len, int line, int col)
{
    if (col < 1)
        col = 1;
    if (!text)
        return col - 1;
    size_t i = 0;
    for (int l = 1; l < line && i < len; i++)
        if (text[i] == '\n')
            l++;
    size_t end = i;
    while (end < len && text[end] != '\n' && text[end] != '\r')
        end++;
    size_t want = (size_t)col - 1;
    if (want > end - i)
        want = end - i; /* past the end of the line (an error at end of file): its end */
    return (int)utf16_units(text + i, want);
}

/* The byte offset of an LSP position in text (for range edits from clients that send them). */
static size_t byte_offset(const char *text, size_t len, int line, int character)
{
    size_t i = 0;
    for (int l = 0; l < line && i < len; i++)
        if (text[i] == '\n')
            l++;
    int u = 0;
    while (i < len && text[i] != '\n' && u < character) {
        unsigned char c = (unsigned char)text[i];
        size_t step = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        u += c >= 0xF0 ? 2 : 1;
        while (step-- && i < len)
            i++;
    }
    return i;
}

/* --- output ------------------------------------------------------------------------------- */

static void send_json(server *s, cJSON *msg)
{
    cJSON_AddStringToObject(msg, "jsonrpc", "2.0");
    char *body = cJSON_PrintUnformatted(msg);
    if (!body) {
        lsp_log("out of memory");
        exit(TK_EXIT_INTERNAL);
    }
    char head[64];
    int hn = snprintf(head, sizeof(head), "Content-Length: %zu\r\n\r\n", strlen(body));
    struct {
        const char *p;
        size_t n;
    } parts[2] = {{head, (size_t)hn}, {body, strlen(body)}};
    for (int k = 0; k < 2; k++) {
        const char *p = parts[k].p;
        size_t n = parts[k].n;
        while (n) {
            ssize_t w = write(s->out_fd, p, n);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                lsp_log("cannot write to the client: %s", strerror(errno));
                exit(TK_EXIT_FINDINGS);
            }
            p += w;
            n -= (size_t)w;
        }
    }
    free(body);
}

static void reply(server *s, const cJSON *id, cJSON *result)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToObject(m, "id", cJSON_Duplicate(id, 1));
    cJSON_AddItemToObject(m, "result", result ? result : cJSON_CreateNull());
    send_json(s, m);
    cJSON_Delete(m);
}

static void reply_error(server *s, const cJSON *id, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToObject(m, "id", cJSON_Duplicate(id, 1));
    cJSON *e = cJSON_AddObjectToObject(m, "error");
    cJSON_AddNumberToObject(e, "code", code);
    cJSON_AddStringToObject(e, "message", msg);
    send_json(s, m);
    cJSON_Delete(m);
}

static void publish(server *s, const char *uri, cJSON *diags)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "method", "textDocument/publishDiagnostics");
    cJSON *p = cJSON_AddObjectToObject(m, "params");
    cJSON_AddStringToObject(p, "uri", uri);
    cJSON_AddItemToObject(p, "diagnostics", diags ? diags : cJSON_CreateArray());
    send_json(s, m);
    cJSON_Delete(m);
}

/* --- documents ---------------------------------------------------------------------------- */

static doc *find_doc_uri(server *s, const char *uri)
{
    for (size_t i = 0; i < s->ndocs; i++)
        if (!strcmp(s->docs[i].uri, uri))
            return &s->docs[i];
    return NULL;
}

static doc *find_doc_real(server *s, const char *real)
{
    for (size_t i = 0; i < s->ndocs; i++)
        if (!strcmp(s->docs[i].real, real))
            return &s->docs[i];
    return NULL;
}

static void doc_set_text(doc *d, const char *text, size_t len)
{
    free(d->text);
    d->text = xrealloc(NULL, len + 1);
    memcpy(d->text, text, len);
    d->text[len] = '\0';
    d->len = len;
}

static void schedule_lint(server *s)
{
    if (s->job)
        s->job->cancel = 1; /* its buffers are stale now */
    s->dirty = 1;
    clock_gettime(CLOCK_MONOTONIC, &s->deadline);
    long ns = s->deadline.tv_nsec + (long)s->debounce_ms * 1000000L;
    s->deadline.tv_sec += ns / 1000000000L;
    s->deadline.tv_nsec = ns % 1000000000L;
}

static void did_open(server *s, const cJSON *params)
{
    const cJSON *td = cJSON_GetObjectItemCaseSensitive(params, "textDocument");
    const char *uri = tk_json_str(td, "uri", NULL), *text = tk_json_str(td, "text", NULL);
    char *path = uri ? uri_to_path(uri) : NULL;
    if (!path || !text) {
        lsp_log("didOpen: %s", !uri || !text ? "no textDocument.uri or .text" : "not a file: URI, ignored");
        free(path);
        return;
    }
    doc *d = find_doc_uri(s, uri);
    if (!d) {
        if (s->ndocs == s->docs_cap) {
            s->docs_cap = s->docs_cap ? 2 * s->docs_cap : 8;
            s->docs = xrealloc(s->docs, s->docs_cap * sizeof(*s->docs));
        }
        d = &s->docs[s->ndocs++];
        memset(d, 0, sizeof(*d));
        d->uri = xstrdup(uri);
        d->path = path;
        d->real = real_name(path);
    } else {
        free(path);
    }
    doc_set_text(d, text, strlen(text));
    schedule_lint(s);
}

static void did_change(server *s, const cJSON *params)
{
    const char *uri = tk_json_str(cJSON_GetObjectItemCaseSensitive(params, "textDocument"), "uri", NULL);
    doc *d = uri ? find_doc_uri(s, uri) : NULL;
    if (!d) {
        lsp_log("didChange: '%s' is not open, ignored", uri ? uri : "(no uri)");
        return;
    }
    const cJSON *ch;
    cJSON_ArrayForEach(ch, cJSON_GetObjectItemCaseSensitive(params, "contentChanges"))
    {
        const char *text = tk_json_str(ch, "text", NULL);
        const cJSON *range = cJSON_GetObjectItemCaseSensitive(ch, "range");
        if (!text)
            continue;
        if (!cJSON_IsObject(range)) {
            doc_set_text(d, text, strlen(text));
            continue;
        }
        /* we ask for full sync, but a range edit is cheap to honour */
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(range, "start"), *b = cJSON_GetObjectItemCaseSensitive(range, "end");
        size_t from = byte_offset(d->text, d->len, tk_json_int(a, "line", 0), tk_json_int(a, "character", 0));
        size_t to = byte_offset(d->text, d->len, tk_json_int(b, "line", 0), tk_json_int(b, "character", 0));
        if (to < from)
            to = from;
        size_t tl = strlen(text), n = d->len - (to - from) + tl;
        char *t = xrealloc(NULL, n + 1);
        memcpy(t, d->text, from);
        memcpy(t + from, text, tl);
        memcpy(t + from + tl, d->text + to, d->len - to);
        t[n] = '\0';
        free(d->text);
        d->text = t;
        d->len = n;
    }
    schedule_lint(s);
}

static void unpublish_path(server *s, const char *real);

static void did_close(server *s, const cJSON *params)
{
    const char *uri = tk_json_str(cJSON_GetObjectItemCaseSensitive(params, "textDocument"), "uri", NULL);
    doc *d = uri ? find_doc_uri(s, uri) : NULL;
    if (!d) {
        lsp_log("didClose: '%s' is not open, ignored", uri ? uri : "(no uri)");
        return;
    }
    /* The file's diagnostics go away with its editor; they come back from the file on disk at
     * the next lint if it still has some. */
    unpublish_path(s, d->real);
    publish(s, uri, NULL);
    free(d->uri);
    free(d->path);
    free(d->real);
    free(d->text);
    *d = s->docs[--s->ndocs];
}

/* --- linting ------------------------------------------------------------------------------ */

static published *find_pub(server *s, const char *path)
{
    for (size_t i = 0; i < s->npubs; i++)
        if (!strcmp(s->pubs[i].path, path))
            return &s->pubs[i];
    return NULL;
}

static void drop_pub(server *s, published *p)
{
    free(p->path);
    free(p->uri);
    free(p->json);
    *p = s->pubs[--s->npubs];
}

static void unpublish_path(server *s, const char *real)
{
    published *p = find_pub(s, real);
    if (p)
        drop_pub(s, p);
}

/* One file's diagnostics of the analysis, converted to LSP. */
typedef struct file_diags {
    char *path;  /* absolute */
    cJSON *list; /* LSP diagnostics */
    doc *open;   /* its buffer, when open */
    const char *text;
    size_t len;
    char *disk;  /* its text read from disk, when not open */
} file_diags;

static cJSON *to_lsp(const cJSON *d, const char *text, size_t len)
{
    int line = tk_json_int(d, "line", 1), col = tk_json_int(d, "column", 1);
    int eline = tk_json_int(d, "end_line", line), ecol = tk_json_int(d, "end_column", col + 1);
    if (line < 1)
        line = 1;
    if (eline < line || (eline == line && ecol < col)) {
        eline = line;
        ecol = col;
    }
    cJSON *r = cJSON_CreateObject();
    cJSON *range = cJSON_AddObjectToObject(r, "range");
    cJSON *a = cJSON_AddObjectToObject(range, "start"), *b = cJSON_AddObjectToObject(range, "end");
    cJSON_AddNumberToObject(a, "line", line - 1);
    cJSON_AddNumberToObject(a, "character", lsp_character(text, len, line, col));
    cJSON_AddNumberToObject(b, "line", eline - 1);
    cJSON_AddNumberToObject(b, "character", lsp_character(text, len, eline, ecol));
    const char *sev = tk_json_str(d, "severity", NULL);
    cJSON_AddNumberToObject(r, "severity", sev && !strcmp(sev, "error") ? 1 : sev && !strcmp(sev, "warning") ? 2 : 3);
    const char *rule = tk_json_str(d, "rule", NULL);
    if (rule)
        cJSON_AddStringToObject(r, "code", rule);
    cJSON_AddStringToObject(r, "source", "tkexport");
    const char *msg = tk_json_str(d, "message", NULL);
    cJSON_AddStringToObject(r, "message", msg ? msg : "");
    return r;
}

/* The document's diagnostics grouped by file (absolute path), converted to LSP against each
 * file's text: the buffer when it is open, else the file on disk. Returns the groups (*n of
 * them), NULL when there is none. */
static file_diags *group_by_file(server *s, const cJSON *doc_json, size_t *n)
{
    file_diags *files = NULL;
    size_t nfiles = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(doc_json, "diagnostics"))
    {
        const char *f = tk_json_str(d, "file", NULL);
        if (!f)
            continue; /* nowhere to show it (a finding without a file) */
        tk_strbuf abs = TK_STRBUF_INIT;
        if (f[0] == '/' ? tk_strbuf_adds(&abs, f) : tk_strbuf_addf(&abs, "%s/%s", s->root, f)) {
            lsp_log("out of memory");
            exit(TK_EXIT_INTERNAL);
        }
        size_t k = 0;
        while (k < nfiles && strcmp(files[k].path, abs.buf))
            k++;
        if (k == nfiles) {
            files = xrealloc(files, (nfiles + 1) * sizeof(*files));
            file_diags *fd = &files[nfiles++];
            memset(fd, 0, sizeof(*fd));
            fd->path = tk_strbuf_detach(&abs);
            fd->list = cJSON_CreateArray();
            fd->open = find_doc_real(s, fd->path);
            if (fd->open) {
                fd->text = fd->open->text;
                fd->len = fd->open->len;
            } else if (tk_file_read(&fd->disk, &fd->len, fd->path, MAX_LINE_SOURCE) == 0) {
                fd->text = fd->disk;
            } else {
                tk_error_clear(); /* gone since: columns are taken as they are */
            }
        }
        tk_strbuf_release(&abs);
        cJSON_AddItemToArray(files[k].list, to_lsp(d, files[k].text, files[k].len));
    }
    *n = nfiles;
    return files;
}

/* Publishes the groups that changed since the last lint, every open buffer (an editor waits for
 * an answer to its change), and an empty list for files whose findings went away. Takes the
 * groups' lists; returns the number of notifications sent. */
static size_t publish_all(server *s, file_diags *files, size_t nfiles)
{
    size_t sent = 0;
    for (size_t k = 0; k < nfiles; k++) {
        doc *od = files[k].open;
        char *uri = od ? xstrdup(od->uri) : path_to_uri(files[k].path);
        char *json = cJSON_PrintUnformatted(files[k].list);
        published *p = find_pub(s, files[k].path);
        int same = p && json && p->json && !strcmp(p->json, json) && !strcmp(p->uri, uri);
        if (p && strcmp(p->uri, uri))
            publish(s, p->uri, NULL); /* the same file under another spelling: clear the old one */
        if (!p) {
            if (s->npubs == s->pubs_cap) {
                s->pubs_cap = s->pubs_cap ? 2 * s->pubs_cap : 16;
                s->pubs = xrealloc(s->pubs, s->pubs_cap * sizeof(*s->pubs));
            }
            p = &s->pubs[s->npubs++];
            p->path = xstrdup(files[k].path);
            p->uri = NULL;
            p->json = NULL;
        }
        if (!same || od) {
            publish(s, uri, files[k].list);
            files[k].list = NULL;
            sent++;
        }
        free(p->uri);
        p->uri = uri;
        free(p->json);
        p->json = json;
    }
    for (size_t i = 0; i < s->npubs;) {
        size_t k = 0;
        while (k < nfiles && strcmp(files[k].path, s->pubs[i].path))
            k++;
        if (k < nfiles) {
            i++;
            continue;
        }
        if (!find_doc_real(s, s->pubs[i].path)) { /* an open buffer hears back below */
            publish(s, s->pubs[i].uri, NULL);
            sent++;
        }
        drop_pub(s, &s->pubs[i]);
    }
    for (size_t i = 0; i < s->ndocs; i++) {
        size_t k = 0;
        while (k < nfiles && strcmp(files[k].path, s->docs[i].real))
            k++;
        if (k == nfiles) {
            publish(s, s->docs[i].uri, NULL); /* an open buffer always hears back */
            sent++;
        }
    }
    return sent;
}

static void *lint_main(void *arg)
{
    lint_job *j = arg;
    double t0 = now_ms();
    j->err = tk_analysis_run(&j->a, &j->opts, j->paths, 1);
    if (j->err)
        snprintf(j->msg, sizeof j->msg, "%s", tk_error_last());
    /* --checks and NOLINT comments, read from the buffers being edited */
    else if (tk_lint_filter_unsaved(tk_analysis_doc(j->a), j->checks, j->unsaved, j->n))
        snprintf(j->filter_msg, sizeof j->filter_msg, "%s", tk_error_last());
    j->ms = now_ms() - t0;
    char done = 1;
    while (write(j->wake_fd, &done, 1) < 0 && errno == EINTR)
        ;
    return NULL;
}

static void job_free(lint_job *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->n; i++) {
        free((char *)j->unsaved[i].path);
        free((char *)j->unsaved[i].contents);
    }
    free(j->unsaved);
    tk_analysis_free(j->a);
    free(j);
}

/* Starts a lint on a copy of the buffers (a running one is canceled first: the next starts when
 * it has stopped). */
static void lint_start(server *s)
{
    if (s->job) {
        s->job->cancel = 1;
        return; /* still dirty: lint_done starts the next */
    }
    s->dirty = 0;
    lint_job *j = xrealloc(NULL, sizeof *j);
    memset(j, 0, sizeof *j);
    j->unsaved = xrealloc(NULL, (s->ndocs + 1) * sizeof(*j->unsaved));
    for (size_t i = 0; i < s->ndocs; i++) {
        char *text = xrealloc(NULL, s->docs[i].len + 1);
        memcpy(text, s->docs[i].text, s->docs[i].len);
        text[s->docs[i].len] = '\0';
        j->unsaved[i].path = xstrdup(s->docs[i].real);
        j->unsaved[i].contents = text;
        j->unsaved[i].length = s->docs[i].len;
    }
    j->n = s->ndocs;
    j->wake_fd = s->wake[1];
    j->checks = s->checks;
    j->paths[0] = s->root;
    tk_analyze_options opts = TK_ANALYZE_OPTIONS_INIT;
    opts.lint = 1;
    opts.unsaved = j->unsaved;
    opts.n_unsaved = j->n;
    opts.max_depth = s->max_depth;
    opts.compdb_dir = s->compdb_dir;
    opts.cancel = &j->cancel;
    j->opts = opts;
    if (pthread_create(&j->thread, NULL, lint_main, j) != 0) {
        lsp_log("cannot start the lint thread: %s", strerror(errno));
        job_free(j);
        return;
    }
    s->job = j;
}

/* The lint thread is done (its byte was read): its findings published unless it was canceled. */
static void lint_done(server *s)
{
    lint_job *j = s->job;
    pthread_join(j->thread, NULL);
    s->job = NULL;
    if (j->cancel) {
        job_free(j);
        return;
    }
    if (j->err) {
        /* once, not at every keystroke, while the failure stays the same */
        if (!s->last_error || strcmp(s->last_error, j->msg)) {
            lsp_log("%s", j->msg);
            free(s->last_error);
            s->last_error = xstrdup(j->msg);
        }
        job_free(j);
        return;
    }
    free(s->last_error);
    s->last_error = NULL;
    if (j->filter_msg[0])
        lsp_log("%s", j->filter_msg);
    cJSON *doc_json = tk_analysis_doc(j->a);
    double t1 = now_ms();
    size_t nfiles = 0;
    file_diags *files = group_by_file(s, doc_json, &nfiles);
    size_t sent = publish_all(s, files, nfiles);
    for (size_t k = 0; k < nfiles; k++) {
        free(files[k].path);
        free(files[k].disk);
        cJSON_Delete(files[k].list);
    }
    free(files);
    if (s->verbose) {
        tk_analysis_stats st;
        tk_analysis_get_stats(j->a, &st);
        lsp_log("lint: %zu files (%zu parsed, %zu cached), %d diagnostics in %zu files; analysis %.1f ms, "
                "publishing %.1f ms (%zu notifications)",
                st.files, st.parsed, st.cached,
                cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(doc_json, "diagnostics")), nfiles, j->ms,
                now_ms() - t1, sent);
    }
    job_free(j);
}

/* At exit: a running lint is canceled and given up to a second to stop (a file's parse); 1 when
 * it is still running after that (the process then ends without waiting for it). */
static int lint_stop(server *s)
{
    if (!s->job)
        return 0;
    s->job->cancel = 1;
    struct pollfd pfd = {s->wake[0], POLLIN, 0};
    double until = now_ms() + 1000;
    while (now_ms() < until) {
        int n = poll(&pfd, 1, (int)(until - now_ms()) + 1);
        if (n > 0) {
            char b;
            if (read(s->wake[0], &b, 1) == 1) {
                lint_done(s);
                return 0;
            }
        }
    }
    return 1;
}

/* --- requests and notifications ----------------------------------------------------------- */

static void initialize(server *s, const cJSON *id, const cJSON *params)
{
    const cJSON *pid = cJSON_GetObjectItemCaseSensitive(params, "processId");
    if (cJSON_IsNumber(pid) && pid->valuedouble > 0 && pid->valuedouble < 1e9)
        s->client_pid = (long)pid->valuedouble;
    const char *uri = tk_json_str(params, "rootUri", NULL);
    char *root = uri ? uri_to_path(uri) : NULL;
    if (!root && tk_json_str(params, "rootPath", NULL))
        root = xstrdup(tk_json_str(params, "rootPath", NULL));
    if (!root) {
        const cJSON *wf = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(params, "workspaceFolders"), 0);
        if ((uri = tk_json_str(wf, "uri", NULL)))
            root = uri_to_path(uri);
    }
    /* Diagnostics name files relative to the current directory: make it the workspace. */
    if (root && chdir(root) != 0)
        lsp_log("cannot enter the workspace '%s' (%s); using '%s'", root, strerror(errno), s->root);
    free(root);
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd))) {
        free(s->root);
        s->root = xstrdup(cwd);
    }
    if (s->compdb_arg && !(s->compdb_dir = realpath(s->compdb_arg, NULL)))
        lsp_log("build folder '%s' does not exist in the workspace '%s'; files get default flags", s->compdb_arg,
                s->root);
    s->initialized = 1;

    cJSON *r = cJSON_CreateObject();
    cJSON *caps = cJSON_AddObjectToObject(r, "capabilities");
    cJSON *sync = cJSON_AddObjectToObject(caps, "textDocumentSync");
    cJSON_AddBoolToObject(sync, "openClose", 1);
    cJSON_AddNumberToObject(sync, "change", 1); /* TextDocumentSyncKind.Full */
    cJSON_AddBoolToObject(cJSON_AddObjectToObject(sync, "save"), "includeText", 0);
    cJSON *info = cJSON_AddObjectToObject(r, "serverInfo");
    cJSON_AddStringToObject(info, "name", "tkexport");
    cJSON_AddStringToObject(info, "version", TK_VERSION);
    reply(s, id, r);
}

/* Handles one message; returns -1 to go on, or the exit status after 'exit'. */
static int handle(server *s, const cJSON *msg)
{
    if (!cJSON_IsObject(msg)) {
        lsp_log("a message that is not a JSON object, skipped");
        return -1;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(msg, "id");
    const char *method = tk_json_str(msg, "method", NULL);
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(msg, "params");
    if (id && !cJSON_IsNumber(id) && !cJSON_IsString(id)) {
        lsp_log("a message whose id is neither a number nor a string, skipped");
        return -1;
    }
    if (!method) {
        if (!id)
            lsp_log("a message with neither method nor id, skipped");
        return -1; /* a response to a request of ours: we send none */
    }
    if (!strcmp(method, "exit"))
        return s->shutdown ? TK_EXIT_OK : TK_EXIT_FINDINGS;
    if (!s->initialized && strcmp(method, "initialize")) {
        if (id)
            reply_error(s, id, LSP_SERVER_NOT_INITIALIZED, "'%s' before 'initialize'", method);
        return -1;
    }
    if (s->shutdown) {
        if (id)
            reply_error(s, id, RPC_INVALID_REQUEST, "'%s' after 'shutdown'", method);
        return -1;
    }
    if (id) {
        if (!strcmp(method, "initialize")) {
            if (s->initialized)
                reply_error(s, id, RPC_INVALID_REQUEST, "'initialize' sent twice");
            else if (params && !cJSON_IsObject(params))
                reply_error(s, id, RPC_INVALID_PARAMS, "'initialize' params must be an object");
            else
                initialize(s, id, params);
        } else if (!strcmp(method, "shutdown")) {
            s->shutdown = 1;
            s->dirty = 0;
            if (s->job)
                s->job->cancel = 1; /* answered now; the lint stops at its next file */
            reply(s, id, NULL);
        } else {
            reply_error(s, id, RPC_METHOD_NOT_FOUND, "method '%s' is not supported", method);
        }
        return -1;
    }
    if (!strcmp(method, "initialized") || !strcmp(method, "workspace/didChangeWatchedFiles") ||
        !strcmp(method, "textDocument/didSave"))
        schedule_lint(s); /* the first: the workspace's findings before anything is opened */
    else if (!strcmp(method, "textDocument/didOpen"))
        did_open(s, params);
    else if (!strcmp(method, "textDocument/didChange"))
        did_change(s, params);
    else if (!strcmp(method, "textDocument/didClose"))
        did_close(s, params);
    /* $/cancelRequest: every request is answered as it comes, so there is none left to cancel; the
     * lint, which is no request, is canceled by the next change instead. $/setTrace...: ignored. */
    return -1;
}

/* --- input -------------------------------------------------------------------------------- */

/* Reads what stdin has (blocking once); 0, or -1 at end of input. */
static int read_input(server *s)
{
    if (s->in_pos > 0 && s->in_pos == s->in_len)
        s->in_pos = s->in_len = 0;
    if (s->in_pos > 65536) {
        memmove(s->in, s->in + s->in_pos, s->in_len - s->in_pos);
        s->in_len -= s->in_pos;
        s->in_pos = 0;
    }
    if (s->in_cap - s->in_len < 65536) {
        s->in_cap = s->in_cap ? 2 * s->in_cap : 131072;
        s->in = xrealloc(s->in, s->in_cap);
    }
    for (;;) {
        ssize_t n = read(s->in_fd, s->in + s->in_len, s->in_cap - s->in_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n < 0)
                lsp_log("cannot read from the client: %s", strerror(errno));
            s->eof = 1;
            return -1;
        }
        s->in_len += (size_t)n;
        return 0;
    }
}

/* The next complete message body in the input (malloc'd, *len bytes), or NULL when more input
 * is needed. Malformed headers are skipped with a log line; so are oversized messages. */
static char *next_message(server *s, size_t *len)
{
    if (!s->in)
        return NULL; /* nothing read yet */
    for (;;) {
        size_t avail = s->in_len - s->in_pos;
        const char *p = s->in + s->in_pos;
        if (s->skip) {
            size_t k = s->skip < avail ? s->skip : avail;
            s->in_pos += k;
            s->skip -= k;
            if (s->skip)
                return NULL;
            continue;
        }
        if (s->in_body) {
            if (avail < (size_t)s->body_len)
                return NULL;
            char *body = xrealloc(NULL, (size_t)s->body_len + 1);
            memcpy(body, p, (size_t)s->body_len);
            body[s->body_len] = '\0';
            *len = (size_t)s->body_len;
            s->in_pos += (size_t)s->body_len;
            s->in_body = 0;
            s->body_len = -1;
            s->header_lines = 0;
            return body;
        }
        const char *nl = memchr(p, '\n', avail);
        if (!nl) {
            if (avail > MAX_HEADER_LINE) {
                lsp_log("a header line longer than %d bytes, skipped", MAX_HEADER_LINE);
                s->in_pos = s->in_len;
                s->header_lines++;
            }
            return NULL;
        }
        size_t ll = (size_t)(nl - p);
        s->in_pos += ll + 1;
        if (ll && p[ll - 1] == '\r')
            ll--;
        if (ll == 0) { /* end of a header block */
            if (s->body_len >= 0) {
                if ((size_t)s->body_len > MAX_BODY) {
                    lsp_log("a message of %ld bytes (more than %u), skipped", s->body_len, MAX_BODY);
                    s->skip = (size_t)s->body_len;
                    s->body_len = -1;
                    s->header_lines = 0;
                } else {
                    s->in_body = 1;
                }
            } else if (s->header_lines) {
                lsp_log("a header without Content-Length, skipped");
                s->header_lines = 0;
            }
            continue;
        }
        s->header_lines++;
        /* "Content-Length: N", also found inside a line of garbage so that the stream resyncs */
        const char *h = NULL;
        for (size_t i = 0; i + 15 <= ll && !h; i++)
            if (!strncasecmp(p + i, "content-length:", 15))
                h = p + i + 15;
        if (!h)
            continue; /* Content-Type, or a header LSP does not define: ignored */
        while (h < p + ll && (*h == ' ' || *h == '\t'))
            h++;
        char num[32];
        size_t nn = (size_t)(p + ll - h);
        if (nn >= sizeof(num))
            nn = sizeof(num) - 1;
        memcpy(num, h, nn);
        num[nn] = '\0';
        char *end;
        errno = 0;
        long v = strtol(num, &end, 10);
        while (*end == ' ' || *end == '\t')
            end++;
        if (errno || *end || end == num || v < 0) {
            lsp_log("a bad Content-Length '%s', skipped", num);
            s->body_len = -1;
            continue;
        }
        s->body_len = v;
    }
}

/* --- the command -------------------------------------------------------------------------- */

static const tk_cli_option options[] = {
    {{"build-dir", required_argument, NULL, 'p'}, "BUILD_DIR", "read flags from BUILD_DIR/compile_commands.json (relative: in the workspace)"},
    {{"max-depth", required_argument, NULL, 'd'}, "N", "follow at most N function hops from an op (default 5)"},
    {{"checks", required_argument, NULL, 'k'}, "LIST", "rules to run, as clang-tidy's list ('-*,tk-raw-launch'; docs/lint.md)"},
    {{"debounce", required_argument, NULL, 'b'}, "MS", "lint MS milliseconds after the last change (default 150)"},
    {{"verbose", no_argument, NULL, 'v'}, NULL, "log each lint's timing on stderr"},
    {{"help", no_argument, NULL, 'h'}, NULL, "show this help"},
};
#define NOPT (sizeof(options) / sizeof(options[0]))

static void help(FILE *f)
{
    fprintf(f, "usage: tkexport lsp [-p BUILD_DIR] [--max-depth N] [--checks LIST] [--debounce MS] [-v]\n\n"
               "A language server on stdin/stdout (LSP, full text sync) for editors: lints the\n"
               "workspace (the client's rootUri) on every change, with unsaved buffers in place\n"
               "of their files, and publishes the findings as diagnostics. docs/editors.md shows\n"
               "how to set it up in VS Code, Neovim and Emacs.\n\n"
               "options:\n");
    tk_cli_print_options(f, options, NOPT, "pvh");
    fprintf(f, "\nexit status: 0 after 'shutdown' then 'exit', 1 on 'exit' (or end of input) without\n"
               "'shutdown', 2 usage error, 3 internal error\n");
}

int cmd_lsp(int argc, char **argv)
{
    struct option longopts[NOPT + 1];
    tk_cli_longopts(longopts, options, NOPT);
    server s;
    memset(&s, 0, sizeof(s));
    s.body_len = -1;
    s.debounce_ms = DEFAULT_DEBOUNCE_MS;
    s.max_depth = TK_ANALYZE_DEFAULT_DEPTH;
    optind = 1;
    int c;
    while ((c = tk_cli_getopt("lsp", argc, argv, "p:vh", longopts)) != -1) {
        switch (c) {
        case 'p':
            if (optarg[0] == '/' && tk_path_is_dir(optarg) != 1) {
                fprintf(stderr, "tkexport lsp: build folder '%s' does not exist\n", optarg);
                return TK_EXIT_USAGE;
            }
            s.compdb_arg = optarg;
            break;
        case 'd':
            if (tk_cli_parse_int("lsp", optarg, "--max-depth", 1000, &s.max_depth))
                return TK_EXIT_USAGE;
            break;
        case 'b':
            if (tk_cli_parse_int("lsp", optarg, "--debounce", 60000, &s.debounce_ms))
                return TK_EXIT_USAGE;
            break;
        case 'k':
            if (tk_lint_checks_validate(optarg)) {
                fprintf(stderr, "tkexport lsp: %s\n", tk_error_last());
                return TK_EXIT_USAGE;
            }
            s.checks = optarg;
            break;
        case 'v': s.verbose = 1; break;
        case 'h': help(stdout); return TK_EXIT_OK;
        default: /* '?': tk_cli_getopt said what */
            return TK_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tkexport lsp: unexpected argument '%s' (the workspace comes from the client)\n", argv[optind]);
        return TK_EXIT_USAGE;
    }
    char cwd[PATH_MAX];
    s.root = xstrdup(getcwd(cwd, sizeof(cwd)) ? cwd : ".");

    /* The protocol owns stdout: anything a library prints goes to stderr instead. */
    signal(SIGPIPE, SIG_IGN);
    s.in_fd = 0;
    s.out_fd = dup(1);
    if (s.out_fd < 0 || dup2(2, 1) < 0) {
        fprintf(stderr, "tkexport lsp: cannot set up stdout: %s\n", strerror(errno));
        free(s.root);
        return TK_EXIT_INTERNAL;
    }

    if (pipe2(s.wake, O_CLOEXEC) != 0) {
        fprintf(stderr, "tkexport lsp: pipe: %s\n", strerror(errno));
        free(s.root);
        return TK_EXIT_INTERNAL;
    }
    s.parent = getppid();
    int rc = -1;
    while (rc < 0) {
        size_t len;
        char *body;
        while (rc < 0 && (body = next_message(&s, &len))) {
            const char *end = NULL;
            cJSON *msg = cJSON_ParseWithLengthOpts(body, len, &end, 0);
            if (!msg)
                lsp_log("a message that is not JSON (near byte %td), skipped", end ? end - body : (ptrdiff_t)0);
            else
                rc = handle(&s, msg);
            cJSON_Delete(msg);
            free(body);
        }
        if (rc >= 0)
            break;
        /* the client gone: end of input, our parent gone (we were reparented), or the process
         * initialize named no longer there */
        if (!s.eof && (getppid() != s.parent || (s.client_pid > 0 && kill((pid_t)s.client_pid, 0) < 0 && errno == ESRCH))) {
            lsp_log("the client is gone: exiting");
            s.eof = 1;
        }
        if (s.eof) {
            rc = s.shutdown ? TK_EXIT_OK : TK_EXIT_FINDINGS;
            break;
        }
        int timeout = 1000; /* at least once a second: is the client still there? */
        if (s.dirty && !s.job) {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            double left = (s.deadline.tv_sec - t.tv_sec) * 1e3 + (s.deadline.tv_nsec - t.tv_nsec) / 1e6;
            if (left < timeout)
                timeout = left > 0 ? (int)left + 1 : 0;
        }
        struct pollfd pfd[2] = {{s.in_fd, POLLIN, 0}, {s.wake[0], POLLIN, 0}};
        int n = poll(pfd, 2, timeout);
        if (n < 0 && errno != EINTR) {
            lsp_log("poll: %s", strerror(errno));
            rc = TK_EXIT_INTERNAL;
        } else if (n > 0 && (pfd[1].revents & POLLIN)) {
            char b;
            if (read(s.wake[0], &b, 1) == 1 && s.job)
                lint_done(&s);
        } else if (n > 0 && pfd[0].revents) {
            read_input(&s); /* pending messages first: a burst of changes makes one lint */
        } else if (n == 0 && s.dirty && !s.job && !s.shutdown) {
            lint_start(&s);
        }
    }
    if (lint_stop(&s)) {
        /* a parse that does not stop within a second: the process ends without it (the summary
           cache writes files atomically, so nothing is left half-written) */
        close(s.out_fd);
        _exit(rc);
    }
    close(s.wake[0]);
    close(s.wake[1]);

    for (size_t i = 0; i < s.ndocs; i++) {
        free(s.docs[i].uri);
        free(s.docs[i].path);
        free(s.docs[i].real);
        free(s.docs[i].text);
    }
    free(s.docs);
    while (s.npubs)
        drop_pub(&s, &s.pubs[0]);
    free(s.pubs);
    free(s.in);
    free(s.root);
    free(s.compdb_dir);
    free(s.last_error);
    close(s.out_fd);
    return rc;
}
