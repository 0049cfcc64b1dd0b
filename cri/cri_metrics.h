/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-cri's metrics (docs/metrics.md): every name, label and label value
 * it exports is defined in cri_metrics.c's table, and counted through the
 * functions below, one line at the point where the event happens.
 *
 * One registry per process (the daemon's; the functions have no handle to pass
 * through the proxy's, the writer's and the hook server's threads). Before
 * cri_metrics_init every function does nothing, so the unit tests and the fuzz
 * targets that link the pull and hook code count nothing and need no setup.
 * After it, every function is lock-free and thread-safe. The metrics and their
 * labels: docs/metrics.md; each scrape also folds the local decisions spool
 * (hooks/local_spool.c) into the decisions counter, as path="local".
 */
#ifndef PULLGATE_CRI_CRI_METRICS_H
#define PULLGATE_CRI_CRI_METRICS_H

#include "metrics.h"

#include <stdbool.h>

/* The gRPC status code names of the code label, by code (NULL-terminated; "other" last). */
extern const char *const cri_metric_codes[];

/*
 * Creates the process's registry and defines every metric; state_dir is where
 * the records-on-disk gauges count (stateDir: pulled/, pulling/). Call once,
 * before any thread that counts starts.
 */
int cri_metrics_init(const char *state_dir, pg_error *err);
/* The registry (NULL before init): metrics_server.c renders it. */
pg_metrics *cri_metrics_registry(void);

/* One CRI call answered: its full method path ("/runtime.v1.RuntimeService/ListContainers";
 * any service version counts under the method's name, anything unknown as "other"), its
 * gRPC status code and its duration from arrival to answer. */
void cri_metric_call(const char *method_path, int grpc_code, double seconds);

/*
 * One record store operation ran: the writer's (recorder.c: "intent", "record": the pulled
 * record with its aliases, "release": a refused pull's intent) or a prune (prune.c), whether it
 * is durable, the credentials' attribution for a record (cri_cred_source_name(): "none",
 * "node", "secret", "unverified"; NULL otherwise), and the time from its submission to
 * its outcome (queue wait included: what a pull waits for).
 */
void cri_metric_record_done(const char *stage, bool ok, const char *credentials, double seconds);

/* A PullImage answered by pullgate itself (never forwarded, or not recordable): its gRPC code and a bounded
 * reason (cri_metric_refusal_reason, or one of cri_metric_refusal_reasons). */
void cri_metric_pull_refused(int grpc_code, const char *reason);
/*
 * The reason label for a refusal, from where the pull stood (pull.h's enums, as
 * ints so that every part can include this header without pull.h): decoded is a
 * cri_decode_result, slot a cri_slot_state, intent a cri_record_outcome.
 *   cancelled                                             (grpc_code CANCELLED, at any point)
 *   not-understood, credentials-unusable, out-of-memory   (the request did not decode)
 *   no-slot                                               (too many pulls in flight)
 *   intent-failed, intent-timeout, writer-full            (the intent is not durable)
 *   not-forwarded                                         (the intent was durable; sending failed)
 * and, counted by the caller after the runtime pulled (the intent stays):
 *   record-share                                          (the namespace's share of the record)
 *   record-full                                           (the record's 8 MiB bound)
 */
const char *cri_metric_refusal_reason(int grpc_code, int decoded, int slot, int intent);

/* One connection to the hook socket, by result (cri_metric_hook_results; docs/metrics.md). */
void cri_metric_hook_request(const char *result);
/* One decision on the resident hook path, delivered to the hook (one that was not is
 * decided again by pullgate-hook-local, and counted there): allowed or not (audit: a
 * denial not enforced, counted as result="audit-deny"), pg_reason_name() of its reason
 * ("not-kubernetes" when there is none), and how long the evaluation took. */
void cri_metric_hook_decision(bool allowed, bool audit, const char *reason, double seconds);
/* One decision pullgate-hook-local spooled: when (Unix time), its result ("allow",
 * "deny", "audit-deny") and reason; NULL result: a spool line that is not a decision,
 * counted as result="other", reason="other". */
void cri_metric_local_decision(long long when, const char *result, const char *reason);
/* pullgate-cri's own prune completed, deleting this many records. */
void cri_metric_pruned(unsigned records);
/* 1 while the hook server serves its socket, 0 when it is not started or stopped. */
void cri_metric_hook_server_up(bool up);

/* One verification of the kubelet's ImageStatus, by result (cri_metric_verification_results;
 * docs/metrics.md). */
void cri_metric_verification(const char *result);

#endif
