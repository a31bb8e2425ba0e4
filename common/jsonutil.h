/* The one set of cJSON accessors every component uses: a member read with its type checked. The
 * lenient ones give a default for a member that is missing or of another type (output documents
 * tkexport wrote itself); the checked ones fail with a one-line message naming where, the key and
 * the type expected (input files: TK_EFORMAT). */
#ifndef TK_JSONUTIL_H
#define TK_JSONUTIL_H

#include <stdint.h>
#include <cjson/cJSON.h>

/* o[key] as a string, dflt when it is missing or not a string (o may be NULL). */
const char *tk_json_str(const cJSON *o, const char *key, const char *dflt);
/* o[key] as an int, dflt when it is missing or not a number. */
int tk_json_int(const cJSON *o, const char *key, int dflt);

/* o[key] as a string into *out; TK_EFORMAT "WHERE: \"key\" is missing (expected a string)" or
 * "... is a number (expected a string)". */
int tk_json_need_str(const cJSON *o, const char *key, const char *where, const char **out);
/* o[key] as a whole number within [min, max] into *out; TK_EFORMAT naming where, key and range. */
int tk_json_need_int(const cJSON *o, const char *key, const char *where, int64_t min, int64_t max, int64_t *out);

#endif
