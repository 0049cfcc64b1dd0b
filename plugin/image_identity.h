/* SPDX-License-Identifier: Apache-2.0 */
/* Image identity: the spellings of one image (IDs, references) and their validation.
 * Internal to the engine; see plugin/image_identity.c. */
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

#endif
