/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interfaces shared by the engine's modules. Not installed. */
#ifndef PULLGATE_INTERNAL_H
#define PULLGATE_INTERNAL_H

#include "pullgate/pullgate.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#define PG_API __attribute__((visibility("default")))

/* Fixed bounds on hostile input. */
#define PG_MAX_RECORD_BYTES (8u << 20)   /* one record file; 1,000 secrets is ~250 KiB */
#define PG_MAX_CONFIG_BYTES (1u << 20)
#define PG_MAX_ANNOTATION_BYTES (1u << 20)
#define PG_MAX_DOCKERCONFIG_BYTES (4u << 20)
#define PG_MAX_IMAGE_LEN 4096             /* longer image strings are rejected */

/* ----------------------------------------------------------- util.c */

/* Sets err (if non-NULL) and returns code. */
int pg_fail(pg_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Same, appending ": strerror(errno_value)". */
int pg_fail_errno(pg_error *err, int errno_value, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

char *pg_strdup(const char *s); /* NULL-safe; NULL on NULL or ENOMEM */

/* hex SHA-256 of data (OpenSSL EVP). Returns PG_OK or PG_ERR_INTERNAL. */
int pg_sha256_hex(const void *data, size_t len, char out[PG_HASH_HEX_LEN + 1], pg_error *err);
/* "sha256-" + hex sha256(s): the kubelet's record file name for s. */
int pg_record_file_name(const char *s, char out[7 + PG_HASH_HEX_LEN + 1], pg_error *err);

/* What pg_read_file_at checks beyond "regular file, no symlink, bounded". */
typedef enum pg_read_flags {
    PG_READ_CHECK_OWNER = 1, /* owner must be root or the effective uid */
    PG_READ_CHECK_MODE = 2,  /* not writable by group or others */
    PG_READ_SINGLE_LINK = 4  /* st_nlink <= 1 (no hard-link aliasing) */
} pg_read_flags;
#define PG_READ_STRICT (PG_READ_CHECK_OWNER | PG_READ_CHECK_MODE | PG_READ_SINGLE_LINK)

/*
 * Reads a whole file relative to dirfd (AT_FDCWD allowed) with O_NOFOLLOW and
 * O_NONBLOCK (a FIFO never blocks), refusing anything but a regular file and
 * anything larger than max. *buf is NUL-terminated, caller frees.
 * Missing file: PG_ERR_NOT_FOUND. Unsafe: PG_ERR_UNSAFE. Too big: PG_ERR_LIMIT.
 */
int pg_read_file_at(int dirfd, const char *name, size_t max, int flags, char **buf, size_t *len,
                    pg_error *err);

/*
 * The opening half of pg_read_file_at: *fd (caller closes) of a regular file that passed the
 * same checks, and its fstat in *st (the size said then: a reader sizes its buffer by it).
 */
int pg_open_file_at(int dirfd, const char *name, size_t max, int flags, int *fd, struct stat *st,
                    pg_error *err);
/*
 * Replaces (or creates) the file at path with len bytes, through a temporary file beside it
 * and rename(2): a reader sees the old or the new file, never a part. The new file gets
 * mode, uid and gid, and is fsync'd. For the tools that edit administrators' files
 * (config-rollback, wire), not for records (store_fs.h).
 */
int pg_write_file_replacing(const char *path, const void *data, size_t len, mode_t mode,
                            uid_t uid, gid_t gid, pg_error *err);

/* Reads at most max bytes from fd until EOF (stdin etc). Over max: PG_ERR_LIMIT. */
int pg_read_fd(int fd, size_t max, char **buf, size_t *len, pg_error *err);

/* Strict JSON parse: duplicate keys rejected, input must be one value.
 * what names the input in error messages. Returns NULL and sets err. */
json_t *pg_json_parse(const char *buf, size_t len, const char *what, pg_error *err);

/* Checks obj has only keys listed in allowed (NULL-terminated). */
int pg_json_only_keys(const json_t *obj, const char *const *allowed, const char *what,
                      pg_error *err);

/* Go-style duration ("0s", "90s", "1h30m", "500ms") in whole seconds (rounded down, >= 0). */
int pg_parse_duration(const char *s, int64_t *seconds, pg_error *err);
/* RFC 3339 (Go's time.RFC3339 / RFC3339Nano) to time_t, and back (UTC "Z"). */
int pg_parse_rfc3339(const char *s, time_t *out, pg_error *err);
void pg_format_rfc3339(time_t t, char out[32]);

/* ----------------------------------------------------------- record.c */

/*
 * One credential of a record mapping or an annotation entry: a secret, or a
 * service account (credential_hash NULL). Secrets and service accounts share
 * this one type so that decoding, merging and matching each have one path.
 */
typedef struct pg_pod_cred {
    char *namespace_, *name, *uid;
    char *credential_hash; /* secrets: "" or 64 hex; service accounts: NULL */
    /* Presented secrets only (NULL in records): the hash of the same credentials
     * with the email omitted, what pullgate-cri computes from a CRI AuthConfig
     * (docs/interfaces.md §4); "" when unknown. */
    char *auth_hash;
} pg_pod_cred;

/* The credentialHash of empty credentials, SHA-256("{}"): what an entry with no
 * username and no password hashes to. It proves nothing (every such entry has
 * it), so it is never presented, recorded by pullgate or matched. */
#define PG_EMPTY_CREDENTIAL_HASH "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"

/*
 * The secret name pullgate-cri records when it cannot attribute a pull's
 * credentials to one of the pod's secrets (docs/interfaces.md §10): the
 * placeholder {namespace: the pod's, name: prefix + A, uid: "", credentialHash: A}
 * with A the auth hash. ':' cannot occur in a Kubernetes object name.
 */
#define PG_UNVERIFIED_NAME_PREFIX "pullgate:unverified-"
#define PG_UNKNOWN_NAMESPACE "pullgate:unknown-namespace"
/*
 * The service account name pullgate-cri records for a pull that carried no credentials while
 * the runtime may have used its own for the pod's namespace (CRI-O's namespaced auth,
 * docs/interfaces.md §10): {namespace: the pod's, name: this, uid: ""}. It matches every
 * presented service account of that namespace, and nothing else; a reader that does not know
 * it (1.0.0) matches it with nothing (no service account is named so), which denies.
 */
#define PG_NAMESPACE_MARKER_NAME "pullgate:runtime-namespace-auth"

/*
 * The pod binding pullgate-cri records beside the placeholder (docs/interfaces.md
 * §10): {namespace: the pod's, name: prefix + the pod's UID, uid: "",
 * credentialHash: ""}. It matches only a container whose runtime-set pod
 * identity (docs/runtime-trust.md) is that namespace and UID, never a presented
 * credential: a presented item always has a uid, and "" proves no hash (so a
 * reader that knows no pod bindings, 1.0.0's, grants nothing from it).
 */
#define PG_POD_BINDING_PREFIX "pullgate:pod-"
#define PG_POD_UID_MAX 128 /* a Kubernetes UID is 36 characters (a UUID) */

/* Frees c's strings (not c). */
void pg_pod_cred_clear(pg_pod_cred *c);
/* Clears and frees (*v)[0..*n), then *v = NULL, *n = 0. */
void pg_pod_creds_free(pg_pod_cred **v, size_t *n);
/* Both carry the same non-empty credentialHash, and it is not the empty-credential hash. */
bool pg_pod_cred_same_hash(const pg_pod_cred *a, const pg_pod_cred *b);
/* recorded is pullgate-cri's placeholder for credentials it could not attribute. */
bool pg_pod_cred_is_placeholder(const pg_pod_cred *recorded);
/* recorded is pullgate-cri's namespace marker (a service account, PG_NAMESPACE_MARKER_NAME). */
bool pg_pod_cred_is_namespace_marker(const pg_pod_cred *recorded);
/*
 * The match of a presented credential against a recorded one, the one place
 * that decides it, for secrets and service accounts (no hash) alike:
 *  - the kubelet's rule: the same credentialHash (non-empty, not the
 *    empty-credential hash), or the same namespace/name/uid;
 *  - a placeholder (pg_pod_cred_is_placeholder) matches only a presented
 *    secret of the same namespace whose auth hash is the placeholder's hash:
 *    an unattributed pull is bound to the pulling pod's namespace;
 *  - the namespace marker (pg_pod_cred_is_namespace_marker) matches any
 *    presented service account of its namespace: a pull made with the
 *    runtime's credentials for that namespace is bound to the namespace.
 */
bool pg_pod_cred_matches(const pg_pod_cred *presented, const pg_pod_cred *recorded);
/* a and b are secrets of pods (not placeholders or pod bindings) of one namespace
 * holding one proving hash: the same credential, recorded once per image (§2). */
bool pg_pod_cred_same_credential(const pg_pod_cred *a, const pg_pod_cred *b);
/* uid can stand in a pod binding: 1..PG_POD_UID_MAX of [A-Za-z0-9._-] (a UUID, a static pod's hash). */
bool pg_pod_uid_valid(const char *uid);
/* recorded is a pod binding (PG_POD_BINDING_PREFIX, empty uid and hash). */
bool pg_pod_cred_is_pod_binding(const pg_pod_cred *recorded);
/* recorded binds the pod pod_uid of namespace pod_namespace (both from the runtime; NULL: unknown). */
bool pg_pod_binding_matches(const char *pod_namespace, const char *pod_uid,
                            const pg_pod_cred *recorded);

typedef struct pg_rec_mapping {
    char *image_name;
    pg_pod_cred *secrets;
    size_t n_secrets;
    pg_pod_cred *sas;
    size_t n_sas;
    bool node_pods_accessible;
} pg_rec_mapping;

struct pg_record {
    char *api_version;
    char *image_ref;
    time_t last_updated;
    char *last_updated_text; /* as read, re-emitted unchanged */
    char *dir;               /* record directory it came from, or NULL */
    pg_rec_mapping *maps;    /* the keys as written, sorted by image_name */
    size_t n_maps;
    /* The mappings by image (pg_record_find), sorted by normalised name: the
     * union of every key naming one image. NULL when every key already is its
     * image's normalised name (maps serve; pullgate's own records). */
    pg_rec_mapping *by_name;
    size_t n_by_name;
};

#define PG_API_V1ALPHA1 "kubelet.config.k8s.io/v1alpha1"
#define PG_API_V1BETA1 "kubelet.config.k8s.io/v1beta1"

/* Strict decode of an ImagePulledRecord (either apiVersion). */
int pg_record_parse(const char *buf, size_t len, pg_record **out, pg_error *err);
/* Serialise (kubelet field order); *out caller frees. */
int pg_record_serialize(const pg_record *rec, const char *api_version, char **out,
                        pg_error *err);
/* *out caller frees. */
int pg_intent_serialize(const char *image, const char *api_version, char **out, pg_error *err);
/*
 * The fair share of one namespace in one pulled record (docs/interfaces.md §2):
 * what the recorded credentials of one namespace occupy, over every mapping:
 * its entries (secrets and service accounts) and its bytes (each entry as
 * serialised, plus each mapping key holding one of its entries). Keys holding
 * no credentials (node-accessible, or pulled with none) are charged to one
 * pool of the record instead. The bounds make room for about 110 namespaces at
 * their full share beside a full pool within the 8 MiB a reader accepts
 * (docs/threat-model.md, "Records").
 */
#define PG_SHARE_MAX_ENTRIES 100u          /* the kubelet's writeRecordWhileMatchingLimit */
#define PG_SHARE_MAX_BYTES (64u << 10)      /* 100 entries of 253-character names fit */
#define PG_SHARE_POOL_BYTES (1u << 20)      /* keys without credentials, per record */
#define PG_SHARE_RECORD_SKELETON 256u       /* the record's own members, with an image ID */

typedef struct pg_share_use {
    size_t entries;
    size_t bytes;
} pg_share_use;

/* What namespace ns occupies in rec. */
pg_share_use pg_record_share(const pg_record *rec, const char *ns);
/* Bytes of rec's mapping keys that hold no credentials (the pool). */
size_t pg_record_pool_bytes(const pg_record *rec);

/*
 * When a recorded secret of rec's mapping image_name was last recorded: the
 * order in which a namespace's own pod bindings make room for its pull. NULL:
 * the record's order.
 */
typedef time_t (*pg_recorded_at_fn)(const char *image_name, const pg_pod_cred *secret, void *ud);

/*
 * pullgate's own write of a pull (pg_store_record_pulled): every other key of
 * rec that names the same image as image_name (a normalised name) is folded
 * into image_name's mapping, then creds are merged by the kubelet's rules, so
 * the records pullgate writes hold one key per image. A pull with no
 * credentials to record still leaves an (empty) mapping for the image: it was
 * pulled under that name, so it is never taken for preloaded (docs/interfaces.md §2).
 * Beyond the kubelet's rules: a secret whose namespace already holds its
 * credentialHash under the image is not added again (one entry per namespace
 * and hash), and the fair share above holds: a namespace of creds whose share
 * grows past a bound first gives up its own oldest pod bindings (those of other
 * pods; recorded_at orders them, may be NULL), then fails with PG_ERR_QUOTA, as
 * does a pull without namespace-bound credentials that grows the pool past its
 * bound. Never charged to a namespace the pull does not name. On any error rec
 * is left changed: discard it.
 */
int pg_record_merge_pull(pg_record *rec, const char *image_name, const pg_pull_credentials *creds,
                         pg_recorded_at_fn recorded_at, void *ud, pg_error *err);
/*
 * The image a credentialMapping key names. The kubelet keys a mapping by the
 * image as the pod wrote it, tag and digest removed ("nginx",
 * "secretorg/myimage"); pullgate by the normalised name: one image either way.
 * *name_out: the normalised name (caller frees) when the key spells it
 * otherwise; NULL when the key is its own name (already normalised, or not a
 * plain image name, which is then compared as written only). PG_ERR_NOMEM only.
 */
int pg_record_key_name(const char *key, char **name_out);
/*
 * The mapping of an image: image_name is its normalised name (or a key as
 * written); the result is the union of every key of rec naming that image
 * (borrowed from rec), or NULL when none does.
 */
const pg_rec_mapping *pg_record_find(const pg_record *rec, const char *image_name);
pg_record *pg_record_new(const char *image_ref, pg_error *err);

/* --------------------------------------------------------- reference.c */

/* pg_ref_parse returning its code; *out (NULL on failure) freed with pg_ref_free. */
int pg_ref_parse_into(const char *image, pg_ref **out, pg_error *err);
/* A pg_ref released when its block is left (cleanup.h). */
static inline void pg_cleanup_ref(pg_ref **r) { pg_ref_free(*r); }
#define pg_autoref __attribute__((cleanup(pg_cleanup_ref)))
/*
 * Whether s spells its domain and path otherwise than its normalised name does
 * (no domain: "nginx", "secretorg/app"; "index.docker.io/..."; "docker.io/x"
 * without "library/"). False means: if s parses at all, its name is s as
 * written. A string check only, no allocation; s is not validated.
 */
bool pg_ref_needs_normalising(const char *s);

/* ------------------------------------------------------------ policy.c */

/* pg_pinned_match for an image already parsed (ref may be NULL: raw string only). */
int pg_pinned_match_ref(const char *const *patterns, const char *image, const pg_ref *ref);

/* ------------------------------------------------------------ config.c */

/*
 * The rollback registry (docs/lifecycle.md, "Roll back"): the release that first reads
 * configuration key `name` ("1.0.0"; static storage), NULL for a key this release does not read.
 */
const char *pg_config_key_since(const char *name);
/* Orders two release versions by MAJOR.MINOR.PATCH (a package revision or suffix after
 * '-', '~' or '+' is ignored): *cmp < 0, 0, > 0. PG_ERR_INVALID for anything else. */
int pg_release_compare(const char *a, const char *b, int *cmp, pg_error *err);

/* hmacKeyFile ("" = annotations are not signed); owned by cfg. */
const char *pg_config_hmac_key_file(const pg_config *cfg);
/* pullgate-cri endpoints (criListen, criRuntimeEndpoint: "unix:///path"); owned by cfg. */
const char *pg_config_cri_listen(const pg_config *cfg);
const char *pg_config_cri_runtime_endpoint(const pg_config *cfg);
/* pullgate-cri's own prune of the records (criPruneInterval): seconds, 0 = never. */
int64_t pg_config_cri_prune_interval(const pg_config *cfg);
/* pullgate-cri's verification pulls (criVerifyPulls, default true): an ImageStatus
 * with pod annotations is answered "not present" when a pull with the pod's own
 * credentials could cure the hook's denial (docs/interfaces.md §10). */
bool pg_config_cri_verify_pulls(const pg_config *cfg);
/* pullgate-cri's GET /metrics address (criMetricsListen: "IPv4:PORT" or "[IPv6]:PORT"),
 * or NULL when it is off ("none"); owned by cfg. */
const char *pg_config_cri_metrics_listen(const pg_config *cfg);
#define PG_DEFAULT_CRI_METRICS_LISTEN "127.0.0.1:9469"
/* The node's own docker config files (nodeCredentialFiles): credentials found
 * there make a pull node-accessible. NULL-terminated, owned by cfg. */
const char *const *pg_config_node_credential_files(const pg_config *cfg);
/*
 * pullgate-cri's memory bounds (docs/kubelet-setup.md, "Sizing"): the record
 * cache's parsed records (criRecordCacheEntries) and their file bytes
 * (criRecordCacheMiB, returned in bytes), the absence cache's remembered absent
 * files (criAbsenceCacheEntries). The defaults are the bounds before they were
 * configuration.
 */
#define PG_DEFAULT_CRI_RECORD_CACHE_ENTRIES 4096
#define PG_DEFAULT_CRI_RECORD_CACHE_MIB 64
#define PG_DEFAULT_CRI_ABSENCE_CACHE_ENTRIES 131072
size_t pg_config_cri_record_cache_entries(const pg_config *cfg);
size_t pg_config_cri_record_cache_bytes(const pg_config *cfg);
size_t pg_config_cri_absence_cache_entries(const pg_config *cfg);
/*
 * pg_store_enable_cache with the absence cache's bound too (criAbsenceCacheEntries:
 * 1,024 to 2^24; 0: the built-in 131,072). Defined by the store (store.c),
 * beside pg_store_enable_cache.
 */
int pg_store_enable_caches(pg_store *store, size_t max_entries, size_t max_bytes,
                           size_t max_absences, pg_error *err);

/* --------------------------------------------------------- presented.c */

/* Credentials a pod presents (the annotation), filtered to its namespace
 * (pg_presented_parse_keyed, annotation_mac.h). */
typedef struct pg_presented pg_presented;
void pg_presented_free(pg_presented *p);
/* Secrets / service accounts presented for image_name (borrowed views). */
size_t pg_presented_secrets(const pg_presented *p, const char *image_name,
                            const pg_pod_cred **out);
size_t pg_presented_sas(const pg_presented *p, const char *image_name, const pg_pod_cred **out);
/* Count of credentials for image_name dropped because they name another namespace. */
size_t pg_presented_ignored(const pg_presented *p, const char *image_name);

/* ------------------------------------------- util.c: errors and pooled helpers */

/* Prepends "<context>: " to err->message (err may be NULL), keeping err->code:
 * the one idiom for adding context on the way up (docs/hacking.md). */
void pg_error_prefix(pg_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Lowercase hex of bytes[0..n) into out (room for 2n + 1). */
void pg_hex_encode(const void *bytes, size_t n, char *out);
/* Value of one hex digit (either case), or -1. */
int pg_hex_value(unsigned char c);
/* The n bytes at s (no terminator needed) are all lowercase hex digits. */
bool pg_lower_hex_run(const char *s, size_t n);
/* s is exactly n lowercase hex digits (NUL after them); NULL-safe. */
bool pg_is_lower_hex(const char *s, size_t n);
/* s is a credentialHash / SHA-256 hex: exactly 64 lowercase hex digits. */
bool pg_is_hex64(const char *s);
/* CLOCK_MONOTONIC in milliseconds: deadlines that wall-clock jumps cannot move. */
int64_t pg_monotonic_ms(void);
/* Length of the valid UTF-8 sequence at s (NUL-terminated; no overlong forms,
 * no surrogates, <= U+10FFFF, as D-Bus requires), or 0 if invalid. */
size_t pg_utf8_valid_len(const unsigned char *s);

/* A growable byte buffer, always NUL-terminated once written. Allocation
 * failure sets oom and makes further appends no-ops: check oom once at the end. */
typedef struct pg_buf {
    char *p;
    size_t len, cap;
    bool oom;
    bool wipe; /* holds secret bytes: growth wipes the old block (free with pg_buf_wipe_free) */
} pg_buf;
void pg_buf_append(pg_buf *b, const void *data, size_t n);
void pg_buf_puts(pg_buf *b, const char *s);
/* Wipes the whole allocation, frees it and empties b. */
void pg_buf_wipe_free(pg_buf *b);

/* A vector of owned strings; v is NULL-terminated (a pg_strv_free-able char **)
 * once written or ensured. Zero-initialise; release with pg_strv_clear. */
typedef struct pg_strv {
    char **v;
    size_t n, cap;
} pg_strv;
/* Makes v an empty vector if it is still NULL. */
int pg_strv_ensure(pg_strv *l, pg_error *err);
/* Appends a copy of s. */
int pg_strv_push(pg_strv *l, const char *s, pg_error *err);
void pg_strv_clear(pg_strv *l);

/* ------------------------------------------------------------ decide.c */

/*
 * pg_decide_identity for a container whose pod UID the runtime set
 * (docs/runtime-trust.md: containerd's io.kubernetes.cri.sandbox-uid, CRI-O's
 * io.kubernetes.pod.uid): a pod binding pullgate-cri recorded for that pod of
 * req->namespace_ (docs/interfaces.md §5, step 8) allows it, reason
 * PG_REASON_POD_PULLED. pod_uid NULL, or not a valid UID: no pod binding
 * matches (pg_decide_identity). Internal: pg_request is a fixed public struct.
 */
int pg_decide_pod(const pg_config *cfg, const pg_store *store, const pg_request *req,
                  const char *pod_uid, const char *const *aliases, const char *const *hints,
                  pg_decision *out);

/*
 * Whether a denial with this reason could become an allow through a pull made
 * with the pod's own credentials (no record, no mapping, no or non-matching
 * credentials, expired): what pullgate-cri's verification pulls ask before
 * answering "not present", and what the hook's denial text explains. Never
 * true for an allow's reason, a bad annotation or signature, a store,
 * configuration or request error.
 */
bool pg_reason_curable_by_pull(int reason);

/*
 * The one namespace a credentials annotation's items name (secrets and
 * service accounts of every entry), without verifying anything: a candidate
 * for the pod's namespace where the caller knows no other (pullgate-cri's
 * ImageStatus carries no pod metadata). PG_OK with *ns (caller frees) the
 * namespace, or NULL when no item names one; PG_ERR_INVALID when the text is
 * not such an annotation or its items name more than one namespace (no
 * producer writes that). Bounded like pg_presented_parse_keyed.
 */
int pg_presented_namespace(const char *json, size_t len, char **ns, pg_error *err);

/* ------------------------------------------------------------ notifier.c */

/* PullRequired(s image, s namespace, s reason): pullgate-cri told the kubelet "not
 * present" so that it pulls with the pod's own credentials (docs/dbus.md). Not in
 * pullgate.h (the header is fixed). */
void pg_notify_pull_required(pg_notifier *n, const char *image, const char *namespace_,
                             const char *reason);

#endif
