/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgatectl annotate: prints a credentials annotation value (docs/interfaces.md §4)
 * for one image. With an HMAC key file it is the keyed form (v2): every hash
 * sealed and every entry signed for its namespace (docs/annotation-hmac.md);
 * without one the unkeyed form (v1, clear hashes). Sealing and MAC are the
 * library functions the verifiers use, so producer and verifier cannot drift.
 */
#include "annotation_build.h"
#include "cleanup.h"
#include "pgctl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD "annotate"

enum { OPT_NAMESPACE = 256, OPT_IMAGE, OPT_SECRET, OPT_SERVICE_ACCOUNT, OPT_HMAC_KEY_FILE };

static const struct option options[] = {
    {"namespace", required_argument, NULL, OPT_NAMESPACE},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"secret", required_argument, NULL, OPT_SECRET},
    {"service-account", required_argument, NULL, OPT_SERVICE_ACCOUNT},
    {"hmac-key-file", required_argument, NULL, OPT_HMAC_KEY_FILE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

typedef struct annotate_options {
    const char *namespace_, *image, *key_file;
    /* In command-line order; each option occurs at most argc times. The strings point into
     * argv; an empty credentialHash stands for none, auth_hashes[i] NULL when not given. */
    pg_secret *secrets;
    const char **auth_hashes;
    size_t n_secrets;
    pg_service_account *sas;
    size_t n_sas;
} annotate_options;

static const char help[] =
    "Usage: " PGCTL_PROG " annotate --namespace NS --image IMAGE\n"
    "           [--secret NS/NAME/UID:HASH[:AUTHHASH]]... [--service-account NS/NAME/UID]...\n"
    "           [--hmac-key-file FILE]\n"
    "\nPrints the value of the credentials annotation for a pod in namespace NS that\n"
    "holds the given secrets and service accounts for IMAGE (keyed by its normalised\n"
    "name). HASH is the credentialHash (pullgatectl hash, with --email when the secret\n"
    "has one); AUTHHASH the same hash without the email (give it when they differ).\n"
    "With --hmac-key-file the hashes are sealed (\"sealedHashes\") and the entry carries\n"
    "\"hmac\", binding it to NS (config hmacKeyFile on the nodes; see\n"
    "docs/annotation-hmac.md); without it the hashes are printed in clear, which only\n"
    "clusters that opted out of the key may use. FILE must be owned by root, mode 0600\n"
    "or 0400, 32 to 1024 bytes, used exactly as stored.";

/* NS/NAME/UID:HASH:AUTHHASH: splits off AUTHHASH (NULL when not given). */
static const char *split_auth_hash(char *arg)
{
    char *last = strrchr(arg, ':');
    if (!last || !pgctl_is_hash(last + 1))
        return NULL;
    *last = '\0';
    char *prev = strrchr(arg, ':');
    if (prev && pgctl_is_hash(prev + 1))
        return last + 1;
    *last = ':';
    return NULL;
}

static int set_option(void *ctx, int c, char *arg)
{
    annotate_options *o = ctx;
    switch (c) {
    case OPT_NAMESPACE: o->namespace_ = arg; return PGCTL_OK;
    case OPT_IMAGE: o->image = arg; return PGCTL_OK;
    case OPT_HMAC_KEY_FILE: o->key_file = arg; return PGCTL_OK;
    case OPT_SECRET:
        o->auth_hashes[o->n_secrets] = split_auth_hash(arg);
        return pgctl_parse_secret(CMD, arg, &o->secrets[o->n_secrets++]);
    case OPT_SERVICE_ACCOUNT: return pgctl_parse_service_account(CMD, arg, &o->sas[o->n_sas++]);
    default: return PGCTL_NOT_MINE;
    }
}

/* A credential of another namespace would be ignored by every verifier: a producer bug. */
static int check_namespaces(const annotate_options *o)
{
    for (size_t i = 0; i < o->n_secrets + o->n_sas; i++) {
        const char *ns =
            i < o->n_secrets ? o->secrets[i].namespace_ : o->sas[i - o->n_secrets].namespace_;
        if (strcmp(ns, o->namespace_) != 0)
            return pgctl_usage_error(CMD, "credential namespace \"%.64s\" is not --namespace "
                                          "\"%.64s\" (a pod can only use its own)",
                                     ns, o->namespace_);
    }
    return PGCTL_OK;
}

static int parse_options(int argc, char **argv, annotate_options *o)
{
    int status = pgctl_parse_options(argc, argv, options, set_option, o, help);
    if (status != PGCTL_OK)
        return status;
    if (!o->namespace_ || !*o->namespace_)
        return pgctl_usage_error(CMD, "--namespace NS is required");
    if (!o->image || !*o->image)
        return pgctl_usage_error(CMD, "--image IMAGE is required");
    return check_namespaces(o);
}

static int sign_annotation(const annotate_options *o, pg_annotation *a)
{
    pg_error err;
    pg_error_clear(&err);
    pg_mac_key *key = NULL;
    if (pg_mac_key_load(o->key_file, &key, &err) != PG_OK)
        return pgctl_fail(&err, "cannot load the HMAC key");
    int rc = pg_annotation_sign(a, key, &err);
    pg_mac_key_free(key);
    return rc == PG_OK ? PGCTL_OK : pgctl_fail(&err, "cannot sign the annotation");
}

/* Copies the parsed credentials into the annotation, in command-line order. */
static int add_credentials(const annotate_options *o, pg_annotation *a, pg_error *err)
{
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < o->n_secrets; i++) {
        const pg_secret *s = &o->secrets[i];
        rc = pg_annotation_add_secret_hashes(a, o->image, s->namespace_, s->name, s->uid,
                                             *s->credential_hash ? s->credential_hash : NULL,
                                             o->auth_hashes[i], err);
    }
    for (size_t i = 0; rc == PG_OK && i < o->n_sas; i++)
        rc = pg_annotation_add_service_account(a, o->image, o->sas[i].namespace_, o->sas[i].name,
                                               o->sas[i].uid, err);
    return rc;
}

static int print_annotation(const annotate_options *o)
{
    pg_error err;
    pg_error_clear(&err);
    pg_annotation *a = pg_annotation_new(o->namespace_, &err);
    if (!a)
        return pgctl_fail(&err, "annotate");
    int status = PGCTL_OK;
    if (pg_annotation_add_image(a, o->image, NULL, &err) != PG_OK)
        status = pgctl_fail(&err, "--image");
    else if (add_credentials(o, a, &err) != PG_OK)
        status = pgctl_fail(&err, "annotate");
    if (status == PGCTL_OK && o->key_file)
        status = sign_annotation(o, a);
    pg_autofree char *text = status == PGCTL_OK ? pg_annotation_dump(a, &err) : NULL;
    if (status == PGCTL_OK && !text)
        status = pgctl_fail(&err, "annotate");
    if (text && puts(text) < 0) {
        pgctl_error("write error on standard output");
        status = PGCTL_INTERNAL;
    }
    pg_annotation_free(a);
    return status;
}

static int run_annotate(const pg_config *cfg, int argc, char **argv)
{
    (void)cfg;
    annotate_options o = {.secrets = calloc((size_t)argc, sizeof *o.secrets),
                          .auth_hashes = calloc((size_t)argc, sizeof *o.auth_hashes),
                          .sas = calloc((size_t)argc, sizeof *o.sas)};
    int status = PGCTL_OK;
    if (!o.secrets || !o.auth_hashes || !o.sas) {
        pgctl_error("out of memory");
        status = PGCTL_INTERNAL;
    } else if ((status = parse_options(argc, argv, &o)) == PGCTL_OK) {
        status = print_annotation(&o);
    }
    free(o.secrets);
    free(o.auth_hashes);
    free(o.sas);
    return status;
}

const pgctl_command pgctl_cmd_annotate = {
    CMD, "print a (signed) credentials annotation for a pod", options, 0, run_annotate,
    NULL};
