/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sealed credential hashes (docs/annotation-hmac.md, "Sealed hashes";
 * docs/interfaces.md §4, annotation v2).
 *
 * A v1 annotation carried the kubelet credentialHash in clear: SHA-256 of
 * {"username","password","email"}, which anyone who may read pods can test
 * offline against guessed passwords. A v2 secret item carries instead
 *
 *   sealedHashes = base64url-nopad( AES-256-SIV(K_seal, AD, H || A) )
 *
 *   H  = the kubelet credentialHash (32 raw bytes), what records hold;
 *   A  = the "auth hash": the same hash with the email omitted (32 raw bytes),
 *        which is what pullgate-cri can compute from a CRI AuthConfig;
 *   AD = "pullgate-sealed-v2\n<namespace>\n<name>\n<uid>\n" of the item;
 *   K_seal = HKDF-SHA256(hmacKeyFile bytes, info "pullgate-annotation-seal-v2").
 *
 * SIV (RFC 5297) is deterministic, so the same pod gets the same annotation
 * (the webhook stays side-effect free), and it is an AEAD: a value moved to
 * another item, or forged without the key, does not open. Only holders of the
 * key (the webhook, the nodes) can open a value; nothing in it can be checked
 * against a guess. Not installed.
 */
#ifndef PULLGATE_ANNOTATION_SEAL_H
#define PULLGATE_ANNOTATION_SEAL_H

#include "annotation_mac.h"

#define PG_SEALED_RAW_BYTES 80 /* 16-byte SIV tag + 64 bytes of ciphertext */
#define PG_SEALED_LEN 107      /* base64url of 80 bytes, no padding */
#define PG_SEAL_AD_HEADER "pullgate-sealed-v2\n"

/* s is exactly PG_SEALED_LEN base64url characters (the form only; NULL-safe). */
bool pg_sealed_text_valid(const char *s);

/*
 * Seals hash (H) and auth_hash (A), both 64 lowercase hex, for the item
 * (ns, name, uid). A field holding a newline is PG_ERR_INVALID (it would shift
 * the associated data's framing). out receives PG_SEALED_LEN characters + NUL.
 */
int pg_seal_hashes(const pg_mac_key *key, const char *ns, const char *name, const char *uid,
                   const char *hash, const char *auth_hash, char out[PG_SEALED_LEN + 1],
                   pg_error *err);

/*
 * Opens a sealed value for the item (ns, name, uid) into two lowercase hex
 * hashes. PG_ERR_UNSAFE when it does not open (malformed text, another item's
 * value, another key, tampered); PG_ERR_INTERNAL / PG_ERR_NOMEM otherwise.
 * Nothing is written to hash/auth_hash unless it opens.
 */
int pg_unseal_hashes(const pg_mac_key *key, const char *ns, const char *name, const char *uid,
                     const char *sealed, char hash[PG_HASH_HEX_LEN + 1],
                     char auth_hash[PG_HASH_HEX_LEN + 1], pg_error *err);

#endif
