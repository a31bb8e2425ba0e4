/* libFuzzer: the .tkpkg reader (runtime/pkgfile.c) on arbitrary bytes, unsigned packages and
 * untrusted keys read anyway (report_only), so that the manifest and every entry are reached. */
#include <stddef.h>
#include <stdint.h>

#include "pkgfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const tk_package_options opts = {TK_PACKAGE_OPTIONS_VERSION, 1, NULL, 1};
    static const tk_pkgfile_trust trust = {&opts, 1};
    tk_pkgfile *f = NULL;
    if (tk_pkgfile_read_mem(&f, data, size, "'fuzz.tkpkg'", &trust) == 0)
        tk_pkgfile_free(f);
    return 0;
}
