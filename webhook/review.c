/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The annotation producer's decision for one AdmissionReview: pods CREATE/UPDATE recompute
 * the annotation, pods/ephemeralcontainers warn, pods/status restore it, pods/binding strip it
 * (docs/webhook.md, "What it does per review" and "Subresources"). Every review whose
 * request.uid can be read is answered HTTP 200, a refusal with a code (http_status_of) when
 * the pod cannot be computed, never a call failure that failurePolicy decides; a body that is
 * not an admission.k8s.io/v1 AdmissionReview with a readable uid is HTTP 400 (413 when cut).
 */
#include "review.h"

#include "cleanup.h"
#include "memory.h"
#include "secrets.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REVIEW_API_VERSION "admission.k8s.io/v1"
#define MAX_WARNINGS 16
#define DEADLINE_CHECK_EVERY 256 /* list items between two looks at the clock */

/* Everything one review needs while it is computed. */
typedef struct review {
    const wh_review_config *cfg;
    const json_t *request, *pod;
    const char *uid, *ns, *operation, *sub_resource;
    json_t *log;
    json_t *warnings; /* array of strings */
    pg_error err;     /* code not PG_OK: the pod is refused, with this message */
    int answering;        /* before_answer was called */
    wh_matching matching; /* secrets.h */
} review;

/* ------------------------------------------------------------ utilities */

/* A string member that may be absent or null: 0 (absent, *out NULL), 1, or -1 (wrong type, NUL). */
static int optional_text(const json_t *obj, const char *key, const char **out)
{
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return 0;
    return (*out = wh_text_at(obj, key)) ? 1 : -1;
}

static int past_deadline(const review *r) { return pg_monotonic_ms() >= r->cfg->deadline_ms; }

/* Messages go into JSON and logs: keep them printable ASCII (a cut may split UTF-8). */
static void printable_ascii(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            *s = '?';
}

/*
 * The HTTP status of a refusal, by its code: the one place the two meet. The
 * request's own faults are the 4xx; whatever the webhook could not read or do
 * (an API read, a pull secret, the key, memory) is a server error.
 */
static int http_status_of(int code)
{
    static const struct {
        int code, status;
    } table[] = {
        {PG_ERR_INVALID, 400}, /* malformed, or more than one pod may hold */
        {PG_ERR_LIMIT, 413},   /* the body: over the size bound or the memory budget */
        {PG_ERR_TIMEOUT, 504}, /* the review's deadline */
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].code == code)
            return table[i].status;
    return 500;
}

/* r->err holds why the pod is refused: its message goes into JSON and logs. */
static int refused(review *r)
{
    printable_ascii(r->err.message);
    return r->err.code;
}

/* Records why the pod is refused; returns the code so callers can `return refuse(...)`. */
static int refuse(review *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(review *r, int code, const char *fmt, ...)
{
    char text[PG_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    pg_fail(&r->err, code, "%s", text);
    return refused(r);
}

static int refuse_late(review *r, const char *what)
{
    return refuse(r, PG_ERR_TIMEOUT, "time limit exceeded %s", what);
}

/* Appends "name: reason" to the log's skippedSecrets (the name printable, cut at 64). */
static void log_skipped(review *r, const char *name, const char *reason)
{
    char text[128];
    snprintf(text, sizeof text, "%.64s: %s", name, reason);
    printable_ascii(text);
    json_array_append_new(json_object_get(r->log, "skippedSecrets"), json_string(text));
}

static char *base64_encode(const char *in, size_t len)
{
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (out)
        EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)in, (int)len);
    return out;
}

/* ---------------------------------------------------------- the pod */

/* Calls fn for every container image of the pod (init, regular, ephemeral). */
typedef int (*image_fn)(review *r, const char *list, const char *container, const char *image,
                        void *arg);

static int for_each_image(review *r, const char *const *lists, image_fn fn, void *arg)
{
    const json_t *spec = json_object_get(r->pod, "spec");
    if (!json_is_object(spec))
        return refuse(r, PG_ERR_INVALID, "malformed pod: no spec");
    for (const char *const *l = lists; *l; l++) {
        const json_t *containers = json_object_get(spec, *l);
        if (!containers || json_is_null(containers))
            continue;
        if (!json_is_array(containers))
            return refuse(r, PG_ERR_INVALID, "malformed pod: spec.%s is not a list", *l);
        size_t i;
        const json_t *c;
        json_array_foreach(containers, i, c)
        {
            const char *image, *name = wh_text_at(c, "name");
            if (i % DEADLINE_CHECK_EVERY == DEADLINE_CHECK_EVERY - 1 && past_deadline(r))
                return refuse_late(r, "reading the containers");
            int got = optional_text(c, "image", &image);
            if (got < 0)
                return refuse(r, PG_ERR_INVALID,
                              "malformed pod: spec.%s[%zu].image is not a string", *l, i);
            int rc = got ? fn(r, *l, name ? name : "", image, arg) : PG_OK;
            if (rc != PG_OK) /* no image: nothing will be pulled for it */
                return rc;
        }
    }
    return 0;
}

static const char *const all_containers[] = {"initContainers", "containers", "ephemeralContainers",
                                             NULL};
static const char *const ephemeral_only[] = {"ephemeralContainers", NULL};

static int add_image(review *r, const char *list, const char *container, const char *image,
                     void *arg)
{
    pg_annotation *a = arg;
    pg_error err = {0};
    size_t before = pg_annotation_count(a);
    if (pg_annotation_add_image(a, image, NULL, &err) != PG_OK)
        return refuse(r, PG_ERR_INVALID, "%s \"%.64s\": image \"%.200s\": %s", list, container,
                      image, err.message);
    if (pg_annotation_count(a) > WH_MAX_IMAGES)
        return refuse(r, PG_ERR_INVALID, "more than %d distinct images in one pod", WH_MAX_IMAGES);
    if (pg_annotation_count(a) > before) /* one log entry per distinct name */
        json_array_append_new(json_object_get(r->log, "images"), json_string(image));
    return 0;
}

/*
 * Pull secret names of a list of LocalObjectReference, deduplicated, appended
 * to names. A name that cannot be an object name cannot exist: the kubelet's
 * lookup of it fails and the kubelet goes on without it, so it is skipped.
 */
static int collect_secret_names(review *r, const json_t *refs, const char *where, json_t *names)
{
    if (!refs || json_is_null(refs))
        return 0;
    if (!json_is_array(refs))
        return refuse(r, PG_ERR_INVALID, "malformed %s: imagePullSecrets is not a list", where);
    size_t i;
    const json_t *ref;
    json_array_foreach(refs, i, ref)
    {
        if (i % DEADLINE_CHECK_EVERY == DEADLINE_CHECK_EVERY - 1 && past_deadline(r))
            return refuse_late(r, "reading imagePullSecrets");
        const char *name = NULL;
        int got = optional_text(ref, "name", &name);
        if (got == 0 || (got > 0 && !*name))
            continue; /* the kubelet skips an empty reference too */
        if (got < 0 || !wh_is_dns_subdomain(name)) {
            log_skipped(r, got < 0 ? "?" : name, "not a valid object name");
            continue;
        }
        int seen = 0;
        size_t j;
        const json_t *n;
        json_array_foreach(names, j, n) seen |= strcmp(json_string_value(n), name) == 0;
        if (!seen && json_array_append_new(names, json_string(name)) != 0)
            return refuse(r, PG_ERR_NOMEM, "out of memory");
        if (json_array_size(names) > WH_MAX_PULL_SECRETS)
            return refuse(r, PG_ERR_INVALID, "more than %d image pull secrets",
                          WH_MAX_PULL_SECRETS);
    }
    return 0;
}

/* -------------------------------------------------------- API lookups */

/* One round of GETs, finishing by the review's deadline. */
static int fetch(review *r, wh_get_req *reqs, size_t n)
{
    if (past_deadline(r))
        return refuse_late(r, "before reading the service account and secrets");
    for (size_t i = 0; i < n; i++)
        reqs[i] =
            (wh_get_req){.resource = reqs[i].resource, .name = reqs[i].name, .result = WH_FAILED};
    r->cfg->get(r->cfg->get_ctx, r->ns, reqs, n, r->cfg->deadline_ms);
    return 0;
}

/* The outcome of one GET: WH_FAILED refuses the pod with the request's message. */
static wh_lookup outcome_of(review *r, wh_get_req *req)
{
    if (req->result == WH_FOUND && !json_is_object(req->obj)) {
        json_decref(req->obj);
        req->obj = NULL;
        pg_fail(&req->err, PG_ERR_IO, "not an object");
        req->result = WH_FAILED;
    }
    if (req->result == WH_FAILED || (req->result != WH_FOUND && req->result != WH_NOT_FOUND)) {
        refuse(r, PG_ERR_IO, "cannot read %s %s/%.64s: %.300s", req->resource, r->ns, req->name,
               req->err.message[0] ? req->err.message : "lookup failed");
        return WH_FAILED;
    }
    return req->result;
}

typedef struct service_account {
    json_t *obj; /* NULL when it does not exist */
    const char *name, *uid;
} service_account;

static int service_account_name(review *r, service_account *sa)
{
    const json_t *spec = json_object_get(r->pod, "spec");
    if (optional_text(spec, "serviceAccountName", &sa->name) < 0 ||
        (!(sa->name && *sa->name) && optional_text(spec, "serviceAccount", &sa->name) < 0))
        return refuse(r, PG_ERR_INVALID, "malformed pod: service account name is not a string");
    if (!sa->name || !*sa->name)
        sa->name = "default";
    if (!wh_is_dns_subdomain(sa->name))
        return refuse(r, PG_ERR_INVALID,
                      "malformed pod: service account name \"%.64s\" is not a valid "
                      "object name",
                      sa->name);
    return 0;
}

/* Takes the fetched service account (or its absence) into sa. */
static int use_service_account(review *r, wh_get_req *req, service_account *sa)
{
    wh_lookup res = outcome_of(r, req);
    if (res == WH_FAILED)
        return r->err.code;
    if (res == WH_NOT_FOUND)
        return 0;
    sa->obj = req->obj;
    req->obj = NULL;
    sa->uid = wh_text_at(json_object_get(sa->obj, "metadata"), "uid");
    if (!sa->uid || !*sa->uid)
        return refuse(r, PG_ERR_IO, "malformed service account %s/%.64s: no metadata.uid", r->ns,
                      sa->name);
    return 0;
}

/* Adds the fetched secret's credentials; a missing secret or another type is skipped. */
static int use_secret(review *r, pg_annotation *a, wh_get_req *req)
{
    wh_lookup res = outcome_of(r, req);
    if (res == WH_FAILED)
        return r->err.code;
    if (res == WH_NOT_FOUND) {
        log_skipped(r, req->name, "not found");
        return 0;
    }
    int pull = wh_secret_is_pull_secret(req->obj);
    int rc = pull ? wh_secret_add(a, r->ns, req->name, req->obj, &r->matching, &r->err) : PG_OK;
    json_decref(req->obj); /* the allocator wipes what it held */
    req->obj = NULL;
    if (rc != PG_OK)
        return refused(r);
    if (!pull)
        log_skipped(r, req->name, "not a pull secret type");
    return 0;
}

static void release(wh_get_req *reqs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_decref(reqs[i].obj);
        reqs[i].obj = NULL;
    }
}

/* ------------------------------------------------------- the patch */

/* "/metadata/annotations/<key>", "/" and "~" escaped as JSON Pointer requires (RFC 6901). */
static char *annotation_path(const char *key)
{
    static const char prefix[] = "/metadata/annotations/";
    char *out = malloc(sizeof prefix + strlen(key) * 2), *p = out;
    if (!out)
        return NULL;
    memcpy(p, prefix, sizeof prefix - 1);
    p += sizeof prefix - 1;
    for (; *key; key++) {
        if (*key == '~' || *key == '/') {
            *p++ = '~';
            *p++ = *key == '~' ? '0' : '1';
        } else
            *p++ = *key;
    }
    *p = '\0';
    return out;
}

static const json_t *annotations_of(const json_t *obj)
{
    return json_object_get(json_object_get(obj, "metadata"), "annotations");
}

/* One JSON patch operation on the annotation: value NULL removes it. */
static json_t *annotation_op(const review *r, const json_t *value)
{
    pg_autofree char *path = annotation_path(r->cfg->annotation_key);
    pg_autojson json_t *op =
        path ? json_pack("{s:s, s:s}", "op", value ? "add" : "remove", "path", path) : NULL;
    if (op && value && json_object_set(op, "value", (json_t *)value) != 0)
        return NULL;
    return pg_steal(&op);
}

/* Sets the pod's annotation to value ("add" replaces a member; the map must exist first), or
 * removes it (value NULL: only ever asked when it is there, so the map exists). */
static json_t *annotation_patch(const review *r, const json_t *value)
{
    pg_autojson json_t *patch = json_array();
    int ok = patch != NULL;
    if (ok && value && !json_is_object(annotations_of(r->pod)))
        ok = json_array_append_new(patch, json_pack("{s:s, s:s, s:{}}", "op", "add", "path",
                                                    "/metadata/annotations", "value")) == 0;
    if (ok)
        ok = json_array_append_new(patch, annotation_op(r, value)) == 0;
    return ok ? pg_steal(&patch) : NULL;
}

/* ------------------------------------------------------- answers */

static void before_answer(review *r)
{
    if (!r->answering && r->cfg->before_answer)
        r->cfg->before_answer(r->cfg->ctx);
    r->answering = 1;
}

static json_t *answer_of(const char *uid)
{
    return json_pack("{s:s, s:s, s:{s:s, s:b}}", "apiVersion", REVIEW_API_VERSION, "kind",
                     "AdmissionReview", "response", "uid", uid, "allowed", 1);
}

/* allowed: true with the patch (consumed; NULL: out of memory). */
static json_t *patched_answer(review *r, json_t *patch)
{
    pg_autofree char *text = patch ? json_dumps(patch, JSON_COMPACT) : NULL;
    json_decref(patch);
    pg_autofree char *encoded = text ? base64_encode(text, strlen(text)) : NULL;
    json_t *out = encoded ? answer_of(r->uid) : NULL;
    json_t *resp = json_object_get(out, "response");
    if (resp && (json_object_set_new(resp, "patchType", json_string("JSONPatch")) != 0 ||
                 json_object_set_new(resp, "patch", json_string(encoded)) != 0)) {
        json_decref(out);
        out = NULL;
    }
    if (!out)
        refuse(r, PG_ERR_NOMEM, "out of memory");
    return out;
}

static json_t *refusal_of(const char *uid, int code, const char *message)
{
    char text[WH_MESSAGE_MAX + 16];
    snprintf(text, sizeof text, "pullgate: %s", message);
    json_t *out = answer_of(uid);
    json_t *resp = json_object_get(out, "response");
    if (resp &&
        (json_object_set_new(resp, "allowed", json_false()) != 0 ||
         json_object_set_new(resp, "status",
                             json_pack("{s:i, s:s}", "code", code, "message", text)) != 0)) {
        json_decref(out);
        out = NULL;
    }
    return out;
}

/* ------------------------------------------------------- pods */

/* GETs of one review: the service account, then the secrets (one slot each). */
typedef struct fetch_plan {
    wh_get_req reqs[1 + WH_MAX_PULL_SECRETS];
    size_t n;
} fetch_plan;

static void plan_secrets(fetch_plan *plan, const json_t *names)
{
    size_t i;
    const json_t *name;
    json_array_foreach(names, i, name) plan->reqs[plan->n++] =
        (wh_get_req){.resource = "secrets", .name = json_string_value(name)};
}

/*
 * Whether the pod lists pull secrets of its own, judged on the list as written,
 * before any name is skipped: the ServiceAccount admission plugin fills in the
 * service account's only when the pod's list is empty, so a pod listing names
 * that cannot exist pulls with none, never with the service account's.
 */
static int pod_lists_pull_secrets(const json_t *refs)
{
    return json_is_array(refs) && json_array_size(refs) > 0;
}

/*
 * Reads the service account and the pull secrets. When the pod lists its own
 * pull secrets everything is fetched in one concurrent round; otherwise the
 * service account comes first, because its imagePullSecrets are the list.
 */
static int read_credentials(review *r, pg_annotation *a, service_account *sa, json_t *names,
                            fetch_plan *plan)
{
    const json_t *spec = json_object_get(r->pod, "spec");
    plan->reqs[0] = (wh_get_req){.resource = "serviceaccounts", .name = sa->name};
    plan->n = 1;
    const json_t *own_refs = json_object_get(spec, "imagePullSecrets");
    int rc = collect_secret_names(r, own_refs, "pod", names);
    int own = pod_lists_pull_secrets(own_refs);
    if (rc == 0 && own)
        plan_secrets(plan, names);
    if (rc == 0)
        rc = fetch(r, plan->reqs, plan->n);
    if (rc == 0)
        rc = use_service_account(r, &plan->reqs[0], sa);
    /* Only when the pod lists none, as the ServiceAccount admission plugin does. */
    if (rc == 0 && !own && sa->obj) {
        rc = collect_secret_names(r, json_object_get(sa->obj, "imagePullSecrets"),
                                  "service account", names);
        if (rc == 0) /* names holds at most WH_MAX_PULL_SECRETS now */
            plan_secrets(plan, names);
        if (rc == 0 && plan->n > 1)
            rc = fetch(r, plan->reqs + 1, plan->n - 1);
    }
    for (size_t i = 1; rc == 0 && i < plan->n; i++) {
        rc = use_secret(r, a, &plan->reqs[i]);
        if (rc == 0 && past_deadline(r))
            rc = refuse_late(r, "reading the pull secrets");
    }
    release(plan->reqs, plan->n);
    return rc;
}

static int compute_annotation(review *r, char **value)
{
    pg_error err = {0};
    pg_annotation *a = pg_annotation_new(r->ns, &err);
    service_account sa = {0};
    pg_autojson json_t *names = json_array();
    pg_autofree fetch_plan *plan = calloc(1, sizeof *plan);
    int rc = a && names && plan ? 0 : refuse(r, PG_ERR_NOMEM, "out of memory");
    if (rc == 0)
        rc = for_each_image(r, all_containers, add_image, a);
    if (rc == 0)
        rc = service_account_name(r, &sa);
    if (rc == 0)
        rc = read_credentials(r, a, &sa, names, plan);
    json_object_set(r->log, "pullSecrets", names);
    if (rc == 0 && sa.uid &&
        pg_annotation_add_service_account(a, NULL, r->ns, sa.name, sa.uid, &err) != PG_OK)
        rc = refuse(r, PG_ERR_IO, "service account %s/%.64s: %s", r->ns, sa.name, err.message);
    if (rc == 0 && r->cfg->key && pg_annotation_sign(a, r->cfg->key, &err) != PG_OK)
        rc = refuse(r, PG_ERR_INTERNAL, "cannot seal the annotation: %s", err.message);
    if (rc == 0 && !(*value = pg_annotation_dump(a, &err)))
        rc = refuse(r, PG_ERR_NOMEM, "out of memory");
    if (rc == 0 && past_deadline(r))
        rc = refuse_late(r, "computing the annotation");
    json_decref(sa.obj);
    pg_annotation_free(a);
    return rc;
}

static json_t *pod_answer(review *r)
{
    pg_autofree char *value = NULL;
    if (r->cfg->key_error) {
        refuse(r, PG_ERR_CONFIG, "the annotation key is unusable: %s", r->cfg->key_error);
        return NULL;
    }
    if (compute_annotation(r, &value) != 0)
        return NULL;
    json_object_set_new(r->log, "annotationBytes", json_integer((json_int_t)strlen(value)));
    pg_autojson json_t *v = json_string(value);
    return patched_answer(r, v ? annotation_patch(r, v) : NULL);
}

/* ------------------------------------------------- pods/ephemeralcontainers */

/* The pod's current annotation as the node reads it (namespace, seal or MAC checked); NULL:
 * it covers nothing. */
static pg_presented *read_coverage(review *r)
{
    const char *value = wh_text_at(annotations_of(r->pod), r->cfg->annotation_key);
    pg_error err = {0};
    pg_presented *presented = NULL;
    if (!value || wh_parse_begin(wh_json_parse_cost(value, strlen(value))) != 0)
        return NULL; /* over the budget: nothing counts as covered */
    if (pg_presented_parse_keyed(value, strlen(value), r->ns, r->cfg->key, &presented, &err) !=
        PG_OK)
        presented = NULL;
    wh_parse_end();
    return presented;
}

static int covered(const pg_presented *presented, const char *image)
{
    pg_autofree char *name = pg_image_name(image, NULL);
    const pg_pod_cred *v;
    return name && presented &&
           pg_presented_secrets(presented, name, &v) + pg_presented_sas(presented, name, &v) > 0;
}

static int warn_uncovered(review *r, const char *list, const char *container, const char *image,
                          void *arg)
{
    (void)list;
    json_t *logged = json_object_get(r->log, "images");
    if (json_array_size(logged) < WH_MAX_IMAGES) /* the log line stays bounded */
        json_array_append_new(logged, json_string(image));
    if (covered(arg, image) || json_array_size(r->warnings) >= MAX_WARNINGS)
        return 0;
    char text[WH_MESSAGE_MAX];
    snprintf(text, sizeof text,
             "pullgate: ephemeral container \"%.64s\" image \"%.200s\" has no credentials in "
             "the pod's %s annotation; the node refuses it unless it is public, preloaded or "
             "exempt",
             container, image, r->cfg->annotation_key);
    printable_ascii(text);
    json_array_append_new(r->warnings, json_string(text));
    return 0;
}

static json_t *ephemeral_answer(review *r)
{
    pg_presented *presented = read_coverage(r);
    int rc = for_each_image(r, ephemeral_only, warn_uncovered, presented);
    pg_presented_free(presented);
    if (rc != 0)
        return NULL;
    json_t *out = answer_of(r->uid);
    if (out && json_array_size(r->warnings) > 0)
        json_object_set(json_object_get(out, "response"), "warnings", r->warnings);
    return out;
}

/* ------------------------------------------- pods/status and pods/binding */

/*
 * pods/status keeps the metadata the caller sends (the status strategy resets
 * only spec, deletionTimestamp and ownerReferences): the annotation written at
 * admission is put back, whatever the update says.
 */
static json_t *status_answer(review *r, const char **outcome)
{
    const json_t *old = json_object_get(r->request, "oldObject");
    if (!json_is_object(old)) {
        refuse(r, PG_ERR_INVALID, "pods/status update without oldObject");
        return NULL;
    }
    const json_t *now = json_object_get(annotations_of(r->pod), r->cfg->annotation_key);
    const json_t *was = json_object_get(annotations_of(old), r->cfg->annotation_key);
    if (!json_is_string(was))
        was = NULL;
    if ((!now && !was) || json_equal((json_t *)now, (json_t *)was)) {
        *outcome = "allowed";
        return answer_of(r->uid);
    }
    *outcome = "restored";
    return patched_answer(r, annotation_patch(r, was));
}

/* A Binding's annotations are copied onto the pod: ours is removed from it. */
static json_t *binding_answer(review *r, const char **outcome)
{
    if (!json_object_get(annotations_of(r->pod), r->cfg->annotation_key)) {
        *outcome = "allowed";
        return answer_of(r->uid);
    }
    *outcome = "stripped";
    return patched_answer(r, annotation_patch(r, NULL));
}

/* ------------------------------------------------------- the review */

static int is_pods(const json_t *request)
{
    const json_t *res = json_object_get(request, "resource");
    const char *group = wh_text_at(res, "group"), *version = wh_text_at(res, "version"),
               *resource = wh_text_at(res, "resource");
    return group && !*group && version && strcmp(version, "v1") == 0 && resource &&
           strcmp(resource, "pods") == 0;
}

/* Checks the envelope; a message for HTTP 400 or NULL. */
static const char *parse_envelope(review *r, const json_t *root)
{
    if (!json_is_object(root))
        return "not a JSON object";
    const char *api_version = wh_text_at(root, "apiVersion"), *kind = wh_text_at(root, "kind");
    if (!api_version || strcmp(api_version, REVIEW_API_VERSION) != 0)
        return "apiVersion is not " REVIEW_API_VERSION;
    if (!kind || strcmp(kind, "AdmissionReview") != 0)
        return "kind is not AdmissionReview";
    r->request = json_object_get(root, "request");
    if (!json_is_object(r->request))
        return "no request";
    r->uid = wh_text_at(r->request, "uid");
    char check[WH_MAX_UID_BYTES + 1];
    if (!r->uid || !*r->uid || strlen(r->uid) > WH_MAX_UID_BYTES)
        return "request.uid missing or too long";
    snprintf(check, sizeof check, "%s", r->uid);
    printable_ascii(check);
    if (strcmp(check, r->uid) != 0)
        return "request.uid is not printable ASCII";
    r->operation = wh_text_at(r->request, "operation");
    if (optional_text(r->request, "subResource", &r->sub_resource) < 0)
        r->sub_resource = NULL; /* refused below, with the uid */
    else if (!r->sub_resource)
        r->sub_resource = "";
    if (optional_text(r->request, "namespace", &r->ns) < 0)
        r->ns = NULL;
    r->pod = json_object_get(r->request, "object");
    return NULL;
}

static void log_request(review *r)
{
    const char *pod = wh_text_at(r->request, "name");
    if (!pod || !*pod)
        pod = wh_text_at(json_object_get(r->pod, "metadata"), "generateName");
    json_object_set_new(r->log, "uid", json_string(r->uid));
    json_object_set_new(r->log, "namespace", r->ns ? json_string(r->ns) : json_null());
    json_object_set_new(r->log, "pod", pod ? json_string(pod) : json_null());
    json_object_set_new(r->log, "operation",
                        r->operation ? json_string(r->operation) : json_null());
    if (r->sub_resource && *r->sub_resource)
        json_object_set_new(r->log, "subResource", json_string(r->sub_resource));
    if (json_is_true(json_object_get(r->request, "dryRun")))
        json_object_set_new(r->log, "dryRun", json_true());
}

static int operation_is(const review *r, const char *op)
{
    return r->operation && strcmp(r->operation, op) == 0;
}

/* The answer to a well-formed review (NULL: refuse with r->err) and its outcome. */
static json_t *decide(review *r, const char **outcome)
{
    if (!r->operation || !r->sub_resource) {
        refuse(r, PG_ERR_INVALID, "request.operation or request.subResource is not a string");
        return NULL;
    }
    const char *sub = r->sub_resource;
    int pods = is_pods(r->request);
    int update = operation_is(r, "UPDATE"), create = operation_is(r, "CREATE");
    int routed =
        pods && ((!*sub && (create || update)) ||
                 (update && (!strcmp(sub, "ephemeralcontainers") || !strcmp(sub, "status"))) ||
                 (create && !strcmp(sub, "binding")));
    if (!routed) {
        *outcome = "ignored"; /* cannot change the annotation: nothing to add */
        return answer_of(r->uid);
    }
    if (!r->ns || !wh_is_dns_label(r->ns)) {
        refuse(r, PG_ERR_INVALID, "request.namespace missing or not a valid namespace name");
        return NULL;
    }
    if (!json_is_object(r->pod) || !json_is_object(json_object_get(r->pod, "metadata"))) {
        refuse(r, PG_ERR_INVALID, "request.object is not an object with metadata");
        return NULL;
    }
    if (!strcmp(sub, "status"))
        return status_answer(r, outcome);
    if (!strcmp(sub, "binding"))
        return binding_answer(r, outcome);
    json_t *out = *sub ? ephemeral_answer(r) : pod_answer(r);
    if (out)
        *outcome = *sub ? (json_array_size(r->warnings) ? "warned" : "allowed") : "patched";
    return out;
}

static void set_body(wh_review_result *out, int status, const char *content_type, char *body)
{
    out->http_status = status;
    out->content_type = content_type;
    out->body = body;
}

/* A plain-text body: why, then a newline. */
static void set_text(wh_review_result *out, int status, const char *why, const char *detail)
{
    char msg[WH_MESSAGE_MAX + 128];
    snprintf(msg, sizeof msg, "%s%s\n", why, detail);
    set_body(out, status, "text/plain", strdup(msg));
}

/* The review could not be read whole: refuse it by the uid of its first bytes. */
static json_t *unreadable(review *r, const char *body, size_t len, char *uid, size_t uid_size,
                          int code, const char *why)
{
    refuse(r, code, "%s", why);
    if (wh_review_uid_of_prefix(body, len, uid, uid_size) != 0)
        return NULL;
    r->uid = uid;
    json_object_set_new(r->log, "uid", json_string(uid));
    before_answer(r);
    return refusal_of(uid, http_status_of(r->err.code), r->err.message);
}

/* Why jansson could not build the review (its text could quote the body: not used). */
static const char *parse_failure(const json_error_t *e)
{
    switch (json_error_code(e)) {
    case json_error_out_of_memory: return "AdmissionReview larger than the memory budget allows";
    case json_error_stack_overflow: return "AdmissionReview nested deeper than 2048 levels";
    case json_error_duplicate_key: return "AdmissionReview with a duplicate key";
    default: return "AdmissionReview is not valid JSON";
    }
}

/* The review as a tree (admitted by wh_parse_begin); the body is released right after. */
static json_t *parse(const wh_review_config *cfg, const char *body, size_t len, json_error_t *e)
{
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, e);
    wh_parse_end();
    if (root && cfg->body_done)
        cfg->body_done(cfg->ctx);
    return root;
}

void wh_review_handle(const wh_review_config *cfg, const char *body, size_t len,
                      wh_review_result *out)
{
    memset(out, 0, sizeof *out);
    review r = {.cfg = cfg,
                .log = json_object(),
                .warnings = json_array(),
                .matching = {WH_MAX_MATCHING, cfg->deadline_ms}};
    out->log = r.log;
    json_object_set_new(r.log, "images", json_array());
    json_object_set_new(r.log, "skippedSecrets", json_array());
    char uid[WH_MAX_UID_BYTES + 1];
    json_error_t jerr;
    pg_autojson json_t *root = NULL;
    pg_autojson json_t *answer = NULL;
    const char *bad = NULL, *outcome = "refused";
    if (cfg->cut)
        answer = unreadable(&r, body, len, uid, sizeof uid, PG_ERR_LIMIT, cfg->cut);
    else if (wh_parse_begin(wh_json_parse_cost(body, len)) != 0)
        answer = unreadable(&r, body, len, uid, sizeof uid, PG_ERR_LIMIT,
                            "AdmissionReview larger than the webhook's memory budget allows now");
    else if (!(root = parse(cfg, body, len, &jerr)))
        answer = unreadable(&r, body, len, uid, sizeof uid, PG_ERR_INVALID, parse_failure(&jerr));
    else if (!(bad = parse_envelope(&r, root))) {
        log_request(&r);
        answer = decide(&r, &outcome);
        if (!answer && r.err.code != PG_OK) {
            before_answer(&r);
            answer = refusal_of(r.uid, http_status_of(r.err.code), r.err.message);
            outcome = "refused";
        }
    }
    before_answer(&r);
    char *text = answer ? json_dumps(answer, JSON_COMPACT) : NULL;
    if (text)
        set_body(out, 200, "application/json", text);
    else if (bad) {
        char why[WH_MESSAGE_MAX];
        snprintf(why, sizeof why, "malformed AdmissionReview: %s", bad);
        set_text(out, 400, why, "");
    } else if (!root && r.err.code != PG_OK) /* no uid in its first bytes */
        set_text(out, cfg->cut ? 413 : 400, r.err.message,
                 " (and no request.uid in its first bytes)");
    else
        set_text(out, 500, "out of memory", "");
    outcome = out->http_status != 200 ? (bad || !root ? "bad-request" : "error") : outcome;
    json_object_set_new(r.log, "outcome", json_string(outcome));
    out->outcome = outcome;
    out->refusal_code = strcmp(outcome, "refused") == 0 ? http_status_of(r.err.code) : 0;
    if (bad)
        json_object_set_new(r.log, "message", json_string(bad));
    else if (r.err.code != PG_OK)
        json_object_set_new(r.log, "message", json_string(r.err.message));
    if (json_array_size(r.warnings))
        json_object_set(r.log, "warnings", r.warnings);
    json_decref(r.warnings);
}

void wh_review_result_free(wh_review_result *r)
{
    if (!r)
        return;
    free(r->body);
    json_decref(r->log);
    r->body = NULL;
    r->log = NULL;
}
