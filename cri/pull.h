/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What pullgate-cri reads from the CRI messages it understands (PullImage,
 * ImageStatus, ListImages, ListContainers: pull_wire.c), the calls it intercepts
 * and the admission rule of a pull (docs/interfaces.md §10: pull.c). Pure
 * functions over bytes: no network, no store, so they can be unit tested and
 * fuzzed. Which credentials a pull records: attribution.h.
 */
#ifndef PULLGATE_CRI_PULL_H
#define PULLGATE_CRI_PULL_H

#include "internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bounds on what one request may carry (the message itself is bounded by gRPC). */
#define CRI_MAX_PULL_REQUEST_BYTES (1u << 20) /* pod annotations total at most 256 KiB */
#define CRI_MAX_CREDENTIAL_BYTES (64u << 10)  /* username, password, auth each */
#define CRI_MAX_FIELD_BYTES 1024u             /* pod namespace, name, uid */
#define CRI_MAX_ALIASES 256u                  /* identities indexed per pulled image */
#define CRI_MAX_LISTED_REFS (1u << 20)        /* identities one ListImages may name */

/* ------------------------------------------------------------ methods */

/* The calls pullgate-cri intercepts, and the ones it relays as unary calls; every other call is
 * pumped as a stream of bytes. */
typedef enum cri_method_kind {
    CRI_METHOD_OTHER = 0,
    CRI_METHOD_PULL_IMAGE,
    CRI_METHOD_IMAGE_STATUS, /* intercepted only with criVerifyPulls (verify.h) */
    CRI_METHOD_UNARY         /* a CRI method the CRI declares unary (unary.h): relayed as one */
} cri_method_kind;

typedef struct cri_method {
    cri_method_kind kind;
    /* For an intercepted method: "/<service>/ImageStatus" of the same CRI
     * version (static storage), for the proxy's own follow-up calls. */
    const char *image_status;
} cri_method;

/*
 * The method a runtime built on grpc-go serves for an HTTP/2 :path, as
 * grpc-go's Server.handleStream splits it (one leading '/' optional, then
 * service and method at the last '/'), so that every spelling containerd or
 * CRI-O runs as PullImage is intercepted as one. path need not be
 * NUL-terminated; a NUL in it matches nothing. CRI_METHOD_UNARY: a method of
 * runtime.v1 or runtime.v1alpha2's RuntimeService or ImageService that the
 * CRI declares unary (every one but GetContainerEvents, PullImage and
 * ImageStatus); a method this table does not know is OTHER.
 */
cri_method cri_method_parse(const char *path, size_t len);

/* ------------------------------------------------------------ PullImage */

/* Why a request was not taken (decode step of the admission). */
typedef enum cri_decode_result {
    CRI_DECODED = 0,       /* a PullImageRequest with an image and usable credentials */
    CRI_NOT_A_PULL,        /* protobuf-c refuses it, no image, a field out of bounds */
    CRI_CREDS_UNUSABLE,    /* credentials that cannot be hashed or attributed */
    CRI_EXTRA_MESSAGE,     /* no request, or more than one, on a unary call */
    CRI_DECODE_NO_RESOURCE /* out of memory */
} cri_decode_result;

/* A decoded PullImageRequest: owned copies, credentials already hashed and wiped. */
typedef struct cri_pull_request {
    char *image;         /* image.image; never NULL after a successful decode */
    bool has_sandbox;    /* sandbox_config present */
    char *pod_namespace; /* sandbox_config.metadata.namespace, NULL when absent/empty */
    char *pod_name;
    char *pod_uid;
    char *annotation; /* the credentials annotation's value, NULL when absent */
    size_t annotation_len;
    char *config_seen; /* the kubelet's kubernetes.io/config.seen, NULL when absent */
    bool has_auth; /* credentials given (a bare server_address is none) */
    /* A: the auth hash (pg_credential_hash(user, pass, "")) of the credentials
     * the runtime uses, when has_auth (docs/interfaces.md §4). */
    char auth_hash[PG_HASH_HEX_LEN + 1];
} cri_pull_request;

/*
 * Decodes a PullImageRequest (runtime.v1 or v1alpha2 bytes) and computes the
 * auth hash of its credentials: username/password, or the base64 "auth"
 * field as "user:pass" when it comes alone. Passwords never leave this
 * function: every copy is wiped with OPENSSL_cleanse. annotation_key is the
 * config's credentialsAnnotation. Returns the decode result; on anything but
 * CRI_DECODED *out is empty and *why (static text, never secret) says why.
 *
 * Credentials that are refused (CRI_CREDS_UNUSABLE): a field over
 * CRI_MAX_CREDENTIAL_BYTES or holding a NUL; "auth" that is not base64 of
 * "user:pass", or given together with a username or password (which one the
 * runtime uses differs between runtimes); identity or registry tokens (no
 * producer presents them); and credentials that are empty once decoded (their
 * hash is the empty-credential hash, which proves nothing).
 */
cri_decode_result cri_pull_request_decode(const uint8_t *buf, size_t len,
                                          const char *annotation_key, cri_pull_request *out,
                                          const char **why);
void cri_pull_request_clear(cri_pull_request *r);

/* ------------------------------------------------------------ ImageStatus */

/* The kubelet's own pod annotations (pkg/kubelet/types): every pod it runs has them. */
#define CRI_KUBELET_ANNOTATION_PREFIX "kubernetes.io/config."
#define CRI_CONFIG_SEEN_ANNOTATION "kubernetes.io/config.seen"
#define CRI_MAX_STATUS_ANNOTATIONS 4096u /* pod annotations on one ImageStatus */

/* What verification pulls read from an ImageStatusRequest; owned copies. */
typedef struct cri_status_request {
    char *image;              /* image.image; never NULL after a successful decode */
    bool has_pod_annotations; /* a kubernetes.io/config.* key or the credentials annotation */
    char *annotation;         /* the credentials annotation's value ("" when empty), or NULL */
    size_t annotation_len;
    char *config_seen; /* kubernetes.io/config.seen, or NULL */
} cri_status_request;

/*
 * Decodes an ImageStatusRequest (runtime.v1 or v1alpha2 bytes). Pod
 * annotations are the kubelet's (EnsureImageExists sends every pod
 * annotation in ImageSpec.annotations). PG_ERR_INVALID for what protobuf-c
 * refuses, no image, a NUL or an oversized field, more than
 * CRI_MAX_STATUS_ANNOTATIONS annotations; *out is then empty. Pure.
 */
int cri_status_request_decode(const uint8_t *buf, size_t len, const char *annotation_key,
                              cri_status_request *out, pg_error *err);
void cri_status_request_clear(cri_status_request *r);

/*
 * The key that ties a pod's ImageStatus to its PullImage (verification pulls'
 * loop bound): SHA-256 over the image, the credentials annotation and the
 * kubelet's config.seen (the same pod object's annotations go with both
 * calls; neither call names the pod). Length-prefixed, so no two inputs share
 * a key. NULLs count as empty.
 */
void cri_verify_key(const char *image, const char *annotation, size_t annotation_len,
                    const char *config_seen, uint8_t key[32]);

/* ------------------------------------------------------------ admission */

/* Where a pull stands on the way to the runtime. */
typedef enum cri_slot_state {
    CRI_SLOT_NONE = 0, /* none free and the wait for one is over (or not allowed) */
    CRI_SLOT_WAITING,  /* waiting (bounded) for a pull slot */
    CRI_SLOT_HELD
} cri_slot_state;

/* The outcome of one record operation of the record writer (recorder.h). */
typedef enum cri_record_outcome {
    CRI_RECORD_NOT_SUBMITTED = 0,
    CRI_RECORD_WAITING,   /* queued, its wait not over yet */
    CRI_RECORD_DURABLE,   /* ran and is on disk */
    CRI_RECORD_FAILED,    /* ran and failed */
    CRI_RECORD_PENDING,   /* the wait is over; it stays queued and runs later */
    CRI_RECORD_NOT_QUEUED /* refused by the writer (its queue is full, or stopping) */
} cri_record_outcome;

typedef enum cri_next_step {
    CRI_STEP_REFUSE = 0,    /* answer the kubelet with code/message, never forward */
    CRI_STEP_WAIT_SLOT,     /* keep waiting for a slot */
    CRI_STEP_RECORD_INTENT, /* submit the intent */
    CRI_STEP_WAIT_INTENT,   /* keep waiting for the intent */
    CRI_STEP_FORWARD        /* send the request to the runtime */
} cri_next_step;

typedef struct cri_admission {
    cri_next_step step;
    int code;            /* a grpc_status_code for CRI_STEP_REFUSE */
    const char *message; /* "pullgate: ..." (static) for CRI_STEP_REFUSE */
} cri_admission;

/*
 * The one place that decides whether a PullImage may reach the runtime: only
 * a decoded request holding a pull slot whose intent is durable is
 * forwarded; everything else waits (bounded) or is refused with
 * INVALID_ARGUMENT (not understood), RESOURCE_EXHAUSTED (no slot, writer
 * queue full, out of memory) or UNAVAILABLE (the intent is not durable in
 * time, or failed), never forwarded unrecorded.
 */
cri_admission cri_pull_admit(cri_decode_result decoded, cri_slot_state slot,
                             cri_record_outcome intent);

/* ------------------------------------------------------------ answers */

/* PullImageResponse.image_ref; caller frees. PG_ERR_INVALID when missing/bad. */
int cri_pull_response_decode(const uint8_t *buf, size_t len, char **image_ref, pg_error *err);

/* An ImageStatusRequest for image (verbose false), packed; caller frees *buf. */
int cri_image_status_request_encode(const char *image, uint8_t **buf, size_t *len, pg_error *err);

/*
 * Every identity an ImageStatusResponse reports (image.id, repo_tags,
 * repo_digests) that is a well-formed image ID or reference, plus `also`
 * (the image string as pulled; may be NULL), de-duplicated, at most
 * CRI_MAX_ALIASES. *aliases is NULL-terminated, free with pg_strv_free.
 * PG_ERR_NOT_FOUND when the response names no image (runtime forgot it).
 */
int cri_image_status_aliases(const uint8_t *buf, size_t len, const char *also, char ***aliases,
                             pg_error *err);

/* Whether an ImageStatusResponse names an image: 1 present, 0 absent, -1 not a response. */
int cri_image_status_present(const uint8_t *buf, size_t len);

/*
 * Appends to *refs every identity a ListImagesResponse names (each image's
 * id, in both spellings "sha256:<hex>" and "<hex>", repo tags and repo
 * digests) and sets *n_images. PG_ERR_INVALID when the bytes are not one.
 */
int cri_list_images_refs(const uint8_t *buf, size_t len, pg_strv *refs, size_t *n_images,
                         pg_error *err);
/* The same for ListContainersResponse: each container's image_ref and image.image. */
int cri_list_containers_refs(const uint8_t *buf, size_t len, pg_strv *refs, pg_error *err);

#endif
