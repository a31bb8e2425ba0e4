/* libFuzzer: program.json (runtime/program_json.c) on arbitrary text: every field, the symbolic
 * expressions of dims and guards, the op table. */
#include <stddef.h>
#include <stdint.h>

#include "progmodel.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tk_program_model *m = NULL;
    if (tk_program_json_read(&m, (const char *)data, size, "'fuzz.json'") == 0)
        tk_program_model_free(m);
    return 0;
}
