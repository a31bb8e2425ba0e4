/* libFuzzer: the .npy reader (cli/npy.c, tkexport run's inputs) on arbitrary bytes in a file, as
 * every dtype it converts to. */
#define _GNU_SOURCE /* memfd_create */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include <tk/runtime.h>

#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const tk_dtype want[] = {TK_F32, TK_F16, TK_BF16, TK_I32, TK_I64};
    int fd = memfd_create("fuzz.npy", 0);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) == (ssize_t)size) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
            tk_tensor *t = NULL;
            if (tk_npy_read(&t, path, &want[i]) == 0)
                tk_tensor_free(t);
        }
    }
    close(fd);
    return 0;
}
