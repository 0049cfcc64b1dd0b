/* SPDX-License-Identifier: Apache-2.0 */
/* Image identity: the spellings of one image (IDs, references) and their validation.
 * Internal to the engine; see plugin/records/image_identity.c. */
#ifndef PULLGATE_IMAGE_IDENTITY_H
#define PULLGATE_IMAGE_IDENTITY_H

#include "internal.h"

#define PG_ID_PREFIX "sha256:"
#define PG_ID_HEX_LEN 64

/*
 * If s is a well-formed image ID ("sha256:" + 64 lowercase hex, or the 64 hex
 * alone) returns a pointer to its 64 hex digits, else NULL. Nothing else is an
 * ID: "SHA256:...", "sha256:sha256:...", trailing blanks are not.
 */
const char *pg_image_id_hex(const char *s);

/*
 * Checks that s is one well-formed identity: an image ID or a reference that
 * pg_ref_parse accepts. PG_ERR_INVALID (message names the problem) otherwise.
 * *ref_out (may be NULL) gets the parsed reference for a reference, NULL for an ID;
 * caller frees.
 */
int pg_identity_check(const char *s, pg_ref **ref_out, pg_error *err);

/* A set of strings (file keys), deduplicated, insertion-ordered: a pg_strv added to only
 * by pg_keyset_add. Zero-initialise; release with pg_keyset_free. */
typedef pg_strv pg_keyset;

int pg_keyset_add(pg_keyset *ks, const char *key, pg_error *err);
void pg_keyset_free(pg_keyset *ks);

/*
 * Record and index keys of one identity: an ID under both spellings; a
 * reference as written, normalised, as name@digest when it has a digest, and
 * with and without ":latest" when the tag is latest or absent (the kubelet adds
 * ":latest"). ref is the parsed reference (NULL for an ID).
 */
int pg_identity_add_keys(pg_keyset *ks, const char *s, const pg_ref *ref, pg_error *err);

/*
 * Intent keys of a reference: the record keys plus the short spellings the
 * kubelet may have written for a Docker Hub image ("x", "library/x",
 * "docker.io/x", "index.docker.io/library/x", ...), each with the tag/digest forms.
 */
int pg_identity_add_intent_keys(pg_keyset *ks, const char *s, const pg_ref *ref, pg_error *err);

#endif
