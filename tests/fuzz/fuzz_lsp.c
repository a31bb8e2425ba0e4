/* libFuzzer: the language server's message loop (cli/cmd_lsp.c: header framing, JSON, every
 * request and notification) on arbitrary input, in-process through a pipe as its stdin; replies
 * go to /dev/null. The lint is never reached (its debounce is longer than any input lasts). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "cli.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int devnull = -1;
    if (devnull < 0)
        devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (size > (1u << 16))
        return 0; /* the pipe must hold it all */
    int p[2];
    if (pipe(p) != 0)
        return 0;
    fcntl(p[1], F_SETPIPE_SZ, 1 << 17);
    if (write(p[1], data, size) != (ssize_t)size) {
        close(p[0]);
        close(p[1]);
        return 0;
    }
    close(p[1]);
    int saved_in = dup(0), saved_out = dup(1);
    dup2(p[0], 0);
    dup2(devnull, 1);
    close(p[0]);
    char a0[] = "tkexport", a1[] = "lsp", a2[] = "--debounce", a3[] = "60000";
    char *argv[] = {a0, a1, a2, a3, NULL};
    cmd_lsp(4, argv);
    dup2(saved_in, 0);
    dup2(saved_out, 1);
    close(saved_in);
    close(saved_out);
    return 0;
}
