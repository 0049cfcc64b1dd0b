/* SPDX-License-Identifier: Apache-2.0 */
/* pullgatectl record-intent / record-pulled / record-failed. */
#include "pgctl.h"
#include "image_identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CMD_PULLED "record-pulled"

enum { OPT_IMAGE = 256, OPT_IMAGE_REF, OPT_SECRET, OPT_SERVICE_ACCOUNT, OPT_NODE_ACCESSIBLE };

static const struct option image_options[] = {{"image", required_argument, NULL, OPT_IMAGE},
                                              {"help", no_argument, NULL, 'h'},
                                              {NULL, 0, NULL, 0}};

static const struct option pulled_options[] = {
    {"image", required_argument, NULL, OPT_IMAGE},
    {"image-ref", required_argument, NULL, OPT_IMAGE_REF},
    {"secret", required_argument, NULL, OPT_SECRET},
    {"service-account", required_argument, NULL, OPT_SERVICE_ACCOUNT},
    {"node-accessible", no_argument, NULL, OPT_NODE_ACCESSIBLE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* ------------------------------------------------ intent and failure */

typedef struct image_op {
    int (*fn)(pg_store *store, const char *image, pg_error *err);
    const char *image;
} image_op;

static int set_image(void *ctx, int c, char *arg)
{
    if (c != OPT_IMAGE)
        return PGCTL_NOT_MINE;
    ((image_op *)ctx)->image = arg;
    return PGCTL_OK;
}

static int run_op(pg_store *store, void *ctx)
{
    const image_op *op = ctx;
    pg_error err = {0};
    return op->fn(store, op->image, &err) == PG_OK ? PGCTL_OK : pgctl_store_fail(&err, op->image);
}

static int run_image_op(const pg_config *cfg, int argc, char **argv, const char *help_text,
                        image_op op)
{
    int status = pgctl_parse_options(argc, argv, image_options, set_image, &op, help_text);
    if (status != PGCTL_OK)
        return status;
    if (!op.image || !*op.image)
        return pgctl_usage_error(argv[0], "--image IMAGE is required");
    return pgctl_with_store(cfg, run_op, &op);
}

static int run_record_intent(const pg_config *cfg, int argc, char **argv)
{
    return run_image_op(cfg, argc, argv,
                        "Usage: " PGCTL_PROG " record-intent --image IMAGE\n\n"
                        "Records that a pull of IMAGE started (a pull intent). Until the pull\n"
                        "is recorded as pulled or failed, IMAGE counts as pulled by pullgate.",
                        (image_op){pg_store_record_intent, NULL});
}

static int run_record_failed(const pg_config *cfg, int argc, char **argv)
{
    return run_image_op(cfg, argc, argv,
                        "Usage: " PGCTL_PROG " record-failed --image IMAGE\n\n"
                        "Records that a pull of IMAGE failed: releases one pull intent.",
                        (image_op){pg_store_record_failed, NULL});
}

/* ------------------------------------------------------ record-pulled */

typedef struct pulled_options_set {
    const char *image, *image_ref;
    pg_secret *secrets;
    size_t n_secrets;
    pg_service_account *sas;
    size_t n_sas;
    int node_accessible;
} pulled_options_set;

static const char pulled_help[] =
    "Usage: " PGCTL_PROG " record-pulled --image IMAGE --image-ref REF\n"
    "           [--secret NS/NAME/UID:HASH]... [--service-account NS/NAME/UID]...\n"
    "           [--node-accessible]\n"
    "\nRecords that IMAGE was pulled as REF with the given credentials, merged into\n"
    "the pulled record of REF by the kubelet's rules, and releases one pull intent.\n"
    "HASH is the credentialHash (64 lowercase hex digits, see 'hash') or empty.\n"
    "--node-accessible: any pod on the node may use the image.";

static int set_pulled_option(void *ctx, int c, char *arg)
{
    pulled_options_set *o = ctx;
    switch (c) {
    case OPT_IMAGE: o->image = arg; return PGCTL_OK;
    case OPT_IMAGE_REF: o->image_ref = arg; return PGCTL_OK;
    case OPT_NODE_ACCESSIBLE: o->node_accessible = 1; return PGCTL_OK;
    case OPT_SECRET: return pgctl_parse_secret(CMD_PULLED, arg, &o->secrets[o->n_secrets++]);
    case OPT_SERVICE_ACCOUNT:
        return pgctl_parse_service_account(CMD_PULLED, arg, &o->sas[o->n_sas++]);
    default: return PGCTL_NOT_MINE;
    }
}

static int parse_pulled_options(int argc, char **argv, pulled_options_set *o)
{
    int status = pgctl_parse_options(argc, argv, pulled_options, set_pulled_option, o, pulled_help);
    if (status != PGCTL_OK)
        return status;
    if (!o->image || !*o->image)
        return pgctl_usage_error(CMD_PULLED, "--image IMAGE is required");
    if (!o->image_ref || !*o->image_ref)
        return pgctl_usage_error(CMD_PULLED, "--image-ref REF is required");
    /* The rule verify and the hook apply: a REF they would refuse must not be recorded. */
    pg_error err = {0};
    if (pg_identity_check(o->image_ref, NULL, &err) != PG_OK)
        return pgctl_usage_error(CMD_PULLED, "--image-ref: %s", err.message);
    return PGCTL_OK;
}

static int record_pulled(pg_store *store, void *ctx)
{
    const pulled_options_set *o = ctx;
    pg_pull_credentials creds = {.secrets = o->secrets,
                                 .n_secrets = o->n_secrets,
                                 .service_accounts = o->sas,
                                 .n_service_accounts = o->n_sas,
                                 .node_pods_accessible = o->node_accessible};
    pg_error err = {0};
    if (pg_store_record_pulled(store, o->image, o->image_ref, &creds, &err) != PG_OK)
        return pgctl_store_fail(&err, o->image);
    return PGCTL_OK;
}

static int run_record_pulled(const pg_config *cfg, int argc, char **argv)
{
    /* Each option occurs at most argc times. */
    pulled_options_set o = {0};
    o.secrets = calloc((size_t)argc, sizeof *o.secrets);
    o.sas = calloc((size_t)argc, sizeof *o.sas);
    int status;
    if (!o.secrets || !o.sas) {
        pgctl_error("out of memory");
        status = PGCTL_INTERNAL;
    } else if ((status = parse_pulled_options(argc, argv, &o)) == PGCTL_OK) {
        status = pgctl_with_store(cfg, record_pulled, &o);
    }
    free(o.secrets);
    free(o.sas);
    return status;
}

const pgctl_command pgctl_cmd_record_intent = {
    "record-intent", "record that a pull started", image_options, 1, run_record_intent, NULL};
const pgctl_command pgctl_cmd_record_pulled = {
    CMD_PULLED, "record a successful pull and its credentials", pulled_options, 1,
    run_record_pulled, NULL};
const pgctl_command pgctl_cmd_record_failed = {
    "record-failed", "record that a pull failed", image_options, 1, run_record_failed, NULL};
