/* Ed25519 keys and signatures for packages (docs/security.md), through OpenSSL's libcrypto: key
 * pairs, private keys in PEM PKCS#8 files, public keys as text ("ed25519:<base64 of the 32 raw
 * bytes>") with a short key id for people, signing and verifying bytes, and the set of public keys
 * a machine trusts (a trust file, TKEXPORT_TRUSTED_KEYS, the caller's). What is signed, and where
 * the signature lies in a package, is runtime/pkgfile.c's business. Internal to tkexport. */
#ifndef TK_SIGN_H
#define TK_SIGN_H

#include <stddef.h>

#define TK_SIGN_PUBLIC_BYTES 32
#define TK_SIGN_BYTES 64
#define TK_SIGN_PREFIX "ed25519:"
#define TK_SIGN_TEXT_MAX 56 /* "ed25519:" + 44 base64 characters + NUL, rounded up */
#define TK_SIGN_ID_MAX 17   /* 16 hex digits + NUL */

/* A private key (libcrypto's EVP_PKEY inside). */
typedef struct tk_sign_key tk_sign_key;

/* A public key: its 32 raw bytes. */
typedef struct tk_sign_public {
    unsigned char raw[TK_SIGN_PUBLIC_BYTES];
} tk_sign_public;

/* A new random key pair. TK_EINTERNAL when libcrypto cannot make one. */
int tk_sign_key_generate(tk_sign_key **out);
/* Reads a PEM PKCS#8 private key ("-----BEGIN PRIVATE KEY-----", as `openssl genpkey -algorithm
 * ed25519` writes it). TK_EIO for an unreadable file, TK_EINVAL for one that holds no Ed25519
 * private key; the message names the file. */
int tk_sign_key_load(tk_sign_key **out, const char *path);
/* Writes the private key as PEM PKCS#8 with mode 0600, atomically (tk_file_write_atomic_mode).
 * With keep_existing, an existing file is left alone and the call returns 1. */
int tk_sign_key_save(const tk_sign_key *key, const char *path, int keep_existing);
void tk_sign_key_free(tk_sign_key *key);
/* The public half of key. */
void tk_sign_key_public(const tk_sign_key *key, tk_sign_public *out);

/* The 64-byte signature of the len bytes at msg. TK_EINTERNAL when libcrypto fails. */
int tk_sign_bytes(unsigned char sig[TK_SIGN_BYTES], const tk_sign_key *key, const void *msg, size_t len);
/* 0 when sig is pub's signature of msg, 1 when it is not (no message set), TK_EINTERNAL when
 * libcrypto fails. */
int tk_sign_verify(const tk_sign_public *pub, const unsigned char sig[TK_SIGN_BYTES], const void *msg, size_t len);

/* "ed25519:<base64>" (exactly: the prefix, 44 characters of standard base64 with its padding,
 * nothing else; len bytes of text). TK_EINVAL, with a message, for anything else. */
int tk_sign_public_parse(tk_sign_public *out, const char *text, size_t len);
/* The text form of pub, "ed25519:<base64>". */
void tk_sign_public_format(const tk_sign_public *pub, char out[TK_SIGN_TEXT_MAX]);
/* The key id people compare: the first 16 hex digits of the SHA-256 of the raw public key. */
void tk_sign_public_id(const tk_sign_public *pub, char out[TK_SIGN_ID_MAX]);

/* Standard base64 with padding: out has room for 4 * ((n + 2) / 3) + 1 characters. */
void tk_base64_encode(char *out, const unsigned char *data, size_t n);
/* Strict decoding of exactly len characters into at most max bytes (*n set): -1 for anything
 * that is not canonical base64 (wrong characters, padding, non-zero spare bits, too long). */
int tk_base64_decode(unsigned char *out, size_t max, size_t *n, const char *text, size_t len);

/* --- trust ---------------------------------------------------------------------------------- */

/* The public keys a reader accepts signers from, and where they came from (for messages). */
typedef struct tk_trust {
    size_t n;
    tk_sign_public *keys;
    char *sources; /* "'~/.config/tkexport/trusted_keys', TKEXPORT_TRUSTED_KEYS, the caller's keys" */
} tk_trust;

/* The trust file: $TKEXPORT_TRUST_FILE when set, else $XDG_CONFIG_HOME/tkexport/trusted_keys
 * (XDG_CONFIG_HOME defaulting to ~/.config). malloc'd; NULL when neither HOME nor the variables
 * are set. */
char *tk_trust_file_path(void);

/* Collects the trusted keys: unless ignore_default, those of the trust file (one key per line,
 * "ed25519:BASE64 [comment]", '#' starts a comment; a missing file holds none) and of
 * TKEXPORT_TRUSTED_KEYS (keys separated by white space or commas); then extra (NULL-terminated,
 * or NULL). A malformed key is TK_EINVAL naming the file and line, the variable, or the
 * option's index. t is released on failure. */
int tk_trust_load(tk_trust *t, const char *const *extra, int ignore_default);
/* 1 when pub is among t's keys. */
int tk_trust_has(const tk_trust *t, const tk_sign_public *pub);
void tk_trust_release(tk_trust *t);

/* Appends pub to the trust file (created, with its folder, when missing) as one line
 * "ed25519:BASE64 comment", unless it is there already. *path_out (malloc'd, may be NULL to
 * drop it) is the file; *added is 0 when the key was already trusted. */
int tk_trust_add(const tk_sign_public *pub, const char *comment, char **path_out, int *added);

/* --- the per-user signing key -------------------------------------------------------------- */

/* $XDG_CONFIG_HOME/tkexport/signing_key (XDG_CONFIG_HOME defaulting to ~/.config); malloc'd,
 * NULL when neither variable is set. */
char *tk_sign_default_key_path(void);

/* The per-user signing key: loaded, or on first use created (0600) and its public half added to
 * the trust file, so that what this user compiles runs here. *created is 1 when this call
 * created it; *key_path and *trust_path (malloc'd; either may be NULL to drop it) name the
 * files. */
int tk_sign_key_default(tk_sign_key **out, int *created, char **key_path, char **trust_path);

#endif
