/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-cri's GET /metrics (docs/metrics.md): plain HTTP on criMetricsListen
 * (default 127.0.0.1:9469, loopback: a node's Prometheus agent scrapes it
 * there, or through a proxy the operator chooses), served by libmicrohttpd,
 * the HTTP library the webhook already uses.
 *
 * Anyone who can reach the address may read it, so it serves nothing else and
 * nothing secret: counts, durations and the build, never an image name, a
 * namespace or a credential (every label value is fixed in cri_metrics.c).
 * Bounded like every other socket: one polling thread, a few connections,
 * a short timeout, a request body discarded as it arrives.
 *
 * Metrics are an observer: an address that cannot be bound is logged and the
 * daemon runs on (the kubelet's CRI and the hook must not go down because a
 * port is taken); Prometheus then reports the target down, which the
 * PullgateCRIDown alert catches.
 */
#include "metrics_server.h"

#include "cri_metrics.h"
#include "http_respond.h"
#include "log.h"

#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CONNECTIONS 8u
#define MAX_PER_PEER 4u
#define TIMEOUT_S 5u

static struct MHD_Daemon *the_daemon; /* the process's listener, until exit */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
    (void)cls, (void)version, (void)upload_data;
    if (!*req_cls) { /* headers only: answer at the next call */
        *req_cls = c;
        return MHD_YES;
    }
    if (*upload_data_size) { /* a body nobody asked for: dropped */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(url, "/metrics") != 0)
        return pg_http_respond(c, MHD_HTTP_NOT_FOUND, "text/plain", strdup("not found\n"));
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return pg_http_respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
                               strdup("GET /metrics\n"));
    return pg_http_respond_metrics(c, cri_metrics_registry());
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char text[256];
    pg_http_log_text(text, sizeof text, fmt, ap);
    cri_log(CRI_LOG_DEBUG, "metrics listener", "detail", text, NULL);
}

static struct MHD_Daemon *listen_on(const struct sockaddr_storage *ss)
{
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG |
                         (ss->ss_family == AF_INET6 ? MHD_USE_IPv6 : 0);
    return MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_EXTERNAL_LOGGER,
                            on_mhd_log, NULL, MHD_OPTION_SOCK_ADDR, ss, MHD_OPTION_CONNECTION_LIMIT,
                            MAX_CONNECTIONS, MHD_OPTION_PER_IP_CONNECTION_LIMIT, MAX_PER_PEER,
                            MHD_OPTION_CONNECTION_TIMEOUT, TIMEOUT_S, MHD_OPTION_END);
}

void cri_metrics_start(const pg_config *cfg)
{
    pg_error err = {0};
    if (!cri_metrics_registry() && cri_metrics_init(pg_config_state_dir(cfg), &err) != PG_OK) {
        cri_log(CRI_LOG_ERROR, "metrics not started", "error", err.message, NULL);
        return;
    }
    const char *address = pg_config_cri_metrics_listen(cfg);
    if (!address || the_daemon)
        return; /* counted, not served (criMetricsListen "none") */
    struct sockaddr_storage ss;
    if (pg_http_parse_address(address, &ss) != 0 || !(the_daemon = listen_on(&ss)))
        cri_log(CRI_LOG_WARNING, "metrics listener not started (address in use?): serving on",
                "criMetricsListen", address, NULL);
    else
        cri_log(CRI_LOG_INFO, "metrics listening", "criMetricsListen", address, NULL);
}
