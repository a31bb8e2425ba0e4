/* libFuzzer: the symbolic-expression parser (runtime/sym.c) on arbitrary text over three symbols;
 * what parses must print, parse back to the same text, and evaluate the same at a point. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tk/runtime.h>

#include "strbuf.h"
#include "sym.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static tk_ctx *ctx;
    static tk_sym vars[3];
    static const char *const names[] = {"batch", "seq", "one"};
    if (!ctx) {
        tk_ctx_new(&ctx, (tk_device){TK_DEVICE_CPU, 0});
        vars[0] = tk_sym_var(ctx, "batch", 1, 1024);
        vars[1] = tk_sym_var(ctx, "seq", 1, 4096);
        vars[2] = tk_sym_var(ctx, "one", 7, 7);
    }
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    /* a context per input: expressions live as long as it */
    tk_ctx *c = NULL;
    tk_ctx_new(&c, (tk_device){TK_DEVICE_CPU, 0});
    tk_sym s, back;
    if (c && tk_sym_parse(c, text, names, vars, 3, &s) == 0) {
        tk_strbuf a = TK_STRBUF_INIT, b = TK_STRBUF_INIT;
        if (tk_sym_print(s, &a) == 0 && tk_sym_parse(c, a.buf, names, vars, 3, &back) == 0 &&
            tk_sym_print(back, &b) == 0 && strcmp(a.buf, b.buf) != 0)
            abort(); /* printed text that reads back as something else */
        const int64_t at[] = {3, 5, 7};
        int64_t x, y;
        int rx = tk_sym_eval(s, names, at, 3, &x), ry = tk_sym_eval(back, names, at, 3, &y);
        if (rx == 0 && ry == 0 && x != y)
            abort();
        tk_strbuf_release(&a);
        tk_strbuf_release(&b);
    }
    tk_error_clear();
    tk_ctx_free(c);
    free(text);
    return 0;
}
