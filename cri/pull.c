/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The calls pullgate-cri intercepts (the method table), the ones it relays as
 * unary calls, and the admission rule of a pull (docs/interfaces.md §10):
 * which step a decoded request takes next.
 */
#include "pull.h"

#include <grpc/status.h>
#include <string.h>

/* ------------------------------------------------------------ methods */

typedef struct intercepted {
    const char *service;
    const char *method;
    cri_method_kind kind;
    const char *image_status; /* the same service's ImageStatus */
} intercepted;

/* The table of intercepted methods (every other call is forwarded as bytes). */
static const intercepted intercepted_methods[] = {
    {"runtime.v1.ImageService", "PullImage", CRI_METHOD_PULL_IMAGE,
     "/runtime.v1.ImageService/ImageStatus"},
    {"runtime.v1alpha2.ImageService", "PullImage", CRI_METHOD_PULL_IMAGE,
     "/runtime.v1alpha2.ImageService/ImageStatus"},
    {"runtime.v1.ImageService", "ImageStatus", CRI_METHOD_IMAGE_STATUS,
     "/runtime.v1.ImageService/ImageStatus"},
    {"runtime.v1alpha2.ImageService", "ImageStatus", CRI_METHOD_IMAGE_STATUS,
     "/runtime.v1alpha2.ImageService/ImageStatus"},
};

/*
 * The CRI's unary methods (cri-api's api.proto, runtime.v1; runtime.v1alpha2 has a subset under
 * the same names), relayed as unary calls (unary.h). GetContainerEvents streams and is not here;
 * a method added to the CRI later is pumped as a stream until it is added.
 */
/* clang-format off */
static const char *const runtime_unary[] = {
    "Version", "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "PodSandboxStatus",
    "ListPodSandbox", "CreateContainer", "StartContainer", "StopContainer", "RemoveContainer",
    "ListContainers", "ContainerStatus", "UpdateContainerResources", "ReopenContainerLog",
    "ExecSync", "Exec", "Attach", "PortForward", "ContainerStats", "ListContainerStats",
    "PodSandboxStats", "ListPodSandboxStats", "UpdateRuntimeConfig", "Status",
    "CheckpointContainer", "ListMetricDescriptors", "ListPodSandboxMetrics", "RuntimeConfig",
    "UpdatePodSandboxResources", NULL};
static const char *const image_unary[] = {"ListImages", "RemoveImage", "ImageFsInfo", NULL};
/* clang-format on */

static bool span_is(const char *s, size_t n, const char *text)
{
    return strlen(text) == n && memcmp(s, text, n) == 0;
}

static bool listed(const char *const *names, const char *method, size_t method_len)
{
    for (size_t i = 0; names[i]; i++)
        if (span_is(method, method_len, names[i]))
            return true;
    return false;
}

static bool is_unary(const char *service, size_t service_len, const char *method, size_t method_len)
{
    if (span_is(service, service_len, "runtime.v1.RuntimeService") ||
        span_is(service, service_len, "runtime.v1alpha2.RuntimeService"))
        return listed(runtime_unary, method, method_len);
    if (span_is(service, service_len, "runtime.v1.ImageService") ||
        span_is(service, service_len, "runtime.v1alpha2.ImageService"))
        return listed(image_unary, method, method_len);
    return false;
}

cri_method cri_method_parse(const char *path, size_t len)
{
    cri_method m = {CRI_METHOD_OTHER, NULL};
    if (!path || memchr(path, '\0', len))
        return m;
    /* grpc-go: one leading '/' is dropped, then service/method split at the last '/'. */
    if (len > 0 && path[0] == '/') {
        path++;
        len--;
    }
    const char *slash = NULL;
    for (size_t i = 0; i < len; i++)
        if (path[i] == '/')
            slash = path + i;
    if (!slash)
        return m;
    size_t service_len = (size_t)(slash - path);
    const char *method = slash + 1;
    size_t method_len = len - service_len - 1;
    for (size_t i = 0; i < sizeof intercepted_methods / sizeof intercepted_methods[0]; i++) {
        const intercepted *t = &intercepted_methods[i];
        if (span_is(path, service_len, t->service) && span_is(method, method_len, t->method)) {
            m.kind = t->kind;
            m.image_status = t->image_status;
            return m;
        }
    }
    if (is_unary(path, service_len, method, method_len))
        m.kind = CRI_METHOD_UNARY;
    return m;
}

/* ------------------------------------------------------------ admission */

static cri_admission refuse(int code, const char *message)
{
    cri_admission a = {CRI_STEP_REFUSE, code, message};
    return a;
}

static cri_admission step(cri_next_step s)
{
    cri_admission a = {s, GRPC_STATUS_OK, NULL};
    return a;
}

/* The refusal for a request that did not decode (never called with CRI_DECODED). */
static cri_admission admit_decoded(cri_decode_result decoded)
{
    switch (decoded) {
    case CRI_NOT_A_PULL:
        return refuse(GRPC_STATUS_INVALID_ARGUMENT,
                      "pullgate: PullImage request not understood; not forwarded");
    case CRI_CREDS_UNUSABLE:
        return refuse(GRPC_STATUS_INVALID_ARGUMENT,
                      "pullgate: the pull's credentials cannot be used; not forwarded");
    case CRI_EXTRA_MESSAGE:
        return refuse(GRPC_STATUS_INVALID_ARGUMENT,
                      "pullgate: PullImage takes exactly one request message");
    case CRI_DECODE_NO_RESOURCE:
        return refuse(GRPC_STATUS_RESOURCE_EXHAUSTED, "pullgate: out of memory; retry");
    case CRI_DECODED: break; /* not a refusal: the caller goes on to the slot and the intent */
    }
    return refuse(GRPC_STATUS_INTERNAL, "pullgate: internal error");
}

cri_admission cri_pull_admit(cri_decode_result decoded, cri_slot_state slot,
                             cri_record_outcome intent)
{
    if (decoded != CRI_DECODED)
        return admit_decoded(decoded);
    if (slot == CRI_SLOT_WAITING)
        return step(CRI_STEP_WAIT_SLOT);
    if (slot != CRI_SLOT_HELD)
        return refuse(GRPC_STATUS_RESOURCE_EXHAUSTED,
                      "pullgate: too many image pulls in flight; retry");
    switch (intent) {
    case CRI_RECORD_NOT_SUBMITTED: return step(CRI_STEP_RECORD_INTENT);
    case CRI_RECORD_WAITING: return step(CRI_STEP_WAIT_INTENT);
    case CRI_RECORD_DURABLE: return step(CRI_STEP_FORWARD);
    case CRI_RECORD_FAILED:
        return refuse(GRPC_STATUS_UNAVAILABLE,
                      "pullgate: the pull intent cannot be recorded; not forwarded");
    case CRI_RECORD_PENDING:
        return refuse(GRPC_STATUS_UNAVAILABLE,
                      "pullgate: the record store did not take the pull intent in time; retry");
    case CRI_RECORD_NOT_QUEUED:
        return refuse(GRPC_STATUS_RESOURCE_EXHAUSTED,
                      "pullgate: the record writer is backed up; retry");
    }
    return refuse(GRPC_STATUS_INTERNAL, "pullgate: internal error");
}
