/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The annotation producer's decision for one AdmissionReview
 * (packaging/kubernetes/annotation-producer.md, docs/webhook.md):
 *  - pods CREATE/UPDATE: recompute the credentials annotation from the pod's
 *    images, its pull secrets (or its service account's) and its service
 *    account, and overwrite it with a JSON patch;
 *  - pods/ephemeralcontainers UPDATE: admit, warn about images the current
 *    annotation does not cover (the API server drops annotation patches there);
 *  - anything that cannot be computed refuses the pod with a message;
 *  - a review that is not an admission.k8s.io/v1 AdmissionReview is HTTP 400.
 */
#include "review.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REVIEW_API_VERSION "admission.k8s.io/v1"
#define MAX_UID_BYTES 128
#define MAX_WARNINGS 16
#define MAX_SECRET_DATA_BYTES (1024u * 1024u)

/* Everything one review needs while it is computed. */
typedef struct review {
    const wh_review_config *cfg;
    const json_t *request, *pod;
    const char *uid, *ns, *operation, *sub_resource;
    int64_t deadline_ms; /* pg_monotonic_ms() */
    json_t *log;
    json_t *warnings; /* array of strings */
    char message[WH_MESSAGE_MAX];
    int status_code; /* of a refusal */
} review;

/* ------------------------------------------------------------ utilities */

int wh_is_dns_label(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return 0;
    return 1;
}

int wh_is_dns_subdomain(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 253)
        return 0;
    /* Labels separated by dots; each one a DNS-1123 label (no "..", no "/"). */
    char label[64];
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        size_t len = i - start;
        if (len == 0 || len > 63)
            return 0;
        memcpy(label, s + start, len);
        label[len] = '\0';
        if (!wh_is_dns_label(label))
            return 0;
        start = i + 1;
    }
    return 1;
}

static const char *string_at(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static long remaining_ms(const review *r) { return (long)(r->deadline_ms - pg_monotonic_ms()); }

/* Messages go into JSON and logs: keep them printable ASCII (a cut may split UTF-8). */
static void printable_ascii(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            *s = '?';
}

/* Records why the pod is refused; returns -1 so callers can `return refuse(...)`. */
static int refuse(review *r, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(review *r, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
    printable_ascii(r->message);
    r->status_code = code;
    return -1;
}

/* Overwrites a string held by a JSON value (secret material) before it is freed. */
static void wipe_json_string(json_t *s)
{
    if (json_is_string(s))
        OPENSSL_cleanse((char *)json_string_value(s), json_string_length(s));
}

static void wipe_secret(json_t *secret)
{
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(secret, "data"), k, v) wipe_json_string(v);
    json_object_foreach(json_object_get(secret, "stringData"), k, v) wipe_json_string(v);
}

/* Standard base64 (what the API server puts in Secret.data). *out wiped and freed by the caller. */
static int base64_decode(const char *in, size_t len, unsigned char **out, size_t *out_len)
{
    if (len > MAX_SECRET_DATA_BYTES * 2)
        return -1;
    unsigned char *buf = malloc(len / 4 * 3 + 4);
    EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
    int n = 0, tail = 0, ok = buf && ctx;
    if (ok) {
        EVP_DecodeInit(ctx);
        ok = EVP_DecodeUpdate(ctx, buf, &n, (const unsigned char *)in, (int)len) >= 0 &&
             EVP_DecodeFinal(ctx, buf + n, &tail) == 1;
    }
    EVP_ENCODE_CTX_free(ctx);
    if (!ok) {
        if (buf)
            OPENSSL_cleanse(buf, len / 4 * 3 + 4);
        free(buf);
        return -1;
    }
    *out = buf;
    *out_len = (size_t)n + (size_t)tail;
    return 0;
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
        return refuse(r, 400, "malformed pod: no spec");
    for (const char *const *l = lists; *l; l++) {
        const json_t *containers = json_object_get(spec, *l);
        if (!containers || json_is_null(containers))
            continue;
        if (!json_is_array(containers))
            return refuse(r, 400, "malformed pod: spec.%s is not a list", *l);
        size_t i;
        const json_t *c;
        json_array_foreach(containers, i, c)
        {
            const json_t *image = json_object_get(c, "image");
            const char *name = string_at(c, "name");
            if (!image || json_is_null(image))
                continue; /* no image: nothing will be pulled for it */
            if (!json_is_string(image))
                return refuse(r, 400, "malformed pod: spec.%s[%zu].image is not a string", *l, i);
            if (fn(r, *l, name ? name : "", json_string_value(image), arg) != 0)
                return -1;
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
    if (pg_annotation_add_image(a, image, NULL, &err) != PG_OK)
        return refuse(r, 400, "%s \"%.64s\": image \"%.200s\": %s", list, container, image,
                      err.message);
    if (pg_annotation_count(a) > WH_MAX_IMAGES)
        return refuse(r, 400, "more than %d distinct images in one pod", WH_MAX_IMAGES);
    json_array_append_new(json_object_get(r->log, "images"), json_string(image));
    return 0;
}

/* Pull secret names of a list of LocalObjectReference, deduplicated, appended to names. */
static int collect_secret_names(review *r, const json_t *refs, const char *where, json_t *names)
{
    if (!refs || json_is_null(refs))
        return 0;
    if (!json_is_array(refs))
        return refuse(r, 400, "malformed %s: imagePullSecrets is not a list", where);
    size_t i;
    const json_t *ref;
    json_array_foreach(refs, i, ref)
    {
        const char *name = string_at(ref, "name");
        if (!name || !*name)
            continue; /* the kubelet skips an empty reference too */
        if (!wh_is_dns_subdomain(name))
            return refuse(r, 400, "malformed %s: imagePullSecrets name \"%.64s\" is not a valid "
                                  "object name", where, name);
        int seen = 0;
        size_t j;
        const json_t *n;
        json_array_foreach(names, j, n) seen |= strcmp(json_string_value(n), name) == 0;
        if (!seen && json_array_append_new(names, json_string(name)) != 0)
            return refuse(r, 500, "out of memory");
        if (json_array_size(names) > WH_MAX_PULL_SECRETS)
            return refuse(r, 400, "more than %d image pull secrets", WH_MAX_PULL_SECRETS);
    }
    return 0;
}

/* -------------------------------------------------------- API lookups */

/* One round of GETs within what is left of the review's budget. */
static int fetch(review *r, wh_get_req *reqs, size_t n)
{
    long left = remaining_ms(r);
    if (left <= 0)
        return refuse(r, 500, "time limit exceeded before reading %s \"%.64s\"", reqs[0].resource,
                      reqs[0].name);
    for (size_t i = 0; i < n; i++) {
        reqs[i].result = WH_FAILED;
        reqs[i].obj = NULL;
        reqs[i].msg[0] = '\0';
    }
    r->cfg->get(r->cfg->get_ctx, r->ns, reqs, n, left);
    return 0;
}

/* The outcome of one GET: WH_FAILED refuses the pod with the request's message. */
static wh_lookup outcome_of(review *r, wh_get_req *req)
{
    if (req->result == WH_FOUND && !json_is_object(req->obj)) {
        json_decref(req->obj);
        req->obj = NULL;
        snprintf(req->msg, sizeof req->msg, "not an object");
        req->result = WH_FAILED;
    }
    if (req->result == WH_FAILED || (req->result != WH_FOUND && req->result != WH_NOT_FOUND)) {
        refuse(r, 500, "cannot read %s %s/%.64s: %.300s", req->resource, r->ns, req->name,
               req->msg[0] ? req->msg : "lookup failed");
        return WH_FAILED;
    }
    return req->result;
}

/* The object's metadata.uid; the API always sets one. */
static const char *object_uid(review *r, const json_t *obj, const char *what, const char *name)
{
    const char *uid = string_at(json_object_get(obj, "metadata"), "uid");
    if (!uid || !*uid) {
        refuse(r, 500, "malformed %s %s/%.64s: no metadata.uid", what, r->ns, name);
        return NULL;
    }
    return uid;
}

typedef struct service_account {
    json_t *obj; /* NULL when it does not exist */
    const char *name, *uid;
} service_account;

static int service_account_name(review *r, service_account *sa)
{
    const json_t *spec = json_object_get(r->pod, "spec");
    sa->name = string_at(spec, "serviceAccountName");
    if (!sa->name || !*sa->name)
        sa->name = string_at(spec, "serviceAccount"); /* deprecated alias */
    if (!sa->name || !*sa->name)
        sa->name = "default";
    if (!wh_is_dns_subdomain(sa->name))
        return refuse(r, 400, "malformed pod: service account name \"%.64s\" is not a valid object "
                              "name", sa->name);
    return 0;
}

/* Takes the fetched service account (or its absence) into sa. */
static int use_service_account(review *r, wh_get_req *req, service_account *sa)
{
    wh_lookup res = outcome_of(r, req);
    if (res == WH_FAILED)
        return -1;
    if (res == WH_NOT_FOUND)
        return 0;
    sa->obj = req->obj;
    req->obj = NULL;
    sa->uid = object_uid(r, sa->obj, "service account", sa->name);
    return sa->uid ? 0 : -1;
}

/* The dockerconfig text of a pull secret, or NULL (with *skip set) for another type. */
static int secret_dockerconfig(review *r, json_t *secret, const char *name, unsigned char **text,
                               size_t *len, int *skip)
{
    const char *type = string_at(secret, "type");
    const char *field;
    if (type && strcmp(type, "kubernetes.io/dockerconfigjson") == 0)
        field = ".dockerconfigjson";
    else if (type && strcmp(type, "kubernetes.io/dockercfg") == 0)
        field = ".dockercfg";
    else {
        *skip = 1; /* Opaque and every other type: the kubelet ignores them for pulls */
        return 0;
    }
    const json_t *data = json_object_get(json_object_get(secret, "data"), field);
    if (!json_is_string(data))
        return refuse(r, 500, "malformed secret %s/%.64s: type %s without data[\"%s\"]", r->ns,
                      name, type, field);
    if (base64_decode(json_string_value(data), json_string_length(data), text, len) != 0)
        return refuse(r, 500, "malformed secret %s/%.64s: data[\"%s\"] is not base64", r->ns,
                      name, field);
    return 0;
}

/* Adds the fetched secret's credentials; a missing secret or another type is skipped. */
static int use_secret(review *r, pg_annotation *a, wh_get_req *req)
{
    const char *name = req->name;
    wh_lookup res = outcome_of(r, req);
    if (res == WH_FAILED)
        return -1;
    if (res == WH_NOT_FOUND) {
        json_array_append_new(json_object_get(r->log, "skippedSecrets"), json_string(name));
        return 0;
    }
    json_t *secret = req->obj;
    req->obj = NULL;
    unsigned char *text = NULL;
    size_t len = 0;
    int skip = 0, rc = 0;
    const char *uid = object_uid(r, secret, "secret", name);
    if (!uid)
        rc = -1;
    else if ((rc = secret_dockerconfig(r, secret, name, &text, &len, &skip)) == 0 && skip)
        json_array_append_new(json_object_get(r->log, "skippedSecrets"), json_string(name));
    else if (rc == 0) {
        pg_error err = {0};
        if (pg_annotation_add_dockerconfig(a, r->ns, name, uid, (const char *)text, len, &err) !=
            PG_OK)
            rc = refuse(r, 500, "secret %s/%.64s: %s", r->ns, name, err.message);
        OPENSSL_cleanse(text, len);
    }
    free(text);
    wipe_secret(secret);
    json_decref(secret);
    return rc;
}

/* Releases what a round left behind (objects after a failure), wiped. */
static void release(wh_get_req *reqs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        wipe_secret(reqs[i].obj);
        json_decref(reqs[i].obj);
        reqs[i].obj = NULL;
    }
}

/* ------------------------------------------------------- the patch */

/* "/" and "~" escaped as JSON Pointer requires (RFC 6901). */
static char *pointer_escape(const char *key)
{
    char *out = malloc(strlen(key) * 2 + 1), *p = out;
    if (!out)
        return NULL;
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

static json_t *annotation_patch(review *r, const char *value)
{
    const json_t *annotations = json_object_get(json_object_get(r->pod, "metadata"), "annotations");
    char *escaped = pointer_escape(r->cfg->annotation_key);
    json_t *patch = json_array();
    int ok = escaped && patch;
    /* "add" on a member replaces it; the map itself must exist first. */
    if (ok && !json_is_object(annotations))
        ok = json_array_append_new(patch, json_pack("{s:s, s:s, s:{}}", "op", "add", "path",
                                                    "/metadata/annotations", "value")) == 0;
    if (ok) {
        size_t n = strlen(escaped) + sizeof "/metadata/annotations/";
        char *path = malloc(n);
        if (path)
            snprintf(path, n, "/metadata/annotations/%s", escaped);
        ok = path && json_array_append_new(patch, json_pack("{s:s, s:s, s:s}", "op", "add",
                                                            "path", path, "value", value)) == 0;
        free(path);
    }
    free(escaped);
    if (!ok) {
        json_decref(patch);
        return NULL;
    }
    return patch;
}

/* ------------------------------------------------------- decisions */

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
    int rc = collect_secret_names(r, json_object_get(spec, "imagePullSecrets"), "pod", names);
    int own = json_array_size(names) > 0;
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
    for (size_t i = 1; rc == 0 && i < plan->n; i++)
        rc = use_secret(r, a, &plan->reqs[i]);
    release(plan->reqs, plan->n);
    return rc;
}

static int compute_annotation(review *r, char **value)
{
    pg_error err = {0};
    pg_annotation *a = pg_annotation_new(r->ns, &err);
    service_account sa = {0};
    json_t *names = json_array();
    fetch_plan *plan = calloc(1, sizeof *plan);
    int rc = a && names && plan ? 0 : refuse(r, 500, "out of memory");
    if (rc == 0)
        rc = for_each_image(r, all_containers, add_image, a);
    if (rc == 0)
        rc = service_account_name(r, &sa);
    if (rc == 0)
        rc = read_credentials(r, a, &sa, names, plan);
    json_object_set(r->log, "pullSecrets", names);
    if (rc == 0 && sa.uid &&
        pg_annotation_add_service_account(a, NULL, r->ns, sa.name, sa.uid, &err) != PG_OK)
        rc = refuse(r, 500, "service account %s/%.64s: %s", r->ns, sa.name, err.message);
    if (rc == 0 && r->cfg->key && pg_annotation_sign(a, r->cfg->key, &err) != PG_OK)
        rc = refuse(r, 500, "cannot sign the annotation: %s", err.message);
    if (rc == 0 && !(*value = pg_annotation_dump(a, &err)))
        rc = refuse(r, 500, "out of memory");
    free(plan);
    json_decref(names);
    json_decref(sa.obj);
    pg_annotation_free(a);
    return rc;
}

static json_t *response_of(review *r)
{
    return json_pack("{s:s, s:s, s:{s:s, s:b}}", "apiVersion", REVIEW_API_VERSION, "kind",
                     "AdmissionReview", "response", "uid", r->uid, "allowed", 1);
}

static json_t *patch_response(review *r)
{
    char *value = NULL;
    if (r->cfg->key_error) {
        refuse(r, 500, "the annotation HMAC key is unusable: %s", r->cfg->key_error);
        return NULL;
    }
    if (compute_annotation(r, &value) != 0)
        return NULL;
    json_t *patch = annotation_patch(r, value);
    char *patch_text = patch ? json_dumps(patch, JSON_COMPACT) : NULL;
    char *encoded = patch_text ? base64_encode(patch_text, strlen(patch_text)) : NULL;
    json_t *out = encoded ? response_of(r) : NULL;
    json_t *resp = json_object_get(out, "response");
    if (resp && (json_object_set_new(resp, "patchType", json_string("JSONPatch")) != 0 ||
                 json_object_set_new(resp, "patch", json_string(encoded)) != 0)) {
        json_decref(out);
        out = NULL;
    }
    if (!out)
        refuse(r, 500, "out of memory");
    json_object_set_new(r->log, "annotationBytes", json_integer((json_int_t)strlen(value)));
    free(encoded);
    free(patch_text);
    json_decref(patch);
    free(value);
    return out;
}

/* The image names the pod's current annotation has entries for; NULL when it has none usable. */
static json_t *covered_names(review *r)
{
    const json_t *annotations = json_object_get(json_object_get(r->pod, "metadata"), "annotations");
    const char *value = string_at(annotations, r->cfg->annotation_key);
    json_t *parsed = value ? json_loads(value, JSON_REJECT_DUPLICATES, NULL) : NULL;
    json_t *names = json_object();
    const char *key;
    json_t *entry;
    json_object_foreach(parsed, key, entry)
    {
        char *name = pg_image_name(key, NULL);
        if (name && names)
            json_object_set_new(names, name, json_true());
        free(name);
    }
    json_decref(parsed);
    return names;
}

static int warn_uncovered(review *r, const char *list, const char *container, const char *image,
                          void *arg)
{
    (void)list;
    json_t *covered = arg;
    char *name = pg_image_name(image, NULL);
    int ok = name && json_object_get(covered, name);
    json_array_append_new(json_object_get(r->log, "images"), json_string(image));
    if (!ok && json_array_size(r->warnings) < MAX_WARNINGS) {
        char text[WH_MESSAGE_MAX];
        snprintf(text, sizeof text,
                 "pullgate: ephemeral container \"%.64s\" image \"%.200s\" has no entry in the "
                 "pod's %s annotation; the node refuses it unless it is public, preloaded or "
                 "exempt",
                 container, image, r->cfg->annotation_key);
        printable_ascii(text);
        json_array_append_new(r->warnings, json_string(text));
    }
    free(name);
    return 0;
}

static json_t *ephemeral_response(review *r)
{
    json_t *covered = covered_names(r);
    int rc = covered ? for_each_image(r, ephemeral_only, warn_uncovered, covered)
                     : refuse(r, 500, "out of memory");
    json_decref(covered);
    if (rc != 0)
        return NULL;
    json_t *out = response_of(r);
    if (out && json_array_size(r->warnings) > 0)
        json_object_set(json_object_get(out, "response"), "warnings", r->warnings);
    return out;
}

static json_t *refusal(review *r)
{
    json_t *out = response_of(r);
    json_t *resp = json_object_get(out, "response");
    if (resp) {
        char text[WH_MESSAGE_MAX + 16];
        snprintf(text, sizeof text, "pullgate: %s", r->message);
        json_object_set_new(resp, "allowed", json_false());
        json_object_set_new(resp, "status", json_pack("{s:i, s:s}", "code", r->status_code,
                                                      "message", text));
    }
    return out;
}

/* ------------------------------------------------------- the review */

static int is_pods(const json_t *request)
{
    const json_t *res = json_object_get(request, "resource");
    const char *group = string_at(res, "group"), *version = string_at(res, "version"),
               *resource = string_at(res, "resource");
    return group && !*group && version && strcmp(version, "v1") == 0 && resource &&
           strcmp(resource, "pods") == 0;
}

/* Checks the envelope; a message for HTTP 400 or NULL. */
static const char *parse_envelope(review *r, const json_t *root)
{
    if (!json_is_object(root))
        return "not a JSON object";
    if (!string_at(root, "apiVersion") || strcmp(string_at(root, "apiVersion"), REVIEW_API_VERSION))
        return "apiVersion is not " REVIEW_API_VERSION;
    if (!string_at(root, "kind") || strcmp(string_at(root, "kind"), "AdmissionReview") != 0)
        return "kind is not AdmissionReview";
    r->request = json_object_get(root, "request");
    if (!json_is_object(r->request))
        return "no request";
    r->uid = string_at(r->request, "uid");
    if (!r->uid || !*r->uid || strlen(r->uid) > MAX_UID_BYTES)
        return "request.uid missing or too long";
    r->operation = string_at(r->request, "operation");
    if (!r->operation)
        return "request.operation missing";
    r->sub_resource = string_at(r->request, "subResource");
    if (!r->sub_resource)
        r->sub_resource = "";
    r->ns = string_at(r->request, "namespace");
    r->pod = json_object_get(r->request, "object");
    return NULL;
}

static void log_request(review *r)
{
    const char *pod = string_at(r->request, "name");
    if (!pod || !*pod)
        pod = string_at(json_object_get(r->pod, "metadata"), "generateName");
    json_object_set_new(r->log, "uid", json_string(r->uid));
    json_object_set_new(r->log, "namespace", r->ns ? json_string(r->ns) : json_null());
    json_object_set_new(r->log, "pod", pod ? json_string(pod) : json_null());
    json_object_set_new(r->log, "operation", json_string(r->operation));
    if (*r->sub_resource)
        json_object_set_new(r->log, "subResource", json_string(r->sub_resource));
    if (json_is_true(json_object_get(r->request, "dryRun")))
        json_object_set_new(r->log, "dryRun", json_true());
}

/* The answer to a well-formed review and the outcome for the log. */
static json_t *decide(review *r, const char **outcome)
{
    int create_or_update = !strcmp(r->operation, "CREATE") || !strcmp(r->operation, "UPDATE");
    if (!is_pods(r->request) || !create_or_update ||
        (*r->sub_resource && strcmp(r->sub_resource, "ephemeralcontainers") != 0)) {
        *outcome = "ignored"; /* not routed here by our configuration: nothing to add */
        return response_of(r);
    }
    json_t *out = NULL;
    if (!r->ns || !wh_is_dns_label(r->ns))
        refuse(r, 400, "request.namespace missing or not a valid namespace name");
    else if (!json_is_object(r->pod) || !json_is_object(json_object_get(r->pod, "metadata")))
        refuse(r, 400, "request.object is not a pod with metadata");
    else if (*r->sub_resource)
        out = ephemeral_response(r);
    else
        out = patch_response(r);
    if (out)
        *outcome = *r->sub_resource ? (json_array_size(r->warnings) ? "warned" : "allowed")
                                    : "patched";
    else {
        *outcome = "refused";
        out = refusal(r);
    }
    return out;
}

static void set_body(wh_review_result *out, int status, const char *content_type, char *body)
{
    out->http_status = status;
    out->content_type = content_type;
    out->body = body;
}

void wh_review_handle(const wh_review_config *cfg, const char *body, size_t len,
                      wh_review_result *out)
{
    memset(out, 0, sizeof *out);
    review r = {.cfg = cfg, .log = json_object(), .warnings = json_array()};
    out->log = r.log;
    r.deadline_ms = pg_monotonic_ms() + cfg->budget_ms;
    json_object_set_new(r.log, "images", json_array());
    json_object_set_new(r.log, "skippedSecrets", json_array());
    json_t *root = len <= WH_MAX_REVIEW_BYTES
                       ? json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL)
                       : NULL;
    const char *bad = root ? parse_envelope(&r, root) : "not valid JSON (or too large)";
    const char *outcome = "bad-request";
    json_t *answer = bad ? NULL : (log_request(&r), decide(&r, &outcome));
    char *text = answer ? json_dumps(answer, JSON_COMPACT) : NULL;
    if (bad) {
        char msg[WH_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "malformed AdmissionReview: %s\n", bad);
        set_body(out, 400, "text/plain", strdup(msg));
        json_object_set_new(r.log, "message", json_string(bad));
    } else if (!text) {
        outcome = "error";
        set_body(out, 500, "text/plain", strdup("out of memory\n"));
    } else
        set_body(out, 200, "application/json", text);
    json_object_set_new(r.log, "outcome", json_string(outcome));
    if (r.message[0])
        json_object_set_new(r.log, "message", json_string(r.message));
    if (json_array_size(r.warnings))
        json_object_set(r.log, "warnings", r.warnings);
    json_decref(answer);
    json_decref(root);
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
