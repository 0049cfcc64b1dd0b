/* SPDX-License-Identifier: Apache-2.0 */
/* pullgatectl verify: the decision of docs/interfaces.md §5 for one request. */
#include "pgctl.h"
#include "internal.h"
#include "cleanup.h"

#include <stdio.h>
#include <stdlib.h>

#define CMD "verify"

enum { OPT_IMAGE = 256, OPT_IMAGE_REF, OPT_NAMESPACE, OPT_CREDENTIALS, OPT_CREDENTIALS_FILE,
       OPT_JSON, OPT_ALIAS, OPT_HINT, OPT_POD_UID };

static const struct option options[] = {
    {"image", required_argument, NULL, OPT_IMAGE},
    {"image-ref", required_argument, NULL, OPT_IMAGE_REF},
    {"namespace", required_argument, NULL, OPT_NAMESPACE},
    {"credentials", required_argument, NULL, OPT_CREDENTIALS},
    {"credentials-file", required_argument, NULL, OPT_CREDENTIALS_FILE},
    {"json", no_argument, NULL, OPT_JSON},
    {"alias", required_argument, NULL, OPT_ALIAS},
    {"hint", required_argument, NULL, OPT_HINT},
    {"pod-uid", required_argument, NULL, OPT_POD_UID},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

typedef struct verify_options {
    const char *image, *image_ref, *namespace_, *credentials, *credentials_file, *pod_uid;
    int json;
    /* NULL-terminated; at most one per argument, so argc + 1 entries suffice. */
    const char **aliases, **hints;
    size_t n_aliases, n_hints;
} verify_options;

static const char help[] =
    "Usage: " PGCTL_PROG " verify --image IMAGE --image-ref REF --namespace NS\n"
    "           [--credentials JSON | --credentials-file FILE] [--alias REF]... [--hint REF]...\n"
    "           [--pod-uid UID] [--json]\n"
    "\nDecides whether a pod in namespace NS may start a container from IMAGE\n"
    "(image ID REF; an empty REF means unknown) presenting the credentials JSON\n"
    "(the value of the credentials annotation; FILE '-' is standard input).\n"
    "--alias: a further spelling of the image's identity the runtime vouches for\n"
    "(an image ID or reference, e.g. CRI-O's io.kubernetes.cri-o.Image); its records\n"
    "may authorise. --hint: one a pod could have injected (e.g. a repo digest): it\n"
    "can only keep the image verified, never authorise. Both repeatable.\n"
    "--pod-uid: the pod's UID as the runtime sets it (the hook reads containerd's\n"
    "io.kubernetes.cri.sandbox-uid or CRI-O's io.kubernetes.pod.uid): a pull this\n"
    "very pod made (pullgate-cri's pod binding) allows it.\n"
    "Prints 'allow: <reason>' (exit 0) or 'deny: <reason>' (exit 1); with --json\n"
    "{\"allow\":BOOL,\"reason\":\"<code>\",\"message\":\"<text>\"}.";

static int set_option(void *ctx, int c, char *arg)
{
    verify_options *o = ctx;
    switch (c) {
    case OPT_IMAGE: o->image = arg; break;
    case OPT_IMAGE_REF: o->image_ref = arg; break;
    case OPT_NAMESPACE: o->namespace_ = arg; break;
    case OPT_CREDENTIALS: o->credentials = arg; break;
    case OPT_CREDENTIALS_FILE: o->credentials_file = arg; break;
    case OPT_JSON: o->json = 1; break;
    case OPT_ALIAS: o->aliases[o->n_aliases++] = arg; break;
    case OPT_HINT: o->hints[o->n_hints++] = arg; break;
    case OPT_POD_UID: o->pod_uid = arg; break;
    default: return PGCTL_NOT_MINE;
    }
    return PGCTL_OK;
}

static int check_options(const verify_options *o)
{
    if (!o->image || !*o->image)
        return pgctl_usage_error(CMD, "--image IMAGE is required");
    if (!o->image_ref)
        return pgctl_usage_error(CMD, "--image-ref REF is required (it may be empty)");
    if (!o->namespace_ || !*o->namespace_)
        return pgctl_usage_error(CMD, "--namespace NS is required");
    if (o->pod_uid && !pg_pod_uid_valid(o->pod_uid))
        return pgctl_usage_error(CMD, "--pod-uid UID: not a pod UID ([A-Za-z0-9._-], 1 to 128)");
    if (o->credentials && o->credentials_file)
        return pgctl_usage_error(CMD, "give only one of --credentials and --credentials-file");
    return PGCTL_OK;
}

static int print_decision(const pg_decision *d, int json)
{
    const char *reason = pg_reason_name(d->reason);
    if (json)
        return pgctl_print_json(json_pack("{s:b, s:s, s:s}", "allow", d->allow, "reason", reason,
                                          "message", d->text),
                                0);
    if (printf("%s: %s\n", d->allow ? "allow" : "deny", d->text[0] ? d->text : reason) < 0)
        return PGCTL_INTERNAL;
    return PGCTL_OK;
}

static int decide(const pg_config *cfg, const verify_options *o, const char *credentials)
{
    pg_error err;
    pg_error_clear(&err);
    pg_decision d;
    pg_store *store = pgctl_store_open_reading(cfg, &err);
    if (!store) {
        /* Same as the hook: a store that cannot be read denies (fail closed). */
        d.allow = 0;
        d.reason = PG_REASON_STORE_ERROR;
        snprintf(d.text, sizeof d.text, "pull record store error (failing closed): %.400s",
                 err.message);
        int status = print_decision(&d, o->json);
        return status != PGCTL_OK ? status : PGCTL_DENY;
    }
    pg_request req = {.image = o->image,
                      .image_ref = o->image_ref,
                      .namespace_ = o->namespace_,
                      .credentials = credentials};
    int allow = pg_decide_pod(cfg, store, &req, o->pod_uid, o->aliases, o->hints, &d);
    pg_store_free(store);
    int status = print_decision(&d, o->json);
    if (status != PGCTL_OK)
        return status;
    return allow ? PGCTL_OK : PGCTL_DENY;
}

/* Runs the parsed request: the credentials from --credentials or read from --credentials-file. */
static int run_parsed(const pg_config *cfg, const verify_options *o)
{
    int status = check_options(o);
    if (status != PGCTL_OK || !o->credentials_file)
        return status != PGCTL_OK ? status : decide(cfg, o, o->credentials);
    pg_autofree char *credentials = NULL;
    pg_error err;
    pg_error_clear(&err);
    if (pgctl_read_input(o->credentials_file, PG_MAX_ANNOTATION_BYTES, &credentials, NULL, &err) !=
        PG_OK)
        return pgctl_fail(&err, "cannot read the credentials");
    return decide(cfg, o, credentials);
}

static int run_verify(const pg_config *cfg, int argc, char **argv)
{
    verify_options o = {0};
    o.aliases = calloc((size_t)argc + 1, sizeof *o.aliases);
    o.hints = calloc((size_t)argc + 1, sizeof *o.hints);
    int status = o.aliases && o.hints
                     ? pgctl_parse_options(argc, argv, options, set_option, &o, help)
                     : PGCTL_INTERNAL;
    if (status == PGCTL_OK)
        status = run_parsed(cfg, &o);
    free(o.aliases);
    free(o.hints);
    return status;
}

const pgctl_command pgctl_cmd_verify = {
    CMD, "decide whether a pod may run an image (allow/deny)", options, 1, run_verify, NULL};
