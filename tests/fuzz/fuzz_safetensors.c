/* libFuzzer: the safetensors header parser (runtime/safetensors.c) on arbitrary bytes, then every
 * tensor it accepts read back, so that accepted offsets are proven in bounds. */
#include <stddef.h>
#include <stdint.h>

#include <tk/runtime.h>
#include <tk/safetensors.h>

#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tk_safetensors *st = NULL;
    if (tk_safetensors_parse(&st, data, size, "'fuzz.safetensors'") != 0)
        return 0;
    const tk_device cpu = {TK_DEVICE_CPU, 0};
    for (size_t i = 0; i < tk_safetensors_count(st); i++) {
        tk_tensor *t = NULL;
        const tk_safetensors_entry *e = tk_safetensors_at(st, i);
        tk_dtype dtype;
        int rank;
        int64_t shape[TK_MAX_DIMS];
        tk_safetensors_entry_info(e, &dtype, &rank, shape);
        if (tk_safetensors_load(&t, NULL, cpu, st, e) == 0) /* reads every byte it accepted */
            tk_tensor_free(t);
    }
    tk_safetensors_free(st);
    return 0;
}
