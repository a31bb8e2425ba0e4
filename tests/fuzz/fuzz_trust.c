/* libFuzzer: the readers of trusted public keys (runtime/sign.c), which decide whose packages run:
 * the input as a trust file ($TKEXPORT_TRUST_FILE), as the TKEXPORT_TRUSTED_KEYS list and as one
 * key's text. Whatever a reader accepts must be well formed: a key that parses prints back as the
 * same text, every key of a list or file is found in the trust it built, and a base64 text that
 * decodes encodes back to itself (strict, canonical decoding). */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tk/runtime.h>

#include "sign.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char path[4096];
    if (!*path) { /* the trust file: one per process, in TMPDIR */
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/fuzz_trust.%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
        setenv("TKEXPORT_TRUST_FILE", path, 1);
    }
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    /* one key's text */
    tk_sign_public k;
    if (tk_sign_public_parse(&k, text, size) == 0) {
        char back[TK_SIGN_TEXT_MAX];
        tk_sign_public_format(&k, back);
        if (strlen(back) != size || memcmp(back, text, size) != 0)
            abort(); /* accepted text that is not the key's own form */
    }
    /* base64 alone */
    unsigned char raw[96];
    size_t n = 0;
    if (tk_base64_decode(raw, sizeof raw, &n, text, size) == 0) {
        char back[132];
        tk_base64_encode(back, raw, n);
        if (strlen(back) != size || memcmp(back, text, size) != 0)
            abort();
    }

    /* the trust file, then the same text as the environment's list (no file) */
    FILE *f = fopen(path, "wb");
    if (f) {
        int ok = fwrite(data, 1, size, f) == size;
        if (fclose(f) == 0 && ok) {
            unsetenv("TKEXPORT_TRUSTED_KEYS");
            tk_trust t;
            if (tk_trust_load(&t, NULL, 0) == 0) {
                for (size_t i = 0; i < t.n; i++)
                    if (!tk_trust_has(&t, &t.keys[i]))
                        abort();
                tk_trust_release(&t);
            }
        }
        unlink(path);
    }
    if (!memchr(data, '\0', size)) {
        setenv("TKEXPORT_TRUSTED_KEYS", text, 1);
        tk_trust t;
        if (tk_trust_load(&t, NULL, 0) == 0)
            tk_trust_release(&t);
        unsetenv("TKEXPORT_TRUSTED_KEYS");
    }
    tk_error_clear();
    free(text);
    return 0;
}
