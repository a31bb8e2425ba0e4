/* libFuzzer: the .tkprog reader (runtime/tkprog.c: the zip, program.json, the weights, the sources
 * and their digests) on arbitrary bytes. */
#include <stddef.h>
#include <stdint.h>

#include "progmodel.h"
#include "tkprog.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tk_program_model *m = NULL;
    if (tk_tkprog_read_mem(&m, data, size, "'fuzz.tkprog'") == 0)
        tk_program_model_free(m);
    return 0;
}
