/* cJSON accessors (jsonutil.h). */
#include "jsonutil.h"

#include <math.h>
#include <tk/error.h>

const char *tk_json_str(const cJSON *o, const char *key, const char *dflt)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return cJSON_IsString(v) && v->valuestring ? v->valuestring : dflt;
}

int tk_json_int(const cJSON *o, const char *key, int dflt)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return cJSON_IsNumber(v) ? v->valueint : dflt;
}

static const char *type_name(const cJSON *v)
{
    if (!v)
        return "missing";
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsArray(v))
        return "an array";
    return "an object";
}

int tk_json_need_str(const cJSON *o, const char *key, const char *where, const char **out)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    if (!cJSON_IsString(v) || !v->valuestring)
        return tk_error_set(TK_EFORMAT, "%s: \"%s\" is %s (expected a string)", where, key, type_name(v));
    *out = v->valuestring;
    return 0;
}

int tk_json_need_int(const cJSON *o, const char *key, const char *where, int64_t min, int64_t max, int64_t *out)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    if (!cJSON_IsNumber(v))
        return tk_error_set(TK_EFORMAT, "%s: \"%s\" is %s (expected a whole number in [%lld, %lld])", where, key,
                            type_name(v), (long long)min, (long long)max);
    double d = v->valuedouble;
    if (d != floor(d) || d < (double)min || d > (double)max)
        return tk_error_set(TK_EFORMAT, "%s: \"%s\" is %g (expected a whole number in [%lld, %lld])", where, key, d,
                            (long long)min, (long long)max);
    *out = (int64_t)d;
    return 0;
}
