/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One hook decision, from its inputs to a pg_decision (docs/interfaces.md §5,
 * §7), for two callers: pullgate-hook-local (a fresh process: loads the
 * configuration, opens the store, reads stdin, opens the bundle by path) and
 * pullgate-cri's resident hook server (configuration and store already open,
 * the state as bytes, the bundle as a directory fd the thin hook passed).
 * Every failure becomes a denial with its reason.
 */
#include "hook.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* what (may be NULL) says which step failed when err's message does not. */
static void deny(hook_run *run, int reason, const char *what, const pg_error *err)
{
    const char *why = err && err->message[0] ? err->message : "unknown error";
    run->decision.allow = 0;
    run->decision.reason = reason;
    if (what)
        snprintf(run->decision.text, sizeof run->decision.text, "%.100s: %.400s", what, why);
    else
        snprintf(run->decision.text, sizeof run->decision.text, "%.500s", why);
}

static void allow(hook_run *run, int reason, const char *text)
{
    run->decision.allow = 1;
    run->decision.reason = reason;
    snprintf(run->decision.text, sizeof run->decision.text, "%s", text);
}

/* A missing default file means built-in defaults; any other problem fails closed. */
static int load_config(hook_run *run, pg_error *err)
{
    run->own_cfg = pg_config_new(err);
    if (!run->own_cfg)
        return PG_ERR_NOMEM; /* pg_config_new's only failure (it has set err) */
    struct stat st;
    if (!run->args.config_explicit && lstat(run->args.config_path, &st) != 0 && errno == ENOENT)
        return PG_OK;
    return pg_config_load_file(run->own_cfg, run->args.config_path, err);
}

/*
 * The hook only reads records. pg_store_open_readonly() opens only
 * readOnlyRecordDirs, and pg_store_open() would create a missing stateDir,
 * so: a stateDir that does not exist (ENOENT) holds no records, and the
 * read-only directories suffice; anything else goes to pg_store_open, which
 * refuses what it cannot use (a lookup that fails is not evidence).
 */
pg_store *hook_open_store(const pg_config *cfg, pg_error *err)
{
    struct stat st;
    const char *state_dir = pg_config_state_dir(cfg);
    if (state_dir && lstat(state_dir, &st) != 0 && errno == ENOENT)
        return pg_store_open_readonly(cfg, err);
    return pg_store_open(cfg, NULL, err);
}

/*
 * containerd names no image ID, so log lines and D-Bus signals would say
 * "unknown" where an operator wants the ID. The library decided over every
 * spelling already; this second index read only names the ID for the report
 * and never influences the decision (a failed lookup leaves it unknown).
 */
static void name_resolved_ref(hook_run *run)
{
    if (run->identity.image_ref || !run->store || !run->identity.image)
        return;
    if (pg_store_resolve_image(run->store, run->identity.image, &run->reported_ref, NULL) != PG_OK)
        run->reported_ref = NULL;
}

/*
 * A container whose OCI config carries no credentials annotation at all is
 * denied like one whose annotation lists nothing ("presented 0 secrets"), but
 * the fix differs: under containerd the annotation reaches config.json only
 * through the runtime handler's pod_annotations; under CRI-O (which copies
 * every pod annotation) the pod has none, so no admission webhook wrote it.
 * Only the text changes, never the decision.
 */
static void explain_missing_annotation(hook_run *run)
{
    if (run->decision.allow || run->decision.reason != PG_REASON_NO_CREDENTIALS)
        return;
    const char *key = pg_config_annotation(run->cfg);
    char why[256];
    if (run->identity.runtime == PG_RUNTIME_CONTAINERD)
        snprintf(why, sizeof why,
                 "containerd passes it only when the runtime handler lists it: pod_annotations = "
                 "[\"%.100s\"] (pullgatectl doctor names the handler); or no webhook wrote it",
                 key);
    else
        snprintf(why, sizeof why, "no admission webhook (pullgate-webhook) wrote it on the pod");
    char text[sizeof run->decision.text];
    /* Truncating the library's text at the end is fine: the reason comes first. */
    if (snprintf(text, sizeof text, "no %.100s annotation in the container's OCI config (%s); %s",
                 key, why, run->decision.text) < 0)
        return;
    memcpy(run->decision.text, text, sizeof text);
}

/*
 * A denial that a pull with the pod's own credentials can cure says how: the
 * kubelet pulls when pullgate-cri's verification pulls answer its ImageStatus
 * "not present" (criVerifyPulls), or on every start with imagePullPolicy:
 * Always. A pod that pulled and is still refused presents an annotation that
 * does not list the secret it pulled with (added after admission): recreating
 * the pod lets the webhook list it. Only the text changes, never the decision.
 */
static void explain_curable(hook_run *run)
{
    if (run->decision.allow || !pg_reason_curable_by_pull(run->decision.reason))
        return;
    static const char *const cures[] = {
        "; cured by a pull with the pod's own credentials (pullgate-cri's verification pulls, "
        "or imagePullPolicy: Always); pulled and still refused: recreate the pod so the webhook "
        "lists the secret it pulls with",
        "; cured by a pull with the pod's own credentials, or by recreating the pod",
    };
    /* The reason stays whole: the longest cure that fits is appended, or none. */
    size_t len = strlen(run->decision.text);
    for (size_t i = 0; i < sizeof cures / sizeof cures[0]; i++)
        if (len + strlen(cures[i]) < sizeof run->decision.text) {
            memcpy(run->decision.text + len, cures[i], strlen(cures[i]) + 1);
            return;
        }
}

static void decide_application(hook_run *run)
{
    pg_error err = {0};
    if (!run->identity.image) {
        /* Only a policy that needs no image name can exempt an unnamed image. */
        if (pg_config_policy(run->cfg) == PG_POLICY_NEVER_VERIFY)
            allow(run, PG_REASON_NEVER_VERIFY, "policy NeverVerify");
        else
            deny(run, PG_REASON_BAD_REQUEST, "the runtime names no image",
                 &(pg_error){PG_ERR_INVALID, "only an image ID is known, not a name"});
        return;
    }
    if (!run->store) {
        run->store = run->own_store = hook_open_store(run->cfg, &err);
        if (!run->store) {
            deny(run, PG_REASON_STORE_ERROR, "opening the record store", &err);
            return;
        }
    }
    /*
     * Every spelling the runtime gives goes to the library, which validates,
     * looks each up in every record directory (containerd's missing image ID
     * included: the index and the name index stand in) and merges what it finds.
     */
    pg_request req = {
        .image = run->identity.image,
        .image_ref = run->identity.image_ref,
        .namespace_ = run->identity.namespace_,
        .credentials = hook_doc_map_get(run->doc, pg_config_annotation(run->cfg)),
    };
    pg_decide_pod(run->cfg, run->store, &req, run->identity.pod_uid, run->identity.aliases,
                  (const char *const *)run->identity.hints, &run->decision);
    if (!req.credentials)
        explain_missing_annotation(run);
    explain_curable(run);
    name_resolved_ref(run);
}

/* After the bundle's annotations were read (rc, err): who the container is, then the decision. */
static void decide_from_annotations(hook_run *run, int rc, const pg_error *read_err)
{
    pg_error err = {0};
    if (rc != PG_OK)
        deny(run, PG_REASON_BAD_REQUEST, NULL, read_err); /* names the bundle */
    else if (hook_identify(pg_config_runtime(run->cfg), run->doc, &run->identity, &err) != PG_OK)
        deny(run, PG_REASON_BAD_REQUEST, "identifying the container", &err);
    else if (run->identity.kind == HOOK_NOT_KUBERNETES)
        allow(run, 0, "not a Kubernetes container (no CRI-O or containerd annotations)");
    else if (run->identity.kind == HOOK_SANDBOX)
        allow(run, PG_REASON_SANDBOX, "sandbox (pause) container");
    else
        decide_application(run);
}

/*
 * The state is read even after an argument or configuration error: it costs
 * at most the stdin deadline and lets the denial name the container.
 */
void hook_evaluate_local(hook_run *run, int argc, char **argv, int state_fd, int stdin_spent_ms)
{
    pg_error args_err = {0}, cfg_err = {0}, state_err = {0}, bundle_err = {0};
    int args_rc = hook_parse_args(argc, argv, &run->args, &args_err);
    int cfg_rc = args_rc == PG_OK ? load_config(run, &cfg_err) : PG_OK;
    run->doc = run->own_doc = hook_doc_new();
    int state_rc = run->doc ? hook_read_state_spent(run->doc, state_fd, stdin_spent_ms, &run->state,
                                                    &state_err)
                            : pg_fail(&state_err, PG_ERR_NOMEM, "out of memory");
    if (cfg_rc != PG_OK || args_rc != PG_OK) {
        /* A configuration we could not load names no mode: enforce (fail closed). */
        pg_config_free(run->own_cfg);
        run->own_cfg = NULL;
    }
    run->cfg = run->own_cfg;
    if (args_rc != PG_OK) {
        deny(run, PG_REASON_BAD_REQUEST, "invalid arguments", &args_err);
    } else if (cfg_rc != PG_OK) {
        deny(run, PG_REASON_CONFIG_ERROR, "configuration", &cfg_err);
    } else if (state_rc != PG_OK) {
        deny(run, PG_REASON_BAD_REQUEST, NULL, &state_err); /* names the OCI state */
    } else {
        int rc = hook_read_bundle_annotations(run->state.bundle, run->doc, &bundle_err);
        decide_from_annotations(run, rc, &bundle_err);
    }
}

void hook_evaluate_resident(hook_run *run, const pg_config *cfg, pg_store *store, hook_doc *doc,
                            const char *stage, const char *state, size_t state_len, int bundle_fd)
{
    pg_error state_err = {0}, bundle_err = {0};
    run->args.stage = stage;
    run->cfg = cfg;
    run->store = store;
    run->doc = doc;
    if (hook_parse_state(doc, state, state_len, &run->state, &state_err) != PG_OK) {
        deny(run, PG_REASON_BAD_REQUEST, NULL, &state_err);
        return;
    }
    /* The state's strings were copied out: the same reader takes config.json now. */
    int rc = hook_read_bundle_annotations_at(bundle_fd, doc, &bundle_err);
    decide_from_annotations(run, rc, &bundle_err);
}

hook_subject hook_run_subject(const hook_run *run)
{
    return (hook_subject){
        .container_id = run->state.id,
        .namespace_ = run->identity.namespace_,
        .image = run->identity.image,
        .image_ref = run->identity.image_ref ? run->identity.image_ref : run->reported_ref,
        .stage = run->args.stage,
    };
}

pg_mode hook_run_mode(const hook_run *run)
{
    return run->cfg ? pg_config_mode(run->cfg) : PG_MODE_ENFORCE;
}

int hook_run_status(const hook_run *run)
{
    return run->decision.allow || hook_run_mode(run) == PG_MODE_AUDIT ? 0 : 1;
}

void hook_run_free(hook_run *run)
{
    pg_store_free(run->own_store);
    pg_free(run->reported_ref);
    hook_identity_clear(&run->identity);
    hook_doc_free(run->own_doc);
    hook_state_clear(&run->state);
    pg_config_free(run->own_cfg);
    memset(run, 0, sizeof *run);
}
