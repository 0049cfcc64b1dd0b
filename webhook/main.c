/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-webhook: the mutating admission webhook that writes the pod
 * credentials annotation (docs/webhook.md, pullgate-webhook(8)).
 */
#include "cleanup.h"
#include "files.h"
#include "http_respond.h"
#include "memory.h"
#include "peers.h"
#include "secrets.h"
#include "server.h"
#include "tlscert.h"
#include "wlog.h"

#include <curl/curl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "pullgate-webhook"
#define DEFAULT_LISTEN "0.0.0.0:8443"
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define STOP_GRACE_MS 1000L /* SIGTERM to exit stays under 2 s: reviews then end at once */
#define EXIT_USAGE 2
#define DEFAULT_MAX_CONNECTIONS 128u
#define DEFAULT_MAX_PER_PEER 32u
#define DEFAULT_MEMORY_BUDGET_MIB 256u
#define MMAP_THRESHOLD (128 * 1024) /* large blocks go back to the system when freed */
#define MALLOC_ARENAS 4

typedef struct options {
    const char *config, *tls_cert, *tls_key, *listen, *health_listen, *client_ca, *api_server,
        *api_ca, *api_token, *hmac_key_file;
    int unkeyed;
    unsigned long max_connections, max_per_peer, reserved, memory_budget_mib, deadline_ms;
    wh_cidr api_cidrs[WH_CIDRS_MAX];
    size_t n_api_cidrs;
} options;

#define RESERVED_UNSET ULONG_MAX /* --reserved-connections not given: a quarter */

/* Every option but --help and --version, and where its value goes (getopt_long's val is its
 * index here plus OPT_FIRST). */
typedef enum { TEXT, NUMBER, FLAG, CIDRS } option_kind;

typedef struct option_spec {
    const char *name;
    option_kind kind;
    size_t member; /* TEXT: a const char *; NUMBER: an unsigned long in [min, max]; FLAG: int */
    unsigned long min, max;
} option_spec;

#define AT(member) offsetof(options, member)
#define OPT_FIRST 256

static const option_spec specs[] = {
    {"config", TEXT, AT(config), 0, 0},
    {"tls-cert", TEXT, AT(tls_cert), 0, 0},
    {"tls-key", TEXT, AT(tls_key), 0, 0},
    {"listen", TEXT, AT(listen), 0, 0},
    {"health-listen", TEXT, AT(health_listen), 0, 0},
    {"client-ca-file", TEXT, AT(client_ca), 0, 0},
    {"api-server", TEXT, AT(api_server), 0, 0},
    {"api-ca", TEXT, AT(api_ca), 0, 0},
    {"api-token-file", TEXT, AT(api_token), 0, 0},
    {"hmac-key-file", TEXT, AT(hmac_key_file), 0, 0},
    {"unkeyed-annotations", FLAG, AT(unkeyed), 0, 0},
    {"max-connections", NUMBER, AT(max_connections), 4, 1024},
    {"max-connections-per-peer", NUMBER, AT(max_per_peer), 1, 1024},
    {"reserved-connections", NUMBER, AT(reserved), 0, 1023},
    {"api-server-cidr", CIDRS, 0, 0, 0},
    {"memory-budget-mib", NUMBER, AT(memory_budget_mib), 64, 65536},
    {"review-deadline-ms", NUMBER, AT(deadline_ms), 200, 29000},
};

#define N_SPECS (sizeof specs / sizeof specs[0])

static void usage(FILE *out)
{
    fputs("Usage: " PROG " [--config FILE] --tls-cert FILE --tls-key FILE [--listen ADDR:PORT]\n"
          "       [--health-listen ADDR:PORT] [--client-ca-file FILE]\n"
          "       [--api-server URL --api-ca FILE --api-token-file FILE]\n"
          "       (--hmac-key-file FILE | --unkeyed-annotations)\n"
          "       [--max-connections N] [--max-connections-per-peer N]\n"
          "       [--api-server-cidr CIDR[,CIDR...]] [--reserved-connections N]\n"
          "       [--memory-budget-mib N] [--review-deadline-ms N]\n"
          "\nServes POST /mutate (admission.k8s.io/v1 AdmissionReview for pods), GET /healthz,\n"
          "GET /readyz over HTTPS (default " DEFAULT_LISTEN "); --health-listen adds the two GETs\n"
          "and GET /metrics (Prometheus) in plain HTTP. Without --api-* it uses the in-cluster "
          "configuration\n"
          "(KUBERNETES_SERVICE_HOST/PORT, " SA_DIR ").\n"
          "The annotation key (--hmac-key-file, or hmacKeyFile of --config) is required:\n"
          "--unkeyed-annotations opts out and puts offline-guessable credential hashes in\n"
          "every pod's annotation. See pullgate-webhook(8).\n",
          out);
}

static int usage_error(const char *what)
{
    fprintf(stderr, PROG ": %s (see --help)\n", what);
    return EXIT_USAGE;
}

static int number(const char *text, unsigned long min, unsigned long max, unsigned long *out)
{
    char *end = NULL;
    unsigned long v = strtoul(text, &end, 10);
    if (!*text || *end || *text == '-' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* One option's value into o: 0, or the exit status of a usage error. */
static int set_option(const option_spec *spec, const char *arg, options *o)
{
    void *at = (char *)o + spec->member;
    pg_error err = {0};
    switch (spec->kind) {
    case TEXT: *(const char **)at = arg; return 0;
    case FLAG: *(int *)at = 1; return 0;
    case NUMBER:
        if (number(arg, spec->min, spec->max, at) != 0)
            return usage_error("a number option is out of its range");
        return 0;
    default:
        if (wh_cidrs_add(o->api_cidrs, &o->n_api_cidrs, arg, &err) != PG_OK)
            return usage_error(err.message);
        return 0;
    }
}

static int check_options(options *o)
{
    if (!o->tls_cert || !o->tls_key)
        return usage_error("--tls-cert and --tls-key are required");
    int n_api = !!o->api_server + !!o->api_ca + !!o->api_token;
    if (n_api != 0 && n_api != 3)
        return usage_error("give all of --api-server, --api-ca and --api-token-file, or none");
    if (o->max_per_peer > o->max_connections)
        return usage_error("--max-connections-per-peer is larger than --max-connections");
    if (o->reserved == RESERVED_UNSET)
        o->reserved = o->max_connections / 4;
    if (o->reserved >= o->max_connections)
        return usage_error("--reserved-connections leaves no connection to other callers");
    if (!o->listen)
        o->listen = DEFAULT_LISTEN;
    return 0;
}

static int parse_options(int argc, char **argv, options *o)
{
    struct option longs[N_SPECS + 3] = {{"help", no_argument, NULL, 'h'},
                                        {"version", no_argument, NULL, 'V'}};
    for (size_t i = 0; i < N_SPECS; i++)
        longs[i + 2] =
            (struct option){specs[i].name, specs[i].kind == FLAG ? no_argument : required_argument,
                            NULL, OPT_FIRST + (int)i};
    o->max_connections = DEFAULT_MAX_CONNECTIONS;
    o->max_per_peer = DEFAULT_MAX_PER_PEER;
    o->reserved = RESERVED_UNSET;
    o->memory_budget_mib = DEFAULT_MEMORY_BUDGET_MIB;
    o->deadline_ms = WH_REVIEW_DEADLINE_MS;
    for (int c, rc; (c = getopt_long(argc, argv, "hV", longs, NULL)) != -1;) {
        if (c == 'h') {
            usage(stdout);
            exit(0);
        }
        if (c == 'V') {
            printf(PROG " %s\n", PG_WEBHOOK_VERSION);
            exit(0);
        }
        if (c < OPT_FIRST || c >= OPT_FIRST + (int)N_SPECS)
            return usage_error("unknown option");
        if ((rc = set_option(&specs[c - OPT_FIRST], optarg, o)) != 0)
            return rc;
    }
    if (optind != argc)
        return usage_error("unexpected operand");
    return check_options(o);
}

/* The in-cluster API server URL from the service environment. */
static int in_cluster_server(char *url, size_t size)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port)
        return -1;
    int v6 = strchr(host, ':') != NULL;
    snprintf(url, size, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
    return 0;
}

/* Settings from pullgate.json; the strings are copied into *annotation / *key_file. */
static int read_config(const options *o, char **annotation, char **key_file)
{
    pg_error err = {0};
    pg_config *cfg = pg_config_new(&err);
    if (cfg && o->config && pg_config_load_file(cfg, o->config, &err) != PG_OK) {
        pg_config_free(cfg);
        cfg = NULL;
    }
    if (!cfg) {
        wh_log("error", "cannot load the configuration", err.message);
        return -1;
    }
    *annotation = strdup(pg_config_annotation(cfg));
    *key_file = strdup(o->hmac_key_file ? o->hmac_key_file : pg_config_hmac_key_file(cfg));
    pg_config_free(cfg);
    return *annotation && *key_file ? 0 : -1;
}

static int wait_for_signal(void)
{
    sigset_t set;
    int sig = 0;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigwait(&set, &sig);
    return sig;
}

static void block_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    /* Blocked before any thread starts, so only sigwait() sees them. */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Whether pods get keyed annotations (1) or, with the explicit opt-out, unkeyed ones (0, said
 * loudly); PG_ERR_CONFIG when the options contradict or say neither. */
static int key_choice(const options *o, const char *key_file, pg_error *err)
{
    if (o->unkeyed && *key_file)
        return pg_fail(err, PG_ERR_CONFIG,
                       "--unkeyed-annotations with an annotation key (%.200s): choose", key_file);
    if (!o->unkeyed && !*key_file)
        return pg_fail(err, PG_ERR_CONFIG,
                       "no annotation key: give --hmac-key-file (or hmacKeyFile in "
                       "--config), or opt out with --unkeyed-annotations");
    if (o->unkeyed)
        wh_log("warning", "UNKEYED ANNOTATIONS (--unkeyed-annotations)",
               "every pod's annotation carries its secrets' credential hashes in clear: "
               "offline-guessable for human passwords and readable by anyone who may read "
               "pods; a copied annotation is not bound to its namespace (docs/webhook.md)");
    return PG_OK;
}

/* The annotation key's holder; a key unusable at start refuses to start (later changes
 * refuse reviews instead). */
static int open_keys(const char *key_file, pg_keyholder **keys, pg_error *err)
{
    if (!(*keys = pg_keyholder_new(key_file, wh_load_key, wh_log)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    pg_key_ref *first = pg_keyholder_get(*keys, err);
    if (first) {
        pg_key_ref_release(first);
        return PG_OK;
    }
    pg_keyholder_free(*keys);
    *keys = NULL;
    return PG_ERR_CONFIG;
}

/* The reserve applies when someone can be known as the API server. */
static unsigned int reserved_connections(const options *o)
{
    return o->n_api_cidrs || o->client_ca ? (unsigned int)o->reserved : 0u;
}

static json_t *cidrs_json(const options *o)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < o->n_api_cidrs; i++) {
        char text[WH_CIDR_TEXT_MAX];
        wh_cidr_text(&o->api_cidrs[i], text, sizeof text);
        json_array_append_new(a, json_string(text));
    }
    return a;
}

static void log_serving(const options *o, const char *server_url, const char *annotation, int keyed)
{
    json_t *f =
        json_pack("{s:s, s:s?, s:s, s:s, s:s, s:b, s:o, s:i, s:i, s:i, s:i, s:i, s:I}", "listen",
                  o->listen, "healthListen", o->health_listen, "apiServer", server_url,
                  "annotation", annotation, "annotationKey", keyed ? "keyed" : "UNKEYED",
                  "clientCertificates", o->client_ca != NULL, "apiServerCidrs", cidrs_json(o),
                  "maxConnections", (int)o->max_connections, "maxConnectionsPerPeer",
                  (int)o->max_per_peer, "reservedConnections", (int)reserved_connections(o),
                  "memoryBudgetMiB", (int)o->memory_budget_mib, "reviewDeadlineMs",
                  (int)o->deadline_ms, "matchingCostPs", (json_int_t)wh_matching_cost_ps());
    wh_log_fields("info", "serving", f);
    json_decref(f);
    if (!reserved_connections(o))
        wh_log("warning", "no connection reserved for the API server",
               "neither --api-server-cidr nor --client-ca-file tells the API server from other "
               "callers: its reviews compete for every connection slot (docs/webhook.md)");
}

static int serve(const options *o, const char *server_url, const char *annotation,
                 pg_keyholder *keys, wh_kubeapi *api, wh_metrics *metrics, pg_error *err)
{
    struct sockaddr_storage addr = {0}, health = {0};
    if (pg_http_parse_address(o->listen, &addr) != 0 ||
        (o->health_listen && pg_http_parse_address(o->health_listen, &health) != 0))
        return pg_fail(err, PG_ERR_CONFIG, "--listen/--health-listen: expected ADDR:PORT");
    wh_server_config cfg = {.annotation_key = annotation,
                            .keys = keys,
                            .api = api,
                            .deadline_ms = (long)o->deadline_ms,
                            .max_connections = (unsigned int)o->max_connections,
                            .max_per_peer = (unsigned int)o->max_per_peer,
                            .reserved_connections = reserved_connections(o),
                            .api_cidrs = o->api_cidrs,
                            .n_api_cidrs = o->n_api_cidrs,
                            .metrics = metrics};
    wh_server *server = wh_server_start(
        (struct sockaddr *)&addr, o->health_listen ? (struct sockaddr *)&health : NULL, &cfg, err);
    if (!server)
        return PG_ERR_IO;
    log_serving(o, server_url, annotation, keys != NULL);
    int sig = wait_for_signal();
    wh_log("info", "stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    wh_server_stop(server, STOP_GRACE_MS);
    wh_log("info", "stopped", NULL);
    return PG_OK;
}

/* TLS, the API client, then serve until a signal. */
static int start(const options *o, const char *server_url, const char *ca, const char *token,
                 const char *annotation, pg_keyholder *keys, pg_error *err)
{
    wh_tls *tls = wh_tls_new(o->tls_cert, o->tls_key, err);
    wh_kubeapi *api = NULL;
    wh_metrics metrics = {0};
    int rc = tls ? PG_OK : PG_ERR_CONFIG;
    if (rc == PG_OK && o->client_ca)
        rc = wh_tls_require_clients(tls, o->client_ca, err);
    if (rc == PG_OK && !(api = wh_kubeapi_new(server_url, ca, token, err)))
        rc = PG_ERR_CONFIG;
    if (rc == PG_OK)
        rc = wh_metrics_init(&metrics, tls, err);
    if (rc == PG_OK)
        rc = serve(o, server_url, annotation, keys, api, &metrics, err);
    wh_kubeapi_free(api);
    wh_metrics_free(&metrics);
    wh_tls_free(tls);
    return rc;
}

/* The exit status: 0 after a signal, 2 for contradicting options, 1 for anything else. */
static int run(const options *o, const char *server_url, const char *ca, const char *token)
{
    pg_error err = {0};
    pg_autofree char *annotation = NULL;
    pg_autofree char *key_file = NULL;
    pg_keyholder *keys = NULL;
    int status = 1;
    if (read_config(o, &annotation, &key_file) != 0)
        pg_fail(&err, PG_ERR_CONFIG, "configuration unusable");
    else if (key_choice(o, key_file, &err) != PG_OK)
        status = EXIT_USAGE;
    else if (o->unkeyed || open_keys(key_file, &keys, &err) == PG_OK)
        status = start(o, server_url, ca, token, annotation, keys, &err) == PG_OK ? 0 : 1;
    if (status != 0)
        wh_log("error", "cannot start", err.message);
    pg_keyholder_free(keys);
    return status;
}

int main(int argc, char **argv)
{
    options o = {0};
    int rc = parse_options(argc, argv, &o);
    if (rc != 0)
        return rc;
    char url[600];
    const char *server = o.api_server, *ca = o.api_ca, *token = o.api_token;
    if (!server) {
        if (in_cluster_server(url, sizeof url) != 0)
            return usage_error("not in a cluster (KUBERNETES_SERVICE_HOST/PORT unset): give "
                               "--api-server, --api-ca and --api-token-file");
        server = url;
        ca = SA_DIR "/ca.crt";
        token = SA_DIR "/token";
    }
    block_signals();
    /* Memory: every review's bytes are charged to a budget, and freed blocks are wiped
     * (memory.h); big blocks are mmap'd so they return to the system when freed, and few
     * arenas keep the per-thread caches of a thread per connection small. */
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
    mallopt(M_ARENA_MAX, MALLOC_ARENAS);
    if (wh_memory_init((size_t)o.memory_budget_mib * 1024u * 1024u) != 0) {
        wh_log("error", "cannot initialise libcurl", NULL);
        return 1;
    }
    wh_matching_calibrate();
    rc = run(&o, server, ca, token);
    curl_global_cleanup();
    return rc;
}
