/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-webhook: the mutating admission webhook that writes the pod
 * credentials annotation (docs/webhook.md, pullgate-webhook(8)).
 */
#include "server.h"
#include "tlscert.h"
#include "wlog.h"

#include <curl/curl.h>
#include <getopt.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "pullgate-webhook"
#define DEFAULT_LISTEN "0.0.0.0:8443"
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define STOP_GRACE_MS 5000L
#define EXIT_USAGE 2

typedef struct options {
    const char *config, *tls_cert, *tls_key, *listen, *api_server, *api_ca, *api_token,
        *hmac_key_file;
} options;

enum { OPT_CONFIG = 256, OPT_CERT, OPT_KEY, OPT_LISTEN, OPT_SERVER, OPT_CA, OPT_TOKEN, OPT_HMAC };

static const struct option long_options[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"tls-cert", required_argument, NULL, OPT_CERT},
    {"tls-key", required_argument, NULL, OPT_KEY},
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"api-server", required_argument, NULL, OPT_SERVER},
    {"api-ca", required_argument, NULL, OPT_CA},
    {"api-token-file", required_argument, NULL, OPT_TOKEN},
    {"hmac-key-file", required_argument, NULL, OPT_HMAC},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0}};

static void usage(FILE *out)
{
    fputs("Usage: " PROG " [--config FILE] --tls-cert FILE --tls-key FILE [--listen ADDR:PORT]\n"
          "       [--api-server URL --api-ca FILE --api-token-file FILE] [--hmac-key-file FILE]\n"
          "\nServes POST /mutate (admission.k8s.io/v1 AdmissionReview for pods), GET /healthz,\n"
          "GET /readyz over HTTPS (default " DEFAULT_LISTEN "). Without --api-* it uses the\n"
          "in-cluster configuration (KUBERNETES_SERVICE_HOST/PORT, " SA_DIR ").\n"
          "--config reads credentialsAnnotation and hmacKeyFile from pullgate.json(5);\n"
          "--hmac-key-file overrides hmacKeyFile. See pullgate-webhook(8).\n",
          out);
}

static int usage_error(const char *what)
{
    fprintf(stderr, PROG ": %s (see --help)\n", what);
    return EXIT_USAGE;
}

static int parse_options(int argc, char **argv, options *o)
{
    int c;
    while ((c = getopt_long(argc, argv, "hV", long_options, NULL)) != -1) {
        switch (c) {
        case OPT_CONFIG: o->config = optarg; break;
        case OPT_CERT: o->tls_cert = optarg; break;
        case OPT_KEY: o->tls_key = optarg; break;
        case OPT_LISTEN: o->listen = optarg; break;
        case OPT_SERVER: o->api_server = optarg; break;
        case OPT_CA: o->api_ca = optarg; break;
        case OPT_TOKEN: o->api_token = optarg; break;
        case OPT_HMAC: o->hmac_key_file = optarg; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf(PROG " %s\n", PG_WEBHOOK_VERSION); exit(0);
        default: return usage_error("unknown option");
        }
    }
    if (optind != argc)
        return usage_error("unexpected operand");
    if (!o->tls_cert || !o->tls_key)
        return usage_error("--tls-cert and --tls-key are required");
    int n_api = !!o->api_server + !!o->api_ca + !!o->api_token;
    if (n_api != 0 && n_api != 3)
        return usage_error("give all of --api-server, --api-ca and --api-token-file, or none");
    if (!o->listen)
        o->listen = DEFAULT_LISTEN;
    return 0;
}

/* ADDR:PORT or [V6ADDR]:PORT, numeric only. */
static int parse_listen(const char *text, struct sockaddr_storage *ss, int *ipv6)
{
    char host[128];
    const char *colon = strrchr(text, ':');
    if (!colon || (size_t)(colon - text) >= sizeof host || !colon[1])
        return -1;
    size_t n = (size_t)(colon - text);
    memcpy(host, text, n);
    host[n] = '\0';
    char *h = host;
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host[n - 1] = '\0';
        h++;
    }
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                             .ai_socktype = SOCK_STREAM};
    struct addrinfo *ai = NULL;
    if (getaddrinfo(h, colon + 1, &hints, &ai) != 0 || !ai)
        return -1;
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *ipv6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    return 0;
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

static void log_tls(const char *level, const char *msg, const char *detail)
{
    wh_log(level, msg, detail);
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

static int run(const options *o, const char *server_url, const char *ca, const char *token)
{
    char msg[WH_MESSAGE_MAX] = "";
    char *annotation = NULL, *key_file = NULL;
    struct sockaddr_storage ss;
    int ipv6 = 0, status = 1;
    wh_tls *tls = NULL;
    wh_kubeapi *api = NULL;
    wh_server *server = NULL;
    if (parse_listen(o->listen, &ss, &ipv6) != 0)
        snprintf(msg, sizeof msg, "--listen %.100s: expected ADDR:PORT", o->listen);
    else if (read_config(o, &annotation, &key_file) != 0)
        snprintf(msg, sizeof msg, "configuration unusable");
    else if ((tls = wh_tls_new(o->tls_cert, o->tls_key, log_tls, msg, sizeof msg)) &&
             (api = wh_kubeapi_new(server_url, ca, token, msg, sizeof msg))) {
        wh_server_config cfg = {annotation, key_file, api, WH_REVIEW_BUDGET_MS};
        server = wh_server_start((struct sockaddr *)&ss, ipv6, &cfg, msg, sizeof msg);
    }
    if (server) {
        json_t *f = json_pack("{s:s, s:s, s:s, s:b}", "listen", o->listen, "apiServer", server_url,
                              "annotation", annotation, "hmac", *key_file != '\0');
        wh_log_fields("info", "serving", f);
        json_decref(f);
        int sig = wait_for_signal();
        wh_log("info", "stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        wh_server_stop(server, STOP_GRACE_MS);
        wh_log("info", "stopped", NULL);
        status = 0;
    } else
        wh_log("error", "cannot start", msg);
    wh_kubeapi_free(api);
    wh_tls_free(tls);
    free(annotation);
    free(key_file);
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
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
        wh_log("error", "cannot initialise libcurl", NULL);
        return 1;
    }
    rc = run(&o, server, ca, token);
    curl_global_cleanup();
    return rc;
}
