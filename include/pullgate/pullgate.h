/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libpullgate — kubelet-compatible "ensure secret pulled images" enforcement.
 *
 * Conventions of this API
 *  - Every function that can fail takes a `pg_error *err` (may be NULL) and
 *    returns PG_OK (0) or a negative-free pg_code > 0. Nothing is printed.
 *  - Handles are opaque, created by the _new or _open functions and released by _free.
 *    Passing NULL to a _free function is a no-op.
 *  - Strings passed in are borrowed for the duration of the call unless said
 *    otherwise. Strings returned as `const char *` are owned by the handle they
 *    came from and live until that handle is freed. Strings returned as
 *    `char *` / `char **` are owned by the caller: release them with
 *    pg_free() / pg_strv_free().
 *  - No hidden global state. A pg_config is immutable after loading and a
 *    pg_store holds only immutable data (its optional record cache, see
 *    pg_store_enable_cache, has its own lock), so both may be shared by
 *    threads once set up; a pg_notifier serialises its own use internally.
 */
#ifndef PULLGATE_PULLGATE_H
#define PULLGATE_PULLGATE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/* PG_VERSION_MAJOR, _MINOR, _PATCH and PG_VERSION_STRING (generated from the build). */
#include <pullgate/version.h>

/* Library version at run time ("MAJOR.MINOR.PATCH"); static storage. */
const char *pg_version(void);

/* ---------------------------------------------------------------- errors */

typedef enum pg_code {
    PG_OK = 0,
    PG_ERR_INVALID = 1,   /* malformed input: bad JSON, bad reference, bad value */
    PG_ERR_NOMEM = 2,     /* allocation failed */
    PG_ERR_IO = 3,        /* system call failed (message names it and errno) */
    PG_ERR_CORRUPT = 4,   /* a record file is not a valid record */
    PG_ERR_UNSAFE = 5,    /* symlink, hard link, wrong owner/mode, not a regular file */
    PG_ERR_LIMIT = 6,     /* input larger than a fixed bound */
    PG_ERR_NOT_FOUND = 7, /* no such record / key */
    PG_ERR_CONFIG = 8,    /* configuration invalid (message names the key) */
    PG_ERR_INTERNAL = 9,  /* a bug or an impossible state */
    PG_ERR_QUOTA = 10,    /* a namespace's fair share of a pull record is used up */
    PG_ERR_TIMEOUT = 11   /* a deadline passed before the work was done */
} pg_code;

#define PG_ERROR_MESSAGE_MAX 512

/* Caller-allocated error object. Zero-initialise (or pg_error_clear) it. */
typedef struct pg_error {
    int code;                            /* a pg_code */
    char message[PG_ERROR_MESSAGE_MAX];  /* one line, NUL-terminated */
} pg_error;

void pg_error_clear(pg_error *err);
/* Stable short name of a code, e.g. "invalid"; static storage. */
const char *pg_code_name(int code);

/* Releases memory returned by this library as `char *`. */
void pg_free(void *p);
/* Releases a NULL-terminated vector of strings returned by this library. */
void pg_strv_free(char **v);

/* ------------------------------------------------------ image references */

/*
 * A reference parsed and normalised exactly like distribution/reference's
 * ParseNormalizedNamed: "nginx:1.25" -> domain "docker.io",
 * path "library/nginx", tag "1.25".
 */
typedef struct pg_ref pg_ref;

pg_ref *pg_ref_parse(const char *image, pg_error *err);
void pg_ref_free(pg_ref *ref);
/* Accessors: owned by ref. tag/digest are NULL when absent. */
const char *pg_ref_domain(const pg_ref *ref);
const char *pg_ref_path(const pg_ref *ref);
const char *pg_ref_tag(const pg_ref *ref);
const char *pg_ref_digest(const pg_ref *ref);
/* "domain/path": the credential-mapping key (tag and digest removed). */
const char *pg_ref_name(const pg_ref *ref);
/* Full normalised string "domain/path[:tag][@digest]". */
const char *pg_ref_string(const pg_ref *ref);

/* Convenience: normalised name of `image` (no tag/digest). Caller frees. */
char *pg_image_name(const char *image, pg_error *err);

/* ----------------------------------------------------- credential hashes */

#define PG_HASH_HEX_LEN 64

/*
 * credentialHash of the kubelet: hex SHA-256 of Go's json.Marshal of
 * {"username","password","email"} with empty fields omitted.
 * `out` receives 64 hex digits and a NUL. Any argument may be NULL (= "").
 */
int pg_credential_hash(const char *username, const char *password, const char *email,
                       char out[PG_HASH_HEX_LEN + 1], pg_error *err);

/*
 * Hashes of every entry of a kubernetes.io/dockerconfigjson secret (JSON
 * text, `{"auths":{...}}` or the legacy bare map) that applies to `image`,
 * in the kubelet keyring's lookup order (most specific first).
 * *hashes_out receives a NULL-terminated vector (possibly empty); caller
 * frees it with pg_strv_free().
 */
int pg_dockerconfig_hashes(const char *json, size_t len, const char *image, char ***hashes_out,
                           pg_error *err);

/* ---------------------------------------------------------- configuration */

typedef enum pg_policy {
    PG_POLICY_NEVER_VERIFY = 0,
    PG_POLICY_NEVER_VERIFY_PRELOADED = 1, /* default */
    PG_POLICY_NEVER_VERIFY_ALLOWLISTED = 2,
    PG_POLICY_ALWAYS_VERIFY = 3
} pg_policy;

typedef enum pg_mode { PG_MODE_ENFORCE = 0, PG_MODE_AUDIT = 1 } pg_mode;

typedef enum pg_runtime {
    PG_RUNTIME_AUTO = 0,
    PG_RUNTIME_CRIO = 1,
    PG_RUNTIME_CONTAINERD = 2
} pg_runtime;

typedef struct pg_config pg_config;

/* A configuration holding the defaults of docs/interfaces.md §8. */
pg_config *pg_config_new(pg_error *err);
void pg_config_free(pg_config *cfg);

/*
 * Loads a JSON configuration file over the current values. The file must be
 * a regular file, not a symlink, at most 1 MiB. Unknown keys and invalid
 * values are PG_ERR_CONFIG errors whose message names the key.
 */
int pg_config_load_file(pg_config *cfg, const char *path, pg_error *err);
int pg_config_load_json(pg_config *cfg, const char *json, size_t len, pg_error *err);

/*
 * Sets one key by its camelCase name from a string, validated as in the file:
 *   policy, stateDir, runtime, mode, credentialsAnnotation, credentialTTL
 *   ("90s", "1h30m", Go duration syntax), recordApiVersion, dbus, logLevel,
 *   hmacKeyFile.
 * For list keys (allowlist, readOnlyRecordDirs, pinnedImages) the value is
 * appended; pg_config_clear_list() empties one first.
 */
int pg_config_set(pg_config *cfg, const char *key, const char *value, pg_error *err);
int pg_config_clear_list(pg_config *cfg, const char *key, pg_error *err);

pg_policy pg_config_policy(const pg_config *cfg);
pg_mode pg_config_mode(const pg_config *cfg);
pg_runtime pg_config_runtime(const pg_config *cfg);
const char *pg_config_state_dir(const pg_config *cfg);
const char *pg_config_annotation(const pg_config *cfg);
const char *pg_config_dbus(const pg_config *cfg);       /* system|session|none|address */
const char *pg_config_log_level(const pg_config *cfg);
const char *pg_config_record_api_version(const pg_config *cfg);
int64_t pg_config_credential_ttl(const pg_config *cfg); /* seconds; 0 = no expiry */
/* List accessors: NULL-terminated, owned by cfg. */
const char *const *pg_config_allowlist(const pg_config *cfg);
const char *const *pg_config_read_only_dirs(const pg_config *cfg);
const char *const *pg_config_pinned_images(const pg_config *cfg);
/* The configuration as canonical JSON (all keys). Caller frees. */
char *pg_config_to_json(const pg_config *cfg, pg_error *err);

/* Policy helpers (pure). */
int pg_pinned_match(const char *const *patterns, const char *image);
int pg_allowlist_validate(const char *pattern, pg_error *err);
int pg_allowlist_match(const char *const *patterns, const char *image);

/* ----------------------------------------------------------- credentials */

/* Borrowed views: the library never keeps these pointers after a call. */
typedef struct pg_secret {
    const char *namespace_;
    const char *name;
    const char *uid;
    const char *credential_hash; /* 64 lowercase hex, or NULL/"" */
} pg_secret;

typedef struct pg_service_account {
    const char *namespace_;
    const char *name;
    const char *uid;
} pg_service_account;

typedef struct pg_pull_credentials {
    const pg_secret *secrets;
    size_t n_secrets;
    const pg_service_account *service_accounts;
    size_t n_service_accounts;
    int node_pods_accessible; /* non-zero: any pod on the node may use the image */
} pg_pull_credentials;

/* ------------------------------------------------------------ the store */

typedef struct pg_store pg_store;
typedef struct pg_notifier pg_notifier;

/*
 * Opens the writable record directory (config stateDir; created 0700 with
 * pulling/ and pulled/ when missing) and the read-only ones (readOnlyRecordDirs;
 * a missing read-only directory is skipped). The store copies what it needs
 * from cfg. `notifier` may be NULL; it is borrowed and must outlive the store.
 * pulled/ is opened once here, the other subdirectories a decision reads when
 * first needed, and they are read through those descriptors from then on: a
 * host that replaces one (rather than its files) under a store without the
 * cache below must reopen the store (with it, the replacement is noticed).
 */
pg_store *pg_store_open(const pg_config *cfg, pg_notifier *notifier, pg_error *err);
/* Opens only the read-only directories: for hosts that never write. */
pg_store *pg_store_open_readonly(const pg_config *cfg, pg_error *err);
void pg_store_free(pg_store *store);
/*
 * For long-lived hosts (pullgate-cri, the webhook, a dlopen host): keeps up
 * to max_entries parsed pulled records (1 .. 2^24; at most max_bytes of record
 * files, 0 = no byte bound) in memory, least recently used evicted first. Every
 * use re-stats the file and compares its identity with what was parsed, so a
 * record replaced on disk is seen at the next decision. Also remembers ABSENT
 * files while inotify watches report nothing new (docs/design.md, "What the
 * lookups cost"). Call once, before the store is shared between threads (the
 * caches are thread-safe). PG_ERR_INVALID when already enabled or a bound is
 * out of range.
 */
int pg_store_enable_cache(pg_store *store, size_t max_entries, size_t max_bytes, pg_error *err);

/* A pull started: writes the intent (reference counted across processes). */
int pg_store_record_intent(pg_store *store, const char *image, pg_error *err);
/*
 * A pull succeeded: merges creds into the pulled record of image_ref under
 * the image's normalised name (kubelet merge rules), remembers image ->
 * image_ref, then releases one intent reference. Durable on return.
 */
int pg_store_record_pulled(pg_store *store, const char *image, const char *image_ref,
                           const pg_pull_credentials *creds, pg_error *err);
/* A pull failed: releases one intent reference. */
int pg_store_record_failed(pg_store *store, const char *image, pg_error *err);

/*
 * Indexes further spellings of one pulled image's identity to image_ref in the
 * writable directory: the repo tags, repo digests and image ID (with or
 * without "sha256:") that the runtime reports for it (CRI ImageStatus), so a
 * later lookup under any spelling the runtime shows at container creation
 * finds the record of image_ref. aliases is NULL-terminated; each must be a
 * well-formed image ID or image reference (PG_ERR_INVALID otherwise, nothing
 * written). Durable on return.
 */
int pg_store_record_aliases(pg_store *store, const char *image_ref, const char *const *aliases,
                            pg_error *err);

/*
 * pg_store_record_pulled and pg_store_record_aliases in one write: the
 * aliases' index entries become durable in the same round as the record and
 * its own index entries, before the intent is released (5 rounds of fsyncs
 * per pull with the intent's 2, instead of 7 with a separate
 * pg_store_record_aliases). aliases: as for pg_store_record_aliases (may be
 * NULL). Every alias is validated first: an invalid one fails the call
 * (PG_ERR_INVALID, naming it) before anything is written, the intent stays,
 * and the caller may record the pull without them (pg_store_record_pulled).
 */
int pg_store_record_pulled_aliases(pg_store *store, const char *image, const char *image_ref,
                                   const pg_pull_credentials *creds, const char *const *aliases,
                                   pg_error *err);

/*
 * Resolves an image name to the imageRef last recorded for it (used where the
 * runtime does not name the image ID, i.e. containerd). Caller frees *ref_out.
 * PG_ERR_NOT_FOUND when nothing was recorded.
 */
int pg_store_resolve_image(const pg_store *store, const char *image, char **ref_out, pg_error *err);

/* A parsed pulled record. */
typedef struct pg_record pg_record;

/* Reads the pulled record of image_ref from the first directory that has one
 * (writable first). PG_ERR_NOT_FOUND when none. Caller frees with pg_record_free. */
int pg_store_get(const pg_store *store, const char *image_ref, pg_record **out, pg_error *err);
void pg_record_free(pg_record *rec);
const char *pg_record_image_ref(const pg_record *rec);
const char *pg_record_api_version(const pg_record *rec);
const char *pg_record_dir(const pg_record *rec); /* the record directory it came from */
time_t pg_record_last_updated(const pg_record *rec);
/* The record as kubelet JSON. Caller frees. */
char *pg_record_to_json(const pg_record *rec, pg_error *err);

/* Calls cb for each valid pulled record of every directory; a file that is
 * not a valid record is reported to bad_cb (may be NULL) and skipped.
 * A non-zero return from cb stops the walk and is returned. */
typedef int (*pg_record_cb)(const pg_record *rec, void *ud);
typedef void (*pg_bad_record_cb)(const char *path, const pg_error *why, void *ud);
int pg_store_list(const pg_store *store, pg_record_cb cb, pg_bad_record_cb bad_cb, void *ud,
                  pg_error *err);

/* Deletes the pulled record of image_ref from the writable directory. */
int pg_store_delete(pg_store *store, const char *image_ref, pg_error *err);

/*
 * Deletes from the writable directory every pulled record whose imageRef is
 * not in in_use (NULL-terminated, may be NULL) and whose lastUpdatedTime is
 * before `before` (0 = any time), except records of pinned images
 * (cfg pinnedImages match any mapped name). *pruned_out gets the count.
 * What only the deleted records justified goes too (the image-index entries
 * naming them: a pruned image no longer counts as pulled). The store lock is
 * taken only in short steps; call it from a thread that pulls do not wait on
 * (docs/design.md, "Prune").
 */
int pg_store_prune(pg_store *store, const char *const *in_use, time_t before, unsigned *pruned_out,
                   pg_error *err);

/* ---------------------------------------------------------- the decision */

typedef enum pg_reason {
    /* allow */
    PG_REASON_NEVER_VERIFY = 1,
    PG_REASON_PINNED = 2,
    PG_REASON_PRELOADED = 3,
    PG_REASON_ALLOWLISTED = 4,
    PG_REASON_NODE_ACCESSIBLE = 5,
    PG_REASON_SECRET_MATCH = 6,
    PG_REASON_SERVICE_ACCOUNT_MATCH = 7,
    PG_REASON_SANDBOX = 8,
    PG_REASON_POD_PULLED = 9, /* the pod itself pulled it (pullgate-cri's pod binding) */
    /* deny */
    PG_REASON_NO_IMAGE_REF = 20,
    PG_REASON_NO_RECORD = 21,
    PG_REASON_NO_MAPPING = 22,
    PG_REASON_NO_CREDENTIALS = 23,
    PG_REASON_CREDENTIALS_MISMATCH = 24,
    PG_REASON_EXPIRED = 25,
    PG_REASON_BAD_ANNOTATION = 26,
    PG_REASON_STORE_ERROR = 27,
    PG_REASON_BAD_REQUEST = 28,
    PG_REASON_CONFIG_ERROR = 29,
    PG_REASON_ANNOTATION_SIGNATURE = 30
} pg_reason;

/* Stable machine-readable name, e.g. "secret-match"; static storage. */
const char *pg_reason_name(int reason);

typedef struct pg_request {
    const char *image;       /* the image as the runtime names it */
    const char *image_ref;   /* the image ID / imageRef; NULL or "" when unknown */
    const char *namespace_;  /* the pod's namespace */
    const char *credentials; /* the credentials annotation value (JSON) or NULL */
} pg_request;

#define PG_REASON_TEXT_MAX 512

typedef struct pg_decision {
    int allow;                       /* 1 allow, 0 deny */
    int reason;                      /* a pg_reason */
    char text[PG_REASON_TEXT_MAX];   /* one-line human reason */
} pg_decision;

/*
 * docs/interfaces.md §5. Always fills *out; never fails open: any error (bad request,
 * bad annotation, unreadable record) is a deny whose text carries the error.
 * Returns out->allow.
 */
int pg_decide(const pg_config *cfg, const pg_store *store, const pg_request *req,
              pg_decision *out);

/*
 * pg_decide over every spelling of the image's identity (docs/design.md,
 * "Image identity"). Besides req->image and req->image_ref:
 *  - aliases: further identities the caller trusts (set by the runtime, not
 *    the pod; e.g. CRI-O's io.kubernetes.cri-o.Image, the kubelet's imageRef):
 *    records found under them may authorise;
 *  - hints: identities a pod could have injected (e.g. repo digests from a pod
 *    annotation): they only add evidence that the image was pulled (a record,
 *    intent or index entry under a hint keeps the image verified), never a
 *    record that authorises.
 * Both are NULL-terminated lists of image IDs ("sha256:<64 hex>" or the 64 hex)
 * or image references, and may be NULL. Any identity that is neither denies
 * (PG_REASON_BAD_REQUEST). pg_decide() is this function with no aliases or hints.
 */
int pg_decide_identity(const pg_config *cfg, const pg_store *store, const pg_request *req,
                       const char *const *aliases, const char *const *hints, pg_decision *out);

/* ------------------------------------------------------------- notifier */

/*
 * D-Bus notifier (interface dev.pullgate.PullGate1, path
 * /dev/pullgate/PullGate1). `bus` is "system", "session", "none" or a D-Bus
 * address. Connecting and every send is bounded by timeout_ms in total per
 * call; failures are recorded, never reported as errors of the caller's
 * operation. pg_notifier_new() never fails except for PG_ERR_NOMEM / a bad
 * argument; an unreachable bus yields a notifier that drops signals, and
 * reconnects after a back-off (docs/dbus.md).
 */
pg_notifier *pg_notifier_new(const char *bus, int timeout_ms, pg_error *err);
void pg_notifier_free(pg_notifier *n);
/* Most recent delivery error (kept after a later reconnect), or NULL; owned
 * by n and valid until pg_notifier_free(), even while other threads emit. */
const char *pg_notifier_last_error(const pg_notifier *n);

void pg_notify_pull_intent(pg_notifier *n, const char *image);
void pg_notify_image_pulled(pg_notifier *n, const char *image, const char *image_ref,
                            const char *credential_kind);
void pg_notify_pull_failed(pg_notifier *n, const char *image);
void pg_notify_container(pg_notifier *n, int allowed, const char *container_id,
                         const char *namespace_, const char *image, const char *image_ref,
                         const char *reason);
void pg_notify_records_pruned(pg_notifier *n, uint32_t count);

/* ------------------------------------------------ loadable module entry */

/*
 * For hosts that dlopen("libpullgate.so.1") instead of linking:
 *   const pg_module_v2 *(*get)(uint32_t) = dlsym(h, PG_MODULE_SYMBOL);
 *   const pg_module_v2 *m = get(PG_MODULE_ABI_V2);
 * The table has static storage. A host must check m->abi equals the ABI it
 * asked for and m->size >= the size it was compiled with (or, for a member
 * appended later, the offset of that member plus its size); later minor
 * versions only append members. An unknown ABI gives NULL.
 *
 * One ABI, 2 (minor numbers: 2.0 up to notify_container, 2.1 store_enable_cache,
 * 2.2 decide_identity). ABI 1 (the v2 table's first ten functions) was removed in
 * release 1.1.0: asking for it gives NULL; its members are in the v2 table.
 */
#define PG_MODULE_SYMBOL "pg_module_get"
#define PG_MODULE_ABI_V2 2u

typedef struct pg_module_v2 {
    uint32_t abi;
    uint32_t size;
    /* --- 2.0: the configuration, the store, recording a pull and the decision */
    const char *(*version)(void);
    pg_config *(*config_new)(pg_error *err);
    int (*config_load_file)(pg_config *cfg, const char *path, pg_error *err);
    int (*config_set)(pg_config *cfg, const char *key, const char *value, pg_error *err);
    void (*config_free)(pg_config *cfg);
    pg_store *(*store_open)(const pg_config *cfg, pg_notifier *n, pg_error *err);
    void (*store_free)(pg_store *store);
    int (*decide)(const pg_config *cfg, const pg_store *store, const pg_request *req,
                  pg_decision *out);
    int (*record_pulled)(pg_store *store, const char *image, const char *image_ref,
                         const pg_pull_credentials *creds, pg_error *err);
    int (*credential_hash)(const char *username, const char *password, const char *email,
                           char out[PG_HASH_HEX_LEN + 1], pg_error *err);
    /* --- errors and releasing what the library returns */
    void (*error_clear)(pg_error *err);
    const char *(*code_name)(int code);
    void (*mem_free)(void *p); /* pg_free */
    void (*strv_free)(char **v);
    /* --- image references and credentials */
    char *(*image_name)(const char *image, pg_error *err);
    int (*dockerconfig_hashes)(const char *json, size_t len, const char *image,
                               char ***hashes_out, pg_error *err);
    /* --- configuration */
    int (*config_load_json)(pg_config *cfg, const char *json, size_t len, pg_error *err);
    int (*config_clear_list)(pg_config *cfg, const char *key, pg_error *err);
    char *(*config_to_json)(const pg_config *cfg, pg_error *err);
    pg_policy (*config_policy)(const pg_config *cfg);
    pg_mode (*config_mode)(const pg_config *cfg);
    const char *(*config_state_dir)(const pg_config *cfg);
    const char *(*config_annotation)(const pg_config *cfg);
    const char *(*config_dbus)(const pg_config *cfg);
    int (*allowlist_validate)(const char *pattern, pg_error *err);
    /* --- the store and its records */
    pg_store *(*store_open_readonly)(const pg_config *cfg, pg_error *err);
    int (*record_intent)(pg_store *store, const char *image, pg_error *err);
    int (*record_failed)(pg_store *store, const char *image, pg_error *err);
    int (*record_aliases)(pg_store *store, const char *image_ref, const char *const *aliases,
                          pg_error *err);
    int (*resolve_image)(const pg_store *store, const char *image, char **ref_out,
                         pg_error *err);
    int (*store_get)(const pg_store *store, const char *image_ref, pg_record **out,
                     pg_error *err);
    void (*record_free)(pg_record *rec);
    const char *(*record_image_ref)(const pg_record *rec);
    time_t (*record_last_updated)(const pg_record *rec);
    char *(*record_to_json)(const pg_record *rec, pg_error *err);
    int (*store_list)(const pg_store *store, pg_record_cb cb, pg_bad_record_cb bad_cb, void *ud,
                      pg_error *err);
    int (*store_delete)(pg_store *store, const char *image_ref, pg_error *err);
    int (*store_prune)(pg_store *store, const char *const *in_use, time_t before,
                       unsigned *pruned_out, pg_error *err);
    /* --- the decision */
    const char *(*reason_name)(int reason);
    /* --- the D-Bus notifier */
    pg_notifier *(*notifier_new)(const char *bus, int timeout_ms, pg_error *err);
    void (*notifier_free)(pg_notifier *n);
    const char *(*notifier_last_error)(const pg_notifier *n);
    void (*notify_container)(pg_notifier *n, int allowed, const char *container_id,
                             const char *namespace_, const char *image, const char *image_ref,
                             const char *reason);
    /* --- 2.1, appended: check size >= offsetof(pg_module_v2, store_enable_cache) + sizeof(void *) */
    int (*store_enable_cache)(pg_store *store, size_t max_entries, size_t max_bytes,
                              pg_error *err);
    /* --- 2.2, appended: check size >= offsetof(pg_module_v2, decide_identity) + sizeof(void *) */
    int (*decide_identity)(const pg_config *cfg, const pg_store *store, const pg_request *req,
                           const char *const *aliases, const char *const *hints,
                           pg_decision *out);
} pg_module_v2;

/* Hosts written against release 1.0.0's header wrap pg_module_get's result in it. */
#define PG_MODULE_V2(table) ((const pg_module_v2 *)(const void *)(table))

/* The table of ABI `abi` (PG_MODULE_ABI_V2), or NULL. */
const pg_module_v2 *pg_module_get(uint32_t abi);

#ifdef __cplusplus
}
#endif
#endif
