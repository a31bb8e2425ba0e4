/* tkexport inspect: a .tkprog or a .tkpkg as text for people, as JSON for tools, or a Graphviz
 * picture of its graph. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "progmodel.h"
#include "tkprog.h"
#include "fsutil.h"
#include "options.h"
#include "pkgfile.h"
#include "zipfile.h"
#include <tk/error.h>

static const tk_cli_option options[] = {
    {{"format", required_argument, NULL, 'f'}, "text|json|dot", "output format (default: text)"},
    {{"help", no_argument, NULL, 'h'}, NULL, "show this help"},
};
#define NOPT (sizeof(options) / sizeof(options[0]))

static void help(FILE *f)
{
    fprintf(f, "usage: tkexport inspect FILE.tkprog|FILE.tkpkg [--format text|json|dot]\n\n"
               "Reads a .tkprog or a .tkpkg (checking its format, version, signature, digests and weights) and\n"
               "shows it: text lists, for a package, who signed it and whether this machine trusts that key\n"
               "(an unsigned or untrusted package is shown, not refused; a signature that does not match is),\n"
               "the architectures, compilers, kernels with their fatbins and every entry with its size and\n"
               "SHA-256, then the program: the inputs with their dimensions' ranges, the parameters, the nodes\n"
               "with their shapes and source lines, the guards, the ops with their kernels and the sources;\n"
               "json prints program.json as stored (for a package, an object with its manifest, its signature\n"
               "and its program); dot prints a Graphviz digraph of values and nodes.\n\n"
               "options:\n");
    tk_cli_print_options(f, options, NOPT, "fh");
    tk_cli_print_exit_statuses(f);
}

#define INSPECT_MAX_FILE ((size_t)1 << 40)

/* A .tkpkg (a zip with manifest.json) or a .tkprog, read and checked; *m is the program (owned
 * by *pkg for a package). */
static int read_file(tk_program_model **m, tk_pkgfile **pkg, const char *path)
{
    char *data = NULL, origin[1100];
    size_t len = 0;
    tk_zip_reader *z = NULL;
    int rc = tk_file_read(&data, &len, path, INSPECT_MAX_FILE), is_pkg = 0;
    if (rc)
        return rc;
    snprintf(origin, sizeof origin, "'%s'", path);
    if (tk_zip_open(&z, data, len, origin, ".tkprog or .tkpkg", TK_TKPKG_MAX_ENTRIES + 1) == 0) {
        for (size_t i = 0; i < tk_zip_count(z) && !is_pkg; i++) {
            const char *name = tk_zip_name(z, i);
            is_pkg = name && !strcmp(name, "manifest.json");
        }
        tk_zip_close(z);
    }
    tk_error_clear();
    /* shown, not refused: an unsigned package, or one this machine does not trust */
    const tk_pkgfile_trust trust = {NULL, 1};
    if (is_pkg && !(rc = tk_pkgfile_read_mem(pkg, data, len, origin, &trust)))
        *m = (*pkg)->program;
    else if (!is_pkg)
        rc = tk_tkprog_read_mem(m, data, len, origin);
    free(data);
    return rc;
}

/* A tuned kernel's configuration c: "BLOCK=128 ITEMS=4". */
static const char *config_text(const tk_pkg_tune *t, int c, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < t->nparams && at < n; k++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s=%d", k ? " " : "", t->params[k], t->values[c][k]);
    return buf;
}

/* The tuning table: per measured bucket, the winner, its time, the default's and the speedup. */
static void write_tuning(const tk_pkgfile *f, FILE *out)
{
    if (!f->ntunes)
        return;
    fprintf(out, "tuning:\n");
    for (size_t i = 0; i < f->ntunes; i++) {
        const tk_pkg_tune *t = &f->tunes[i];
        char cfg[160], def[160];
        fprintf(out, "  %s: key '%s' by powers of two, %d configurations (%zu compiled), default %s\n", t->kernel,
                t->key, t->nconfigs, t->nfatbins / (size_t)t->nh, config_text(t, 0, def, sizeof def));
        if (t->hparam) {
            fprintf(out, "    heuristic %s in {", t->hparam);
            for (int h = 0; h < t->nh; h++)
                fprintf(out, "%s%d", h ? ", " : "", t->hvalues[h]);
            fprintf(out, "}: chosen by the op per call, %d variants per configuration\n", t->nh);
        }
        if (!t->measured) {
            fprintf(out, "    not measured (compiled without --autotune or without a GPU): the default for every size\n");
            continue;
        }
        fprintf(out, "    measured on %s, driver %s\n", t->device ? t->device : "?", t->driver ? t->driver : "?");
        fprintf(out, "    %-22s %-26s %10s %11s %8s\n", "key (bucket)", "winner", "time us", "default us", "speedup");
        for (size_t r = 0; r < t->nrows; r++) {
            const tk_pkg_tune_row *row = &t->rows[r];
            char key[48];
            snprintf(key, sizeof key, "%lld (2^%d)", (long long)row->key, row->bucket);
            double win = row->times_us[row->winner], d0 = row->times_us[0];
            fprintf(out, "    %-22s %-26s %10.2f %11.2f %7.2fx\n", key, config_text(t, row->winner, cfg, sizeof cfg),
                    win, d0, d0 > 0 && win > 0 ? d0 / win : 0.0);
        }
    }
}

static int write_package_text(const tk_pkgfile *f, FILE *out)
{
    fprintf(out, "package %s: program '%s', written by tkexport %s\n", f->origin, f->program_name, f->tkexport);
    if (f->signer)
        fprintf(out, "signed by: %s (key id %s, %s on this machine)\n", f->signer_key, f->signer_id,
                f->trusted ? "trusted" : "NOT trusted");
    else
        fprintf(out, "unsigned (no manifest.sig: it runs only where unsigned packages are allowed explicitly)\n");
    fprintf(out, "architectures:");
    for (size_t i = 0; i < f->narchs; i++)
        fprintf(out, " %s", f->archs[i]);
    fprintf(out, "%s%s%s\n", f->narchs ? "" : " none (no kernels)", f->ptx ? ", PTX " : "", f->ptx ? f->ptx : "");
    fprintf(out, "compilers: nvcc %s; cc %s\n", f->nvcc ? f->nvcc : "(not used)", f->cc ? f->cc : "(not used)");
    fprintf(out, "host object: %s\n", f->host ? f->host : "none (every op is built in)");
    uint64_t total = 0;
    const tk_pkg_entry *weights = NULL;
    for (size_t i = 0; i < f->nentries; i++) {
        total += f->entries[i].size;
        if (!strcmp(f->entries[i].path, "weights.safetensors"))
            weights = &f->entries[i];
    }
    fprintf(out, "entries: %zu, %llu bytes", f->nentries, (unsigned long long)total);
    if (weights)
        fprintf(out, " (weights.safetensors %llu bytes)", (unsigned long long)weights->size);
    fprintf(out, "\n");
    fprintf(out, "kernels:\n");
    if (!f->nkernels)
        fprintf(out, "  (none)\n");
    for (size_t i = 0; i < f->nkernels; i++)
        fprintf(out, "  %-24s %s (from %s)\n", f->kernels[i].name, f->kernels[i].fatbin, f->kernels[i].source);
    write_tuning(f, out);
    fprintf(out, "entries (SHA-256 verified):\n");
    for (size_t i = 0; i < f->nentries; i++)
        fprintf(out, "  %-44s %10llu  %s\n", f->entries[i].path, (unsigned long long)f->entries[i].size,
                f->entries[i].sha256);
    return fprintf(out, "\n") < 0 ? tk_error_set(TK_EIO, "writing the output failed") : 0;
}

/* {"manifest": <manifest.json>, "signature": {...} or null, "program": <program.json>}: the JSON
 * files as stored; the signature as verified: who signed, and whether this machine trusts it. */
static int write_package_json(const tk_pkgfile *f, FILE *out)
{
    const tk_pkg_entry *pj = tk_pkgfile_entry(f, "program.json");
    char sig[256] = "null";
    if (f->signer)
        snprintf(sig, sizeof sig, "{\"public_key\": \"%s\", \"key_id\": \"%s\", \"trusted\": %s}", f->signer_key,
                 f->signer_id, f->trusted ? "true" : "false");
    int bad = fprintf(out, "{\"manifest\": %s,\n\"signature\": %s,\n\"program\": %s}\n", f->manifest_json, sig,
                      pj ? (const char *)pj->data : "null") < 0;
    return bad ? tk_error_set(TK_EIO, "writing the output failed") : 0;
}

int cmd_inspect(int argc, char **argv)
{
    struct option longopts[NOPT + 1];
    tk_cli_longopts(longopts, options, NOPT);
    const char *format = "text";
    int rc = TK_EXIT_USAGE, err;
    tk_program_model *m = NULL;
    optind = 1;
    int c;
    while ((c = tk_cli_getopt("inspect", argc, argv, "f:h", longopts)) != -1) {
        switch (c) {
        case 'f':
            if (strcmp(optarg, "text") && strcmp(optarg, "json") && strcmp(optarg, "dot")) {
                fprintf(stderr, "tkexport inspect: unknown format '%s' (expected text, json or dot)\n", optarg);
                return TK_EXIT_USAGE;
            }
            format = optarg;
            break;
        case 'h': help(stdout); return TK_EXIT_OK;
        default: /* '?': tk_cli_getopt said what */
            return TK_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "tkexport inspect: no FILE given (expected a .tkprog)\n");
        return TK_EXIT_USAGE;
    }
    if (argc - optind > 1) {
        fprintf(stderr, "tkexport inspect: one FILE at a time (got %d)\n", argc - optind);
        return TK_EXIT_USAGE;
    }
    if (access(argv[optind], F_OK) != 0) {
        fprintf(stderr, "tkexport inspect: '%s' does not exist\n", argv[optind]);
        return TK_EXIT_USAGE;
    }
    tk_pkgfile *pkg = NULL;
    if ((err = read_file(&m, &pkg, argv[optind]))) {
        fprintf(stderr, "tkexport inspect: %s\n", tk_error_last());
        return tk_cli_exit_status(err);
    }
    if (pkg && !strcmp(format, "json"))
        err = write_package_json(pkg, stdout);
    else if (!strcmp(format, "json"))
        err = fputs(m->program_json, stdout) < 0 ? tk_error_set(TK_EIO, "writing the output failed") : 0;
    else if (!strcmp(format, "dot"))
        err = tk_program_model_write_dot(m, stdout);
    else if (pkg && (err = write_package_text(pkg, stdout)) == 0)
        err = tk_program_model_write_text(m, stdout);
    else if (!pkg)
        err = tk_program_model_write_text(m, stdout);
    if (err)
        fprintf(stderr, "tkexport inspect: %s\n", tk_error_last());
    rc = err ? tk_cli_exit_status(err) : tk_cli_stdout_done("inspect");
    if (pkg)
        tk_pkgfile_free(pkg);
    else
        tk_program_model_free(m);
    return rc;
}
