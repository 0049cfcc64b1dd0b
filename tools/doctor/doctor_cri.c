/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The doctor's one CRI call, runtime.v1.RuntimeService/Version, made with gRPC's
 * C core (as pullgate-cri does) and decoded with protobuf-c. Through
 * pullgate-cri it proves the whole path the kubelet uses: the proxy answers and
 * the runtime behind it answers (the proxy forwards Version unchanged).
 */
#include "cri_version.pb-c.h"
#include "doctor.h"
#include "grpc_unary.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <stdio.h>
#include <string.h>

#define VERSION_METHOD "/runtime.v1.RuntimeService/Version"
#define MAX_REPLY_BYTES (64u << 10)

static void describe(grpc_slice answer, char *out, size_t n)
{
    Runtime__V1__VersionResponse *v =
        GRPC_SLICE_LENGTH(answer) <= MAX_REPLY_BYTES
            ? runtime__v1__version_response__unpack(NULL, GRPC_SLICE_LENGTH(answer),
                                                    GRPC_SLICE_START_PTR(answer))
            : NULL;
    if (!v) {
        snprintf(out, n, "an answer that is not a VersionResponse");
        return;
    }
    snprintf(out, n, "%.64s %.64s, CRI %.32s", v->runtime_name, v->runtime_version,
             v->runtime_api_version);
    runtime__v1__version_response__free_unpacked(v, NULL);
}

int pgd_cri_version(const char *endpoint, int timeout_ms, char *out, size_t n, pg_error *err)
{
    out[0] = '\0';
    if (strncmp(endpoint, "unix://", 7) != 0 || endpoint[7] != '/')
        return pg_fail(err, PG_ERR_INVALID, "not a unix:///absolute/path endpoint");
    grpc_init();
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *channel = grpc_channel_create(endpoint, creds, NULL);
    grpc_channel_credentials_release(creds);
    grpc_slice answer = grpc_empty_slice();
    grpc_status_code status;
    /* VersionRequest{}: every field empty, no bytes. */
    int rc = pg_grpc_unary_call(channel, VERSION_METHOD, "", 0, timeout_ms, &answer, &status, err);
    if (rc == PG_OK)
        describe(answer, out, n);
    grpc_slice_unref(answer);
    grpc_channel_destroy(channel);
    grpc_shutdown();
    return rc;
}
