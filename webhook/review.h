/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AdmissionReview in, AdmissionReview out (docs/webhook.md). Pure apart from
 * the Kubernetes API lookups, which go through a function pointer so the
 * fuzzer and unit-style harnesses run without a network.
 */
#ifndef PULLGATE_WEBHOOK_REVIEW_H
#define PULLGATE_WEBHOOK_REVIEW_H

#include "annotation_build.h"
#include "skim.h"

#include <stddef.h>
#include <stdint.h>

/* The largest AdmissionReview kube-apiserver can send for a legal request, its body limit and
 * the stored pod as oldObject, every character escaped (docs/webhook.md, "What it returns");
 * anything larger is refused from the first bytes (wh_review_uid_of_prefix). */
#define WH_MAX_REVIEW_BYTES (28u * 1024u * 1024u)
#define WH_REVIEW_PREFIX_BYTES 4096u /* always kept: the uid comes first */
#define WH_MAX_IMAGES 256      /* distinct image names per pod */
#define WH_MAX_PULL_SECRETS 64 /* distinct pull secret names per pod */
#define WH_MESSAGE_MAX 512

typedef enum wh_lookup {
    WH_FOUND = 0,     /* *obj holds the object (a new reference) */
    WH_NOT_FOUND = 1, /* the API answered 404 NotFound for exactly this object */
    WH_FAILED = 2     /* anything else; err says what */
} wh_lookup;

/* One GET /api/v1/namespaces/NS/RESOURCE/NAME ("secrets" or "serviceaccounts"). */
typedef struct wh_get_req {
    const char *resource, *name; /* in */
    wh_lookup result;            /* out */
    json_t *obj;                 /* out, WH_FOUND: the object (caller decrefs) */
    pg_error err;                /* out, WH_FAILED: why (never secret material) */
    const char *fail_kind;       /* out, WH_FAILED: a metrics label (whmetrics.h), or NULL */
} wh_get_req;

/*
 * Performs the n GETs in namespace ns, concurrently where the client can,
 * finishing by deadline_ms (pg_monotonic_ms()); fills every request's result.
 */
typedef void (*wh_get_fn)(void *ctx, const char *ns, wh_get_req *reqs, size_t n,
                          int64_t deadline_ms);

typedef struct wh_review_config {
    const char *annotation_key; /* e.g. pullgate.dev/credentials */
    const pg_mac_key *key;      /* NULL: unkeyed annotations (explicit opt-out) */
    const char *key_error;      /* non-NULL: the key is configured but unusable; pods are refused */
    wh_get_fn get;
    void *get_ctx;
    int64_t deadline_ms; /* the whole review (pg_monotonic_ms()) */
    /* Non-NULL: the body was cut (over the size bound or the memory budget) and
     * only its first bytes are given; the text says why. */
    const char *cut;
    /* Called once the body was parsed (the server wipes and frees it), and once
     * before the answer is built (the server stops charging memory). */
    void (*body_done)(void *ctx);
    void (*before_answer)(void *ctx);
    void *ctx;
} wh_review_config;

typedef struct wh_review_result {
    int http_status; /* 200, or 400/413 when no request.uid can be read */
    char *body;      /* response body, caller frees (wh_review_result_free) */
    const char *content_type;
    json_t *log; /* fields for the log line; never secret material */
    const char *outcome; /* static text, the log's "outcome" (metrics) */
    int refusal_code; /* the refusal's HTTP status (400, 413, 500, 504) when outcome is "refused" */
} wh_review_result;

/* Never fails as a whole: every outcome, out of memory included, is a result. */
void wh_review_handle(const wh_review_config *cfg, const char *body, size_t len,
                      wh_review_result *out);
void wh_review_result_free(wh_review_result *r);

#endif
