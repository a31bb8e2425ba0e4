/* tkexport keygen: a new Ed25519 key pair for signing packages (docs/security.md): the private
 * key (PEM PKCS#8, mode 0600) and KEYFILE.pub (the public key as a trust-file line). */
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "fsutil.h"
#include "options.h"
#include "sign.h"
#include <tk/error.h>

static const tk_cli_option options[] = {
    {{"output", required_argument, NULL, 'o'}, "KEYFILE",
     "the private key to write (default $XDG_CONFIG_HOME/tkexport/signing_key); its public key goes to KEYFILE.pub"},
    {{"force", no_argument, NULL, 'f'}, NULL, "replace KEYFILE and KEYFILE.pub when they exist"},
    {{"trust", no_argument, NULL, 't'}, NULL, "add the public key to this machine's trusted keys"},
    {{"help", no_argument, NULL, 'h'}, NULL, "show this help"},
};
#define NOPT (sizeof(options) / sizeof(options[0]))

static void help(FILE *f)
{
    fprintf(f, "usage: tkexport keygen [-o KEYFILE] [--force] [--trust]\n\n"
               "Makes a new Ed25519 key pair for signing packages: the private key goes to KEYFILE (PEM PKCS#8,\n"
               "readable by you alone: mode 0600), the public key to KEYFILE.pub as one line\n"
               "'ed25519:BASE64 comment', the format of a trust file. Without -o, KEYFILE is your per-user key,\n"
               "$XDG_CONFIG_HOME/tkexport/signing_key (~/.config/tkexport/signing_key), the one tkexport compile\n"
               "signs with when given no --sign-key and no TKEXPORT_SIGN_KEY. An existing key is never replaced\n"
               "without --force: packages it signed would then no longer match a key you hold.\n\n"
               "A machine runs a package only when it trusts the key that signed it: add the line of\n"
               "KEYFILE.pub to its trust file ($TKEXPORT_TRUST_FILE, else $XDG_CONFIG_HOME/tkexport/trusted_keys),\n"
               "or to TKEXPORT_TRUSTED_KEYS; --trust adds it to this machine's trust file. docs/security.md says\n"
               "where keys should live and how to rotate them.\n\n"
               "options:\n");
    tk_cli_print_options(f, options, NOPT, "ofth");
    tk_cli_print_exit_statuses(f);
}

int cmd_keygen(int argc, char **argv)
{
    struct option longopts[NOPT + 1];
    tk_cli_longopts(longopts, options, NOPT);
    const char *output = NULL;
    int force = 0, trust = 0, c, err = 0, rc = TK_EXIT_OK;
    optind = 1;
    while ((c = tk_cli_getopt("keygen", argc, argv, "o:fth", longopts)) != -1) {
        switch (c) {
        case 'o': output = optarg; break;
        case 'f': force = 1; break;
        case 't': trust = 1; break;
        case 'h': help(stdout); return TK_EXIT_OK;
        default: /* '?': tk_cli_getopt said what */
            return TK_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tkexport keygen: unexpected argument '%s' (the key file is given with -o)\n", argv[optind]);
        return TK_EXIT_USAGE;
    }
    char *path = output ? strdup(output) : tk_sign_default_key_path(), *pub_path = NULL, *trust_path = NULL;
    char *line = NULL;
    tk_sign_key *key = NULL;
    if (!path) {
        fprintf(stderr, "tkexport keygen: no key file: neither HOME nor XDG_CONFIG_HOME is set (give one with -o)\n");
        return TK_EXIT_USAGE;
    }
    size_t n = strlen(path) + 8;
    if (!(pub_path = malloc(n))) {
        rc = TK_EXIT_INTERNAL;
        goto done;
    }
    snprintf(pub_path, n, "%s.pub", path);
    if (tk_path_is_dir(path) == 1) {
        fprintf(stderr, "tkexport keygen: '%s' is a folder: give the key file's path with -o (e.g. %s/signing_key)\n",
                path, path);
        rc = TK_EXIT_USAGE;
        goto done;
    }
    const char *there = access(path, F_OK) == 0 ? path : access(pub_path, F_OK) == 0 ? pub_path : NULL;
    if (there && !force) {
        fprintf(stderr, "tkexport keygen: '%s' exists; refusing to overwrite a key (--force replaces it)\n", there);
        rc = TK_EXIT_FINDINGS;
        goto done;
    }
    if (!output) { /* the per-user key's folder */
        char *slash = strrchr(path, '/');
        *slash = '\0';
        err = tk_mkdirs(path);
        *slash = '/';
    }
    if (err || (err = tk_sign_key_generate(&key)) || (err = tk_sign_key_save(key, path, !force)) < 0) {
        fprintf(stderr, "tkexport keygen: %s\n", tk_error_last());
        rc = tk_cli_exit_status(err);
        goto done;
    }
    if (err == 1) { /* made by someone else since the check above */
        fprintf(stderr, "tkexport keygen: '%s' exists; refusing to overwrite a key (--force replaces it)\n", path);
        rc = TK_EXIT_FINDINGS;
        goto done;
    }
    tk_sign_public pub;
    char text[TK_SIGN_TEXT_MAX], id[TK_SIGN_ID_MAX], comment[1100];
    tk_sign_key_public(key, &pub);
    tk_sign_public_format(&pub, text);
    tk_sign_public_id(&pub, id);
    snprintf(comment, sizeof comment, "tkexport key %s", path);
    n = strlen(text) + strlen(comment) + 4;
    if (!(line = malloc(n))) {
        rc = TK_EXIT_INTERNAL;
        goto done;
    }
    snprintf(line, n, "%s %s\n", text, comment);
    if ((err = tk_file_write_atomic(pub_path, line, strlen(line)))) {
        fprintf(stderr, "tkexport keygen: %s\n", tk_error_last());
        rc = tk_cli_exit_status(err);
        goto done;
    }
    printf("wrote the private key '%s' (mode 0600) and the public key '%s'\n", path, pub_path);
    printf("public key: %s (key id %s)\n", text, id);
    if (trust) {
        int added = 0;
        if ((err = tk_trust_add(&pub, comment, &trust_path, &added))) {
            fprintf(stderr, "tkexport keygen: %s\n", tk_error_last());
            rc = tk_cli_exit_status(err);
            goto done;
        }
        printf("%s '%s'\n", added ? "trusted on this machine: added to" : "already trusted in", trust_path);
    } else {
        printf("machines that are to run packages it signs need the line of '%s' in their trust file "
               "(docs/security.md)\n", pub_path);
    }
done:
    tk_sign_key_free(key);
    free(path);
    free(pub_path);
    free(trust_path);
    free(line);
    return rc;
}
