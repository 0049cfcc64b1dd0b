/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AdmissionReview in, AdmissionReview out (docs/webhook.md). Pure apart from
 * the Kubernetes API lookups, which go through a function pointer so the
 * fuzzer and unit-style harnesses run without a network.
 */
#ifndef PULLGATE_WEBHOOK_REVIEW_H
#define PULLGATE_WEBHOOK_REVIEW_H

#include "annotation_build.h"

#include <stddef.h>

#define WH_MAX_REVIEW_BYTES (4u * 1024u * 1024u) /* kube-apiserver objects are ~3 MiB at most */
#define WH_MAX_IMAGES 256                        /* distinct image names per pod */
#define WH_MAX_PULL_SECRETS 64                   /* distinct pull secret names per pod */
#define WH_MESSAGE_MAX 512

typedef enum wh_lookup {
    WH_FOUND = 0,     /* *obj holds the object (a new reference) */
    WH_NOT_FOUND = 1, /* the API answered 404 NotFound for exactly this object */
    WH_FAILED = 2     /* anything else; msg says what */
} wh_lookup;

/* One GET /api/v1/namespaces/NS/RESOURCE/NAME ("secrets" or "serviceaccounts"). */
typedef struct wh_get_req {
    const char *resource, *name; /* in */
    wh_lookup result;            /* out */
    json_t *obj;                 /* out, WH_FOUND: the object (caller decrefs, after wiping) */
    char msg[WH_MESSAGE_MAX];    /* out, WH_FAILED: why */
} wh_get_req;

/*
 * Performs the n GETs in namespace ns, concurrently where the client can, all
 * within timeout_ms; fills every request's result. Objects may hold secret
 * material: callers wipe them.
 */
typedef void (*wh_get_fn)(void *ctx, const char *ns, wh_get_req *reqs, size_t n, long timeout_ms);

typedef struct wh_review_config {
    const char *annotation_key; /* e.g. pullgate.dev/credentials */
    const pg_mac_key *key;      /* NULL: entries are not signed */
    const char *key_error;      /* non-NULL: a key is configured but unusable; pods are refused */
    wh_get_fn get;
    void *get_ctx;
    long budget_ms; /* total time for all lookups of one review */
} wh_review_config;

typedef struct wh_review_result {
    int http_status; /* 200, or 400 for a malformed review */
    char *body;      /* response body, caller frees (wh_review_result_free) */
    const char *content_type;
    json_t *log; /* fields for the log line; never secret material */
} wh_review_result;

/* Never fails as a whole: every outcome, out of memory included, is a result. */
void wh_review_handle(const wh_review_config *cfg, const char *body, size_t len,
                      wh_review_result *out);
void wh_review_result_free(wh_review_result *r);

/* DNS-1123 label (namespaces) and subdomain (object names), as the API validates them. */
int wh_is_dns_label(const char *s);
int wh_is_dns_subdomain(const char *s);

#endif
