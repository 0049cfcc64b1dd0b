/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One blocking unary gRPC call of our own, for the programs that need one
 * answer from a CRI endpoint: pullgate-cri's prune (ListImages,
 * ListContainers) and pullgate-doctor (Version). gRPC's C core, a private
 * completion queue, the call's deadline bounding everything.
 */
#ifndef PULLGATE_COMMON_GRPC_UNARY_H
#define PULLGATE_COMMON_GRPC_UNARY_H

#include "pullgate/pullgate.h"

#include <grpc/grpc.h>

#include <stddef.h>

/* Where a unary call's answer is received: each must live until its batch completes. */
typedef struct pg_grpc_unary_answer {
    grpc_metadata_array *initial;
    grpc_byte_buffer **message;
    grpc_metadata_array *trailing;
    grpc_status_code *status;
    grpc_slice *details;
} pg_grpc_unary_answer;

/*
 * The six ops of one unary client call, into ops[0..5]: the initial metadata md[0..n_md) (NULL, 0
 * for none), request and the half-close sent; the answer received into *into's places. Nothing
 * is copied: every argument must live until the batch completes.
 */
void pg_grpc_unary_ops(grpc_op ops[6], grpc_metadata *md, size_t n_md, grpc_byte_buffer *request,
                       const pg_grpc_unary_answer *into);

/*
 * Calls method on ch with the request bytes req[0..req_len) and waits at most timeout_ms.
 * PG_OK when the status is OK and a response message came: its bytes are in *answer (a new
 * slice: the caller unrefs it). Otherwise *answer is empty, *status says which
 * (GRPC_STATUS_UNKNOWN when the call never started; OK when no message came) and err says
 * "status N: <details>" (at most 300 bytes of details): PG_ERR_TIMEOUT for
 * DEADLINE_EXCEEDED, PG_ERR_IO otherwise.
 */
int pg_grpc_unary_call(grpc_channel *ch, const char *method, const void *req, size_t req_len,
                       int timeout_ms, grpc_slice *answer, grpc_status_code *status, pg_error *err);

#endif
