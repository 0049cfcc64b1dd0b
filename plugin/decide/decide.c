/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decision of docs/interfaces.md §5. Structure: a short pipeline of steps, each of
 * which either settles the decision (fills *out and returns true) or passes.
 * The default outcome is deny; anything unexpected (a NULL, an unparsable
 * image or annotation, a store error) settles as a deny, never as an allow.
 */
#include "annotation_mac.h"
#include "cleanup.h"
#include "image_identity.h"
#include "internal.h"
#include "store_lookup.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    case PG_REASON_POD_PULLED: return "pod-pulled";
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

/*
 * The pull is recorded with the credentials the kubelet used (pullgate-cri's
 * attribution, docs/interfaces.md §10), so it can bring a record, a mapping, a
 * matching credential or a fresh lastUpdatedTime; a bad or foreign annotation
 * it cannot cure (its pull is recorded under the namespace-bound placeholder,
 * which the annotation does not list).
 */
bool pg_reason_curable_by_pull(int reason)
{
    switch (reason) {
    case PG_REASON_NO_IMAGE_REF:
    case PG_REASON_NO_RECORD:
    case PG_REASON_NO_MAPPING:
    case PG_REASON_NO_CREDENTIALS:
    case PG_REASON_CREDENTIALS_MISMATCH:
    case PG_REASON_EXPIRED: return true;
    default: return false;
    }
}

/* Everything the steps share; owned resources are released by decide_cleanup. */
typedef struct decide_ctx {
    const pg_config *cfg;
    const pg_store *store;
    const pg_request *req;
    const char *const *aliases; /* trusted further identities (may be NULL) */
    const char *const *hints;   /* untrusted: evidence of a pull only (may be NULL) */
    const char *image_ref;      /* NULL when unknown */
    const char *namespace_;     /* never NULL */
    const char *pod_uid;        /* the runtime's pod UID; NULL: unknown (no pod binding matches) */
    pg_ref *ref;                /* the parsed image */
    const char *name;           /* its normalised name (credential-mapping key) */
    pg_presented *presented;    /* NULL: nothing presented */
    bool content_known;         /* an image ID or digest names the content */
    pg_keyset content_keys;     /* record/index keys of IDs and digest references */
    pg_keyset tag_keys;         /* record/index keys of tag references (the image name) */
    pg_keyset intent_keys;      /* intent spellings of every trusted reference */
    pg_keyset hint_keys;        /* keys of the hints (records, index, intents) */
    pg_keyset ref_names;        /* normalised names of every reference given (aliases, hints) */
    pg_record_focus focus;      /* what the decision reads of a record */
    pg_lookup *lk;              /* the decision's lookups: each file read once */
    const pg_focused **recs;    /* the union of trusted records found (owned by lk) */
    size_t n_recs, cap_recs;
    bool pulled;                /* something says the image was pulled by us */
    char pulled_why[200];       /* what said so first */
    int names_mapped;           /* -1 not checked; else records mapping name (+unknown) */
    time_t now;
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

/* ------------------------------------------------------------ identities */

/* One identity the runtime or caller gives: validated, then its keys added. */
static int add_identity(decide_ctx *c, const char *s, bool trusted, pg_error *err)
{
    pg_autoref pg_ref *ref = NULL;
    int rc = pg_identity_check(s, &ref, err);
    if (rc != PG_OK)
        return rc;
    bool content = !ref || pg_ref_digest(ref);
    if (trusted && content)
        c->content_known = true;
    pg_keyset *keys = !trusted ? &c->hint_keys : content ? &c->content_keys : &c->tag_keys;
    rc = pg_identity_add_keys(keys, s, ref, err);
    if (rc == PG_OK && ref)
        rc = pg_identity_add_intent_keys(trusted ? &c->intent_keys : &c->hint_keys, s, ref, err);
    if (rc == PG_OK && ref)
        rc = pg_keyset_add(&c->ref_names, pg_ref_name(ref), err);
    return rc;
}

static bool bad_identity(decide_ctx *c, const char *what, const pg_error *err)
{
    return settle(c, 0, PG_REASON_BAD_REQUEST, "bad request: %s: %s", what, err->message);
}

/*
 * Every spelling of the image's identity: the image (as written and
 * normalised), the imageRef, the caller's trusted aliases and its untrusted
 * hints. One that is not a well-formed ID or reference denies: a lookup under
 * a mangled spelling finds nothing, and nothing must never pass for "preloaded".
 */
static bool step_identities(decide_ctx *c)
{
    pg_error err = {0};
    if (add_identity(c, c->req->image, true, &err) != PG_OK)
        return bad_identity(c, "image", &err);
    if (c->image_ref && add_identity(c, c->image_ref, true, &err) != PG_OK)
        return bad_identity(c, "imageRef", &err);
    for (size_t i = 0; c->aliases && c->aliases[i]; i++)
        if (add_identity(c, c->aliases[i], true, &err) != PG_OK)
            return bad_identity(c, "image alias", &err);
    for (size_t i = 0; c->hints && c->hints[i]; i++)
        if (add_identity(c, c->hints[i], false, &err) != PG_OK)
            return bad_identity(c, "image hint", &err);
    return false;
}

/* Parsed up front: a malformed annotation is a deny even where credentials would
 * not be consulted, so tampering never goes unnoticed. */
static bool step_annotation(decide_ctx *c)
{
    const char *json = c->req->credentials;
    if (!json || !*json)
        return false;
    pg_error err = {0};
    pg_automackey pg_mac_key *key = NULL;
    const char *key_file = pg_config_hmac_key_file(c->cfg);
    /* Namespace-bound annotations (docs/annotation-hmac.md): no usable key, no decision. */
    if (key_file && *key_file && pg_mac_key_load(key_file, &key, &err) != PG_OK)
        return settle(c, 0, PG_REASON_CONFIG_ERROR, "hmacKeyFile: %s", err.message);
    int rc = pg_presented_parse_keyed(json, strlen(json), c->namespace_, key, &c->presented, &err);
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

static bool store_error(decide_ctx *c, const pg_error *err)
{
    return settle(c, 0, PG_REASON_STORE_ERROR, "pull record store error (failing closed): %s",
                  err->message[0] ? err->message : pg_code_name(err->code));
}

static void note_pulled(decide_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Remembers the first thing that says the image was pulled, for the reason text. */
static void note_pulled(decide_ctx *c, const char *fmt, ...)
{
    if (!c->pulled) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->pulled_why, sizeof c->pulled_why, fmt, ap);
        va_end(ap);
    }
    c->pulled = true;
}

/* ------------------------------------------------------------- gathering */

/* Adds a record found to the union unless it is there (the same file, found again). */
static int add_record(decide_ctx *c, const pg_focused *f)
{
    for (size_t i = 0; i < c->n_recs; i++)
        if (c->recs[i] == f)
            return PG_OK;
    if (c->n_recs == c->cap_recs) {
        size_t cap = c->cap_recs ? c->cap_recs * 2 : 4;
        const pg_focused **grown = realloc(c->recs, cap * sizeof *grown);
        if (!grown)
            return PG_ERR_NOMEM;
        c->recs = grown;
        c->cap_recs = cap;
    }
    c->recs[c->n_recs++] = f;
    note_pulled(c, "a pull record of %.160s exists", f->rec->image_ref);
    return PG_OK;
}

/*
 * Records of key in every directory. A file that exists but is unusable: error.
 * Focused (store_read.h): only the image's mapping and the recorded credentials
 * that match presented ones, which is all the later steps read, with their times.
 */
static int gather_records(decide_ctx *c, const char *key, pg_error *err)
{
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < pg_lookup_dirs(c->lk); i++) {
        const pg_focused *f = NULL;
        rc = pg_lookup_record(c->lk, i, key, &f, err);
        if (rc == PG_OK)
            rc = add_record(c, f);
        else if (rc == PG_ERR_NOT_FOUND)
            rc = PG_OK;
    }
    return rc;
}

/* The records of an imageRef found in an index, under each of its spellings. */
static int gather_resolved(decide_ctx *c, const char *image_ref, pg_error *err)
{
    pg_keyset ks = {0};
    pg_autoref pg_ref *ref = NULL;
    int rc = pg_identity_check(image_ref, &ref, NULL) == PG_OK
                 ? pg_identity_add_keys(&ks, image_ref, ref, err)
                 : pg_keyset_add(&ks, image_ref, err); /* kept as the index says */
    for (size_t k = 0; rc == PG_OK && k < ks.n; k++)
        rc = gather_records(c, ks.v[k], err);
    pg_keyset_free(&ks);
    return rc;
}

/*
 * Index entries (identity -> imageRef). Entries under an ID or digest name
 * content and authorise. An entry under a tag authorises only when no ID or
 * digest is known (containerd): a tag moves, so next to a known image ID a
 * tag entry naming other content is only evidence that the name was pulled.
 */
static int gather_index(decide_ctx *c, const pg_keyset *ks, bool authorises, pg_error *err)
{
    int rc = PG_OK;
    for (size_t k = 0; rc == PG_OK && k < ks->n; k++)
        for (size_t i = 0; rc == PG_OK && i < pg_lookup_dirs(c->lk); i++) {
            const char *ref = NULL;
            rc = pg_lookup_index(c->lk, i, ks->v[k], &ref, err);
            if (rc == PG_ERR_NOT_FOUND) {
                rc = PG_OK;
                continue;
            }
            if (rc == PG_OK) {
                note_pulled(c, "the image index names %.160s", ks->v[k]);
                if (authorises)
                    rc = gather_resolved(c, ref, err);
            }
        }
    return rc;
}

/* The first key of ks with an entry of that kind in some directory (a probe), or NULL. */
static const char *first_entry(const decide_ctx *c, const pg_keyset *ks, pg_entry_kind kind)
{
    for (size_t k = 0; k < ks->n; k++)
        for (size_t i = 0; i < pg_lookup_dirs(c->lk); i++)
            if (pg_lookup_exists(c->lk, i, kind, ks->v[k]))
                return ks->v[k];
    return NULL;
}

/* Existence probes only (intents; hints' records and index entries). */
static void probe(decide_ctx *c, const pg_keyset *ks, pg_entry_kind kind, const char *what)
{
    const char *key = c->pulled ? NULL : first_entry(c, ks, kind);
    if (key)
        note_pulled(c, "%s %.160s exists", what, key);
}

/*
 * Unlike a record of the content (which may have been pulled under another
 * name), an intent or anything under a hint says the image was pulled under
 * one of its own spellings.
 */
static bool name_pulled(const decide_ctx *c)
{
    return first_entry(c, &c->intent_keys, PG_ENTRY_INTENT) ||
           first_entry(c, &c->hint_keys, PG_ENTRY_INTENT) ||
           first_entry(c, &c->hint_keys, PG_ENTRY_PULLED) ||
           first_entry(c, &c->hint_keys, PG_ENTRY_INDEX);
}

static bool step_gather(decide_ctx *c)
{
    if (!c->store) {
        pg_error err = {PG_ERR_INVALID, "no record store"};
        return store_error(c, &err);
    }
    pg_error err = {0};
    int rc = PG_OK;
    c->focus = (pg_record_focus){c->name, c->presented, c->namespace_, c->pod_uid};
    if (!(c->lk = pg_lookup_new(c->store, &c->focus))) {
        pg_error nomem = {PG_ERR_NOMEM, "out of memory"};
        return store_error(c, &nomem);
    }
    for (size_t k = 0; rc == PG_OK && k < c->content_keys.n; k++)
        rc = gather_records(c, c->content_keys.v[k], &err);
    for (size_t k = 0; rc == PG_OK && k < c->tag_keys.n; k++)
        rc = gather_records(c, c->tag_keys.v[k], &err);
    if (rc == PG_OK)
        rc = gather_index(c, &c->content_keys, true, &err);
    if (rc == PG_OK)
        rc = gather_index(c, &c->tag_keys, !c->content_known, &err);
    if (rc == PG_ERR_NOMEM && !err.message[0])
        pg_fail(&err, rc, "out of memory");
    if (rc != PG_OK)
        return store_error(c, &err);
    probe(c, &c->intent_keys, PG_ENTRY_INTENT, "a pull intent for");
    probe(c, &c->hint_keys, PG_ENTRY_INTENT, "a pull intent for");
    probe(c, &c->hint_keys, PG_ENTRY_PULLED, "a pull record under the hint");
    probe(c, &c->hint_keys, PG_ENTRY_INDEX, "an image index entry for the hint");
    return false;
}

/*
 * How many records in any directory map name (a record that could not be read
 * counts: it may). -1 after settling a store error.
 */
static int records_mapping(decide_ctx *c, const char *name)
{
    pg_error err = {0};
    size_t n = 0;
    bool unknown = false;
    if (pg_lookup_mapping(c->lk, name, false, NULL, &n, &unknown, &err) != PG_OK) {
        store_error(c, &err);
        return -1;
    }
    return (int)(n + unknown);
}

/* records_mapping of the image's name, asked once. */
static int names_mapped(decide_ctx *c)
{
    if (c->names_mapped < 0)
        c->names_mapped = records_mapping(c, c->name);
    return c->names_mapped;
}

/* Nothing under any identity, hint or name says the image was pulled: 1; 0; -1 settled. */
static int proven_preloaded(decide_ctx *c)
{
    if (c->pulled)
        return 0;
    int n = names_mapped(c);
    return n < 0 ? -1 : n == 0;
}

/* Pinned: exempt only while nothing says the image was pulled (a pinned
 * pattern never overrides a record of a pull made with credentials). */
static bool step_pinned(decide_ctx *c)
{
    if (!pg_pinned_match_ref(pg_config_pinned_images(c->cfg), c->req->image, c->ref))
        return false;
    int proven = proven_preloaded(c);
    if (proven < 0)
        return true;
    if (!proven)
        return false; /* verified like any other image */
    return settle(c, 1, PG_REASON_PINNED, "%.256s is a pinned image", c->req->image);
}

/*
 * Under containerd no image ID is known. When the index resolved nothing but
 * records map the image's name, decide over the union of those records
 * (docs/design.md): any of them may authorise, as for several spellings.
 */
static bool step_name_union(decide_ctx *c)
{
    if (c->n_recs || c->content_known)
        return false;
    pg_error err = {0};
    pg_autofree const pg_focused **recs = NULL;
    size_t n = 0;
    bool unknown = false;
    if (pg_lookup_mapping(c->lk, c->name, true, &recs, &n, &unknown, &err) != PG_OK)
        return store_error(c, &err);
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < n; i++)
        rc = add_record(c, recs[i]);
    if (rc != PG_OK) {
        pg_error nomem = {PG_ERR_NOMEM, "out of memory"};
        return store_error(c, &nomem);
    }
    return false;
}

static bool step_preloaded(decide_ctx *c)
{
    if (c->n_recs)
        return false;
    int proven = pg_config_policy(c->cfg) == PG_POLICY_NEVER_VERIFY_PRELOADED ? proven_preloaded(c) : 0;
    if (proven < 0)
        return true;
    if (proven)
        return settle(c, 1, PG_REASON_PRELOADED,
                      "%.256s (%.160s) was not pulled by the kubelet or pullgate (preloaded: no "
                      "record, intent or index entry under any of its identities, no record maps "
                      "its name)", c->name, or_unknown(c->image_ref));
    /* Without an image ID or a record for the name, its pulls cannot be checked. */
    if (!c->content_known)
        return settle(c, 0, PG_REASON_NO_IMAGE_REF,
                      "the image ID of %.256s is unknown, so its pull records cannot be checked%s%.200s",
                      c->req->image, c->pulled ? " (" : "", c->pulled ? c->pulled_why : "");
    if (c->pulled)
        return settle(c, 0, PG_REASON_NO_RECORD,
                      "no pull record of %.160s for %.256s, but %.200s (pull in progress, "
                      "interrupted, or another spelling)",
                      or_unknown(c->image_ref), c->name, c->pulled_why);
    return settle(c, 0, PG_REASON_NO_RECORD, "no pull record of %.160s for %.256s%s",
                  or_unknown(c->image_ref), c->name,
                  c->names_mapped > 0 ? " (records of other images map its name)" : "");
}

/*
 * Whether every record of the gathered ones' imageRefs, in every directory, maps
 * some image (the gathered ones are focused on this image's name: the lookup
 * says whether the whole record maps any). 1 yes; 0 no; -1 settled (store error).
 */
static int records_map_other_images(decide_ctx *c)
{
    for (size_t r = 0; r < c->n_recs; r++)
        for (size_t i = 0; i < pg_lookup_dirs(c->lk); i++) {
            pg_error err = {0};
            const pg_focused *f = NULL;
            int rc = pg_lookup_record(c->lk, i, c->recs[r]->rec->image_ref, &f, &err);
            if (rc == PG_ERR_NOT_FOUND)
                continue;
            if (rc != PG_OK) {
                store_error(c, &err);
                return -1;
            }
            if (!f->maps_any)
                return 0;
        }
    return 1;
}

/*
 * kubelet #138175: the same content may be preloaded under one name and pulled
 * with a secret under another. The records of the content then map only the
 * other name; the kubelet takes the image as preloaded under its own name, and
 * so do we, but only when nothing at all says this name was pulled: no record
 * in any directory maps it (a pull by pullgate always does, with empty
 * credentials when it had none), no intent or hint names it, and every record
 * found maps some image (a record without mappings was pulled with unknown
 * credentials). The argument: docs/threat-model.md, "Preloaded under its own name".
 */
static bool step_preloaded_name(decide_ctx *c)
{
    if (!c->n_recs || pg_config_policy(c->cfg) != PG_POLICY_NEVER_VERIFY_PRELOADED)
        return false;
    /* Every name given for the image (CRI-O's Image may hold the one the pod wrote). */
    for (size_t k = 0; k < c->ref_names.n; k++)
        for (size_t i = 0; i < c->n_recs; i++)
            if (pg_record_find(c->recs[i]->rec, c->ref_names.v[k]))
                return false;
    if (name_pulled(c))
        return false;
    int maps_others = records_map_other_images(c);
    if (maps_others <= 0)
        return maps_others < 0;
    for (size_t k = 0; k < c->ref_names.n; k++) {
        int n = strcmp(c->ref_names.v[k], c->name) == 0 ? names_mapped(c)
                                                        : records_mapping(c, c->ref_names.v[k]);
        if (n < 0)
            return true;
        if (n > 0)
            return false;
    }
    return settle(
        c, 1, PG_REASON_PRELOADED,
        "%.256s (%.160s) was not pulled by the kubelet or pullgate under this name "
        "(preloaded: the pull record%s of its content map%s only other images; no record, "
        "intent or hint names it)",
        c->name, c->image_ref ? c->image_ref : c->recs[0]->rec->image_ref, c->n_recs > 1 ? "s" : "",
        c->n_recs > 1 ? "" : "s");
}

static const char *shown_ref(const decide_ctx *c)
{
    return c->image_ref ? c->image_ref : c->n_recs ? c->recs[0]->rec->image_ref : "(unknown)";
}

static bool step_mapping(decide_ctx *c)
{
    for (size_t i = 0; i < c->n_recs; i++)
        if (pg_record_find(c->recs[i]->rec, c->name))
            return false;
    return settle(c, 0, PG_REASON_NO_MAPPING,
                  "the pull record%s of %.160s ha%s no credentials for %.256s",
                  c->n_recs > 1 ? "s" : "", shown_ref(c), c->n_recs > 1 ? "ve" : "s", c->name);
}

static bool step_node_accessible(decide_ctx *c)
{
    for (size_t i = 0; i < c->n_recs; i++) {
        const pg_rec_mapping *m = pg_record_find(c->recs[i]->rec, c->name);
        if (m && m->node_pods_accessible)
            return settle(c, 1, PG_REASON_NODE_ACCESSIBLE,
                          "%.256s was pulled without pod credentials (accessible to every pod "
                          "on the node; record of %.160s)", c->name, c->recs[i]->rec->image_ref);
    }
    return false;
}

#define PG_FUTURE_SKEW_S 60 /* clock skew tolerated for a lastUpdatedTime ahead of now */

/* What a match found so far, over every record and credential. */
typedef struct match_state {
    bool any;            /* some credential matched */
    bool fresh;          /* ... and was within TTL and not in the future */
    int64_t age;         /* of the freshest stale match, for the message */
    bool future;         /* a match was dated in the future */
    bool by_pod;         /* the fresh match is a binding of this very pod */
    const char *kind, *ns, *who, *image_ref;
} match_state;

/* Judges one matching credential (j of record r) by its recorded time. */
static void judge_time(decide_ctx *c, match_state *m, size_t r, size_t j, bool secret)
{
    const pg_record *rec = c->recs[r]->rec;
    const pg_rec_mapping *map = pg_record_find(rec, c->name);
    const pg_pod_cred *cred = secret ? &map->secrets[j] : &map->sas[j];
    /* Read with the record (store_lookup.h): judging it reads nothing more. */
    time_t when = secret ? c->recs[r]->secret_times[j] : c->recs[r]->sa_times[j];
    int64_t ttl = pg_config_credential_ttl(c->cfg);
    int64_t age = (int64_t)c->now - (int64_t)when;
    bool future = age < -PG_FUTURE_SKEW_S;
    bool expired = ttl > 0 && age > ttl;
    if (!m->any || (!future && (m->future || age < m->age))) {
        m->age = age;
        m->future = future;
    }
    m->any = true;
    if (!future && !expired && !m->fresh) {
        m->fresh = true;
        m->image_ref = rec->image_ref;
        m->ns = cred->namespace_;
        m->who = cred->name;
    }
}

static const char *match_kind(const pg_pod_cred *p, const pg_pod_cred *r, bool secret)
{
    if (!secret && pg_pod_cred_is_namespace_marker(r))
        return "service account (of the namespace the runtime pulled for with its own "
               "credentials)";
    if (!secret)
        return "service account";
    if (pg_pod_cred_is_placeholder(r))
        return "secret (same credentials as an unattributed pull in its namespace)";
    return pg_pod_cred_same_hash(p, r) ? "secret (by credentialHash)"
                                   : "secret (by namespace/name/uid)";
}

/* The recorded credentials of one kind in rec's mapping for the image. */
static size_t recorded_creds(const decide_ctx *c, const pg_record *rec, bool secrets,
                             const pg_pod_cred **out)
{
    const pg_rec_mapping *map = pg_record_find(rec, c->name);
    *out = !map ? NULL : secrets ? map->secrets : map->sas;
    return !map ? 0 : secrets ? map->n_secrets : map->n_sas;
}

/* Over the union: any presented secret (or, !secrets, service account) matching any record. */
/*
 * The pod that pulled may run it: a binding pullgate-cri recorded for this
 * very pod (namespace and UID as the runtime sets them, never as the pod
 * presents them), judged like a credential (TTL). After the presented
 * secrets, so that a match of theirs names the secret.
 */
static void find_pod_binding(decide_ctx *c, match_state *m)
{
    const pg_pod_cred *rec_creds = NULL;
    for (size_t r = 0; c->pod_uid && r < c->n_recs; r++) {
        size_t n_rec = recorded_creds(c, c->recs[r]->rec, true, &rec_creds);
        for (size_t j = 0; j < n_rec; j++) {
            if (!pg_pod_binding_matches(c->namespace_, c->pod_uid, &rec_creds[j]))
                continue;
            bool was_fresh = m->fresh;
            judge_time(c, m, r, j, true);
            if (!was_fresh && m->fresh) {
                m->by_pod = true;
                m->kind = "this pod's own pull (pod binding)";
                m->ns = c->namespace_;
                m->who = c->pod_uid;
            }
        }
    }
}

static void find_matches(decide_ctx *c, bool secrets, match_state *m)
{
    const pg_pod_cred *pres = NULL, *rec_creds = NULL;
    size_t n = secrets ? pg_presented_secrets(c->presented, c->name, &pres)
                       : pg_presented_sas(c->presented, c->name, &pres);
    for (size_t r = 0; r < c->n_recs; r++) {
        size_t n_rec = recorded_creds(c, c->recs[r]->rec, secrets, &rec_creds);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n_rec; j++) {
                if (!pg_pod_cred_matches(&pres[i], &rec_creds[j]))
                    continue;
                bool was_fresh = m->fresh;
                judge_time(c, m, r, j, secrets);
                if (!was_fresh && m->fresh) {
                    m->kind = match_kind(&pres[i], &rec_creds[j], secrets);
                    m->ns = pres[i].namespace_;
                    m->who = pres[i].name;
                }
            }
    }
    if (secrets)
        find_pod_binding(c, m);
}

static bool settle_matches(decide_ctx *c, bool secrets, int reason)
{
    match_state m = {0};
    find_matches(c, secrets, &m);
    if (m.fresh)
        return settle(c, 1, m.by_pod ? PG_REASON_POD_PULLED : reason,
                      "%s %.64s/%.128s matches the pull record of %.160s for %.256s", m.kind,
                      m.ns, m.who, m.image_ref, c->name);
    if (!m.any)
        return false;
    const char *what = secrets ? "presented secret (or this pod's binding)" : "presented service account";
    if (m.future)
        return settle(c, 0, PG_REASON_EXPIRED,
                      "a %s matches a pull record for %.256s, but its lastUpdatedTime "
                      "is %" PRId64 "s in the future (more than %ds of clock skew): not trusted",
                      what, c->name, -m.age, PG_FUTURE_SKEW_S);
    return settle(c, 0, PG_REASON_EXPIRED,
                  "a %s matches a pull record for %.256s, but that credential was "
                  "recorded %" PRId64 "s ago, longer than credentialTTL %" PRId64 "s",
                  what, c->name, m.age, pg_config_credential_ttl(c->cfg));
}

static bool step_secret(decide_ctx *c) { return settle_matches(c, true, PG_REASON_SECRET_MATCH); }

static bool step_service_account(decide_ctx *c)
{
    return settle_matches(c, false, PG_REASON_SERVICE_ACCOUNT_MATCH);
}

/* Entries for the image existed but were not signed for this namespace, or
 * were sealed and this node has no key to open them: say so. */
static bool step_signature_rejected(decide_ctx *c)
{
    size_t rejected = pg_presented_rejected(c->presented, c->name);
    size_t unopened = pg_presented_unopened(c->presented, c->name);
    if (!rejected && unopened)
        return settle(c, 0, PG_REASON_ANNOTATION_SIGNATURE,
                      "the credentials annotation for %.256s carries sealed credentials (%zu "
                      "entr%s) and this node has no hmacKeyFile to open them: give the node the "
                      "webhook's annotation key",
                      c->name, unopened, unopened == 1 ? "y" : "ies");
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
    const pg_pod_cred *ps;
    const pg_pod_cred *psa;
    size_t n_secrets = pg_presented_secrets(c->presented, c->name, &ps);
    size_t n_sas = pg_presented_sas(c->presented, c->name, &psa);
    size_t ignored = pg_presented_ignored(c->presented, c->name);
    int reason = n_secrets + n_sas ? PG_REASON_CREDENTIALS_MISMATCH : PG_REASON_NO_CREDENTIALS;
    return settle(c, 0, reason,
                  "no presented credential matches the pull record of %.160s for %.256s "
                  "(namespace %.64s presented %zu secret%s, %zu service account%s; %zu ignored "
                  "from other namespaces)",
                  shown_ref(c), c->name, or_unknown(c->namespace_), n_secrets,
                  n_secrets == 1 ? "" : "s", n_sas, n_sas == 1 ? "" : "s", ignored);
}

/* ------------------------------------------------------------- pipeline */

typedef bool (*decide_step)(decide_ctx *c);

/*
 * The annotation is parsed before any exemption (pinned, allowlisted,
 * preloaded): a broken producer must be loud. Everything the store says about
 * the image is gathered before the first step that depends on it.
 */
static const decide_step steps[] = {
    step_request,         step_never_verify, step_parse_image,     step_identities,
    step_annotation,      step_gather,       step_pinned,          step_allowlisted,
    step_name_union,      step_preloaded,    step_preloaded_name,  step_mapping,
    step_node_accessible, step_secret,       step_service_account, step_signature_rejected,
    step_no_match,
};

static void decide_cleanup(decide_ctx *c)
{
    free(c->recs);
    pg_lookup_free(c->lk);
    pg_keyset_free(&c->content_keys);
    pg_keyset_free(&c->tag_keys);
    pg_keyset_free(&c->intent_keys);
    pg_keyset_free(&c->hint_keys);
    pg_keyset_free(&c->ref_names);
    pg_presented_free(c->presented);
    pg_ref_free(c->ref);
}

PG_API int pg_decide(const pg_config *cfg, const pg_store *store, const pg_request *req,
                     pg_decision *out)
{
    return pg_decide_pod(cfg, store, req, NULL, NULL, NULL, out);
}

PG_API int pg_decide_identity(const pg_config *cfg, const pg_store *store, const pg_request *req,
                              const char *const *aliases, const char *const *hints,
                              pg_decision *out)
{
    return pg_decide_pod(cfg, store, req, NULL, aliases, hints, out);
}

int pg_decide_pod(const pg_config *cfg, const pg_store *store, const pg_request *req,
                  const char *pod_uid, const char *const *aliases, const char *const *hints,
                  pg_decision *out)
{
    if (!out)
        return 0;
    memset(out, 0, sizeof *out);
    decide_ctx c = {.cfg = cfg, .store = store, .req = req, .aliases = aliases, .hints = hints,
                    .pod_uid = pg_pod_uid_valid(pod_uid) ? pod_uid : NULL,
                    .names_mapped = -1, .now = time(NULL), .out = out};
    bool settled = false;
    for (size_t i = 0; !settled && i < sizeof steps / sizeof steps[0]; i++)
        settled = steps[i](&c);
    if (!settled) /* unreachable: step_no_match always settles; still, deny */
        settle(&c, 0, PG_REASON_CREDENTIALS_MISMATCH, "no rule allowed the image");
    decide_cleanup(&c);
    return out->allow;
}
