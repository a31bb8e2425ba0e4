/* The .tkprog file (docs/formats/tkprog.md), written and read by libtkrt for the exporter and
 * the AOT stage. */
#ifndef TK_TKPROG_H
#define TK_TKPROG_H

#include <stddef.h>

#include "progmodel.h"

/* --- tkprog.c: the .tkprog zip -------------------------------------------------------------- */

/* The .tkprog bytes (a zip: program.json, sources/<path>..., weights.safetensors), sorted,
 * with fixed timestamps and attributes, so that equal models give equal bytes. *data malloc'd. */
int tk_tkprog_write_mem(void **data, size_t *len, const tk_program_model *m);
/* Writes the .tkprog to path through a temporary file and a rename. */
int tk_tkprog_write(const tk_program_model *m, const char *path);

/* Reads a .tkprog: program.json checked (format, version, fields), every source against its
 * SHA-256, the weights' header validated and the parameters' dtypes and shapes against it, no
 * unexpected entry. Returns 0 and a new model, or a negative tk_error_code with *out NULL. */
int tk_tkprog_read(tk_program_model **out, const char *path);
int tk_tkprog_read_mem(tk_program_model **out, const void *data, size_t len, const char *origin);

#endif
