/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One blocking unary gRPC call of our own, for the programs that need one
 * answer from a CRI endpoint: pullgate-cri's prune (ListImages,
 * ListContainers) and pullgate-doctor (Version). gRPC's C core, a private
 * completion queue, the call's deadline bounding everything.
 */
#ifndef PULLGATE_COMMON_GRPC_UNARY_H
#define PULLGATE_COMMON_GRPC_UNARY_H

#include <grpc/grpc.h>

#include <stddef.h>

/*
 * Calls method on ch with the request bytes req[0..req_len) and waits at most timeout_ms.
 * Returns 0 when the status is OK and a response message came: its bytes are in *answer (a new
 * slice: the caller unrefs it). Otherwise -1, *answer is empty, *status says which
 * (GRPC_STATUS_UNKNOWN when the call never started; OK when no message came), and, when why is
 * not NULL, why[0..why_n) describes it ("status N: <details>", at most 300 bytes of details).
 */
int pg_grpc_unary_call(grpc_channel *ch, const char *method, const void *req, size_t req_len,
                       int timeout_ms, grpc_slice *answer, grpc_status_code *status, char *why,
                       size_t why_n);

#endif
