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

typedef int (*image_op_fn)(pg_store *store, const char *image, pg_error *err);

static int parse_image_options(const char *cmd, int argc, char **argv, const char **image,
                               int *help)
{
    pgctl_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", image_options, NULL)) != -1) {
        if (c == OPT_IMAGE)
            *image = optarg;
        else if (c == 'h')
            *help = 1;
        else
            return pgctl_option_error(cmd, c, argv);
    }
    return pgctl_no_operands(cmd, argc, argv);
}

static int run_image_op(const pg_config *cfg, int argc, char **argv, const char *help_text,
                        image_op_fn op)
{
    const char *cmd = argv[0], *image = NULL;
    int help = 0;
    int status = parse_image_options(cmd, argc, argv, &image, &help);
    if (status != PGCTL_OK)
        return status;
    if (help) {
        printf("Usage: " PGCTL_PROG " %s --image IMAGE\n\n%s\n", cmd, help_text);
        return PGCTL_OK;
    }
    if (!image || !*image)
        return pgctl_usage_error(cmd, "--image IMAGE is required");
    pg_notifier *notifier;
    pg_store *store = pgctl_store_open(cfg, &notifier, &status);
    if (!store)
        return status;
    pg_error err;
    pg_error_clear(&err);
    if (op(store, image, &err) != PG_OK)
        status = pgctl_store_fail(&err, image);
    pgctl_store_close(store, notifier);
    return status;
}

static int run_record_intent(const pg_config *cfg, int argc, char **argv)
{
    return run_image_op(cfg, argc, argv,
                        "Records that a pull of IMAGE started (a pull intent). Until the pull\n"
                        "is recorded as pulled or failed, IMAGE counts as pulled by pullgate.",
                        pg_store_record_intent);
}

static int run_record_failed(const pg_config *cfg, int argc, char **argv)
{
    return run_image_op(cfg, argc, argv,
                        "Records that a pull of IMAGE failed: releases one pull intent.",
                        pg_store_record_failed);
}

/* ------------------------------------------------------ record-pulled */

typedef struct pulled_options_set {
    const char *image, *image_ref;
    pg_secret *secrets;
    size_t n_secrets;
    pg_service_account *sas;
    size_t n_sas;
    int node_accessible, help;
} pulled_options_set;

static void print_pulled_usage(void)
{
    puts("Usage: " PGCTL_PROG " record-pulled --image IMAGE --image-ref REF\n"
         "           [--secret NS/NAME/UID:HASH]... [--service-account NS/NAME/UID]...\n"
         "           [--node-accessible]\n"
         "\nRecords that IMAGE was pulled as REF with the given credentials, merged into\n"
         "the pulled record of REF by the kubelet's rules, and releases one pull intent.\n"
         "HASH is the credentialHash (64 lowercase hex digits, see 'hash') or empty.\n"
         "--node-accessible: any pod on the node may use the image.");
}

static int parse_pulled_option(pulled_options_set *o, int c, char **argv)
{
    switch (c) {
    case OPT_IMAGE: o->image = optarg; return PGCTL_OK;
    case OPT_IMAGE_REF: o->image_ref = optarg; return PGCTL_OK;
    case OPT_NODE_ACCESSIBLE: o->node_accessible = 1; return PGCTL_OK;
    case 'h': o->help = 1; return PGCTL_OK;
    case OPT_SECRET: return pgctl_parse_secret(CMD_PULLED, optarg, &o->secrets[o->n_secrets++]);
    case OPT_SERVICE_ACCOUNT:
        return pgctl_parse_service_account(CMD_PULLED, optarg, &o->sas[o->n_sas++]);
    default: return pgctl_option_error(CMD_PULLED, c, argv);
    }
}

static int parse_pulled_options(int argc, char **argv, pulled_options_set *o)
{
    pgctl_getopt_reset();
    int c, status;
    while ((c = getopt_long(argc, argv, ":h", pulled_options, NULL)) != -1)
        if ((status = parse_pulled_option(o, c, argv)) != PGCTL_OK)
            return status;
    if ((status = pgctl_no_operands(CMD_PULLED, argc, argv)) != PGCTL_OK || o->help)
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

static int record_pulled(const pg_config *cfg, const pulled_options_set *o)
{
    pg_pull_credentials creds = {.secrets = o->secrets,
                                 .n_secrets = o->n_secrets,
                                 .service_accounts = o->sas,
                                 .n_service_accounts = o->n_sas,
                                 .node_pods_accessible = o->node_accessible};
    int status = PGCTL_OK;
    pg_notifier *notifier;
    pg_store *store = pgctl_store_open(cfg, &notifier, &status);
    if (!store)
        return status;
    pg_error err;
    pg_error_clear(&err);
    if (pg_store_record_pulled(store, o->image, o->image_ref, &creds, &err) != PG_OK)
        status = pgctl_store_fail(&err, o->image);
    pgctl_store_close(store, notifier);
    return status;
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
        if (o.help)
            print_pulled_usage();
        else
            status = record_pulled(cfg, &o);
    }
    free(o.secrets);
    free(o.sas);
    return status;
}

const pgctl_command pgctl_cmd_record_intent = {
    "record-intent", "record that a pull started", image_options, 1, run_record_intent};
const pgctl_command pgctl_cmd_record_pulled = {
    CMD_PULLED, "record a successful pull and its credentials", pulled_options, 1,
    run_record_pulled};
const pgctl_command pgctl_cmd_record_failed = {
    "record-failed", "record that a pull failed", image_options, 1, run_record_failed};
