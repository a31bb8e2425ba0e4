/* Packages (tk_package_*): a .tkpkg read and verified by runtime/pkgfile.c, then made a namespace
 * of its own: a registry (runtime/registry.c) holding its fatbins, the ops its host object's
 * constructors register, and its tuned kernels as its manifest records them; the program's
 * nodes are resolved there once. Sessions hold a reference: a package closed while sessions run
 * goes away with the last of them, which is how a service swaps versions under load. */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "exec.h"
#include "log.h"
#include "pkgfile.h"
#include "rt_internal.h"
#include "strbuf.h"
#include "sym.h"

struct tk_package {
    atomic_size_t refs; /* the opener's, plus one per session */
    tk_pkgfile *f;
    tk_registry *reg;   /* the package's namespace */
    tk_exec_program *prog;
    size_t nfatbins;
    tk_fatbin_node *fatbins;
    int host_fd;      /* the memfd (or temporary file) the host object was loaded from; -1 */
    void *host;       /* tk_ops_load's handle */
    tk_io_info *inputs, *outputs;
    char (*out_names)[24];
};

/* --- the host object ------------------------------------------------------------------------- */

static int write_all(int fd, const unsigned char *data, size_t len)
{
    while (len) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Loads the host object's bytes with dlopen: through a memfd ("/proc/self/fd/N", kept open while
 * loaded so that no other object gets that name, which dlopen would take for this one), or a
 * temporary file removed once loaded where memfds are not available. */
static int load_host(tk_package *pkg, const tk_pkg_entry *e)
{
    char path[4200];
    int rc, fd = -1, tmp = 0;
#ifdef MFD_CLOEXEC
    fd = memfd_create("tkpkg-host", MFD_CLOEXEC);
#endif
    if (fd >= 0) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    } else {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/tkpkg-host-XXXXXX", dir && dir[0] ? dir : "/tmp");
        if ((fd = mkstemp(path)) < 0)
            return tk_error_set(TK_EIO, "%s: cannot make a file for the host object '%s': %s", pkg->f->origin,
                                e->path, strerror(errno));
        tmp = 1;
    }
    if (write_all(fd, e->data, (size_t)e->size)) {
        rc = tk_error_set(TK_EIO, "%s: cannot write the host object '%s': %s", pkg->f->origin, e->path,
                          strerror(errno));
    } else {
        rc = tk_registry_load(pkg->reg, &pkg->host, path);
    }
    if (tmp) {
        unlink(path);
        close(fd);
        fd = -1;
    }
    if (rc && fd >= 0) {
        close(fd);
        fd = -1;
    }
    pkg->host_fd = fd;
    return rc;
}

/* --- opening ------------------------------------------------------------------------------------ */

/* Every kernels/...fatbin entry joins the fatbin list (names ending in "@cN.fatbin" hold the
 * variants of tuning configuration N, as launch.c reads them). */
static int register_fatbins(tk_package *pkg)
{
    const tk_pkgfile *f = pkg->f;
    pkg->fatbins = calloc(f->nentries + 1, sizeof(*pkg->fatbins));
    if (!pkg->fatbins)
        return tk_error_set(TK_ENOMEM, "out of memory");
    for (size_t i = 0; i < f->nentries; i++) {
        const tk_pkg_entry *e = &f->entries[i];
        if (strncmp(e->path, "kernels/", 8) != 0 || !tk_ends_with(e->path, ".fatbin"))
            continue;
        tk_fatbin_node *node = &pkg->fatbins[pkg->nfatbins++];
        node->version = TK_FATBIN_RECORD_VERSION;
        node->image = e->data;
        node->size = (size_t)e->size;
        node->name = e->path;
        tk_registry_add_fatbin(pkg->reg, node);
    }
    return 0;
}

/* After the host object: every op of the program is the package's own or, for built-in ops,
 * libtkrt's; the tuned kernels' records are installed in the package's registry. */
static int check_ops(tk_package *pkg)
{
    const tk_pkgfile *f = pkg->f;
    const tk_program_model *m = f->program;
    for (size_t i = 0; i < m->nops; i++) {
        const char *name = m->ops[i].name;
        if (m->ops[i].builtin ? tk_registry_find_op(NULL, name) != NULL
                              : tk_registry_find_op(pkg->reg, name) != NULL)
            continue;
        if (m->ops[i].builtin)
            return tk_error_set(TK_EINVAL, "%s: op '%s' is built into libtkrt according to the package, and this "
                                           "libtkrt does not have it", f->origin, name);
        return tk_error_set(TK_EINVAL, "%s: op '%s' is not registered after loading %s", f->origin, name,
                            f->host ? f->host : "the package (it has no host object)");
    }
    /* the tuned kernels as the package records them (read once, by the analyzer at export) */
    for (size_t i = 0; i < f->ntunes; i++) {
        int rc = tk_tune_set_recorded(pkg->reg, &f->tunes[i]);
        if (rc)
            return rc;
    }
    tk_tune_prepare(pkg->reg);
    return 0;
}

static void io_info(tk_io_info *io, const tk_pm_value *v, const tk_exec_program *prog, const char *name)
{
    (void)prog;
    io->name = name;
    io->dtype = v->dtype;
    io->rank = v->rank;
    for (int d = 0; d < v->rank; d++) {
        io->dims[d].sym = v->dims[d].expr;
        io->dims[d].value = v->dims[d].value;
        io->dims[d].min = io->dims[d].max = v->dims[d].value;
    }
}

/* The range of each symbolic dim of the inputs and outputs, from the symbols' ranges. */
static int io_ranges(tk_package *pkg)
{
    const tk_program_model *m = pkg->f->program;
    tk_ctx *ctx = NULL;
    tk_sym vars[64];
    const char *names[64];
    int rc = tk_ctx_new(&ctx, (tk_device){TK_DEVICE_CPU, 0});
    if (rc)
        return rc;
    for (size_t k = 0; k < m->nsymbols && k < 64; k++) {
        names[k] = m->symbols[k].name;
        vars[k] = tk_sym_var(ctx, names[k], m->symbols[k].min, m->symbols[k].max);
    }
    for (size_t side = 0; side < 2; side++) {
        size_t n = side ? m->noutputs : m->ninputs;
        tk_io_info *io = side ? pkg->outputs : pkg->inputs;
        for (size_t i = 0; i < n; i++) {
            for (int d = 0; d < io[i].rank; d++) {
                tk_sym s;
                if (!io[i].dims[d].sym)
                    continue;
                if ((rc = tk_sym_parse(ctx, io[i].dims[d].sym, names, vars, (int)(m->nsymbols < 64 ? m->nsymbols : 64),
                                       &s)))
                    goto done;
                tk_sym_range(s, &io[i].dims[d].min, &io[i].dims[d].max);
                io[i].dims[d].value = -1;
            }
        }
    }
done:
    tk_ctx_free(ctx);
    return rc;
}

static int describe_io(tk_package *pkg)
{
    const tk_program_model *m = pkg->f->program;
    pkg->inputs = calloc(m->ninputs + 1, sizeof(tk_io_info));
    pkg->outputs = calloc(m->noutputs + 1, sizeof(tk_io_info));
    pkg->out_names = calloc(m->noutputs + 1, sizeof(*pkg->out_names));
    if (!pkg->inputs || !pkg->outputs || !pkg->out_names)
        return tk_error_set(TK_ENOMEM, "out of memory");
    for (size_t i = 0; i < m->ninputs; i++)
        io_info(&pkg->inputs[i], &m->inputs[i], pkg->prog, m->inputs[i].name);
    for (size_t i = 0; i < m->noutputs; i++) {
        snprintf(pkg->out_names[i], sizeof pkg->out_names[i], "out%zu", i);
        io_info(&pkg->outputs[i], &m->outputs[i], pkg->prog, pkg->out_names[i]);
    }
    return io_ranges(pkg);
}

int tk_package_open(tk_package **out, const char *path)
{
    return tk_package_open_ex(out, path, NULL);
}

int tk_package_open_ex(tk_package **out, const char *path, const tk_package_options *opts)
{
    int rc;
    if (!out)
        return tk_error_set(TK_EINVAL, "tk_package_open: no place for the package");
    *out = NULL;
    if (!path)
        return tk_error_set(TK_EINVAL, "tk_package_open: no path");
    tk_package *pkg = calloc(1, sizeof(*pkg));
    if (!pkg)
        return tk_error_set(TK_ENOMEM, "out of memory");
    atomic_init(&pkg->refs, 1);
    pkg->host_fd = -1;
    const tk_pkgfile_trust trust = {opts, 0};
    if ((rc = tk_pkgfile_read(&pkg->f, path, &trust)) || (rc = tk_registry_new(&pkg->reg, pkg->f->origin)) ||
        (rc = register_fatbins(pkg)))
        goto done;
    /* the host object's constructors register its ops into the package's registry */
    if (pkg->f->host && (rc = load_host(pkg, tk_pkgfile_entry(pkg->f, pkg->f->host))))
        goto done;
    if ((rc = check_ops(pkg)))
        goto done;
    const tk_pkg_entry *w = tk_pkgfile_entry(pkg->f, "weights.safetensors");
    if ((rc = tk_exec_program_new(&pkg->prog, pkg->f->program, w ? w->data : NULL, w ? (size_t)w->size : 0,
                                  pkg->f->origin, pkg->reg)) ||
        (rc = describe_io(pkg)))
        goto done;
done:
    if (rc) {
        tk_package_close(pkg);
        return rc;
    }
    tk_log(TK_LOG_DEBUG, "package %s opened%s", pkg->f->origin, pkg->host ? ": its host object loaded" : "");
    *out = pkg;
    return 0;
}

/* The reverse of open: the program and its uploaded weights, the host object (its destructors
 * leave the package's registry), the registry with the fatbins and tuning tables, the file. */
static void package_free(tk_package *pkg)
{
    char origin[1200];
    snprintf(origin, sizeof origin, "%s", pkg->f && pkg->f->origin ? pkg->f->origin : "a package");
    tk_exec_program_free(pkg->prog);
    tk_registry_unload(pkg->reg, pkg->host);
    if (pkg->host_fd >= 0)
        close(pkg->host_fd);
    tk_registry_free(pkg->reg);
    tk_cuda_unload_stale(); /* the package's modules, on each GPU it ran on */
    free(pkg->fatbins);
    free(pkg->inputs);
    free(pkg->outputs);
    free(pkg->out_names);
    int loaded = pkg->host != NULL;
    tk_pkgfile_free(pkg->f);
    free(pkg);
    tk_log(TK_LOG_DEBUG, "package %s closed%s", origin, loaded ? ": its host object unloaded" : "");
}

static void package_release(void *arg)
{
    tk_package *pkg = arg;
    if (atomic_fetch_sub(&pkg->refs, 1) == 1)
        package_free(pkg);
}

void tk_package_close(tk_package *pkg)
{
    if (pkg)
        package_release(pkg);
}

const char *tk_package_program(const tk_package *pkg)
{
    return pkg ? pkg->f->program->name : NULL;
}

size_t tk_package_num_inputs(const tk_package *pkg)
{
    return pkg ? pkg->f->program->ninputs : 0;
}

size_t tk_package_num_outputs(const tk_package *pkg)
{
    return pkg ? pkg->f->program->noutputs : 0;
}

const tk_io_info *tk_package_input(const tk_package *pkg, size_t i)
{
    return pkg && i < pkg->f->program->ninputs ? &pkg->inputs[i] : NULL;
}

const tk_io_info *tk_package_output(const tk_package *pkg, size_t i)
{
    return pkg && i < pkg->f->program->noutputs ? &pkg->outputs[i] : NULL;
}

const char *tk_package_signer(const tk_package *pkg)
{
    return pkg ? pkg->f->signer : NULL;
}

/* --- sessions ------------------------------------------------------------------------------------ */

/* The compute capability in "sm_XY[a]" / "compute_XY" as major*10 + minor (sm_100 is 100). */
static int arch_number(const char *arch, const char *prefix)
{
    size_t k = strlen(prefix);
    if (strncmp(arch, prefix, k) != 0)
        return -1;
    char *end;
    long v = strtol(arch + k, &end, 10);
    return end != arch + k && v > 0 && v < 10000 ? (int)v : -1;
}

/* A cubin for exactly this architecture (sm_XY, or sm_XYa of the same major.minor), or PTX the
 * driver can compile for it (not newer than the device). */
static int check_arch(const tk_package *pkg, tk_device dev)
{
    const tk_pkgfile *f = pkg->f;
    int major, minor, rc;
    char name[32];
    if (!f->narchs && !f->ptx)
        return 0; /* no kernels of its own: the built-in ones come with libtkrt */
    if ((rc = tk_cuda_compute_capability(dev.index, &major, &minor)))
        return rc;
    int cc = major * 10 + minor;
    for (size_t i = 0; i < f->narchs; i++) {
        const char *a = f->archs[i];
        if (arch_number(a, "sm_") != cc)
            continue;
        const char *tail = a + 3;
        while (*tail >= '0' && *tail <= '9')
            tail++;
        if (!*tail || !strcmp(tail, "a"))
            return 0;
    }
    if (f->ptx && arch_number(f->ptx, "compute_") > 0 && arch_number(f->ptx, "compute_") <= cc)
        return 0;
    tk_strbuf sb = TK_STRBUF_INIT;
    for (size_t i = 0; i < f->narchs; i++)
        tk_strbuf_addf(&sb, "%s%s", i ? ", " : "", f->archs[i]);
    if (f->ptx)
        tk_strbuf_addf(&sb, "%sPTX %s", f->narchs ? " and " : "", f->ptx);
    rc = tk_error_set(TK_EDEVICE, "device '%s' is sm_%d; %s holds %s and none of it runs there (recompile with "
                                  "--arch sm_%d)", tk_device_name(dev, name, sizeof name), cc, f->origin,
                      sb.buf ? sb.buf : "nothing", cc);
    tk_strbuf_release(&sb);
    return rc;
}

int tk_session_new(tk_session **out, tk_package *pkg, tk_device dev)
{
    return tk_session_new_ex(out, pkg, dev, NULL);
}

int tk_session_new_ex(tk_session **out, tk_package *pkg, tk_device dev, const tk_session_options *opts)
{
    int rc;
    if (!out)
        return tk_error_set(TK_EINVAL, "tk_session_new: no place for the session");
    *out = NULL;
    if (!pkg)
        return tk_error_set(TK_EINVAL, "tk_session_new: no package");
    if (dev.kind == TK_DEVICE_CUDA && (rc = check_arch(pkg, dev)))
        return rc;
    if ((rc = tk_exec_session_new(out, pkg->prog, dev, opts)))
        return rc;
    atomic_fetch_add(&pkg->refs, 1);
    tk_exec_session_set_owner(*out, package_release, pkg);
    return 0;
}
