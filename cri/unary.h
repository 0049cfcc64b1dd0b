/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CRI's unary methods (pull.h, CRI_METHOD_UNARY), relayed as unary calls
 * on the event loop: the request message received, then one batch up (the
 * forwarded metadata, the request and the half-close, and the whole answer),
 * then one batch down (the runtime's headers, answer, status and trailers), as
 * the bare relay does it (bench/grpc_relay.c). A grpc-go runtime reads exactly
 * one request message of a unary method and answers it: so does this path
 * (a further message is never read); the byte pump (proxy.c), which every
 * other method takes, needs three times the completions for the same call.
 */
#ifndef PULLGATE_CRI_UNARY_H
#define PULLGATE_CRI_UNARY_H

#include <grpc/grpc.h>

/*
 * Takes over an incoming call of a unary CRI method (all moved); channel and
 * cq are borrowed and outlive the call. Called on the event loop, whose queue
 * cq is: every completion of the call runs there.
 */
void cri_unary_start(grpc_channel *channel, grpc_completion_queue *cq, grpc_call *incoming,
                     grpc_call_details *details, grpc_metadata_array *md);

#endif
