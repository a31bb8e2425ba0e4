/* tkexport compile: a .tkprog into a .tkpkg (docs/formats/tkpkg.md), through aoti/. */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aoti.h"
#include "cli.h"
#include "options.h"
#include "sign.h"
#include <tk/error.h>

static const tk_cli_option options[] = {
    {{"output", required_argument, NULL, 'o'}, "OUT", "the .tkpkg to write (through a temporary file)"},
    {{"arch", required_argument, NULL, 'a'}, "sm_XX",
     "a GPU architecture to compile cubins for (repeatable; default: the GPUs present, else sm_90)"},
    {{"jobs", required_argument, NULL, 'j'}, "N", "run N compilers at once (default: the number of cores)"},
    {{"cache-dir", required_argument, NULL, 'c'}, "DIR", "compile cache folder (default $XDG_CACHE_HOME/tkexport)"},
    {{"no-cache", no_argument, NULL, 'n'}, NULL, "neither read nor write the compile cache"},
    {{"autotune", no_argument, NULL, 't'}, NULL,
     "measure each TK_AUTOTUNE kernel's configurations on the GPU and record the winners per size"},
    {{"sign-key", required_argument, NULL, 'k'}, "KEYFILE",
     "sign with this private key (default: $TKEXPORT_SIGN_KEY, else your per-user key, made on first use)"},
    {{"no-sign", no_argument, NULL, 'N'}, NULL, "write an unsigned package (runs only where unsigned ones are allowed)"},
    {{"quiet", no_argument, NULL, 'q'}, NULL, "print nothing but errors (and that your signing key was made)"},
    {{"help", no_argument, NULL, 'h'}, NULL, "show this help"},
};
#define NOPT (sizeof(options) / sizeof(options[0]))

static void help(FILE *f)
{
    fprintf(f, "usage: tkexport compile IN.tkprog -o OUT.tkpkg [--arch sm_XX]... [-j N] [--autotune]\n"
               "                        [--cache-dir DIR | --no-cache] [--sign-key KEYFILE | --no-sign]\n\n"
               "Compiles what the program needs ahead of time and packs it: each kernel source of the .tkprog that\n"
               "defines a kernel its ops launch becomes a fatbin (nvcc: a cubin per --arch plus PTX of the lowest),\n"
               "the ops' host code and CPU fallbacks one shared object (the system C compiler), and both go with\n"
               "program.json and the weights into OUT, a zip whose manifest lists every entry's SHA-256. The same\n"
               "input and options give the same bytes. Compiled files are cached by the digest of their inputs.\n"
               "nvcc is $TKEXPORT_NVCC, else $CUDA_HOME/bin/nvcc, else /usr/local/cuda/bin/nvcc, else on PATH.\n"
               "A kernel declared with TK_AUTOTUNE is compiled once per configuration; --autotune times them on\n"
               "the GPU (cached per device) and records the fastest per size bucket (docs/autotune.md).\n"
               "The manifest is signed (Ed25519; docs/security.md) with --sign-key KEYFILE, else the key file\n"
               "$TKEXPORT_SIGN_KEY names, else your per-user key $XDG_CONFIG_HOME/tkexport/signing_key\n"
               "(~/.config/tkexport/signing_key), which the first compile creates and adds to this machine's\n"
               "trusted keys. Machines that run the package must trust the key (tkexport keygen --help).\n\n"
               "options:\n");
    tk_cli_print_options(f, options, NOPT, "ojqh");
    tk_cli_print_exit_statuses(f);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The key that signs: --sign-key, else $TKEXPORT_SIGN_KEY, else the per-user key (created and
 * trusted on first use, which is said on stderr even with --quiet: a key this machine now trusts
 * should not appear unannounced). */
static int signing_key(tk_sign_key **key, const char *flag)
{
    const char *env = getenv("TKEXPORT_SIGN_KEY");
    const char *path = flag ? flag : env && *env ? env : NULL;
    if (path)
        return tk_sign_key_load(key, path);
    char *key_path = NULL, *trust_path = NULL;
    int created = 0, rc = tk_sign_key_default(key, &created, &key_path, &trust_path);
    if (!rc && created) {
        tk_sign_public pub;
        char id[TK_SIGN_ID_MAX];
        tk_sign_key_public(*key, &pub);
        tk_sign_public_id(&pub, id);
        fprintf(stderr, "tkexport compile: created your signing key '%s' (key id %s) and added it to this machine's "
                        "trusted keys in '%s'\n", key_path, id, trust_path);
    }
    free(key_path);
    free(trust_path);
    return rc;
}

int cmd_compile(int argc, char **argv)
{
    struct option longopts[NOPT + 1];
    tk_cli_longopts(longopts, options, NOPT);
    tk_aoti_options o = {0};
    const char *output = NULL, *key_file = NULL;
    int quiet = 0, no_sign = 0, c, err;
    tk_sign_key *key = NULL;
    optind = 1;
    while ((c = tk_cli_getopt("compile", argc, argv, "o:j:qh", longopts)) != -1) {
        switch (c) {
        case 'o': output = optarg; break;
        case 'a':
            if (tk_aoti_check_arch(optarg)) {
                fprintf(stderr, "tkexport compile: %s\n", tk_error_last());
                return TK_EXIT_USAGE;
            }
            if (o.narchs == TK_AOTI_MAX_ARCHS) {
                fprintf(stderr, "tkexport compile: more than %d --arch given\n", TK_AOTI_MAX_ARCHS);
                return TK_EXIT_USAGE;
            }
            o.archs[o.narchs++] = optarg;
            break;
        case 'j':
            if (tk_cli_parse_int("compile", optarg, "--jobs", 1024, &o.jobs))
                return TK_EXIT_USAGE;
            break;
        case 'c': o.cache_dir = optarg; break;
        case 'n': o.no_cache = 1; break;
        case 'q': quiet = 1; break;
        case 't': o.autotune = 1; break;
        case 'k': key_file = optarg; break;
        case 'N': no_sign = 1; break;
        case 'h': help(stdout); return TK_EXIT_OK;
        default: /* '?': tk_cli_getopt said what */
            return TK_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "tkexport compile: no input given (expected a .tkprog written by tkexport export)\n");
        return TK_EXIT_USAGE;
    }
    if (optind + 1 < argc) {
        fprintf(stderr, "tkexport compile: one input expected, got %d ('%s', '%s'...)\n", argc - optind,
                argv[optind], argv[optind + 1]);
        return TK_EXIT_USAGE;
    }
    if (!output) {
        fprintf(stderr, "tkexport compile: no -o OUT.tkpkg given\n");
        return TK_EXIT_USAGE;
    }
    if (access(argv[optind], F_OK) != 0) {
        fprintf(stderr, "tkexport compile: '%s' does not exist\n", argv[optind]);
        return TK_EXIT_USAGE;
    }
    if (!strcmp(output, "-")) {
        fprintf(stderr, "tkexport compile: -o -: a package is a zip archive, written to a file: give its path\n");
        return TK_EXIT_USAGE;
    }
    if (tk_cli_output_clobbers("compile", output, (const char *const *)argv + optind, 1))
        return TK_EXIT_USAGE;
    if (key_file && access(key_file, F_OK) != 0) {
        fprintf(stderr, "tkexport compile: --sign-key '%s' does not exist\n", key_file);
        return TK_EXIT_USAGE;
    }
    if (key_file && no_sign) {
        fprintf(stderr, "tkexport compile: --sign-key and --no-sign contradict each other\n");
        return TK_EXIT_USAGE;
    }
    if (o.cache_dir && o.no_cache) {
        fprintf(stderr, "tkexport compile: --cache-dir and --no-cache contradict each other\n");
        return TK_EXIT_USAGE;
    }
    /* the key first: a key that cannot be read stops the compile before it spends any time */
    if (!no_sign && (err = signing_key(&key, key_file))) {
        fprintf(stderr, "tkexport compile: %s\n", tk_error_last());
        return tk_cli_exit_status(err);
    }
    o.sign_key = key;
    o.progress = !quiet && isatty(STDERR_FILENO);
    tk_aoti_stats st;
    double t0 = now();
    err = tk_aoti_compile(argv[optind], output, &o, &st);
    char signer[80] = "unsigned";
    if (key) {
        tk_sign_public pub;
        char id[TK_SIGN_ID_MAX];
        tk_sign_key_public(key, &pub);
        tk_sign_public_id(&pub, id);
        snprintf(signer, sizeof signer, "signed by key %s", id);
    }
    tk_sign_key_free(key);
    if (err) {
        fprintf(stderr, "tkexport compile: %s\n", tk_error_last());
        return tk_cli_exit_status(err);
    }
    if (!quiet) {
        fprintf(stderr, "tkexport compile: wrote %s (%zu bytes, %s) in %.2f s: ", output, st.package_bytes, signer,
                now() - t0);
        if (st.kernel_sources && st.fatbins > st.kernel_sources)
            fprintf(stderr, "%zu kernel source%s as %zu fatbins with the tuning variants, for %s (%zu from the cache)",
                    st.kernel_sources, st.kernel_sources == 1 ? "" : "s", st.fatbins, st.archs, st.kernels_cached);
        else if (st.kernel_sources)
            fprintf(stderr, "%zu kernel source%s for %s (%zu from the cache)", st.kernel_sources,
                    st.kernel_sources == 1 ? "" : "s", st.archs, st.kernels_cached);
        else
            fprintf(stderr, "no kernel source");
        fprintf(stderr, ", %s\n", !st.host ? "no host code" : st.host_cached ? "host code from the cache" : "host code");
        if (o.autotune && st.tune_note[0])
            fprintf(stderr, "tkexport compile: autotune: nothing measured: %s\n", st.tune_note);
        else if (o.autotune)
            fprintf(stderr, "tkexport compile: autotune: %zu kernel%s tuned (%zu from the tuning cache)\n", st.tuned,
                    st.tuned == 1 ? "" : "s", st.tune_cached);
        if (no_sign)
            fprintf(stderr, "tkexport compile: warning: %s is not signed: tkexport run and tk_package_open refuse it "
                            "unless unsigned packages are allowed explicitly (--allow-unsigned)\n", output);
    }
    return TK_EXIT_OK;
}
