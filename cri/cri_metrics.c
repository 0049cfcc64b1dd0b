/* SPDX-License-Identifier: Apache-2.0 */
/* pullgate-cri's metric definitions and counting functions (cri_metrics.h). */
#include "cri_metrics.h"

#include "cleanup.h"
#include "hook.h" /* the local decisions spool */
#include "pull.h"

#include "pullgate/version.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* clang-format off: label values by the line, not one per line */
/* The CRI v1 methods (k8s.io/cri-api runtime/v1/api.proto, RuntimeService and ImageService). */
static const char *const cri_metric_methods[] = {
    "Version", "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "PodSandboxStatus",
    "ListPodSandbox", "CreateContainer", "StartContainer", "StopContainer", "RemoveContainer",
    "ListContainers", "ContainerStatus", "UpdateContainerResources", "ReopenContainerLog",
    "ExecSync", "Exec", "Attach", "PortForward", "ContainerStats", "ListContainerStats",
    "PodSandboxStats", "ListPodSandboxStats", "UpdateRuntimeConfig", "Status",
    "CheckpointContainer", "GetContainerEvents", "ListMetricDescriptors", "ListPodSandboxMetrics",
    "RuntimeConfig", "ListImages", "ImageStatus", "PullImage", "RemoveImage", "ImageFsInfo",
    "other", NULL};
const char *const cri_metric_codes[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED",
    "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
    "other", NULL};
static const char *const cri_metric_credentials[] = {
    "none", "node", "secret", "unverified", "runtime-namespace", "other", NULL};
static const char *const cri_metric_record_stages[] = {
    "intent", "record", "release", "prune", "other", NULL};
static const char *const cri_metric_refusal_reasons[] = {
    "not-understood", "credentials-unusable", "out-of-memory", "no-slot", "intent-failed",
    "intent-timeout", "writer-full", "cancelled", "not-forwarded", "record-share", "record-full",
    "other", NULL};
static const char *const cri_metric_hook_results[] = {
    "answered", "undelivered", "not-mine", "store-unavailable", "abandoned", "bad-request",
    "not-root", "other", NULL};
static const char *const cri_metric_decision_results[] = {
    "allow", "deny", "audit-deny", "other", NULL};
/* pg_reason_name()'s names (plugin/decide/decide.c). */
static const char *const cri_metric_decision_reasons[] = {
    "never-verify", "pinned", "preloaded", "allowlisted", "node-accessible", "secret-match",
    "service-account-match", "sandbox", "pod-pulled", "no-image-ref", "no-record", "no-mapping",
    "no-credentials", "credentials-mismatch", "expired", "bad-annotation", "store-error",
    "bad-request", "config-error", "annotation-signature", "not-kubernetes", "other", NULL};
static const char *const cri_metric_verification_results[] = {
    "verified", "policy-allowed", "must-pull", "error", "other", NULL};
static const char *const cri_metric_decision_paths[] = {"resident", "local", "other", NULL};
/* clang-format on */

static const double decision_buckets[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                          0.01,   0.025,   0.05,   0.1,   0.25,   1};
/* CRI calls: a proxied Version or ImageStatus takes 0.3-1 ms, a PullImage seconds to minutes. */
static const double call_buckets[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
                                      0.01,    0.025,  0.05,    0.1,    0.25,  0.5,    1,
                                      2.5,     5,      10,      30,     60};

/* Denials in the last hour (both paths), per minute: pullgatectl doctor's status line. */
#define DENIAL_MINUTES 60
typedef struct denial_ring {
    pthread_mutex_t lock;
    long long minute[DENIAL_MINUTES];
    unsigned count[DENIAL_MINUTES];
} denial_ring;

/* How long a fold waits for a hook in the middle of its append (microseconds of work). */
#define FOLD_WAIT_MS 50

/* The process's metrics: written once by cri_metrics_init before any counting thread starts. */
static struct {
    pg_metrics *reg;
    char *state_dir;
    pg_metric *pulled_records, *intents, *calls, *call_seconds, *recorded, *record_failures,
        *record_seconds, *refused, *hook_requests, *decisions, *decision_seconds, *hook_up,
        *verifications, *start_time, *last_prune, *pruned, *recent_denials;
    pthread_mutex_t fold_lock; /* one fold of the local spool at a time */
    denial_ring denials;
} m = {.fold_lock = PTHREAD_MUTEX_INITIALIZER,
       .denials = {.lock = PTHREAD_MUTEX_INITIALIZER}};

static void denial_at(long long when)
{
    long long now = (long long)time(NULL) / 60, minute = when / 60;
    if (minute > now)
        minute = now; /* a clock ahead: counted as now */
    if (minute <= now - DENIAL_MINUTES)
        return;
    denial_ring *r = &m.denials;
    size_t slot = (size_t)(minute % DENIAL_MINUTES);
    pthread_mutex_lock(&r->lock);
    if (r->minute[slot] != minute) {
        r->minute[slot] = minute;
        r->count[slot] = 0;
    }
    r->count[slot]++;
    pthread_mutex_unlock(&r->lock);
}

static double denials_last_hour(void)
{
    long long now = (long long)time(NULL) / 60;
    double n = 0;
    denial_ring *r = &m.denials;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < DENIAL_MINUTES; i++)
        if (r->minute[i] > now - DENIAL_MINUTES && r->minute[i] <= now)
            n += r->count[i];
    pthread_mutex_unlock(&r->lock);
    return n;
}

/* Record files in one subdirectory of stateDir, as the store names them (sha256-<hex>, no
 * .tmp); a directory that cannot be read counts nothing. No symlink is followed. */
static double count_records(const char *sub)
{
    pg_autoclose int dfd = open(m.state_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    pg_autoclose int fd =
        dfd >= 0 ? openat(dfd, sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d)
        return 0;
    fd = -1; /* closedir closes it */
    double n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "sha256-", 7) == 0 &&
            !(len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0))
            n++;
    }
    closedir(d);
    return n;
}

/* One line of the local spool: a decision pullgate-hook-local made (or, NULL, a line
 * that is not one: counted as result "other", never lost). */
static void on_local_decision(void *ctx, long long when, const char *result, const char *reason)
{
    (void)ctx;
    cri_metric_local_decision(when, result, reason);
}

/* The decisions pullgate-hook-local spooled since the last fold (hooks/local_spool.c). */
static void fold_local_decisions(void)
{
    pthread_mutex_lock(&m.fold_lock);
    hook_spool_take(m.state_dir, FOLD_WAIT_MS, on_local_decision, NULL);
    pthread_mutex_unlock(&m.fold_lock);
}

static void collect(void *ctx)
{
    (void)ctx;
    pg_metric_set(m.pulled_records, NULL, NULL, count_records("pulled"));
    pg_metric_set(m.intents, NULL, NULL, count_records("pulling"));
    fold_local_decisions();
    pg_metric_set(m.recent_denials, NULL, NULL, denials_last_hour());
}

static int define_all(pg_error *err)
{
    const pg_metric_def defs[] = {
        {.name = "pullgate_cri_ondisk_pulledrecords",
         .type = PG_METRIC_GAUGE,
         .help = "Pulled records in stateDir (the kubelet's "
                 "kubelet_imagemanager_ondisk_pulledrecords, for pullgate's store)."},
        {.name = "pullgate_cri_ondisk_pullintents",
         .type = PG_METRIC_GAUGE,
         .help = "Pull intents in stateDir (the kubelet's kubelet_imagemanager_ondisk_pullintents, "
                 "for pullgate's store)."},
        {.name = "pullgate_cri_calls_total",
         .type = PG_METRIC_COUNTER,
         .help = "CRI calls answered, by method and gRPC status code.",
         .nlabels = 2,
         .labels = {{"method", cri_metric_methods}, {"code", cri_metric_codes}},
         .sparse = 1},
        {.name = "pullgate_cri_call_duration_seconds",
         .type = PG_METRIC_HISTOGRAM,
         .help = "CRI calls from arrival to answer, by method.",
         .nlabels = 1,
         .labels = {{"method", cri_metric_methods}},
         .buckets = call_buckets,
         .nbuckets = sizeof call_buckets / sizeof call_buckets[0],
         .sparse = 1},
        {.name = "pullgate_cri_pulls_recorded_total",
         .type = PG_METRIC_COUNTER,
         .help = "Pulls recorded, by how their credentials were attributed.",
         .nlabels = 1,
         .labels = {{"credentials", cri_metric_credentials}}},
        {.name = "pullgate_cri_recording_failures_total",
         .type = PG_METRIC_COUNTER,
         .help = "Record store writes that failed, by stage (intent: the pull was refused; "
                 "record: the runtime pulled, the intent stays).",
         .nlabels = 1,
         .labels = {{"stage", cri_metric_record_stages}}},
        {.name = "pullgate_cri_recording_duration_seconds",
         .type = PG_METRIC_HISTOGRAM,
         .help = "Record store writes from submission to outcome, by stage.",
         .nlabels = 1,
         .labels = {{"stage", cri_metric_record_stages}},
         .buckets = pg_metrics_latency_buckets,
         .nbuckets = pg_metrics_latency_nbuckets},
        {.name = "pullgate_cri_pulls_refused_total",
         .type = PG_METRIC_COUNTER,
         .help = "PullImage calls answered by pullgate-cri: never forwarded, or pulled and "
                 "not recordable (record-share, record-full), by gRPC code and reason.",
         .nlabels = 2,
         .labels = {{"code", cri_metric_codes}, {"reason", cri_metric_refusal_reasons}},
         .sparse = 1},
        {.name = "pullgate_cri_hook_requests_total",
         .type = PG_METRIC_COUNTER,
         .help = "Requests of pullgate-hook on the resident path, by result.",
         .nlabels = 1,
         .labels = {{"result", cri_metric_hook_results}}},
        {.name = "pullgate_cri_hook_decisions_total",
         .type = PG_METRIC_COUNTER,
         .help = "Container starts decided, by result, reason and path (resident: by "
                 "pullgate-cri; local: by pullgate-hook-local, counted once pullgate-cri folds "
                 "its spool).",
         .nlabels = 3,
         .labels = {{"result", cri_metric_decision_results},
                    {"reason", cri_metric_decision_reasons},
                    {"path", cri_metric_decision_paths}},
         .sparse = 1},
        {.name = "pullgate_cri_hook_decision_duration_seconds",
         .type = PG_METRIC_HISTOGRAM,
         .help = "Decisions on the resident hook path, from request to answer.",
         .buckets = decision_buckets,
         .nbuckets = sizeof decision_buckets / sizeof decision_buckets[0]},
        {.name = "pullgate_cri_hook_server_up",
         .type = PG_METRIC_GAUGE,
         .help = "1 while the resident hook server serves its socket."},
        {.name = "pullgate_cri_image_verifications_total",
         .type = PG_METRIC_COUNTER,
         .help = "Verifications of the kubelet's ImageStatus, by result (the kubelet's "
                 "kubelet_imagemanager_image_mustpull_checks_total).",
         .nlabels = 1,
         .labels = {{"result", cri_metric_verification_results}}},
        {.name = "pullgate_cri_start_timestamp_seconds",
         .type = PG_METRIC_GAUGE,
         .help = "When this pullgate-cri process started (Unix time)."},
        {.name = "pullgate_cri_last_prune_timestamp_seconds",
         .type = PG_METRIC_GAUGE,
         .help = "When pullgate-cri's own prune last completed (Unix time; 0: not yet)."},
        {.name = "pullgate_cri_records_pruned_total",
         .type = PG_METRIC_COUNTER,
         .help = "Pulled records deleted by pullgate-cri's own prune."},
        {.name = "pullgate_cri_hook_denials_last_hour",
         .type = PG_METRIC_GAUGE,
         .help = "Container starts denied (or audit-denied) in the last hour, both paths: "
                 "pullgatectl doctor's status; dashboards use the counter."},
    };
    pg_metric **slots[] = {
        &m.pulled_records,   &m.intents,        &m.calls,         &m.call_seconds,  &m.recorded,
        &m.record_failures,  &m.record_seconds, &m.refused,       &m.hook_requests, &m.decisions,
        &m.decision_seconds, &m.hook_up,        &m.verifications, &m.start_time,    &m.last_prune,
        &m.pruned,           &m.recent_denials};
    _Static_assert(sizeof defs / sizeof defs[0] == sizeof slots / sizeof slots[0],
                   "one slot per definition");
    return pg_metrics_define(PG_VERSION_STRING, "cri", defs, slots, sizeof defs / sizeof defs[0],
                             &m.reg, err);
}

int cri_metrics_init(const char *state_dir, pg_error *err)
{
    if (m.reg)
        return pg_fail(err, PG_ERR_INTERNAL, "metrics already initialised");
    if (!(m.state_dir = strdup(state_dir)))
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    int rc = define_all(err);
    if (rc != PG_OK) {
        free(m.state_dir);
        m.state_dir = NULL;
        return rc;
    }
    pg_metric_set(m.start_time, NULL, NULL, (double)time(NULL));
    pg_metrics_on_collect(m.reg, collect, NULL);
    return 0;
}

pg_metrics *cri_metrics_registry(void) { return m.reg; }

/* "/runtime.v1.RuntimeService/ListContainers" -> "ListContainers" (bounded by the label). */
static const char *method_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path;
}

static const char *code_name(int code)
{
    return code >= 0 && code < 17 ? cri_metric_codes[code] : "other";
}

void cri_metric_call(const char *method_path, int grpc_code, double seconds)
{
    if (!m.reg)
        return;
    const char *method = method_name(method_path);
    pg_metric_inc(m.calls, method, code_name(grpc_code));
    pg_metric_observe(m.call_seconds, method, NULL, seconds);
}

void cri_metric_record_done(const char *stage, bool ok, const char *credentials, double seconds)
{
    if (!m.reg)
        return;
    pg_metric_observe(m.record_seconds, stage, NULL, seconds);
    if (!ok)
        pg_metric_inc(m.record_failures, stage, NULL);
    else if (stage && strcmp(stage, "record") == 0)
        pg_metric_inc(m.recorded, credentials, NULL);
}

void cri_metric_pull_refused(int grpc_code, const char *reason)
{
    pg_metric_inc(m.refused, code_name(grpc_code), reason);
}

const char *cri_metric_refusal_reason(int grpc_code, int decoded, int slot, int intent)
{
    if (grpc_code == 1) /* CANCELLED: the caller went away, wherever the pull stood */
        return "cancelled";
    switch ((cri_decode_result)decoded) {
    case CRI_DECODED: break;
    case CRI_NOT_A_PULL:
    case CRI_EXTRA_MESSAGE: return "not-understood";
    case CRI_CREDS_UNUSABLE: return "credentials-unusable";
    case CRI_DECODE_NO_RESOURCE: return "out-of-memory";
    default: return "other";
    }
    if (slot != CRI_SLOT_HELD)
        return "no-slot";
    switch ((cri_record_outcome)intent) {
    case CRI_RECORD_FAILED: return "intent-failed";
    case CRI_RECORD_PENDING:
    case CRI_RECORD_WAITING: return "intent-timeout";
    case CRI_RECORD_NOT_QUEUED: return "writer-full";
    default: break;
    }
    return "not-forwarded";
}

void cri_metric_hook_request(const char *result) { pg_metric_inc(m.hook_requests, result, NULL); }

void cri_metric_hook_decision(bool allowed, bool audit, const char *reason, double seconds)
{
    if (!m.reg)
        return;
    pg_metric_add3(m.decisions, allowed ? "allow" : audit ? "audit-deny" : "deny", reason,
                   "resident", 1);
    pg_metric_observe(m.decision_seconds, NULL, NULL, seconds);
    if (!allowed)
        denial_at((long long)time(NULL));
}

void cri_metric_local_decision(long long when, const char *result, const char *reason)
{
    if (!m.reg)
        return;
    /* Only the three results a hook writes; anything else (a line that is not a decision,
     * another version's word) is "other", so it is still counted, never dropped. */
    bool known = result && (strcmp(result, "allow") == 0 || strcmp(result, "deny") == 0 ||
                            strcmp(result, "audit-deny") == 0);
    pg_metric_add3(m.decisions, known ? result : "other", known ? reason : "other", "local", 1);
    if (known && strcmp(result, "allow") != 0)
        denial_at(when);
}

void cri_metric_pruned(unsigned records)
{
    if (!m.reg)
        return;
    pg_metric_add_value(m.pruned, NULL, NULL, records);
    pg_metric_set(m.last_prune, NULL, NULL, (double)time(NULL));
}

void cri_metric_hook_server_up(bool up) { pg_metric_set(m.hook_up, NULL, NULL, up ? 1 : 0); }

void cri_metric_verification(const char *result) { pg_metric_inc(m.verifications, result, NULL); }
