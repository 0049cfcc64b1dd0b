/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Building the credentials annotation value (docs/annotation-hmac.md,
 * packaging/kubernetes/annotation-producer.md): one implementation shared by
 * `pullgatectl annotate` and pullgate-webhook, on top of the library's own
 * image normalisation, kubelet keyring matching (pg_dockerconfig_hashes) and
 * MAC (annotation_mac.h), so producers and the verifier cannot drift apart.
 * Not installed.
 *
 * Usage: pg_annotation_new(), pg_annotation_add_image() for every image, then
 * the credentials (each applies to every image added so far), then
 * pg_annotation_sign() when a key is configured, pg_annotation_dump().
 */
#ifndef PULLGATE_ANNOTATION_BUILD_H
#define PULLGATE_ANNOTATION_BUILD_H

#include "annotation_mac.h"
#include "keyring.h" /* pg_dockerconfig_form */

/* The value under construction: image name -> entry. Free with pg_annotation_free. */
typedef struct pg_annotation pg_annotation;

pg_annotation *pg_annotation_new(const char *pod_namespace, pg_error *err);
void pg_annotation_free(pg_annotation *a);

/*
 * Adds IMAGE's entry (keyed by its normalised name) unless one exists. The
 * name is returned in *name_out when name_out is not NULL (owned by a, valid
 * until it is freed). A reference that does not parse is PG_ERR_INVALID.
 */
int pg_annotation_add_image(pg_annotation *a, const char *image, const char **name_out,
                            pg_error *err);

/* Adds one secret credential to the entry of image_name (added first if absent).
 * hash NULL or "" omits credentialHash. The hash of empty credentials
 * (PG_EMPTY_CREDENTIAL_HASH) is refused: it proves nothing. auth_hash is A (the
 * hash with the email omitted; NULL or equal to hash when the entry has no email)
 * (docs/interfaces.md §4). */
int pg_annotation_add_secret_hashes(pg_annotation *a, const char *image, const char *ns,
                                    const char *name, const char *uid, const char *hash,
                                    const char *auth_hash, pg_error *err);

/*
 * For every image added so far, one secret credential per entry of the
 * dockerconfig text (kubernetes.io/dockerconfigjson or the legacy bare map of
 * kubernetes.io/dockercfg) that applies to it by the kubelet keyring's rules
 * and has a username or a password (an entry with neither, e.g. identity-token
 * only or {}, proves nothing and is not presented). The text is parsed once per
 * call; errors never quote it. The caller owns and wipes the dockerconfig text.
 */
int pg_annotation_add_dockerconfig(pg_annotation *a, const char *ns, const char *name,
                                   const char *uid, const char *dockerconfig, size_t len,
                                   pg_error *err);
/*
 * The same, reading the text in the form the secret's type gives it, as the kubelet does
 * (pkg/credentialprovider/secrets): kubernetes.io/dockerconfigjson's .dockerconfigjson for its
 * "auths" only (PG_DOCKERCONFIG_AUTHS), kubernetes.io/dockercfg's .dockercfg as the bare map
 * (PG_DOCKERCONFIG_BARE): an entry the kubelet never uses is never presented.
 */
int pg_annotation_add_dockerconfig_as(pg_annotation *a, const char *ns, const char *name,
                                      const char *uid, const char *dockerconfig, size_t len,
                                      pg_dockerconfig_form form, pg_error *err);

/* Adds a service account to the entry of image (NULL: to every image added so far). */
int pg_annotation_add_service_account(pg_annotation *a, const char *image, const char *ns,
                                      const char *name, const char *uid, pg_error *err);

/* Seals every secret item's hashes (sealedHashes, annotation_seal.h) and signs
 * every entry for the pod's namespace ("hmac" field): the keyed annotation (v2).
 * Without this call the value is the unkeyed form (v1: clear credentialHash and
 * authHash), the explicit opt-out for clusters without a shared key. */
int pg_annotation_sign(pg_annotation *a, const pg_mac_key *key, pg_error *err);

/* Number of image entries. */
size_t pg_annotation_count(const pg_annotation *a);

/* The value as compact JSON text, keys in insertion order. Caller frees. */
char *pg_annotation_dump(const pg_annotation *a, pg_error *err);

#endif
