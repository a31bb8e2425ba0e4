/* The language server (tkexport lsp) driven through pipes by a scripted client: a real process,
 * a temporary workspace, LSP messages in, diagnostics and replies out. */
#define _GNU_SOURCE /* memmem, nftw */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#define WAIT_MS 120000 /* a cold parse of a file on a loaded CI machine */

typedef struct client {
    pid_t pid;
    int to, from;
    char *buf;
    size_t len, cap;
} client;

typedef struct workspace {
    char dir[PATH_MAX];  /* as created: holds a space, so URIs need percent-encoding */
    char real[PATH_MAX]; /* its realpath: how the server names files it did not get from us */
} workspace;

/* --- the workspace ------------------------------------------------------------------------ */

static void write_file(const workspace *w, const char *rel, const char *text)
{
    char p[PATH_MAX * 2];
    snprintf(p, sizeof(p), "%s/%s", w->dir, rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    mkdir(p, 0777);
    *slash = '/';
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void make_workspace(workspace *w)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(w->dir, sizeof(w->dir), "%s/tk lsp.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    assert_non_null(mkdtemp(w->dir));
    assert_non_null(realpath(w->dir, w->real));
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static void remove_workspace(const workspace *w) { nftw(w->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* file:// URI of dir/rel, percent-encoded as the server encodes (RFC 3986 unreserved and '/'). */
static void uri_of(char *out, size_t n, const char *dir, const char *rel)
{
    char path[PATH_MAX * 2];
    snprintf(path, sizeof(path), rel ? "%s/%s" : "%s", dir, rel);
    size_t o = (size_t)snprintf(out, n, "file://");
    for (const unsigned char *p = (const unsigned char *)path; *p && o + 4 < n; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("-._~/", *p))
            out[o++] = (char)*p;
        else
            o += (size_t)snprintf(out + o, n - o, "%%%02X", *p);
    }
    out[o] = '\0';
}

/* --- the process -------------------------------------------------------------------------- */

static void start(client *c, const char *cwd)
{
    int in[2], out[2];
    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    memset(c, 0, sizeof(*c));
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        if (cwd && chdir(cwd) != 0)
            _exit(126);
        execl(TK_TKEXPORT, "tkexport", "lsp", "--debounce", "20", (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c->to = in[1];
    c->from = out[0];
}

static void send_raw(client *c, const char *data, size_t n)
{
    while (n) {
        ssize_t w = write(c->to, data, n);
        if (w < 0 && errno == EINTR)
            continue;
        assert_true(w > 0);
        data += w;
        n -= (size_t)w;
    }
}

/* Frames printf-formatted JSON with its Content-Length into out (n bytes); returns its length. */
static size_t vframe(char *out, size_t n, const char *fmt, va_list ap)
{
    char body[16384];
    int b = vsnprintf(body, sizeof(body), fmt, ap);
    assert_true(b > 0 && (size_t)b < sizeof(body));
    int h = snprintf(out, n, "Content-Length: %d\r\n\r\n%s", b, body);
    assert_true(h > 0 && (size_t)h < n);
    return (size_t)h;
}

/* Sends one message: printf-formatted JSON, framed with its Content-Length. */
static void sendf(client *c, const char *fmt, ...)
{
    char msg[16448];
    va_list ap;
    va_start(ap, fmt);
    size_t n = vframe(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    send_raw(c, msg, n);
}

/* s with its first `from` replaced by `to` (malloc'd). */
static char *replace(const char *s, const char *from, const char *to)
{
    const char *at = strstr(s, from);
    assert_non_null(at);
    size_t a = (size_t)(at - s), fl = strlen(from), tl = strlen(to), n = strlen(s) - fl + tl;
    char *r = malloc(n + 1);
    assert_non_null(r);
    memcpy(r, s, a);
    memcpy(r + a, to, tl);
    strcpy(r + a + tl, at + fl);
    return r;
}

/* A JSON string literal of text (quotes included) for message bodies. */
static char *json_string(const char *text)
{
    cJSON *s = cJSON_CreateString(text);
    char *r = cJSON_PrintUnformatted(s);
    cJSON_Delete(s);
    assert_non_null(r);
    return r;
}

static size_t frame(char *out, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t r = vframe(out, n, fmt, ap);
    va_end(ap);
    return r;
}

/* didOpen; with `initialized` in front when first is set. Both go in one write (atomic on a
 * pipe below PIPE_BUF), so the server reads them together and lints once. */
static void send_open_ex(client *c, const char *uri, const char *text, int first)
{
    char msg[PIPE_BUF];
    size_t n = first ? frame(msg, sizeof(msg), "{\"jsonrpc\":\"2.0\",\"method\":\"initialized\",\"params\":{}}") : 0;
    char *t = json_string(text);
    n += frame(msg + n, sizeof(msg) - n, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didOpen\",\"params\":"
               "{\"textDocument\":{\"uri\":\"%s\",\"languageId\":\"c\",\"version\":1,\"text\":%s}}}", uri, t);
    free(t);
    send_raw(c, msg, n);
}

static void send_open(client *c, const char *uri, const char *text) { send_open_ex(c, uri, text, 0); }

static void send_change(client *c, const char *uri, int version, const char *text)
{
    char *t = json_string(text);
    sendf(c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didChange\",\"params\":{\"textDocument\":"
             "{\"uri\":\"%s\",\"version\":%d},\"contentChanges\":[{\"text\":%s}]}}", uri, version, t);
    free(t);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* The next message from the server, or NULL when none came within WAIT_MS or it exited. */
static cJSON *recv_msg(client *c)
{
    double until = now_ms() + WAIT_MS;
    for (;;) {
        /* a complete "headers \r\n\r\n body" in the buffer? */
        char *end = c->len ? memmem(c->buf, c->len, "\r\n\r\n", 4) : NULL;
        if (end) {
            const char *cl = memmem(c->buf, (size_t)(end - c->buf), "Content-Length: ", 16);
            assert_non_null(cl);
            size_t body = (size_t)(end + 4 - c->buf), n = strtoul(cl + 16, NULL, 10);
            if (c->len >= body + n) {
                cJSON *m = cJSON_ParseWithLength(c->buf + body, n);
                assert_non_null(m);
                memmove(c->buf, c->buf + body + n, c->len - body - n);
                c->len -= body + n;
                return m;
            }
        }
        int left = (int)(until - now_ms());
        if (left <= 0)
            return NULL;
        struct pollfd p = {c->from, POLLIN, 0};
        if (poll(&p, 1, left) <= 0)
            continue;
        if (c->cap - c->len < 65536) {
            c->cap = c->cap ? 2 * c->cap : 131072;
            c->buf = realloc(c->buf, c->cap);
            assert_non_null(c->buf);
        }
        ssize_t r = read(c->from, c->buf + c->len, c->cap - c->len);
        if (r <= 0)
            return NULL;
        c->len += (size_t)r;
    }
}

/* Reads until the reply to request id; fails the test when none comes. */
static cJSON *wait_reply(client *c, int id)
{
    for (;;) {
        cJSON *m = recv_msg(c);
        if (!m)
            fail_msg("no reply to request %d", id);
        cJSON *mid = cJSON_GetObjectItemCaseSensitive(m, "id");
        if (cJSON_IsNumber(mid) && mid->valueint == id && !cJSON_GetObjectItemCaseSensitive(m, "method"))
            return m;
        cJSON_Delete(m);
    }
}

/* Reads until the next publication of diagnostics for uri and checks that it has `count`
 * entries: every change is sent after the server answered the one before, and each lint
 * publishes an open file once, so the next publication is the answer to the last change.
 * Returns the diagnostics array; the message is in *msg, which the caller frees. */
static cJSON *wait_publish(client *c, const char *uri, int count, cJSON **msg)
{
    for (;;) {
        cJSON *m = recv_msg(c);
        if (!m)
            fail_msg("no publishDiagnostics for %s", uri);
        cJSON *method = cJSON_GetObjectItemCaseSensitive(m, "method");
        cJSON *params = cJSON_GetObjectItemCaseSensitive(m, "params");
        cJSON *u = cJSON_GetObjectItemCaseSensitive(params, "uri");
        cJSON *d = cJSON_GetObjectItemCaseSensitive(params, "diagnostics");
        if (cJSON_IsString(method) && !strcmp(method->valuestring, "textDocument/publishDiagnostics") &&
            cJSON_IsString(u) && !strcmp(u->valuestring, uri)) {
            if (cJSON_GetArraySize(d) != count) {
                char *text = cJSON_PrintUnformatted(d);
                print_error("diagnostics for %s: %s\n", uri, text);
                free(text);
                fail_msg("%d diagnostics published, expected %d", cJSON_GetArraySize(d), count);
            }
            *msg = m;
            return d;
        }
        cJSON_Delete(m);
    }
}

/* Closes the server's input and returns its exit status (-1 when it did not exit normally). */
static int finish(client *c)
{
    close(c->to);
    int st = 0;
    double until = now_ms() + WAIT_MS;
    pid_t r;
    while ((r = waitpid(c->pid, &st, WNOHANG)) == 0 && now_ms() < until)
        usleep(10000);
    if (r == 0) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, &st, 0);
    }
    close(c->from);
    free(c->buf);
    return r > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* initialize, checking the capabilities; `initialized` follows when send_initialized is set. */
static void initialize_ex(client *c, const workspace *w, int send_initialized)
{
    char root[PATH_MAX * 3];
    uri_of(root, sizeof(root), w->dir, NULL);
    sendf(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"processId\":null,"
             "\"rootUri\":\"%s\",\"capabilities\":{}}}", root);
    cJSON *r = wait_reply(c, 1);
    cJSON *sync = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r, "result"), "capabilities"),
        "textDocumentSync");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(sync, "openClose")));
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(sync, "change")->valueint, 1);
    assert_non_null(cJSON_GetObjectItemCaseSensitive(sync, "save"));
    cJSON_Delete(r);
    if (send_initialized)
        sendf(c, "{\"jsonrpc\":\"2.0\",\"method\":\"initialized\",\"params\":{}}");
}

static void initialize(client *c, const workspace *w) { initialize_ex(c, w, 1); }

static void shutdown_and_exit(client *c, int id)
{
    sendf(c, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"shutdown\"}", id);
    cJSON *r = wait_reply(c, id);
    cJSON *result = cJSON_GetObjectItemCaseSensitive(r, "result");
    assert_non_null(result);
    assert_true(cJSON_IsNull(result));
    cJSON_Delete(r);
    sendf(c, "{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}");
    assert_int_equal(finish(c), 0);
}

static int num_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, a), b);
    assert_true(cJSON_IsNumber(v));
    return v->valueint;
}

static const char *code_of(const cJSON *d) { return cJSON_GetObjectItemCaseSensitive(d, "code")->valuestring; }

/* --- the tests ---------------------------------------------------------------------------- */

/* A syntax error after non-ASCII text: the column counts UTF-16 units ("é" one, "😀" two). */
static const char broken_op[] =
    "/* an op with a syntax error */\n"
    "#include <tk/op.h>\n"
    "\n"
    "TK_OP(lsp_op, \"test::lsp\", \"(Tensor x) -> Tensor\") {\n"
    "    const char *s = \"h\xc3\xa9llo \xf0\x9f\x98\x80\"; int x = ;\n"
    "    (void)ctx, (void)in, (void)out, (void)s, (void)x;\n"
    "    return 0;\n"
    "}\n";

static void lsp__parse_error_is_published_at_its_utf16_position_and_goes_away_when_fixed(void **state)
{
    (void)state;
    workspace w;
    make_workspace(&w);
    write_file(&w, "ops/op.c", broken_op);
    char uri[PATH_MAX * 3];
    uri_of(uri, sizeof(uri), w.dir, "ops/op.c");
    client c;
    start(&c, NULL);
    initialize_ex(&c, &w, 0);
    send_open_ex(&c, uri, broken_op, 1);

    cJSON *msg;
    cJSON *d = cJSON_GetArrayItem(wait_publish(&c, uri, 1, &msg), 0);
    assert_string_equal(code_of(d), "tk-parse-error");
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(d, "severity")->valueint, 1);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(d, "source")->valuestring, "tkexport");
    cJSON *range = cJSON_GetObjectItemCaseSensitive(d, "range");
    assert_int_equal(num_at(range, "start", "line"), 4);
    /* the ';' after "int x = " is byte 44 (1-based) of the line; in UTF-16 it is unit 40 */
    assert_int_equal(num_at(range, "start", "character"), 40);
    assert_int_equal(num_at(range, "end", "line"), 4);
    assert_int_equal(num_at(range, "end", "character"), 41);
    cJSON_Delete(msg);

    /* the fix lives only in the buffer: the file on disk still has the error */
    char *fixed = replace(broken_op, "x = ;", "x = 1;");
    send_change(&c, uri, 2, fixed);
    free(fixed);
    wait_publish(&c, uri, 0, &msg);
    cJSON_Delete(msg);

    send_change(&c, uri, 3, broken_op);
    wait_publish(&c, uri, 1, &msg);
    cJSON_Delete(msg);

    sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didClose\",\"params\":{\"textDocument\":{\"uri\":\"%s\"}}}", uri);
    wait_publish(&c, uri, 0, &msg);
    cJSON_Delete(msg);

    shutdown_and_exit(&c, 9);
    remove_workspace(&w);
}

static const char two_defects[] =
    "#include <tk/op.h>\n"
    "\n"
    "TK_KERNEL_DECL(lsp_k);\n"
    "\n"
    "TK_OP(lsp_op2, \"BadName\", \"(Tensor x) -> Tensor\") {\n"
    "    return tk_wrap(ctx, lsp_k, TK_DIM3(1), TK_DIM3(256), in[0], out[0]);\n"
    "}\n";

static const char kernel_src[] =
    "#include <tk/kernel.h>\n"
    "\n"
    "TK_KERNEL void lsp_k(const float *x, float *y) { (void)x, (void)y; }\n";

static void lsp__fixing_one_defect_lowers_the_count_by_one_and_buffers_resolve_across_files(void **state)
{
    (void)state;
    workspace w;
    make_workspace(&w);
    write_file(&w, "ops/op2.c", two_defects);
    char uri[PATH_MAX * 3], kuri[PATH_MAX * 3];
    uri_of(uri, sizeof(uri), w.dir, "ops/op2.c");
    uri_of(kuri, sizeof(kuri), w.dir, "kernels/k.c");
    client c;
    start(&c, NULL);
    initialize_ex(&c, &w, 0);
    send_open_ex(&c, uri, two_defects, 1);

    cJSON *msg;
    cJSON *diags = wait_publish(&c, uri, 2, &msg);
    assert_string_equal(code_of(cJSON_GetArrayItem(diags, 0)), "tk-bad-op-name");
    assert_int_equal(num_at(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(diags, 0), "range"), "start", "line"), 4);
    assert_string_equal(code_of(cJSON_GetArrayItem(diags, 1)), "tk-undefined-kernel");
    cJSON_Delete(msg);

    char *fixed = replace(two_defects, "BadName", "test::good");
    send_change(&c, uri, 2, fixed);
    diags = wait_publish(&c, uri, 1, &msg);
    assert_string_equal(code_of(cJSON_GetArrayItem(diags, 0)), "tk-undefined-kernel");
    cJSON_Delete(msg);

    /* NOLINT comments count as the buffer has them, not as the file on disk does */
    char *quiet = replace(fixed, "out[0]);\n", "out[0]); // NOLINT(tk-undefined-kernel)\n");
    send_change(&c, uri, 3, quiet);
    free(quiet);
    wait_publish(&c, uri, 0, &msg);
    cJSON_Delete(msg);
    send_change(&c, uri, 4, fixed);
    wait_publish(&c, uri, 1, &msg);
    cJSON_Delete(msg);

    /* a kernel that exists only in an unsaved buffer of another file resolves the launch */
    send_open(&c, kuri, kernel_src);
    wait_publish(&c, uri, 0, &msg);
    cJSON_Delete(msg);

    free(fixed);
    shutdown_and_exit(&c, 2);
    remove_workspace(&w);
}

static void lsp__files_not_open_are_published_under_encoded_uris_and_cleared_when_fixed(void **state)
{
    (void)state;
    workspace w;
    make_workspace(&w);
    write_file(&w, "ops/my op.c", broken_op);
    char uri[PATH_MAX * 3];
    uri_of(uri, sizeof(uri), w.real, "ops/my op.c");
    assert_non_null(strstr(uri, "my%20op.c"));
    client c;
    start(&c, NULL);
    initialize(&c, &w); /* the workspace's findings come without any file being opened */
    cJSON *msg;
    wait_publish(&c, uri, 1, &msg);
    cJSON_Delete(msg);

    write_file(&w, "ops/my op.c", "int fine;\n");
    sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didSave\",\"params\":{\"textDocument\":{\"uri\":\"%s\"}}}", uri);
    wait_publish(&c, uri, 0, &msg);
    cJSON_Delete(msg);

    shutdown_and_exit(&c, 3);
    remove_workspace(&w);
}

static void lsp__malformed_input_and_unknown_methods_do_not_stop_the_server(void **state)
{
    (void)state;
    workspace w;
    make_workspace(&w);
    client c;
    start(&c, w.dir); /* no rootUri below: the server's working directory is the workspace */

    sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"textDocument/hover\",\"params\":{}}");
    cJSON *r = wait_reply(&c, 1);
    assert_int_equal(num_at(r, "error", "code"), -32002);
    cJSON_Delete(r);

    static const char garbage[] = "Foo: bar\r\n\r\n"                       /* no Content-Length */
                                  "Content-Length: abc\r\n\r\n"            /* not a number */
                                  "Content-Length: 9\r\n\r\n{\"id\": 2,"   /* not JSON */
                                  "Content-Length: 5\r\n\r\n[1,2]"         /* not an object */
                                  "Content-Length: 8\r\n\r\n{\"id\":2}" /* a response: ignored */
                                  "\r\n";
    send_raw(&c, garbage, sizeof(garbage) - 1);
    sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"method\":\"initialize\",\"params\":{\"rootUri\":null}}");
    r = recv_msg(&c);
    assert_non_null(r);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(r, "id")->valuestring, "two");
    assert_non_null(cJSON_GetObjectItemCaseSensitive(r, "result"));
    cJSON_Delete(r);

    sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"workspace/somethingNew\",\"params\":{}}"); /* ignored */
    sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"textDocument/hover\",\"params\":{}}");
    r = recv_msg(&c);
    assert_non_null(r);
    assert_int_equal(cJSON_GetObjectItemCaseSensitive(r, "id")->valueint, 3);
    assert_int_equal(num_at(r, "error", "code"), -32601);
    cJSON_Delete(r);

    /* exit without shutdown: status 1 */
    sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}");
    assert_int_equal(finish(&c), 1);
    remove_workspace(&w);
}

static void lsp__end_of_input_after_shutdown_exits_0_and_help_is_there(void **state)
{
    (void)state;
    workspace w;
    make_workspace(&w);
    client c;
    start(&c, NULL);
    initialize(&c, &w);
    sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"shutdown\"}");
    cJSON_Delete(wait_reply(&c, 2));
    assert_int_equal(finish(&c), 0); /* the client closed the pipe instead of sending exit */

    int st = system("'" TK_TKEXPORT "' lsp --help >/dev/null");
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    st = system("'" TK_TKEXPORT "' lsp --no-such-option 2>/dev/null");
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    remove_workspace(&w);
}

/* A workspace of n generated sources (each includes the op header and libc's), linted cold: a
 * fresh summary cache, so the lint takes seconds on a small machine. */
static void make_large_workspace(workspace *w, int n, char *cache, size_t cache_len)
{
    make_workspace(w);
    for (int i = 0; i < n; i++) {
        char rel[64], text[512];
        snprintf(rel, sizeof rel, "gen/op%03d.c", i);
        snprintf(text, sizeof text,
                 "#include <math.h>\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <tk/op.h>\n"
                 "double f%d(double x) { char b[32]; snprintf(b, sizeof b, \"%%g\", sin(x)); return atof(b) + %d; }\n",
                 i, i);
        write_file(w, rel, text);
    }
    snprintf(cache, cache_len, "%s/cache", w->dir);
    setenv("TKEXPORT_CACHE_DIR", cache, 1);
}

/* Waits up to ms for the server to end by itself (stdin left open); its exit status, or -1. */
static int wait_exit(client *c, double ms)
{
    int st = 0;
    double until = now_ms() + ms;
    pid_t r;
    while ((r = waitpid(c->pid, &st, WNOHANG)) == 0 && now_ms() < until)
        usleep(10000);
    if (r == 0) {
        kill(c->pid, SIGKILL);
        waitpid(c->pid, &st, 0);
    }
    close(c->to);
    close(c->from);
    free(c->buf);
    return r > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The lint runs beside the message loop: while a cold workspace of 200 files is being linted,
 * $/cancelRequest is taken, shutdown is answered at once (it waited for the whole lint before:
 * 57 s on a 217-file workspace) and exit ends the process within a second or so. */
static void lsp__shutdown_is_answered_at_once_while_a_large_workspace_is_linted(void **state)
{
    (void)state;
    workspace w;
    char cache[PATH_MAX + 16];
    const char *old = getenv("TKEXPORT_CACHE_DIR");
    char *saved = old ? strdup(old) : NULL;
    make_large_workspace(&w, 200, cache, sizeof cache);
    client c;
    start(&c, NULL);
    initialize(&c, &w); /* initialized: the workspace's lint starts 20 ms later */
    usleep(400000);
    sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancelRequest\",\"params\":{\"id\":1}}");
    double t0 = now_ms();
    sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"shutdown\"}");
    cJSON *r = wait_reply(&c, 2);
    double answered = now_ms() - t0;
    assert_true(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r, "result")));
    cJSON_Delete(r);
    if (answered >= 1000)
        fail_msg("shutdown answered after %.0f ms while linting", answered);
    t0 = now_ms();
    sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}");
    assert_int_equal(wait_exit(&c, 10000), 0);
    double gone = now_ms() - t0;
    if (gone >= 3000)
        fail_msg("the server took %.0f ms to exit after 'exit' while linting", gone);
    if (saved)
        setenv("TKEXPORT_CACHE_DIR", saved, 1);
    else
        unsetenv("TKEXPORT_CACHE_DIR");
    free(saved);
    remove_workspace(&w);
}

/* The server ends when its client goes: end of input while it lints, or the process that
 * initialize named (processId) ending while stdin stays open. */
static void lsp__the_server_exits_when_its_client_is_gone(void **state)
{
    (void)state;
    workspace w;
    char cache[PATH_MAX + 16];
    const char *old = getenv("TKEXPORT_CACHE_DIR");
    char *saved = old ? strdup(old) : NULL;
    make_large_workspace(&w, 60, cache, sizeof cache);
    client c;
    start(&c, NULL);
    initialize(&c, &w);
    usleep(300000);
    double t0 = now_ms();
    assert_int_equal(finish(&c), 1); /* end of input without shutdown */
    if (now_ms() - t0 >= 3000)
        fail_msg("the server took %.0f ms to exit at end of input while linting", now_ms() - t0);

    pid_t editor = fork();
    assert_true(editor >= 0);
    if (editor == 0) {
        pause();
        _exit(0);
    }
    start(&c, NULL);
    char root[PATH_MAX * 3];
    uri_of(root, sizeof(root), w.dir, NULL);
    sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"processId\":%d,"
              "\"rootUri\":\"%s\",\"capabilities\":{}}}", (int)editor, root);
    cJSON_Delete(wait_reply(&c, 1));
    kill(editor, SIGKILL);
    waitpid(editor, NULL, 0);
    assert_int_equal(wait_exit(&c, 10000), 1);
    if (saved)
        setenv("TKEXPORT_CACHE_DIR", saved, 1);
    else
        unsetenv("TKEXPORT_CACHE_DIR");
    free(saved);
    remove_workspace(&w);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(lsp__parse_error_is_published_at_its_utf16_position_and_goes_away_when_fixed),
        cmocka_unit_test(lsp__fixing_one_defect_lowers_the_count_by_one_and_buffers_resolve_across_files),
        cmocka_unit_test(lsp__files_not_open_are_published_under_encoded_uris_and_cleared_when_fixed),
        cmocka_unit_test(lsp__malformed_input_and_unknown_methods_do_not_stop_the_server),
        cmocka_unit_test(lsp__end_of_input_after_shutdown_exits_0_and_help_is_there),
        cmocka_unit_test(lsp__shutdown_is_answered_at_once_while_a_large_workspace_is_linted),
        cmocka_unit_test(lsp__the_server_exits_when_its_client_is_gone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
