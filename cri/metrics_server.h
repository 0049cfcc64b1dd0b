/* SPDX-License-Identifier: Apache-2.0 */
/* pullgate-cri's GET /metrics listener (metrics_server.c, docs/metrics.md). */
#ifndef PULLGATE_CRI_METRICS_SERVER_H
#define PULLGATE_CRI_METRICS_SERVER_H

#include "internal.h"

/*
 * Defines the process's metrics (cri_metrics_init, counting stateDir's records)
 * and, unless criMetricsListen is "none", serves GET /metrics there until the
 * process exits. Never fails the daemon: a listener that cannot start is logged
 * at warning. Call once from main, before the threads that count start.
 */
void cri_metrics_start(const pg_config *cfg);

#endif
