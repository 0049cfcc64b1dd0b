/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration (docs/interfaces.md §8): defaults, strict JSON loading, per-key setters,
 * getters and canonical JSON output.
 *
 * Every value is validated before it is stored, and a file is applied to a
 * copy that replaces the live configuration only when every key was valid,
 * so a rejected file never leaves a half-applied configuration behind.
 */
#include "cleanup.h"
#include "engine_testing.h" /* pg_config_key_at */
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every member is one key of the table below (keys[]), which frees, copies and prints them. */
struct pg_config {
    int policy, mode, runtime; /* pg_policy, pg_mode, pg_runtime: indexes of their names */
    int log_level;             /* index of log_levels[] */
    int record_api_version;    /* index of api_versions[] */
    int64_t credential_ttl;
    char *state_dir;
    char *annotation;
    char *dbus;
    char *hmac_key_file;
    char *cri_listen;           /* pullgate-cri: unix:// endpoint it serves */
    char *cri_runtime;          /* pullgate-cri: unix:// endpoint of the runtime */
    int64_t cri_prune_interval; /* pullgate-cri: seconds between its prunes, 0 = never */
    bool cri_verify_pulls;      /* pullgate-cri: answer "not present" to unverified pods */
    char *cri_metrics_listen;   /* pullgate-cri: ADDR:PORT of GET /metrics, "none" = off */
    /* pullgate-cri's memory bounds: parsed records kept, their bytes (MiB), absences kept. */
    int64_t cri_record_cache_entries;
    int64_t cri_record_cache_mib;
    int64_t cri_absence_cache_entries;
    pg_strv allowlist;
    pg_strv read_only_dirs;
    pg_strv pinned_images;
    pg_strv node_credential_files; /* pullgate-cri: the node's own docker config files */
};

static const char *const policy_names[] = {"NeverVerify", "NeverVerifyPreloadedImages",
                                           "NeverVerifyAllowlistedImages", "AlwaysVerify", NULL};
static const char *const mode_names[] = {"enforce", "audit", NULL};
static const char *const runtime_names[] = {"auto", "cri-o", "containerd", NULL};
static const char *const log_levels[] = {"error", "warning", "info", "debug", NULL};
static const char *const api_versions[] = {PG_API_V1ALPHA1, PG_API_V1BETA1, NULL};
/*
 * Where the kubelet looks for the node's own registry credentials
 * (kubernetes pkg/credentialprovider/config.go, DefaultDockerConfigJSONPaths
 * and DefaultDockercfgPaths: its --root-dir, its working directory, $HOME and
 * /, config.json under .docker/ except in the root dir): pullgate-cri's
 * default nodeCredentialFiles, for the usual kubelet (root dir
 * /var/lib/kubelet, working directory /, HOME /root or unset).
 */
static const char *const kubelet_docker_config_paths[] = {"/var/lib/kubelet/config.json",
                                                          "/config.json",
                                                          "/root/.docker/config.json",
                                                          "/.docker/config.json",
                                                          "/var/lib/kubelet/.dockercfg",
                                                          "/.dockercfg",
                                                          "/root/.dockercfg",
                                                          NULL};

/* ------------------------------------------------------------ string lists */

static int strv_copy(pg_strv *dst, const pg_strv *src, pg_error *err)
{
    int rc = pg_strv_ensure(dst, err);
    for (size_t i = 0; rc == PG_OK && i < src->n; i++)
        rc = pg_strv_push(dst, src->v[i], err);
    return rc;
}

/* Replaces *slot with a copy of s (NULL-safe on failure: *slot unchanged). */
static int replace_string(char **slot, const char *s, pg_error *err)
{
    char *copy = pg_strdup(s);
    if (!copy)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    free(*slot);
    *slot = copy;
    return PG_OK;
}

/* -------------------------------------------------------------- validation */

/* Keys are echoed into messages bounded, so a hostile value cannot flood them. */
static int bad_value(pg_error *err, const char *key, const char *value, const char *expected)
{
    return pg_fail(err, PG_ERR_CONFIG, "config: key \"%s\": invalid value \"%.128s\" (%s)", key,
                   value, expected);
}

static int enum_index(const char *const *names, const char *value)
{
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], value) == 0)
            return i;
    return -1;
}

static int parse_enum(const char *const *names, const char *key, const char *value, int *out,
                      pg_error *err)
{
    int i = enum_index(names, value);
    *out = i < 0 ? 0 : i; /* defined on every path, so callers never read garbage */
    if (i >= 0) {
        return PG_OK;
    }
    char expected[256] = "expected one of";
    for (int j = 0; names[j]; j++) {
        size_t used = strlen(expected);
        snprintf(expected + used, sizeof expected - used, "%s%s", j ? ", " : " ", names[j]);
    }
    return bad_value(err, key, value, expected);
}

static bool has_control_char(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return true;
    return false;
}

static int check_absolute_path(const char *key, const char *value, pg_error *err)
{
    if (value[0] != '/' || strlen(value) >= PATH_MAX || has_control_char(value))
        return bad_value(err, key, value, "expected an absolute path");
    return PG_OK;
}

static bool is_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* Kubernetes qualified-name part: [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 chars. */
static bool valid_annotation_name(const char *s, size_t len)
{
    if (len == 0 || len > 63 || !is_alnum(s[0]) || !is_alnum(s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

/* DNS-1123 subdomain: lowercase labels of [a-z0-9-] starting and ending alnum, at most 253 chars. */
static bool valid_dns_subdomain(const char *s, size_t len)
{
    if (len == 0 || len > 253)
        return false;
    size_t label = 0;
    for (size_t i = 0; i <= len; i++) {
        char c = i < len ? s[i] : '.';
        if (c == '.') {
            if (label == 0 || s[i - 1] == '-' || s[i - label] == '-' || label > 63)
                return false;
            label = 0;
        } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') {
            label++;
        } else {
            return false;
        }
    }
    return true;
}

static int check_annotation_key(const char *key, const char *value, pg_error *err)
{
    const char *slash = strchr(value, '/');
    bool ok = slash ? valid_dns_subdomain(value, (size_t)(slash - value)) &&
                          valid_annotation_name(slash + 1, strlen(slash + 1))
                    : valid_annotation_name(value, strlen(value));
    if (!ok)
        return bad_value(err, key, value,
                         "expected a Kubernetes annotation key: [DNS subdomain/]name, name at most "
                         "63 characters of [A-Za-z0-9._-] starting and ending alphanumeric");
    return PG_OK;
}

static int check_dbus(const char *key, const char *value, pg_error *err)
{
    if (enum_index((const char *const[]){"system", "session", "none", NULL}, value) >= 0)
        return PG_OK;
    /* A D-Bus address is "transport:key=value,..."; libdbus validates the rest when connecting. */
    if (strchr(value, ':') && value[0] != ':' && !has_control_char(value))
        return PG_OK;
    return bad_value(err, key, value, "expected system, session, none or a D-Bus address");
}

static int check_pinned_pattern(const char *key, const char *value, pg_error *err)
{
    size_t len = strlen(value);
    size_t core_start = value[0] == '*' ? 1 : 0;
    size_t core_end = len > 0 && value[len - 1] == '*' ? len - 1 : len;
    /* CRI-O patterns: exact, "prefix*" or "*keyword*"; a leading '*' needs a trailing one. */
    bool ok = len > 0 && !has_control_char(value) && !strchr(value, ' ') && core_end > core_start &&
              !(core_start == 1 && core_end == len);
    for (size_t i = core_start; ok && i < core_end; i++)
        if (value[i] == '*')
            ok = false;
    if (!ok)
        return bad_value(err, key, value,
                         "expected an image, \"prefix*\" or \"*keyword*\" (CRI-O pinned image "
                         "pattern)");
    return PG_OK;
}

static int check_allowlist_pattern(const char *key, const char *value, pg_error *err)
{
    pg_error why = {0};
    if (pg_allowlist_validate(value, &why) != PG_OK)
        return bad_value(err, key, value, why.message);
    return PG_OK;
}

/* A gRPC unix socket endpoint "unix:///absolute/path" (the kubelet's spelling);
 * the path must fit a sockaddr_un. */
static int check_unix_endpoint(const char *key, const char *value, pg_error *err)
{
    static const char prefix[] = "unix://";
    const char *path = value + sizeof prefix - 1;
    if (strncmp(value, prefix, sizeof prefix - 1) != 0 || path[0] != '/' || strlen(path) > 107 ||
        has_control_char(value))
        return bad_value(err, key, value,
                         "expected unix:///absolute/path, the path at most 107 bytes");
    return PG_OK;
}

/* "IPv4:PORT" or "[IPv6]:PORT", literal addresses only (no name resolution at start);
 * "none" turns the listener off ("" stands for it: keys[]). */
static int check_metrics_listen(const char *key, const char *value, pg_error *err)
{
    if (strcmp(value, "none") == 0)
        return PG_OK;
    const char *colon = strrchr(value, ':');
    char host[64], probe[16];
    size_t hlen = colon ? (size_t)(colon - value) : 0;
    int ok = colon && hlen > 0 && hlen < sizeof host && !has_control_char(value);
    if (ok) {
        memcpy(host, value, hlen);
        host[hlen] = '\0';
        if (host[0] == '[' && host[hlen - 1] == ']') {
            host[hlen - 1] = '\0';
            ok = inet_pton(AF_INET6, host + 1, probe) == 1;
        } else
            ok = inet_pton(AF_INET, host, probe) == 1;
    }
    char *end = NULL;
    long port = ok && colon[1] >= '0' && colon[1] <= '9' ? strtol(colon + 1, &end, 10) : 0;
    if (!ok || !end || *end || port < 1 || port > 65535)
        return bad_value(err, key, value,
                         "expected IPv4:PORT or [IPv6]:PORT (a literal address), or none");
    return PG_OK;
}

/* A whole number in [min, max]: a JSON integer in a file, its decimal digits through
 * pg_config_set. */
static int parse_count(const char *key, const char *value, int64_t min, int64_t max, int64_t *out,
                       pg_error *err)
{
    char expected[96];
    snprintf(expected, sizeof expected, "expected a whole number from %" PRId64 " to %" PRId64, min,
             max);
    char *end = NULL;
    errno = 0;
    long long v = value[0] >= '0' && value[0] <= '9' ? strtoll(value, &end, 10) : -1;
    if (!end || *end || errno || v < min || v > max)
        return bad_value(err, key, value, expected);
    *out = v;
    return PG_OK;
}

/* ----------------------------------------------------------------- the keys */

/* ENUM: one of names (an int member); TEXT: a checked string; DURATION: a Go duration in
 * whole seconds; BOOL: true/false; LIST: checked strings; INT: a whole number in [min, max]. */
typedef enum key_kind { KEY_ENUM, KEY_TEXT, KEY_DURATION, KEY_BOOL, KEY_LIST, KEY_INT } key_kind;

typedef int (*value_check)(const char *key, const char *value, pg_error *err);

/*
 * `since` is the rollback registry (docs/lifecycle.md, "Roll back"): the release that first
 * reads the key. Every release refuses a key it does not know, so a downgrade moves the keys
 * newer than its target out of the file first (pullgate-config-rollback, run by the package);
 * a key added without its release here fails test_config (every_key_is_registered).
 */
typedef struct key_spec {
    const char *name;
    key_kind kind;
    size_t offset;            /* the member of pg_config */
    const char *since;        /* the first release that reads it */
    const char *initial;      /* the default (a LIST: its one item), set by pg_config_new */
    value_check check;        /* TEXT, LIST */
    const char *empty;        /* TEXT: what "" stands for, unchecked (NULL: "" is checked) */
    const char *const *names; /* ENUM */
    int64_t min, max;         /* INT: the bounds; DURATION: min is the least positive value */
    const char *too_small;    /* DURATION: why a positive value below min is refused */
} key_spec;

#define STR_(x) #x
#define STR(x) STR_(x)
#define AT(member) offsetof(pg_config, member)

/* In the order of docs/interfaces.md §8, which pg_config_to_json keeps. */
static const key_spec keys[] = {
    {"policy", KEY_ENUM, AT(policy), "1.0.0", "NeverVerifyPreloadedImages", .names = policy_names},
    {"allowlist", KEY_LIST, AT(allowlist), "1.0.0", NULL, .check = check_allowlist_pattern},
    {"stateDir", KEY_TEXT, AT(state_dir), "1.0.0", PG_DEFAULT_STATE_DIR,
     .check = check_absolute_path},
    {"readOnlyRecordDirs", KEY_LIST, AT(read_only_dirs), "1.0.0", "/var/lib/kubelet/image_manager",
     .check = check_absolute_path},
    {"runtime", KEY_ENUM, AT(runtime), "1.0.0", "auto", .names = runtime_names},
    {"mode", KEY_ENUM, AT(mode), "1.0.0", "enforce", .names = mode_names},
    {"credentialsAnnotation", KEY_TEXT, AT(annotation), "1.0.0", "pullgate.dev/credentials",
     .check = check_annotation_key},
    /* A positive TTL below one second would round to 0 = "never expires": refused rather
     * than silently disabling expiry. */
    {"credentialTTL", KEY_DURATION, AT(credential_ttl), "1.0.0", "0s", .min = 1,
     .too_small = "a positive TTL must be at least 1s"},
    {"pinnedImages", KEY_LIST, AT(pinned_images), "1.0.0", NULL, .check = check_pinned_pattern},
    {"recordApiVersion", KEY_ENUM, AT(record_api_version), "1.0.0", PG_API_V1ALPHA1,
     .names = api_versions},
    {"dbus", KEY_TEXT, AT(dbus), "1.0.0", "system", .check = check_dbus},
    {"logLevel", KEY_ENUM, AT(log_level), "1.0.0", "info", .names = log_levels},
    /* "" turns namespace-bound annotations off; otherwise the key file's absolute path. */
    {"hmacKeyFile", KEY_TEXT, AT(hmac_key_file), "1.0.0", "", .check = check_absolute_path,
     .empty = ""},
    {"criListen", KEY_TEXT, AT(cri_listen), "1.0.0", "unix:///run/pullgate/cri.sock",
     .check = check_unix_endpoint},
    {"criRuntimeEndpoint", KEY_TEXT, AT(cri_runtime), "1.0.0",
     "unix:///run/containerd/containerd.sock", .check = check_unix_endpoint},
    /* "0s" turns pullgate-cri's own prune off. */
    {"criPruneInterval", KEY_DURATION, AT(cri_prune_interval), "1.0.0", "1h", .min = 60,
     .too_small = "at least 1m, or 0s for never"},
    {"criVerifyPulls", KEY_BOOL, AT(cri_verify_pulls), "1.0.0", .initial = "true"},
    {"criMetricsListen", KEY_TEXT, AT(cri_metrics_listen), "1.0.0", PG_DEFAULT_CRI_METRICS_LISTEN,
     .check = check_metrics_listen, .empty = "none"},
    {"nodeCredentialFiles", KEY_LIST, AT(node_credential_files), "1.0.0", NULL,
     .check = check_absolute_path},
    /* The record cache's and the absence cache's bounds (docs/kubelet-setup.md, "Sizing"). */
    {"criRecordCacheEntries", KEY_INT, AT(cri_record_cache_entries), "1.1.0",
     STR(PG_DEFAULT_CRI_RECORD_CACHE_ENTRIES), .min = 1, .max = 1 << 24},
    {"criRecordCacheMiB", KEY_INT, AT(cri_record_cache_mib), "1.1.0",
     STR(PG_DEFAULT_CRI_RECORD_CACHE_MIB), .min = 1, .max = 65536},
    {"criAbsenceCacheEntries", KEY_INT, AT(cri_absence_cache_entries), "1.1.0",
     STR(PG_DEFAULT_CRI_ABSENCE_CACHE_ENTRIES), .min = 1024, .max = 1 << 24},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

static void *member(const pg_config *cfg, const key_spec *k) { return (char *)cfg + k->offset; }

static int set_duration(const key_spec *k, const char *value, int64_t *out, pg_error *err)
{
    pg_error why = {0};
    int64_t seconds = 0;
    if (pg_parse_duration(value, &seconds, &why) != PG_OK)
        return bad_value(err, k->name, value, why.message);
    if ((seconds > 0 && seconds < k->min) || (seconds == 0 && strpbrk(value, "123456789")))
        return bad_value(err, k->name, value, k->too_small);
    *out = seconds;
    return PG_OK;
}

/* One value of key k (a LIST: one more item), as text; cfg is unchanged when it is refused. */
static int set_value(pg_config *cfg, const key_spec *k, const char *value, pg_error *err)
{
    void *at = member(cfg, k);
    int rc = PG_OK, i;
    switch (k->kind) {
    case KEY_ENUM:
        rc = parse_enum(k->names, k->name, value, &i, err);
        if (rc == PG_OK)
            *(int *)at = i;
        return rc;
    case KEY_TEXT:
        if (!*value && k->empty)
            return replace_string(at, k->empty, err);
        rc = k->check(k->name, value, err);
        return rc == PG_OK ? replace_string(at, value, err) : rc;
    case KEY_LIST:
        rc = k->check(k->name, value, err);
        return rc == PG_OK ? pg_strv_push(at, value, err) : rc;
    case KEY_DURATION: return set_duration(k, value, at, err);
    case KEY_BOOL:
        /* JSON true/false in a file, "true"/"false" through pg_config_set. */
        if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
            return bad_value(err, k->name, value, "expected true or false");
        *(bool *)at = strcmp(value, "true") == 0;
        return PG_OK;
    case KEY_INT: return parse_count(k->name, value, k->min, k->max, at, err);
    }
    return PG_OK;
}

/* --------------------------------------------------------------- lifecycle */

PG_API void pg_config_free(pg_config *cfg)
{
    for (size_t i = 0; cfg && i < N_KEYS; i++) {
        if (keys[i].kind == KEY_TEXT)
            free(*(char **)member(cfg, &keys[i]));
        else if (keys[i].kind == KEY_LIST)
            pg_strv_clear(member(cfg, &keys[i]));
    }
    free(cfg);
}

/* A configuration released when its block is left (cleanup.h). */
static void cleanup_config(pg_config **cfg) { pg_config_free(*cfg); }
#define pg_autoconfig __attribute__((cleanup(cleanup_config)))

PG_API pg_config *pg_config_new(pg_error *err)
{
    pg_autoconfig pg_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    /* Lists stay non-NULL (an empty vector at least) so getters can hand v out directly. */
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < N_KEYS; i++) {
        if (keys[i].kind == KEY_LIST)
            rc = pg_strv_ensure(member(cfg, &keys[i]), err);
        if (rc == PG_OK && keys[i].initial)
            rc = set_value(cfg, &keys[i], keys[i].initial, err);
    }
    for (size_t i = 0; rc == PG_OK && kubelet_docker_config_paths[i]; i++)
        rc = pg_strv_push(&cfg->node_credential_files, kubelet_docker_config_paths[i], err);
    return rc == PG_OK ? pg_steal(&cfg) : NULL;
}

static pg_config *config_clone(const pg_config *src, pg_error *err)
{
    pg_autoconfig pg_config *c = malloc(sizeof *c);
    if (!c) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    *c = *src; /* the scalars; the strings and lists are copied next */
    for (size_t i = 0; i < N_KEYS; i++)
        if (keys[i].kind == KEY_TEXT)
            *(char **)member(c, &keys[i]) = NULL;
        else if (keys[i].kind == KEY_LIST)
            *(pg_strv *)member(c, &keys[i]) = (pg_strv){0};
    int rc = PG_OK;
    for (size_t i = 0; rc == PG_OK && i < N_KEYS; i++)
        if (keys[i].kind == KEY_TEXT)
            rc = replace_string(member(c, &keys[i]), *(char **)member(src, &keys[i]), err);
        else if (keys[i].kind == KEY_LIST)
            rc = strv_copy(member(c, &keys[i]), member(src, &keys[i]), err);
    return rc == PG_OK ? pg_steal(&c) : NULL;
}

/* Moves the contents of *from into *to and frees the emptied shell of from. */
static void config_take(pg_config *to, pg_config *from)
{
    pg_config old = *to;
    *to = *from;
    *from = old;
    pg_config_free(from);
}

static const key_spec *find_key(const char *name)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

const char *pg_config_key_since(const char *name)
{
    const key_spec *k = name ? find_key(name) : NULL;
    return k ? k->since : NULL;
}

const char *pg_config_key_at(size_t i) { return i < N_KEYS ? keys[i].name : NULL; }

/* MAJOR.MINOR.PATCH of a release or package version ("1.0.0", "1.0.0-1", "1.1.0~rc1-1"). */
static int parse_release(const char *v, unsigned long out[3], pg_error *err)
{
    const char *p = v ? v : "";
    for (int i = 0; i < 3; i++) {
        char *end = NULL;
        if (*p < '0' || *p > '9')
            break;
        out[i] = strtoul(p, &end, 10);
        p = end;
        if (i < 2 && *p == '.')
            p++;
        else if (i < 2)
            break;
        else if (*p == '\0' || *p == '-' || *p == '~' || *p == '+')
            return PG_OK;
    }
    return pg_fail(err, PG_ERR_INVALID, "\"%.64s\" is not a release version (MAJOR.MINOR.PATCH)",
                   v ? v : "");
}

int pg_release_compare(const char *a, const char *b, int *cmp, pg_error *err)
{
    unsigned long va[3] = {0}, vb[3] = {0};
    int rc = parse_release(a, va, err);
    if (rc == PG_OK)
        rc = parse_release(b, vb, err);
    if (rc != PG_OK)
        return rc;
    *cmp = 0;
    for (int i = 0; i < 3 && *cmp == 0; i++)
        *cmp = va[i] < vb[i] ? -1 : va[i] > vb[i];
    return PG_OK;
}

static int unknown_key(pg_error *err, const char *key)
{
    return pg_fail(err, PG_ERR_CONFIG, "config: unknown key \"%.128s\"", key);
}

PG_API int pg_config_set(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    if (!cfg || !key || !value)
        return pg_fail(err, PG_ERR_INVALID, "pg_config_set: NULL argument");
    const key_spec *k = find_key(key);
    if (!k)
        return unknown_key(err, key);
    /* Values from a file are UTF-8 by construction; keep pg_config_to_json total. */
    pg_autojson json_t *probe = json_string(value);
    if (!probe)
        return bad_value(err, key, "(not UTF-8)", "expected UTF-8 text");
    return set_value(cfg, k, value, err);
}

PG_API int pg_config_clear_list(pg_config *cfg, const char *key, pg_error *err)
{
    if (!cfg || !key)
        return pg_fail(err, PG_ERR_INVALID, "pg_config_clear_list: NULL argument");
    const key_spec *k = find_key(key);
    if (!k)
        return unknown_key(err, key);
    if (k->kind != KEY_LIST)
        return pg_fail(err, PG_ERR_CONFIG, "config: key \"%s\" is not a list", key);
    pg_strv_clear(member(cfg, k));
    return pg_strv_ensure(member(cfg, k), err);
}

/* ----------------------------------------------------------------- loading */

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static int wrong_type(pg_error *err, const char *key, const json_t *v, const char *expected)
{
    return pg_fail(err, PG_ERR_CONFIG, "config: key \"%s\": expected %s, got %s", key, expected,
                   json_type_name(v));
}

/* json_string_value stops at an embedded NUL; refuse such strings instead of truncating. */
static bool is_plain_string(const json_t *v)
{
    return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

/* A list in a file replaces the current list (unlike pg_config_set, which appends). */
static int load_list(pg_config *cfg, const key_spec *k, const json_t *arr, pg_error *err)
{
    if (!json_is_array(arr))
        return wrong_type(err, k->name, arr, "an array of strings");
    pg_strv *l = member(cfg, k);
    pg_strv_clear(l);
    int rc = pg_strv_ensure(l, err);
    size_t i = 0;
    json_t *item;
    json_array_foreach(arr, i, item)
    {
        if (rc != PG_OK)
            break;
        if (!is_plain_string(item))
            return pg_fail(err, PG_ERR_CONFIG, "config: key \"%s\": item %zu: expected a string",
                           k->name, i);
        rc = set_value(cfg, k, json_string_value(item), err);
    }
    return rc;
}

static int load_one(pg_config *cfg, const char *name, const json_t *v, pg_error *err)
{
    const key_spec *k = find_key(name);
    if (!k)
        return unknown_key(err, name);
    if (k->kind == KEY_LIST)
        return load_list(cfg, k, v, err);
    if (k->kind == KEY_BOOL) {
        if (!json_is_boolean(v))
            return wrong_type(err, k->name, v, "a boolean");
        return set_value(cfg, k, json_is_true(v) ? "true" : "false", err);
    }
    if (k->kind == KEY_INT) {
        if (!json_is_integer(v))
            return wrong_type(err, k->name, v, "a whole number");
        char digits[32];
        snprintf(digits, sizeof digits, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return set_value(cfg, k, digits, err);
    }
    if (!is_plain_string(v))
        return wrong_type(err, k->name, v, "a string");
    return set_value(cfg, k, json_string_value(v), err);
}

static int load_object(pg_config *cfg, const json_t *root, pg_error *err)
{
    if (!json_is_object(root))
        return pg_fail(err, PG_ERR_CONFIG, "config: expected a JSON object, got %s",
                       json_type_name(root));
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)root, name, v)
    {
        int rc = load_one(cfg, name, v, err);
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

PG_API int pg_config_load_json(pg_config *cfg, const char *json, size_t len, pg_error *err)
{
    if (!cfg || (!json && len))
        return pg_fail(err, PG_ERR_INVALID, "pg_config_load_json: NULL argument");
    if (len > PG_MAX_CONFIG_BYTES)
        return pg_fail(err, PG_ERR_LIMIT, "config: %zu bytes, larger than the limit of %u", len,
                       PG_MAX_CONFIG_BYTES);
    pg_error why = {0};
    pg_autojson json_t *root = pg_json_parse(json ? json : "", len, "config", &why);
    if (!root)
        return pg_fail(err, PG_ERR_CONFIG, "%s", why.message);
    pg_autoconfig pg_config *next = config_clone(cfg, err);
    int rc = next ? load_object(next, root, err) : PG_ERR_NOMEM;
    if (rc == PG_OK)
        config_take(cfg, pg_steal(&next));
    return rc;
}

PG_API int pg_config_load_file(pg_config *cfg, const char *path, pg_error *err)
{
    if (!cfg || !path)
        return pg_fail(err, PG_ERR_INVALID, "pg_config_load_file: NULL argument");
    pg_autofree char *buf = NULL;
    size_t len = 0;
    /* Whoever can write the configuration can switch enforcement off. */
    int rc = pg_read_file_at(AT_FDCWD, path, PG_MAX_CONFIG_BYTES,
                             PG_READ_CHECK_MODE | PG_READ_CHECK_OWNER, &buf, &len, err);
    return rc == PG_OK ? pg_config_load_json(cfg, buf, len, err) : rc;
}

/* ----------------------------------------------------------------- getters */

PG_API pg_policy pg_config_policy(const pg_config *cfg) { return cfg->policy; }
PG_API pg_mode pg_config_mode(const pg_config *cfg) { return cfg->mode; }
PG_API pg_runtime pg_config_runtime(const pg_config *cfg) { return cfg->runtime; }
PG_API const char *pg_config_state_dir(const pg_config *cfg) { return cfg->state_dir; }
PG_API const char *pg_config_annotation(const pg_config *cfg) { return cfg->annotation; }
PG_API const char *pg_config_dbus(const pg_config *cfg) { return cfg->dbus; }
PG_API const char *pg_config_log_level(const pg_config *cfg) { return log_levels[cfg->log_level]; }
PG_API int64_t pg_config_credential_ttl(const pg_config *cfg) { return cfg->credential_ttl; }

PG_API const char *pg_config_record_api_version(const pg_config *cfg)
{
    return api_versions[cfg->record_api_version];
}

PG_API const char *const *pg_config_allowlist(const pg_config *cfg)
{
    return (const char *const *)cfg->allowlist.v;
}

PG_API const char *const *pg_config_read_only_dirs(const pg_config *cfg)
{
    return (const char *const *)cfg->read_only_dirs.v;
}

PG_API const char *const *pg_config_pinned_images(const pg_config *cfg)
{
    return (const char *const *)cfg->pinned_images.v;
}

/* hmacKeyFile is not in pullgate.h (the header is fixed); internal users read it here. */
const char *pg_config_hmac_key_file(const pg_config *cfg) { return cfg->hmac_key_file; }
const char *pg_config_cri_listen(const pg_config *cfg) { return cfg->cri_listen; }
const char *pg_config_cri_runtime_endpoint(const pg_config *cfg) { return cfg->cri_runtime; }
int64_t pg_config_cri_prune_interval(const pg_config *cfg) { return cfg->cri_prune_interval; }
bool pg_config_cri_verify_pulls(const pg_config *cfg) { return cfg->cri_verify_pulls; }
const char *pg_config_cri_metrics_listen(const pg_config *cfg)
{
    return strcmp(cfg->cri_metrics_listen, "none") == 0 ? NULL : cfg->cri_metrics_listen;
}
const char *const *pg_config_node_credential_files(const pg_config *cfg)
{
    return (const char *const *)cfg->node_credential_files.v;
}
size_t pg_config_cri_record_cache_entries(const pg_config *cfg)
{
    return (size_t)cfg->cri_record_cache_entries;
}
size_t pg_config_cri_record_cache_bytes(const pg_config *cfg)
{
    return (size_t)cfg->cri_record_cache_mib << 20;
}
size_t pg_config_cri_absence_cache_entries(const pg_config *cfg)
{
    return (size_t)cfg->cri_absence_cache_entries;
}

/* ------------------------------------------------------------------ output */

/* Go's time.Duration.String() for whole seconds: "0s", "1m30s", "1h30m0s". */
static void format_duration(int64_t s, char out[32])
{
    int64_t h = s / 3600, m = (s % 3600) / 60, sec = s % 60;
    if (h)
        snprintf(out, 32, "%" PRId64 "h%" PRId64 "m%" PRId64 "s", h, m, sec);
    else if (m)
        snprintf(out, 32, "%" PRId64 "m%" PRId64 "s", m, sec);
    else
        snprintf(out, 32, "%" PRId64 "s", sec);
}

static json_t *list_to_json(const pg_strv *l)
{
    pg_autojson json_t *arr = json_array();
    for (size_t i = 0; arr && i < l->n; i++)
        if (json_array_append_new(arr, json_string(l->v[i])) != 0)
            return NULL;
    return pg_steal(&arr);
}

static int put(json_t *obj, const char *key, json_t *v)
{
    return v ? json_object_set_new(obj, key, v) : -1;
}
static json_t *value_to_json(const pg_config *cfg, const key_spec *k)
{
    const void *at = member(cfg, k);
    char text[32];
    switch (k->kind) {
    case KEY_ENUM: return json_string(k->names[*(const int *)at]);
    case KEY_TEXT: return json_string(*(char *const *)at);
    case KEY_DURATION: format_duration(*(const int64_t *)at, text); return json_string(text);
    case KEY_BOOL: return json_boolean(*(const bool *)at);
    case KEY_LIST: return list_to_json(at);
    case KEY_INT: return json_integer(*(const int64_t *)at);
    }
    return NULL;
}

PG_API char *pg_config_to_json(const pg_config *cfg, pg_error *err)
{
    pg_autojson json_t *o = json_object();
    int bad = !o;
    for (size_t i = 0; !bad && i < N_KEYS; i++)
        bad = put(o, keys[i].name, value_to_json(cfg, &keys[i]));
    char *text = bad ? NULL : json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT);
    if (!text)
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return text;
}
