/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Namespace-bound credentials annotations (docs/annotation-hmac.md).
 *
 * With config hmacKeyFile set, every image entry of the credentials
 * annotation must carry "hmac": HMAC-SHA-256 under the node key over a
 * canonical, language-neutral text naming the pod's namespace, the image name
 * and the entry's credentials. A copy replayed into another namespace (even
 * with its namespace fields rewritten) does not verify there. Not installed.
 */
#ifndef PULLGATE_ANNOTATION_MAC_H
#define PULLGATE_ANNOTATION_MAC_H

#include "internal.h"

#include <openssl/evp.h>

#define PG_MAC_KEY_MIN_BYTES 32
#define PG_MAC_KEY_MAX_BYTES 1024
#define PG_MAC_HEX_LEN 64 /* HMAC-SHA-256, lowercase hex */
#define PG_MAC_FIELD "hmac"
#define PG_MAC_MESSAGE_HEADER "pullgate-annotation-v1\n"    /* entries holding no hash */
#define PG_MAC_MESSAGE_HEADER_V2 "pullgate-annotation-v2\n" /* entries with sealed hashes */
#define PG_SEALED_FIELD "sealedHashes"                      /* annotation v2 secret items */
#define PG_SEAL_KEY_INFO "pullgate-annotation-seal-v2"      /* HKDF info of the sealing key */
#define PG_SEAL_KEY_BYTES 64                                /* AES-256-SIV: two 256-bit keys */

/* A loaded key; its bytes are wiped when freed. It also holds the sealing key
 * (annotation_seal.h) derived from it, and is read-only once made: threads may share it. */
typedef struct pg_mac_key pg_mac_key;

/*
 * Loads a key file: a regular file (no symlink, one link), owned by root or
 * the effective uid, no permission bits for group or others (0600/0400),
 * PG_MAC_KEY_MIN_BYTES..PG_MAC_KEY_MAX_BYTES bytes, used exactly as stored
 * (no trimming: a trailing newline is part of the key).
 */
int pg_mac_key_load(const char *path, pg_mac_key **out, pg_error *err);
/*
 * Whether a configuration's hmacKeyFile is usable, by the loader the hook and
 * pullgate-cri use (so `pullgatectl check-config` fails where they would deny):
 * PG_OK for "" (no key configured) or a loadable key, else the loader's error
 * (PG_ERR_NOT_FOUND missing, PG_ERR_UNSAFE readable by others or not root's, ...).
 */
int pg_mac_key_file_check(const char *path, pg_error *err);
/*
 * pg_mac_key_load also reads PATH.previous when it exists, with the same checks (one that
 * exists and cannot be used fails the load): the key a rotation retired, which readers
 * still accept for entries the producer signed before it (docs/annotation-hmac.md,
 * "Rotation"). Producers sign with the key itself only. NULL when there is none.
 */
#define PG_MAC_PREVIOUS_SUFFIX ".previous"
const pg_mac_key *pg_mac_key_previous(const pg_mac_key *key);
/* A key from memory (tests, tools); same length bounds. */
int pg_mac_key_from_bytes(const void *bytes, size_t len, pg_mac_key **out, pg_error *err);
void pg_mac_key_free(pg_mac_key *key);
/* A key released (and wiped) when its block is left (cleanup.h). */
static inline void pg_cleanup_mac_key(pg_mac_key **k) { pg_mac_key_free(*k); }
#define pg_automackey __attribute__((cleanup(pg_cleanup_mac_key)))
/* For annotation_seal.c: the derived PG_SEAL_KEY_BYTES sealing key and the
 * AES-256-SIV cipher (both owned by key). */
const unsigned char *pg_mac_key_seal_bytes(const pg_mac_key *key);
EVP_CIPHER *pg_mac_key_siv(const pg_mac_key *key);

/* One credential as it appears in an annotation entry; hash NULL for a service account. */
typedef struct pg_mac_cred {
    const char *namespace_, *name, *uid, *hash;
} pg_mac_cred;

/*
 * The signed text: header (version 2: PG_MAC_MESSAGE_HEADER_V2, 1: PG_MAC_MESSAGE_HEADER),
 * namespace, image name, then one line per secret "secret\t<ns>\t<name>\t<uid>\t<sealed>\n"
 * sorted by (ns, name, uid, sealed), then one per service account "sa\t<ns>\t<name>\t<uid>\n"
 * sorted by (ns, name, uid); a secret's hash is its sealedHashes text or "". A field
 * containing a tab or a newline could shift the framing: refused (PG_ERR_INVALID).
 * *out is NUL-terminated, caller frees.
 */
int pg_annotation_mac_message(int version, const char *namespace_, const char *image_name,
                              const pg_mac_cred *secrets, size_t n_secrets,
                              const pg_mac_cred *sas, size_t n_sas, char **out, size_t *len,
                              pg_error *err);

/* The message version of entry: 2 when any kubernetesSecrets item carries sealedHashes,
 * else 1: the header of an entry that holds no hash at all (service accounts, coordinates
 * only), as the keyed producer signs it since release 1.0.0. */
int pg_annotation_entry_version(const json_t *entry);

/*
 * The MAC of one annotation entry object (its kubernetesSecrets and
 * kubernetesServiceAccounts as written, "hmac" ignored) for image_name (the
 * normalised key) and namespace_. The entry must be well-formed (the strict
 * parser's job) and hold no clear hash; anything else is PG_ERR_INVALID.
 */
int pg_annotation_mac_of_entry(const pg_mac_key *key, const char *namespace_,
                               const char *image_name, const json_t *entry,
                               char out[PG_MAC_HEX_LEN + 1], pg_error *err);

/*
 * PG_OK when entry carries an "hmac" that verifies for namespace_ and
 * image_name (compared in constant time); PG_ERR_UNSAFE with the reason when it
 * is missing, malformed or wrong; other codes for internal failures.
 */
int pg_annotation_mac_verify_entry(const pg_mac_key *key, const char *namespace_,
                                   const char *image_name, const json_t *entry, pg_error *err);

/* ------------------------------------------------------- presented.c */

/* The credentials a pod presents (the annotation json), filtered to pod_namespace, with
 * every entry's "hmac" checked against key (NULL: not checked); an entry that does not
 * verify for pod_namespace presents no credentials. */
int pg_presented_parse_keyed(const char *json, size_t len, const char *pod_namespace,
                             const pg_mac_key *key, pg_presented **out, pg_error *err);
/* Entries for image_name dropped because their "hmac" did not verify (a clear hash never
 * does) or their sealed hashes did not open. */
size_t pg_presented_rejected(const pg_presented *p, const char *image_name);
/* v2 entries for image_name dropped because no key was given to open them. */
size_t pg_presented_unopened(const pg_presented *p, const char *image_name);

#endif
