/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Configuration (docs/interfaces.md §8): defaults, strict JSON loading, per-key setters,
 * getters and canonical JSON output.
 *
 * Every value is validated before it is stored, and a file is applied to a
 * copy that replaces the live configuration only when every key was valid,
 * so a rejected file never leaves a half-applied configuration behind.
 */
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

struct pg_config {
    pg_policy policy;
    pg_mode mode;
    pg_runtime runtime;
    int64_t credential_ttl;
    const char *log_level;          /* static storage: one of log_levels[] */
    const char *record_api_version; /* static storage: PG_API_V1ALPHA1 / V1BETA1 */
    char *state_dir;
    char *annotation;
    char *dbus;
    char *hmac_key_file;
    char *cri_listen;   /* pullgate-cri: unix:// endpoint it serves */
    char *cri_runtime;  /* pullgate-cri: unix:// endpoint of the runtime */
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

/* Lists stay non-NULL (an empty vector at least) so getters can hand v out directly. */
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

/* --------------------------------------------------------------- lifecycle */

PG_API void pg_config_free(pg_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->state_dir);
    free(cfg->annotation);
    free(cfg->dbus);
    free(cfg->hmac_key_file);
    free(cfg->cri_listen);
    free(cfg->cri_metrics_listen);
    free(cfg->cri_runtime);
    pg_strv_clear(&cfg->allowlist);
    pg_strv_clear(&cfg->read_only_dirs);
    pg_strv_clear(&cfg->pinned_images);
    pg_strv_clear(&cfg->node_credential_files);
    free(cfg);
}

PG_API pg_config *pg_config_new(pg_error *err)
{
    pg_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    cfg->policy = PG_POLICY_NEVER_VERIFY_PRELOADED;
    cfg->mode = PG_MODE_ENFORCE;
    cfg->runtime = PG_RUNTIME_AUTO;
    cfg->credential_ttl = 0;
    cfg->log_level = "info";
    cfg->record_api_version = PG_API_V1ALPHA1;
    cfg->cri_prune_interval = 3600;
    cfg->cri_verify_pulls = true;
    cfg->cri_record_cache_entries = PG_DEFAULT_CRI_RECORD_CACHE_ENTRIES;
    cfg->cri_record_cache_mib = PG_DEFAULT_CRI_RECORD_CACHE_MIB;
    cfg->cri_absence_cache_entries = PG_DEFAULT_CRI_ABSENCE_CACHE_ENTRIES;
    int rc = PG_OK;
    if (!(cfg->state_dir = pg_strdup(PG_DEFAULT_STATE_DIR)) ||
        !(cfg->annotation = pg_strdup("pullgate.dev/credentials")) ||
        !(cfg->dbus = pg_strdup("system")) || !(cfg->hmac_key_file = pg_strdup("")) ||
        !(cfg->cri_listen = pg_strdup("unix:///run/pullgate/cri.sock")) ||
        !(cfg->cri_runtime = pg_strdup("unix:///run/containerd/containerd.sock")) ||
        !(cfg->cri_metrics_listen = pg_strdup(PG_DEFAULT_CRI_METRICS_LISTEN)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_OK)
        rc = pg_strv_ensure(&cfg->allowlist, err);
    if (rc == PG_OK)
        rc = pg_strv_ensure(&cfg->pinned_images, err);
    if (rc == PG_OK)
        rc = pg_strv_ensure(&cfg->read_only_dirs, err);
    if (rc == PG_OK)
        rc = pg_strv_push(&cfg->read_only_dirs, "/var/lib/kubelet/image_manager", err);
    if (rc == PG_OK)
        rc = pg_strv_ensure(&cfg->node_credential_files, err);
    for (size_t i = 0; rc == PG_OK && kubelet_docker_config_paths[i]; i++)
        rc = pg_strv_push(&cfg->node_credential_files, kubelet_docker_config_paths[i], err);
    if (rc != PG_OK) {
        pg_config_free(cfg);
        return NULL;
    }
    return cfg;
}

static pg_config *config_clone(const pg_config *src, pg_error *err)
{
    pg_config *c = calloc(1, sizeof *c);
    if (!c) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    c->policy = src->policy;
    c->mode = src->mode;
    c->runtime = src->runtime;
    c->credential_ttl = src->credential_ttl;
    c->log_level = src->log_level;
    c->record_api_version = src->record_api_version;
    c->cri_prune_interval = src->cri_prune_interval;
    c->cri_verify_pulls = src->cri_verify_pulls;
    c->cri_record_cache_entries = src->cri_record_cache_entries;
    c->cri_record_cache_mib = src->cri_record_cache_mib;
    c->cri_absence_cache_entries = src->cri_absence_cache_entries;
    int rc = PG_OK;
    if (!(c->state_dir = pg_strdup(src->state_dir)) ||
        !(c->annotation = pg_strdup(src->annotation)) || !(c->dbus = pg_strdup(src->dbus)) ||
        !(c->hmac_key_file = pg_strdup(src->hmac_key_file)) ||
        !(c->cri_listen = pg_strdup(src->cri_listen)) ||
        !(c->cri_runtime = pg_strdup(src->cri_runtime)) ||
        !(c->cri_metrics_listen = pg_strdup(src->cri_metrics_listen)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_OK)
        rc = strv_copy(&c->allowlist, &src->allowlist, err);
    if (rc == PG_OK)
        rc = strv_copy(&c->read_only_dirs, &src->read_only_dirs, err);
    if (rc == PG_OK)
        rc = strv_copy(&c->pinned_images, &src->pinned_images, err);
    if (rc == PG_OK)
        rc = strv_copy(&c->node_credential_files, &src->node_credential_files, err);
    if (rc != PG_OK) {
        pg_config_free(c);
        return NULL;
    }
    return c;
}

/* Moves the contents of *from into *to and frees the emptied shell of from. */
static void config_take(pg_config *to, pg_config *from)
{
    pg_config old = *to;
    *to = *from;
    *from = old;
    pg_config_free(from);
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

static int parse_ttl(const char *key, const char *value, int64_t *out, pg_error *err)
{
    pg_error why = {0};
    int64_t seconds = 0;
    if (pg_parse_duration(value, &seconds, &why) != PG_OK)
        return bad_value(err, key, value, why.message);
    /* A positive TTL below one second would round to 0 = "never expires": refuse it
     * rather than silently disabling expiry. */
    if (seconds == 0 && strpbrk(value, "123456789"))
        return bad_value(err, key, value, "a positive TTL must be at least 1s");
    *out = seconds;
    return PG_OK;
}

static int check_pinned_pattern(const char *key, const char *value, pg_error *err)
{
    size_t len = strlen(value);
    size_t core_start = value[0] == '*' ? 1 : 0;
    size_t core_end = len > 0 && value[len - 1] == '*' ? len - 1 : len;
    /* CRI-O patterns: exact, "prefix*" or "*keyword*"; a leading '*' needs a trailing one. */
    bool ok = len > 0 && !has_control_char(value) && !strchr(value, ' ') &&
              core_end > core_start && !(core_start == 1 && core_end == len);
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

/* ----------------------------------------------------------------- setting */

typedef enum key_kind { KEY_SCALAR, KEY_BOOL, KEY_LIST, KEY_INT } key_kind;

typedef int (*scalar_setter)(pg_config *cfg, const char *key, const char *value, pg_error *err);
typedef int (*item_check)(const char *key, const char *value, pg_error *err);

static int set_policy(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    int i;
    int rc = parse_enum(policy_names, key, value, &i, err);
    if (rc == PG_OK)
        cfg->policy = (pg_policy)i;
    return rc;
}

static int set_mode(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    int i;
    int rc = parse_enum(mode_names, key, value, &i, err);
    if (rc == PG_OK)
        cfg->mode = (pg_mode)i;
    return rc;
}

static int set_runtime(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    int i;
    int rc = parse_enum(runtime_names, key, value, &i, err);
    if (rc == PG_OK)
        cfg->runtime = (pg_runtime)i;
    return rc;
}

static int set_log_level(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    int i;
    int rc = parse_enum(log_levels, key, value, &i, err);
    if (rc == PG_OK)
        cfg->log_level = log_levels[i];
    return rc;
}

static int set_api_version(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    int i;
    int rc = parse_enum(api_versions, key, value, &i, err);
    if (rc == PG_OK)
        cfg->record_api_version = api_versions[i];
    return rc;
}

static int set_state_dir(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    int rc = check_absolute_path(key, value, err);
    return rc == PG_OK ? replace_string(&cfg->state_dir, value, err) : rc;
}

static int set_annotation(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    int rc = check_annotation_key(key, value, err);
    return rc == PG_OK ? replace_string(&cfg->annotation, value, err) : rc;
}

static int set_dbus(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    int rc = check_dbus(key, value, err);
    return rc == PG_OK ? replace_string(&cfg->dbus, value, err) : rc;
}

static int set_ttl(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    return parse_ttl(key, value, &cfg->credential_ttl, err);
}

/* "" turns namespace-bound annotations off; otherwise the key file's absolute path. */
static int set_hmac_key_file(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    int rc = value[0] ? check_absolute_path(key, value, err) : PG_OK;
    return rc == PG_OK ? replace_string(&cfg->hmac_key_file, value, err) : rc;
}

/* A gRPC unix socket endpoint "unix:///absolute/path" (the kubelet's spelling);
 * the path must fit a sockaddr_un. */
static int check_unix_endpoint(const char *key, const char *value, pg_error *err)
{
    static const char prefix[] = "unix://";
    const char *path = value + sizeof prefix - 1;
    if (strncmp(value, prefix, sizeof prefix - 1) != 0 || path[0] != '/' ||
        strlen(path) > 107 || has_control_char(value))
        return bad_value(err, key, value,
                         "expected unix:///absolute/path, the path at most 107 bytes");
    return PG_OK;
}

static int set_cri_listen(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    int rc = check_unix_endpoint(key, value, err);
    return rc == PG_OK ? replace_string(&cfg->cri_listen, value, err) : rc;
}

static int set_cri_runtime(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    int rc = check_unix_endpoint(key, value, err);
    return rc == PG_OK ? replace_string(&cfg->cri_runtime, value, err) : rc;
}

/* "IPv4:PORT" or "[IPv6]:PORT", literal addresses only (no name resolution at start);
 * "none" or "" turns the listener off (stored as "none"). */
static int set_cri_metrics_listen(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    if (!value[0] || strcmp(value, "none") == 0)
        return replace_string(&cfg->cri_metrics_listen, "none", err);
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
    return replace_string(&cfg->cri_metrics_listen, value, err);
}

/* A Go duration, whole seconds; "0s" turns pullgate-cri's own prune off. */
static int set_cri_prune_interval(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    pg_error why = {0};
    int64_t seconds = 0;
    if (pg_parse_duration(value, &seconds, &why) != PG_OK)
        return bad_value(err, key, value, why.message);
    if (seconds > 0 && seconds < 60)
        return bad_value(err, key, value, "at least 1m, or 0s for never");
    if (seconds == 0 && strpbrk(value, "123456789"))
        return bad_value(err, key, value, "at least 1m, or 0s for never");
    cfg->cri_prune_interval = seconds;
    return PG_OK;
}

/* A boolean: JSON true/false in a file, "true"/"false" through pg_config_set. */
static int set_cri_verify_pulls(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
        return bad_value(err, key, value, "expected true or false");
    cfg->cri_verify_pulls = strcmp(value, "true") == 0;
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

/* The record cache's and the absence cache's bounds (docs/kubelet-setup.md, "Sizing"). */
static int set_cri_record_cache_entries(pg_config *cfg, const char *key, const char *value,
                                        pg_error *err)
{
    return parse_count(key, value, 1, 1 << 24, &cfg->cri_record_cache_entries, err);
}

static int set_cri_record_cache_mib(pg_config *cfg, const char *key, const char *value,
                                    pg_error *err)
{
    return parse_count(key, value, 1, 65536, &cfg->cri_record_cache_mib, err);
}

static int set_cri_absence_cache_entries(pg_config *cfg, const char *key, const char *value,
                                         pg_error *err)
{
    return parse_count(key, value, 1024, 1 << 24, &cfg->cri_absence_cache_entries, err);
}

static pg_strv *list_of(pg_config *cfg, size_t offset)
{
    return (pg_strv *)((char *)cfg + offset);
}

/*
 * `since` is the rollback registry (docs/lifecycle.md, "Roll back"): the release that first
 * reads the key. Every release refuses a key it does not know, so a downgrade moves the keys
 * newer than its target out of the file first (pullgate-config-rollback, run by the package);
 * a key added without its release here fails test_config (every_key_is_registered).
 */
typedef struct key_spec {
    const char *name;
    key_kind kind;
    scalar_setter set;   /* KEY_SCALAR */
    size_t list_offset;  /* KEY_LIST */
    item_check check;    /* KEY_LIST */
    const char *since;   /* the first release that reads it */
} key_spec;

static const key_spec keys[] = {
    {"policy", KEY_SCALAR, set_policy, 0, NULL, "1.0.0"},
    {"allowlist", KEY_LIST, NULL, offsetof(pg_config, allowlist), check_allowlist_pattern,
     "1.0.0"},
    {"stateDir", KEY_SCALAR, set_state_dir, 0, NULL, "1.0.0"},
    {"readOnlyRecordDirs", KEY_LIST, NULL, offsetof(pg_config, read_only_dirs),
     check_absolute_path, "1.0.0"},
    {"runtime", KEY_SCALAR, set_runtime, 0, NULL, "1.0.0"},
    {"mode", KEY_SCALAR, set_mode, 0, NULL, "1.0.0"},
    {"credentialsAnnotation", KEY_SCALAR, set_annotation, 0, NULL, "1.0.0"},
    {"credentialTTL", KEY_SCALAR, set_ttl, 0, NULL, "1.0.0"},
    {"pinnedImages", KEY_LIST, NULL, offsetof(pg_config, pinned_images), check_pinned_pattern,
     "1.0.0"},
    {"recordApiVersion", KEY_SCALAR, set_api_version, 0, NULL, "1.0.0"},
    {"dbus", KEY_SCALAR, set_dbus, 0, NULL, "1.0.0"},
    {"logLevel", KEY_SCALAR, set_log_level, 0, NULL, "1.0.0"},
    {"hmacKeyFile", KEY_SCALAR, set_hmac_key_file, 0, NULL, "1.0.0"},
    {"criListen", KEY_SCALAR, set_cri_listen, 0, NULL, "1.0.0"},
    {"criRuntimeEndpoint", KEY_SCALAR, set_cri_runtime, 0, NULL, "1.0.0"},
    {"criPruneInterval", KEY_SCALAR, set_cri_prune_interval, 0, NULL, "1.0.0"},
    {"criVerifyPulls", KEY_BOOL, set_cri_verify_pulls, 0, NULL, "1.0.0"},
    {"criMetricsListen", KEY_SCALAR, set_cri_metrics_listen, 0, NULL, "1.0.0"},
    {"nodeCredentialFiles", KEY_LIST, NULL, offsetof(pg_config, node_credential_files),
     check_absolute_path, "1.0.0"},
    {"criRecordCacheEntries", KEY_INT, set_cri_record_cache_entries, 0, NULL, "1.1.0"},
    {"criRecordCacheMiB", KEY_INT, set_cri_record_cache_mib, 0, NULL, "1.1.0"},
    {"criAbsenceCacheEntries", KEY_INT, set_cri_absence_cache_entries, 0, NULL, "1.1.0"},
};
#define N_KEYS (sizeof keys / sizeof keys[0])

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

static int append_checked(pg_config *cfg, const key_spec *k, const char *value, pg_error *err)
{
    int rc = k->check(k->name, value, err);
    return rc == PG_OK ? pg_strv_push(list_of(cfg, k->list_offset), value, err) : rc;
}

PG_API int pg_config_set(pg_config *cfg, const char *key, const char *value, pg_error *err)
{
    if (!cfg || !key || !value)
        return pg_fail(err, PG_ERR_INVALID, "pg_config_set: NULL argument");
    const key_spec *k = find_key(key);
    if (!k)
        return unknown_key(err, key);
    /* Values from a file are UTF-8 by construction; keep pg_config_to_json total. */
    json_t *probe = json_string(value);
    if (!probe)
        return bad_value(err, key, "(not UTF-8)", "expected UTF-8 text");
    json_decref(probe);
    if (k->kind == KEY_LIST)
        return append_checked(cfg, k, value, err);
    return k->set(cfg, k->name, value, err);
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
    pg_strv *l = list_of(cfg, k->list_offset);
    pg_strv_clear(l);
    return pg_strv_ensure(l, err);
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
    pg_strv *l = list_of(cfg, k->list_offset);
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
        rc = append_checked(cfg, k, json_string_value(item), err);
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
        return k->set(cfg, k->name, json_is_true(v) ? "true" : "false", err);
    }
    if (k->kind == KEY_INT) {
        if (!json_is_integer(v))
            return wrong_type(err, k->name, v, "a whole number");
        char digits[32];
        snprintf(digits, sizeof digits, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return k->set(cfg, k->name, digits, err);
    }
    if (!is_plain_string(v))
        return wrong_type(err, k->name, v, "a string");
    return k->set(cfg, k->name, json_string_value(v), err);
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
    json_t *root = pg_json_parse(json ? json : "", len, "config", &why);
    if (!root)
        return pg_fail(err, PG_ERR_CONFIG, "%s", why.message);
    pg_config *next = config_clone(cfg, err);
    int rc = next ? load_object(next, root, err) : PG_ERR_NOMEM;
    json_decref(root);
    if (rc == PG_OK)
        config_take(cfg, next);
    else
        pg_config_free(next);
    return rc;
}

PG_API int pg_config_load_file(pg_config *cfg, const char *path, pg_error *err)
{
    if (!cfg || !path)
        return pg_fail(err, PG_ERR_INVALID, "pg_config_load_file: NULL argument");
    char *buf = NULL;
    size_t len = 0;
    /* Whoever can write the configuration can switch enforcement off. */
    int rc = pg_read_file_at(AT_FDCWD, path, PG_MAX_CONFIG_BYTES,
                             PG_READ_CHECK_MODE | PG_READ_CHECK_OWNER, &buf, &len, err);
    if (rc != PG_OK)
        return rc;
    rc = pg_config_load_json(cfg, buf, len, err);
    free(buf);
    return rc;
}

/* ----------------------------------------------------------------- getters */

PG_API pg_policy pg_config_policy(const pg_config *cfg) { return cfg->policy; }
PG_API pg_mode pg_config_mode(const pg_config *cfg) { return cfg->mode; }
PG_API pg_runtime pg_config_runtime(const pg_config *cfg) { return cfg->runtime; }
PG_API const char *pg_config_state_dir(const pg_config *cfg) { return cfg->state_dir; }
PG_API const char *pg_config_annotation(const pg_config *cfg) { return cfg->annotation; }
PG_API const char *pg_config_dbus(const pg_config *cfg) { return cfg->dbus; }
PG_API const char *pg_config_log_level(const pg_config *cfg) { return cfg->log_level; }
PG_API int64_t pg_config_credential_ttl(const pg_config *cfg) { return cfg->credential_ttl; }

PG_API const char *pg_config_record_api_version(const pg_config *cfg)
{
    return cfg->record_api_version;
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
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < l->n; i++)
        if (json_array_append_new(arr, json_string(l->v[i])) != 0) {
            json_decref(arr);
            return NULL;
        }
    return arr;
}

static int put(json_t *obj, const char *key, json_t *v)
{
    return v ? json_object_set_new(obj, key, v) : -1;
}

PG_API char *pg_config_to_json(const pg_config *cfg, pg_error *err)
{
    char ttl[32], prune[32];
    format_duration(cfg->credential_ttl, ttl);
    format_duration(cfg->cri_prune_interval, prune);
    json_t *o = json_object();
    /* Same key order as docs/interfaces.md §8, then the extension key. */
    int bad = !o || put(o, "policy", json_string(policy_names[cfg->policy])) ||
              put(o, "allowlist", list_to_json(&cfg->allowlist)) ||
              put(o, "stateDir", json_string(cfg->state_dir)) ||
              put(o, "readOnlyRecordDirs", list_to_json(&cfg->read_only_dirs)) ||
              put(o, "runtime", json_string(runtime_names[cfg->runtime])) ||
              put(o, "mode", json_string(mode_names[cfg->mode])) ||
              put(o, "credentialsAnnotation", json_string(cfg->annotation)) ||
              put(o, "credentialTTL", json_string(ttl)) ||
              put(o, "pinnedImages", list_to_json(&cfg->pinned_images)) ||
              put(o, "recordApiVersion", json_string(cfg->record_api_version)) ||
              put(o, "dbus", json_string(cfg->dbus)) ||
              put(o, "logLevel", json_string(cfg->log_level)) ||
              put(o, "hmacKeyFile", json_string(cfg->hmac_key_file)) ||
              put(o, "criListen", json_string(cfg->cri_listen)) ||
              put(o, "criRuntimeEndpoint", json_string(cfg->cri_runtime)) ||
              put(o, "criPruneInterval", json_string(prune)) ||
              put(o, "criVerifyPulls", json_boolean(cfg->cri_verify_pulls)) ||
              put(o, "criMetricsListen", json_string(cfg->cri_metrics_listen)) ||
              put(o, "nodeCredentialFiles", list_to_json(&cfg->node_credential_files)) ||
              put(o, "criRecordCacheEntries", json_integer(cfg->cri_record_cache_entries)) ||
              put(o, "criRecordCacheMiB", json_integer(cfg->cri_record_cache_mib)) ||
              put(o, "criAbsenceCacheEntries", json_integer(cfg->cri_absence_cache_entries));
    char *text = bad ? NULL : json_dumps(o, JSON_PRESERVE_ORDER | JSON_COMPACT);
    json_decref(o);
    if (!text)
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return text;
}
