/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgatectl hash: the kubelet credentialHash of a username/password, or of
 * every entry of a dockerconfigjson secret that applies to an image.
 * The password is never taken from argv.
 */
#include "pgctl.h"
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "hash"

enum { OPT_USERNAME = 256, OPT_EMAIL, OPT_PASSWORD_STDIN, OPT_PASSWORD_FILE, OPT_DOCKERCONFIG,
       OPT_IMAGE };

static const struct option options[] = {
    {"username", required_argument, NULL, OPT_USERNAME},
    {"email", required_argument, NULL, OPT_EMAIL},
    {"password-stdin", no_argument, NULL, OPT_PASSWORD_STDIN},
    {"password-file", required_argument, NULL, OPT_PASSWORD_FILE},
    {"dockerconfigjson", required_argument, NULL, OPT_DOCKERCONFIG},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

typedef struct hash_options {
    const char *username, *email, *password_file, *dockerconfig, *image;
    int password_stdin;
} hash_options;

static const char help[] =
    "Usage: " PGCTL_PROG " hash --username USER (--password-stdin | --password-file FILE)\n"
    "                        [--email EMAIL]\n"
    "       " PGCTL_PROG " hash --dockerconfigjson FILE --image IMAGE\n"
    "\nPrints the kubelet credentialHash of a registry credential. The password is\n"
    "read from standard input or a file (one trailing newline is removed), never\n"
    "from the command line. With --dockerconfigjson, prints the hash of every entry\n"
    "of the secret that applies to IMAGE, one per line, most specific first\n"
    "(nothing when no entry applies). FILE '-' is standard input.";

static int set_option(void *ctx, int c, char *arg)
{
    hash_options *o = ctx;
    switch (c) {
    case OPT_USERNAME: o->username = arg; break;
    case OPT_EMAIL: o->email = arg; break;
    case OPT_PASSWORD_STDIN: o->password_stdin = 1; break;
    case OPT_PASSWORD_FILE: o->password_file = arg; break;
    case OPT_DOCKERCONFIG: o->dockerconfig = arg; break;
    case OPT_IMAGE: o->image = arg; break;
    default: return PGCTL_NOT_MINE;
    }
    return PGCTL_OK;
}

static int check_options(const hash_options *o)
{
    int by_password = o->username || o->email || o->password_stdin || o->password_file;
    if (o->dockerconfig || o->image) {
        if (by_password)
            return pgctl_usage_error(CMD, "--dockerconfigjson cannot be combined with "
                                          "--username, --email or a password");
        if (!o->dockerconfig || !o->image)
            return pgctl_usage_error(CMD, "--dockerconfigjson and --image go together");
        return PGCTL_OK;
    }
    if (o->password_stdin && o->password_file)
        return pgctl_usage_error(CMD, "give only one of --password-stdin and --password-file");
    if (!o->password_stdin && !o->password_file)
        return pgctl_usage_error(CMD, "a password is required: --password-stdin or "
                                      "--password-file FILE");
    if (!o->username)
        return pgctl_usage_error(CMD, "--username is required (it may be empty)");
    return PGCTL_OK;
}

/* Reads the password; removes one trailing newline; refuses NUL bytes. */
static int read_password(const hash_options *o, char **password, size_t *len)
{
    pg_error err;
    pg_error_clear(&err);
    const char *source = o->password_stdin ? "-" : o->password_file;
    if (pgctl_read_input(source, PGCTL_MAX_PASSWORD_BYTES, password, len, &err) != PG_OK)
        return pgctl_fail(&err, "cannot read the password");
    if (*len > 0 && (*password)[*len - 1] == '\n')
        (*password)[--*len] = '\0';
    if (memchr(*password, '\0', *len)) {
        explicit_bzero(*password, *len);
        free(*password);
        *password = NULL;
        pgctl_error("the password contains a NUL byte");
        return PGCTL_USAGE;
    }
    return PGCTL_OK;
}

static int hash_password(const hash_options *o)
{
    char *password = NULL;
    size_t len = 0;
    int status = read_password(o, &password, &len);
    if (status != PGCTL_OK)
        return status;
    char hash[PG_HASH_HEX_LEN + 1];
    pg_error err;
    pg_error_clear(&err);
    int rc = pg_credential_hash(o->username, password, o->email, hash, &err);
    explicit_bzero(password, len);
    free(password);
    if (rc != PG_OK)
        return pgctl_fail(&err, "cannot compute the credential hash");
    return puts(hash) >= 0 ? PGCTL_OK : PGCTL_INTERNAL;
}

static int hash_dockerconfig(const hash_options *o)
{
    char *json = NULL;
    size_t len = 0;
    pg_error err;
    pg_error_clear(&err);
    if (pgctl_read_input(o->dockerconfig, PG_MAX_DOCKERCONFIG_BYTES, &json, &len, &err) != PG_OK)
        return pgctl_fail(&err, "cannot read the dockerconfigjson");
    char **hashes = NULL;
    int rc = pg_dockerconfig_hashes(json, len, o->image, &hashes, &err);
    explicit_bzero(json, len);
    free(json);
    if (rc != PG_OK)
        return pgctl_fail(&err, o->dockerconfig);
    int status = PGCTL_OK;
    for (size_t i = 0; hashes[i]; i++)
        if (puts(hashes[i]) < 0)
            status = PGCTL_INTERNAL;
    if (!hashes[0])
        pgctl_error("note: no entry of %s applies to %s", o->dockerconfig, o->image);
    pg_strv_free(hashes);
    return status;
}

static int run_hash(const pg_config *cfg, int argc, char **argv)
{
    (void)cfg;
    hash_options o = {0};
    int status = pgctl_parse_options(argc, argv, options, set_option, &o, help);
    if (status != PGCTL_OK || (status = check_options(&o)) != PGCTL_OK)
        return status;
    return o.dockerconfig ? hash_dockerconfig(&o) : hash_password(&o);
}

const pgctl_command pgctl_cmd_hash = {
    CMD, "print the kubelet credentialHash of a registry credential", options, 0, run_hash,
    NULL};
