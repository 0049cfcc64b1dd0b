/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decision of CONTRACT §5. Structure: a short pipeline of steps, each of
 * which either settles the decision (fills *out and returns true) or passes.
 * The default outcome is deny; anything unexpected (a NULL, an unparsable
 * image or annotation, a store error) settles as a deny, never as an allow.
 */
#include "annotation_mac.h"
#include "internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* presented.c; not in internal.h yet. */

PG_API const char *pg_reason_name(int reason)
{
    switch (reason) {
    case PG_REASON_NEVER_VERIFY: return "never-verify";
    case PG_REASON_PINNED: return "pinned";
    case PG_REASON_PRELOADED: return "preloaded";
    case PG_REASON_ALLOWLISTED: return "allowlisted";
    case PG_REASON_NODE_ACCESSIBLE: return "node-accessible";
    case PG_REASON_SECRET_MATCH: return "secret-match";
    case PG_REASON_SERVICE_ACCOUNT_MATCH: return "service-account-match";
    case PG_REASON_SANDBOX: return "sandbox";
    case PG_REASON_NO_IMAGE_REF: return "no-image-ref";
    case PG_REASON_NO_RECORD: return "no-record";
    case PG_REASON_NO_MAPPING: return "no-mapping";
    case PG_REASON_NO_CREDENTIALS: return "no-credentials";
    case PG_REASON_CREDENTIALS_MISMATCH: return "credentials-mismatch";
    case PG_REASON_EXPIRED: return "expired";
    case PG_REASON_BAD_ANNOTATION: return "bad-annotation";
    case PG_REASON_STORE_ERROR: return "store-error";
    case PG_REASON_BAD_REQUEST: return "bad-request";
    case PG_REASON_CONFIG_ERROR: return "config-error";
    case PG_REASON_ANNOTATION_SIGNATURE: return "annotation-signature";
    default: return "unknown";
    }
}

/* Everything the steps share; owned resources are released by decide_cleanup. */
typedef struct decide_ctx {
    const pg_config *cfg;
    const pg_store *store;
    const pg_request *req;
    const char *image_ref;     /* NULL when unknown */
    const char *namespace_;    /* never NULL */
    pg_ref *ref;               /* the parsed image */
    const char *name;          /* its normalised name (credential-mapping key) */
    pg_presented *presented;   /* NULL: nothing presented */
    pg_record *record;         /* NULL: no pulled record */
    const pg_rec_mapping *mapping;
    pg_decision *out;
} decide_ctx;

/* ------------------------------------------------------------- settling */

static void sanitize_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = ' ';
}

static bool settle(decide_ctx *c, int allow, int reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Fills the decision; the text is the reason only (callers print "allow:"/"deny:"). */
static bool settle(decide_ctx *c, int allow, int reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->out->text, sizeof c->out->text, fmt, ap);
    va_end(ap);
    /* Image, imageRef and namespace come from the runtime and the pod: keep one line. */
    sanitize_line(c->out->text);
    c->out->allow = allow;
    c->out->reason = reason;
    return true;
}

static const char *or_unknown(const char *s) { return s && *s ? s : "(unknown)"; }

/* --------------------------------------------------------------- steps */

static bool step_request(decide_ctx *c)
{
    const pg_request *r = c->req;
    if (!c->cfg)
        return settle(c, 0, PG_REASON_CONFIG_ERROR, "no configuration");
    if (!r || !r->image || !*r->image)
        return settle(c, 0, PG_REASON_BAD_REQUEST, "bad request: no image named");
    if (strlen(r->image) > PG_MAX_IMAGE_LEN)
        return settle(c, 0, PG_REASON_BAD_REQUEST, "bad request: image name longer than %d bytes",
                      PG_MAX_IMAGE_LEN);
    c->image_ref = r->image_ref && *r->image_ref ? r->image_ref : NULL;
    c->namespace_ = r->namespace_ ? r->namespace_ : "";
    return false;
}

static bool step_never_verify(decide_ctx *c)
{
    if (pg_config_policy(c->cfg) != PG_POLICY_NEVER_VERIFY)
        return false;
    return settle(c, 1, PG_REASON_NEVER_VERIFY, "policy NeverVerify: %.256s is not checked",
                  c->req->image);
}

static bool step_parse_image(decide_ctx *c)
{
    pg_error err = {0};
    if ((c->ref = pg_ref_parse(c->req->image, &err))) {
        c->name = pg_ref_name(c->ref);
        return false;
    }
    return settle(c, 0, PG_REASON_BAD_REQUEST, "bad request: image \"%.256s\": %s",
                  c->req->image, err.message);
}

static bool step_pinned(decide_ctx *c)
{
    if (!pg_pinned_match_ref(pg_config_pinned_images(c->cfg), c->req->image, c->ref))
        return false;
    return settle(c, 1, PG_REASON_PINNED, "%.256s is a pinned image", c->req->image);
}

/* Parsed up front: a malformed annotation is a deny even where credentials would
 * not be consulted, so tampering never goes unnoticed. */
static bool step_annotation(decide_ctx *c)
{
    const char *json = c->req->credentials;
    if (!json || !*json)
        return false;
    pg_error err = {0};
    pg_mac_key *key = NULL;
    const char *key_file = pg_config_hmac_key_file(c->cfg);
    /* Namespace-bound annotations (docs/annotation-hmac.md): no usable key, no decision. */
    if (key_file && *key_file && pg_mac_key_load(key_file, &key, &err) != PG_OK)
        return settle(c, 0, PG_REASON_CONFIG_ERROR, "hmacKeyFile: %s", err.message);
    int rc = pg_presented_parse_keyed(json, strlen(json), c->namespace_, key, &c->presented, &err);
    pg_mac_key_free(key);
    if (rc == PG_OK)
        return false;
    return settle(c, 0, PG_REASON_BAD_ANNOTATION, "bad credentials annotation: %s", err.message);
}

static bool allowlisted(const decide_ctx *c)
{
    return pg_config_policy(c->cfg) == PG_POLICY_NEVER_VERIFY_ALLOWLISTED &&
           pg_allowlist_match(pg_config_allowlist(c->cfg), c->req->image);
}

static bool step_allowlisted(decide_ctx *c)
{
    if (!allowlisted(c))
        return false;
    return settle(c, 1, PG_REASON_ALLOWLISTED, "%.256s is in the preloaded-images allowlist",
                  c->name);
}

/* Without the imageRef we cannot tell whether we pulled the image: fail closed
 * (under containerd the runtime does not name it and resolution found nothing). */
static bool step_image_ref_known(decide_ctx *c)
{
    if (c->image_ref)
        return false;
    return settle(c, 0, PG_REASON_NO_IMAGE_REF,
                  "the image ID of %.256s is unknown, so its pull records cannot be checked",
                  c->req->image);
}

static bool store_error(decide_ctx *c, const pg_error *err)
{
    return settle(c, 0, PG_REASON_STORE_ERROR, "pull record store error (failing closed): %s",
                  err->message[0] ? err->message : pg_code_name(err->code));
}

static bool step_load_record(decide_ctx *c)
{
    if (!c->store) {
        pg_error err = {PG_ERR_INVALID, "no record store"};
        return store_error(c, &err);
    }
    pg_error err = {0};
    int rc = pg_store_get(c->store, c->image_ref, &c->record, &err);
    if (rc == PG_OK || rc == PG_ERR_NOT_FOUND) {
        if (rc != PG_OK)
            c->record = NULL;
        return false;
    }
    return store_error(c, &err);
}

/* 1 / 0, or -1 after settling a store error. An intent under either spelling of
 * the image counts: it may have been recorded as written or normalised. */
static int intent_exists(decide_ctx *c)
{
    const char *spellings[] = {c->req->image, pg_ref_string(c->ref)};
    for (size_t i = 0; i < 2; i++) {
        if (i == 1 && strcmp(spellings[0], spellings[1]) == 0)
            break;
        pg_error err = {0};
        int rc = pg_store_intent_exists(c->store, spellings[i], &err);
        if (rc > 0)
            return 1;
        if (rc < 0) {
            store_error(c, &err);
            return -1;
        }
    }
    return 0;
}

static bool step_preloaded(decide_ctx *c)
{
    if (pg_config_policy(c->cfg) != PG_POLICY_NEVER_VERIFY_PRELOADED || c->record)
        return false;
    int pulled = intent_exists(c);
    if (pulled < 0)
        return true;
    if (pulled)
        return settle(c, 0, PG_REASON_NO_RECORD,
                      "%.256s has a pull intent but no pull record for %.160s (pull in progress "
                      "or interrupted)",
                      c->name, c->image_ref);
    return settle(c, 1, PG_REASON_PRELOADED, "%.256s (%.160s) was not pulled by the kubelet or "
                  "pullgate (preloaded)", c->name, c->image_ref);
}

static bool step_mapping(decide_ctx *c)
{
    if (!c->record)
        return settle(c, 0, PG_REASON_NO_RECORD, "no pull record of %.160s for %.256s",
                      c->image_ref, c->name);
    if ((c->mapping = pg_record_find(c->record, c->name)))
        return false;
    return settle(c, 0, PG_REASON_NO_MAPPING,
                  "the pull record of %.160s has no credentials for %.256s", c->image_ref,
                  c->name);
}

static bool step_node_accessible(decide_ctx *c)
{
    if (!c->mapping->node_pods_accessible)
        return false;
    return settle(c, 1, PG_REASON_NODE_ACCESSIBLE,
                  "%.256s was pulled without pod credentials (accessible to every pod on the node)",
                  c->name);
}

static bool secret_matches(const pg_rec_secret *presented, const pg_rec_secret *recorded)
{
    const char *ph = presented->credential_hash, *rh = recorded->credential_hash;
    if (ph && rh && *ph && *rh && strcmp(ph, rh) == 0)
        return true;
    return strcmp(presented->namespace_, recorded->namespace_) == 0 &&
           strcmp(presented->name, recorded->name) == 0 &&
           strcmp(presented->uid, recorded->uid) == 0;
}

static const pg_rec_secret *find_secret_match(const decide_ctx *c)
{
    const pg_rec_secret *ps;
    size_t n = pg_presented_secrets(c->presented, c->name, &ps);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < c->mapping->n_secrets; j++)
            if (secret_matches(&ps[i], &c->mapping->secrets[j]))
                return &ps[i];
    return NULL;
}

static const pg_rec_sa *find_sa_match(const decide_ctx *c)
{
    const pg_rec_sa *ps;
    size_t n = pg_presented_sas(c->presented, c->name, &ps);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < c->mapping->n_sas; j++) {
            const pg_rec_sa *r = &c->mapping->sas[j];
            if (strcmp(ps[i].namespace_, r->namespace_) == 0 &&
                strcmp(ps[i].name, r->name) == 0 && strcmp(ps[i].uid, r->uid) == 0)
                return &ps[i];
        }
    return NULL;
}

/* credentialTTL: a match only counts while the record is younger than the TTL. */
static bool expired(const decide_ctx *c, int64_t *age_out)
{
    int64_t ttl = pg_config_credential_ttl(c->cfg);
    int64_t age = (int64_t)time(NULL) - (int64_t)c->record->last_updated;
    *age_out = age;
    return ttl > 0 && age > ttl;
}

static bool settle_match(decide_ctx *c, int reason, const char *kind, const char *ns,
                         const char *name)
{
    int64_t age;
    if (expired(c, &age))
        return settle(c, 0, PG_REASON_EXPIRED,
                      "%s %.64s/%.128s matches the pull record of %.160s for %.256s, but the "
                      "record is %" PRId64 "s old, older than credentialTTL %" PRId64 "s",
                      kind, ns, name, c->image_ref, c->name, age, pg_config_credential_ttl(c->cfg));
    return settle(c, 1, reason, "%s %.64s/%.128s matches the pull record of %.160s for %.256s",
                  kind, ns, name, c->image_ref, c->name);
}

/* Says which rule matched: the same credentials (hash) or the same secret (coordinates). */
static const char *secret_match_kind(const decide_ctx *c, const pg_rec_secret *s)
{
    for (size_t j = 0; j < c->mapping->n_secrets; j++) {
        const char *recorded = c->mapping->secrets[j].credential_hash;
        if (s->credential_hash[0] && recorded && strcmp(s->credential_hash, recorded) == 0)
            return "secret (by credentialHash)";
    }
    return "secret (by namespace/name/uid)";
}

static bool step_secret(decide_ctx *c)
{
    const pg_rec_secret *s = find_secret_match(c);
    return s && settle_match(c, PG_REASON_SECRET_MATCH, secret_match_kind(c, s), s->namespace_,
                             s->name);
}

static bool step_service_account(decide_ctx *c)
{
    const pg_rec_sa *sa = find_sa_match(c);
    return sa && settle_match(c, PG_REASON_SERVICE_ACCOUNT_MATCH, "service account",
                              sa->namespace_, sa->name);
}

/* Entries for the image existed but were not signed for this namespace: say so. */
static bool step_signature_rejected(decide_ctx *c)
{
    size_t rejected = pg_presented_rejected(c->presented, c->name);
    if (!rejected)
        return false;
    return settle(c, 0, PG_REASON_ANNOTATION_SIGNATURE,
                  "the credentials annotation for %.256s failed its HMAC signature check for "
                  "namespace %.64s (%zu entr%s rejected: unsigned, tampered or replayed from "
                  "another namespace)",
                  c->name, or_unknown(c->namespace_), rejected, rejected == 1 ? "y" : "ies");
}

static bool step_no_match(decide_ctx *c)
{
    const pg_rec_secret *ps;
    const pg_rec_sa *psa;
    size_t n_secrets = pg_presented_secrets(c->presented, c->name, &ps);
    size_t n_sas = pg_presented_sas(c->presented, c->name, &psa);
    size_t ignored = pg_presented_ignored(c->presented, c->name);
    int reason = n_secrets + n_sas ? PG_REASON_CREDENTIALS_MISMATCH : PG_REASON_NO_CREDENTIALS;
    return settle(c, 0, reason,
                  "no presented credential matches the pull record of %.160s for %.256s "
                  "(namespace %.64s presented %zu secret%s, %zu service account%s; %zu ignored "
                  "from other namespaces)",
                  c->image_ref, c->name, or_unknown(c->namespace_), n_secrets,
                  n_secrets == 1 ? "" : "s", n_sas, n_sas == 1 ? "" : "s", ignored);
}

/* ------------------------------------------------------------- pipeline */

typedef bool (*decide_step)(decide_ctx *c);

static const decide_step steps[] = {
    step_request,      step_never_verify,  step_parse_image, step_pinned,
    step_annotation,   step_allowlisted,   step_image_ref_known,
    step_load_record,  step_preloaded,     step_mapping,     step_node_accessible,
    step_secret,       step_service_account, step_signature_rejected, step_no_match,
};

static void decide_cleanup(decide_ctx *c)
{
    pg_record_free(c->record);
    pg_presented_free(c->presented);
    pg_ref_free(c->ref);
}

PG_API int pg_decide(const pg_config *cfg, const pg_store *store, const pg_request *req,
                     pg_decision *out)
{
    if (!out)
        return 0;
    memset(out, 0, sizeof *out);
    decide_ctx c = {.cfg = cfg, .store = store, .req = req, .out = out};
    bool settled = false;
    for (size_t i = 0; !settled && i < sizeof steps / sizeof steps[0]; i++)
        settled = steps[i](&c);
    if (!settled) /* unreachable: step_no_match always settles; still, deny */
        settle(&c, 0, PG_REASON_CREDENTIALS_MISMATCH, "no rule allowed the image");
    decide_cleanup(&c);
    return out->allow;
}
