/* Ed25519 keys, signatures and trusted keys (runtime/sign.h) over OpenSSL's EVP interface:
 * EVP_PKEY_ED25519 keys, EVP_DigestSign/EVP_DigestVerify without a digest (Ed25519 hashes the
 * message itself, RFC 8032), PEM PKCS#8 for private keys. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tk/error.h>

#include "fsutil.h"
#include "sha256.h"
#include "sign.h"
#include "strbuf.h"

#define KEY_FILE_MAX (64u << 10)
#define TRUST_FILE_MAX (1u << 20)

struct tk_sign_key {
    EVP_PKEY *pkey;
};

/* libcrypto's queue of error records: emptied after a failure we report ourselves, so that a
 * later, unrelated libcrypto call does not find stale records. */
static int crypto_fail(int code, const char *what)
{
    unsigned long e = ERR_peek_last_error();
    char detail[256] = "";
    if (e)
        ERR_error_string_n(e, detail, sizeof detail);
    ERR_clear_error();
    return tk_error_set(code, "%s%s%s", what, detail[0] ? ": " : "", detail);
}

/* --- base64 ---------------------------------------------------------------------------------- */

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void tk_base64_encode(char *out, const unsigned char *data, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)data[i] << 16 | (i + 1 < n ? (unsigned)data[i + 1] << 8 : 0) |
                     (i + 2 < n ? data[i + 2] : 0);
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    out[o] = '\0';
}

static int b64_value(char c)
{
    const char *p = c ? strchr(b64, c) : NULL;
    return p ? (int)(p - b64) : -1;
}

int tk_base64_decode(unsigned char *out, size_t max, size_t *n, const char *text, size_t len)
{
    *n = 0;
    if (len % 4)
        return -1;
    for (size_t i = 0; i < len; i += 4) {
        int last = i + 4 == len;
        int pad = (text[i + 3] == '=') + (text[i + 2] == '=' && text[i + 3] == '=');
        if (pad && !last)
            return -1;
        int v[4] = {0, 0, 0, 0};
        for (int k = 0; k < 4 - pad; k++)
            if ((v[k] = b64_value(text[i + k])) < 0)
                return -1;
        unsigned bits = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 | (unsigned)v[3];
        /* canonical: the bits below the last byte kept are zero */
        if ((pad == 1 && (bits & 0xff)) || (pad == 2 && (bits & 0xffff)))
            return -1;
        size_t take = 3 - (size_t)pad;
        if (*n + take > max)
            return -1;
        for (size_t k = 0; k < take; k++)
            out[(*n)++] = (unsigned char)(bits >> (16 - 8 * k));
    }
    return 0;
}

/* --- public keys ------------------------------------------------------------------------------ */

/* Up to 48 characters of text for a message, with anything unprintable as '?'. */
static const char *shown(const char *text, size_t len, char buf[64])
{
    size_t n = len < 48 ? len : 48, i;
    for (i = 0; i < n; i++)
        buf[i] = text[i] >= 0x20 && text[i] < 0x7f && text[i] != '\'' ? text[i] : '?';
    if (len > n)
        buf[i++] = '.', buf[i++] = '.', buf[i++] = '.';
    buf[i] = '\0';
    return buf;
}

int tk_sign_public_parse(tk_sign_public *out, const char *text, size_t len)
{
    size_t pl = strlen(TK_SIGN_PREFIX), n = 0;
    char buf[64];
    if (len != pl + 44 || strncmp(text, TK_SIGN_PREFIX, pl) != 0 ||
        tk_base64_decode(out->raw, sizeof out->raw, &n, text + pl, len - pl) != 0 || n != TK_SIGN_PUBLIC_BYTES)
        return tk_error_set(TK_EINVAL, "'%s' is not a public key (expected ed25519: and the base64 of 32 bytes)",
                            shown(text, len, buf));
    return 0;
}

void tk_sign_public_format(const tk_sign_public *pub, char out[TK_SIGN_TEXT_MAX])
{
    size_t pl = strlen(TK_SIGN_PREFIX);
    memcpy(out, TK_SIGN_PREFIX, pl);
    tk_base64_encode(out + pl, pub->raw, sizeof pub->raw);
}

void tk_sign_public_id(const tk_sign_public *pub, char out[TK_SIGN_ID_MAX])
{
    char hex[65];
    if (tk_sha256_hex(pub->raw, sizeof pub->raw, hex) != 0)
        snprintf(hex, sizeof hex, "%s", "????????????????");
    memcpy(out, hex, 16);
    out[16] = '\0';
}

/* --- private keys ----------------------------------------------------------------------------- */

int tk_sign_key_generate(tk_sign_key **out)
{
    *out = NULL;
    tk_sign_key *k = calloc(1, sizeof(*k));
    if (!k)
        return tk_error_set(TK_ENOMEM, "out of memory");
    EVP_PKEY_CTX *pc = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
    int rc = 0;
    if (!pc || EVP_PKEY_keygen_init(pc) <= 0 || EVP_PKEY_keygen(pc, &k->pkey) <= 0) {
        rc = crypto_fail(TK_EINTERNAL, "cannot generate an ed25519 key pair");
        free(k);
    } else {
        *out = k;
    }
    EVP_PKEY_CTX_free(pc);
    return rc;
}

/* PEM_read_bio_PrivateKey's passphrase callback: none, so that an encrypted key is an error
 * instead of a prompt on the terminal. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

int tk_sign_key_load(tk_sign_key **out, const char *path)
{
    *out = NULL;
    char *data = NULL;
    size_t len = 0;
    int rc = tk_file_read(&data, &len, path, KEY_FILE_MAX);
    if (rc)
        return rc;
    tk_sign_key *k = calloc(1, sizeof(*k));
    BIO *bio = k ? BIO_new_mem_buf(data, (int)len) : NULL;
    if (!k || !bio) {
        rc = tk_error_set(TK_ENOMEM, "out of memory reading '%s'", path);
        goto done;
    }
    if (!(k->pkey = PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL))) {
        ERR_clear_error();
        rc = tk_error_set(TK_EFORMAT, "'%s' is not a private key in PEM (PKCS#8) without a passphrase (tkexport keygen "
                                     "writes one)", path);
        goto done;
    }
    if (EVP_PKEY_get_id(k->pkey) != EVP_PKEY_ED25519) {
        rc = tk_error_set(TK_EFORMAT, "'%s' holds a %s key; packages are signed with ed25519 keys (tkexport keygen "
                                     "writes one)", path, EVP_PKEY_get0_type_name(k->pkey) ? EVP_PKEY_get0_type_name(k->pkey) : "non-ed25519");
        goto done;
    }
    *out = k;
    k = NULL;
done:
    BIO_free(bio);
    OPENSSL_cleanse(data, len);
    free(data);
    tk_sign_key_free(k);
    return rc;
}

int tk_sign_key_save(const tk_sign_key *key, const char *path, int keep_existing)
{
    BIO *bio = BIO_new(BIO_s_mem());
    char *pem = NULL;
    long len = 0;
    int rc;
    if (!bio || !PEM_write_bio_PrivateKey(bio, key->pkey, NULL, NULL, 0, NULL, NULL) ||
        (len = BIO_get_mem_data(bio, &pem)) <= 0)
        rc = crypto_fail(TK_EINTERNAL, "cannot encode the private key");
    else
        rc = tk_file_write_atomic_mode(path, pem, (size_t)len, 0600, keep_existing);
    if (pem)
        OPENSSL_cleanse(pem, (size_t)len);
    BIO_free(bio);
    return rc;
}

void tk_sign_key_free(tk_sign_key *key)
{
    if (!key)
        return;
    EVP_PKEY_free(key->pkey);
    free(key);
}

void tk_sign_key_public(const tk_sign_key *key, tk_sign_public *out)
{
    size_t len = sizeof out->raw;
    /* an Ed25519 key always has its 32-byte public half */
    if (EVP_PKEY_get_raw_public_key(key->pkey, out->raw, &len) != 1 || len != sizeof out->raw) {
        memset(out->raw, 0, sizeof out->raw);
        ERR_clear_error();
    }
}

/* --- signatures ------------------------------------------------------------------------------- */

int tk_sign_bytes(unsigned char sig[TK_SIGN_BYTES], const tk_sign_key *key, const void *msg, size_t len)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    size_t n = TK_SIGN_BYTES;
    int rc = 0;
    if (!m || EVP_DigestSignInit(m, NULL, NULL, NULL, key->pkey) != 1 ||
        EVP_DigestSign(m, sig, &n, msg, len) != 1 || n != TK_SIGN_BYTES)
        rc = crypto_fail(TK_EINTERNAL, "cannot sign");
    EVP_MD_CTX_free(m);
    return rc;
}

int tk_sign_verify(const tk_sign_public *pub, const unsigned char sig[TK_SIGN_BYTES], const void *msg, size_t len)
{
    EVP_PKEY *pk = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub->raw, sizeof pub->raw);
    EVP_MD_CTX *m = pk ? EVP_MD_CTX_new() : NULL;
    int rc;
    if (!m || EVP_DigestVerifyInit(m, NULL, NULL, NULL, pk) != 1) {
        rc = crypto_fail(TK_EINTERNAL, "cannot verify a signature");
    } else {
        int ok = EVP_DigestVerify(m, sig, TK_SIGN_BYTES, msg, len);
        rc = ok == 1 ? 0 : 1;
        ERR_clear_error(); /* a signature that does not verify leaves records behind */
    }
    EVP_MD_CTX_free(m);
    EVP_PKEY_free(pk);
    return rc;
}

/* --- trust ------------------------------------------------------------------------------------ */

/* name in tkexport's configuration folder (malloc'd), or NULL. */
static char *config_file(const char *name)
{
    char *dir = tk_default_config_dir();
    if (!dir)
        return NULL;
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    free(dir);
    return p;
}

char *tk_trust_file_path(void)
{
    const char *e = getenv("TKEXPORT_TRUST_FILE");
    if (e && *e)
        return strdup(e);
    return config_file("trusted_keys");
}

static int trust_push(tk_trust *t, const tk_sign_public *k)
{
    if (tk_trust_has(t, k))
        return 0;
    tk_sign_public *grown = realloc(t->keys, (t->n + 1) * sizeof(*grown));
    if (!grown)
        return tk_error_set(TK_ENOMEM, "out of memory");
    t->keys = grown;
    t->keys[t->n++] = *k;
    return 0;
}

/* One key of a list (file, variable, option): parsed, with where it came from before the parse
 * error's words. */
static int trust_parse(tk_sign_public *k, const char *text, size_t len, const char *where)
{
    if (tk_sign_public_parse(k, text, len) == 0)
        return 0;
    char why[512];
    snprintf(why, sizeof why, "%s", tk_error_last());
    return tk_error_set(TK_EFORMAT, "%s: %s", where, why);
}

/* The keys of a trust file into t (when t is not NULL); *found is 0 for a file that does not
 * exist. */
static int trust_file(tk_trust *t, const char *path, int *found)
{
    struct stat st;
    *found = 0;
    if (stat(path, &st) != 0 && errno == ENOENT)
        return 0;
    *found = 1;
    char *data = NULL;
    size_t len = 0;
    int rc = tk_file_read(&data, &len, path, TRUST_FILE_MAX), line = 0;
    for (char *p = data; !rc && p && p < data + len;) {
        char *end = memchr(p, '\n', (size_t)(data + len - p));
        char *stop = end ? end : data + len, *hash = memchr(p, '#', (size_t)(stop - p));
        line++;
        if (hash)
            stop = hash;
        while (p < stop && (*p == ' ' || *p == '\t' || *p == '\r'))
            p++;
        char *tok = p;
        while (p < stop && *p != ' ' && *p != '\t' && *p != '\r')
            p++;
        if (p > tok) {
            tk_sign_public k;
            char where[1100];
            snprintf(where, sizeof where, "'%s' line %d", path, line);
            if (!(rc = trust_parse(&k, tok, (size_t)(p - tok), where)) && t)
                rc = trust_push(t, &k);
        }
        p = end ? end + 1 : data + len;
    }
    free(data);
    return rc;
}

int tk_trust_load(tk_trust *t, const char *const *extra, int ignore_default)
{
    memset(t, 0, sizeof(*t));
    tk_strbuf src = TK_STRBUF_INIT;
    char *path = NULL;
    int rc = 0;
    if (!ignore_default) {
        int found = 0;
        if ((path = tk_trust_file_path())) {
            rc = trust_file(t, path, &found);
            tk_strbuf_addf(&src, "'%s'%s", path, found ? "" : " (absent)");
        } else {
            tk_strbuf_adds(&src, "no trust file (neither HOME nor XDG_CONFIG_HOME is set)");
        }
        const char *env = getenv("TKEXPORT_TRUSTED_KEYS");
        if (env && *env) {
            tk_strbuf_adds(&src, ", TKEXPORT_TRUSTED_KEYS");
            for (const char *p = env; !rc && *p;) {
                size_t skip = strspn(p, " \t\r\n,"), n;
                p += skip;
                if (!(n = strcspn(p, " \t\r\n,")))
                    continue;
                tk_sign_public k;
                if (!(rc = trust_parse(&k, p, n, "TKEXPORT_TRUSTED_KEYS")))
                    rc = trust_push(t, &k);
                p += n;
            }
        }
    }
    size_t nextra = 0;
    for (; extra && extra[nextra] && !rc; nextra++) {
        char where[64];
        tk_sign_public k;
        snprintf(where, sizeof where, "trusted key %zu of the options", nextra);
        if (!(rc = trust_parse(&k, extra[nextra], strlen(extra[nextra]), where)))
            rc = trust_push(t, &k);
    }
    if (nextra)
        tk_strbuf_addf(&src, "%sthe caller's trusted_keys", src.len ? ", " : "");
    else if (!src.len)
        tk_strbuf_adds(&src, "nowhere (the caller ignores the default trust and gives no keys)");
    free(path);
    if (!rc && !(t->sources = tk_strbuf_detach(&src)))
        rc = tk_error_set(TK_ENOMEM, "out of memory");
    tk_strbuf_release(&src);
    if (rc)
        tk_trust_release(t);
    return rc;
}

int tk_trust_has(const tk_trust *t, const tk_sign_public *pub)
{
    for (size_t i = 0; i < t->n; i++)
        if (!memcmp(t->keys[i].raw, pub->raw, sizeof pub->raw))
            return 1;
    return 0;
}

void tk_trust_release(tk_trust *t)
{
    if (!t)
        return;
    free(t->keys);
    free(t->sources);
    memset(t, 0, sizeof(*t));
}

int tk_trust_add(const tk_sign_public *pub, const char *comment, char **path_out, int *added)
{
    char *path = tk_trust_file_path(), *data = NULL, text[TK_SIGN_TEXT_MAX];
    tk_trust t = {0};
    int rc = 0, found = 0, fd = -1;
    *added = 0;
    if (path_out)
        *path_out = NULL;
    if (!path)
        return tk_error_set(TK_EINVAL, "no trust file: set HOME, XDG_CONFIG_HOME or TKEXPORT_TRUST_FILE");
    if ((rc = trust_file(&t, path, &found)) || tk_trust_has(&t, pub))
        goto done;
    char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        *slash = '\0';
        rc = tk_mkdirs(path);
        *slash = '/';
        if (rc)
            goto done;
    }
    /* a newline first when the file does not end with one */
    size_t len = 0;
    int newline = found && tk_file_read(&data, &len, path, TRUST_FILE_MAX) == 0 && len && data[len - 1] != '\n';
    tk_error_clear();
    tk_sign_public_format(pub, text);
    tk_strbuf line = TK_STRBUF_INIT;
    tk_strbuf_addf(&line, "%s%s", newline ? "\n" : "", text);
    if (comment && *comment) {
        tk_strbuf_adds(&line, " ");
        for (const char *c = comment; *c; c++)
            tk_strbuf_add(&line, *c == '\n' || *c == '\r' ? " " : c, 1);
    }
    tk_strbuf_adds(&line, "\n");
    /* one write of one line with O_APPEND: lines added at once by two processes do not mix */
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (!line.buf)
        rc = tk_error_set(TK_ENOMEM, "out of memory");
    else if (fd < 0 || write(fd, line.buf, line.len) != (ssize_t)line.len)
        rc = tk_error_set(TK_EIO, "cannot add a key to '%s': %s", path, strerror(errno));
    else
        *added = 1;
    tk_strbuf_release(&line);
done:
    if (fd >= 0 && close(fd) != 0 && !rc)
        rc = tk_error_set(TK_EIO, "cannot add a key to '%s': %s", path, strerror(errno));
    tk_trust_release(&t);
    free(data);
    if (!rc && path_out)
        *path_out = path;
    else
        free(path);
    return rc;
}

/* --- the per-user signing key ----------------------------------------------------------------- */

char *tk_sign_default_key_path(void)
{
    return config_file("signing_key");
}

int tk_sign_key_default(tk_sign_key **out, int *created, char **key_path, char **trust_path)
{
    char *path = tk_sign_default_key_path(), *trust = NULL;
    tk_sign_key *key = NULL;
    int rc = 0;
    *out = NULL;
    *created = 0;
    if (key_path)
        *key_path = NULL;
    if (trust_path)
        *trust_path = NULL;
    if (!path)
        return tk_error_set(TK_EINVAL, "no signing key: neither HOME nor XDG_CONFIG_HOME is set (give one with "
                                       "--sign-key or TKEXPORT_SIGN_KEY)");
    if (access(path, F_OK) == 0) {
        rc = tk_sign_key_load(&key, path);
        goto done;
    }
    char *slash = strrchr(path, '/');
    *slash = '\0';
    rc = tk_mkdirs(path);
    *slash = '/';
    if (rc || (rc = tk_sign_key_generate(&key)) || (rc = tk_sign_key_save(key, path, 1)) < 0)
        goto done;
    if (rc == 1) { /* another process made it first: use theirs */
        tk_sign_key_free(key);
        key = NULL;
        rc = tk_sign_key_load(&key, path);
        goto done;
    }
    tk_sign_public pub;
    char comment[1100];
    int added = 0;
    tk_sign_key_public(key, &pub);
    snprintf(comment, sizeof comment, "tkexport signing key %s", path);
    if ((rc = tk_trust_add(&pub, comment, &trust, &added)))
        goto done;
    *created = 1;
done:
    if (rc) {
        tk_sign_key_free(key);
        free(trust);
        free(path);
        return rc;
    }
    *out = key;
    if (key_path)
        *key_path = path;
    else
        free(path);
    if (trust_path)
        *trust_path = trust;
    else
        free(trust);
    return 0;
}
