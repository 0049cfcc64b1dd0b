/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small helpers over gRPC's C core shared by the generic proxy (proxy.c) and
 * the intercepted calls (intercept.c): completion-queue tags, batch ops,
 * metadata filtering, and wiping byte buffers that held credentials.
 */
#ifndef PULLGATE_CRI_GRPC_UTIL_H
#define PULLGATE_CRI_GRPC_UTIL_H

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>

#include <stdbool.h>

#define CRI_MAX_MESSAGE_BYTES (16 << 20) /* the kubelet's default max receive size */
#include <stddef.h>
#include <stdint.h>

typedef void (*cri_handler_fn)(void *arg, int ok);

/* A completion-queue tag: what the event loop runs when an operation completes. */
typedef struct cri_tag {
    cri_handler_fn fn;
    void *arg;
} cri_tag;

grpc_op cri_op(grpc_op_type type);

/*
 * A server's whole answer as the ops of one batch: initial metadata, the message (skipped when
 * NULL) and the status with its trailers, into ops[0..2]. Returns how many were set. Nothing is
 * copied: every argument must live until the batch completes.
 */
size_t cri_answer_ops(grpc_op ops[3], grpc_status_code code, grpc_slice *details,
                      grpc_metadata *initial, size_t n_initial, grpc_metadata *trailing,
                      size_t n_trailing, grpc_byte_buffer *message);
const char *cri_status_name(grpc_status_code s);
/* The debug log line of a relayed call's end (start_ms: pg_monotonic_ms at its arrival). */
void cri_log_call_end(const char *method, grpc_status_code status, int64_t start_ms, int delivered);

/*
 * A filtered view of md (the entries share md's slices) without the headers of
 * one HTTP/2 and gRPC hop, which gRPC writes anew for the next hop; *out is
 * NULL when nothing is left (or out of memory: no metadata is forwarded).
 */
void cri_filter_md(const grpc_metadata_array *md, grpc_metadata **out, size_t *n);

/* The whole payload of a byte buffer as one new slice (caller unrefs; wipe first
 * with cri_slice_wipe when it may hold credentials). */
grpc_slice cri_flatten(grpc_byte_buffer *bb);
/* Overwrites a slice's bytes (it must not be a static slice). */
void cri_slice_wipe(grpc_slice s);
/* Overwrites every byte a byte buffer holds, then destroys it (NULL-safe): the
 * received slices may be the transport's own read buffers, wiped in place. */
void cri_byte_buffer_wipe_destroy(grpc_byte_buffer *bb);

/*
 * What every relayed call holds, the plain proxy's (proxy.c) and the intercepted ones'
 * (call.h): both ends, the incoming details and metadata, the runtime's metadata and
 * status, and the filtered views of each that are forwarded (cri_filter_md).
 */
typedef struct cri_relay {
    grpc_call *down; /* kubelet -> proxy */
    grpc_call *up;   /* proxy -> runtime, NULL until started */
    grpc_call_details details;
    grpc_metadata_array client_md, up_initial_md, up_trailing_md;
    grpc_metadata *fwd_md, *fwd_initial, *fwd_trailing;
    size_t n_fwd_md, n_fwd_initial, n_fwd_trailing;
    grpc_status_code status;
    grpc_slice status_details;
    int down_cancelled;
} cri_relay;

/* Takes over an incoming call, its details and metadata (moved: the caller's are zeroed)
 * and filters the metadata to forward. */
void cri_relay_init(cri_relay *r, grpc_call *incoming, grpc_call_details *details,
                    grpc_metadata_array *md);
/* The call to the runtime: the incoming method, host and deadline, the incoming call its
 * parent (deadline and cancellation propagate). r->up, NULL when gRPC refuses. */
grpc_call *cri_relay_start_up(cri_relay *r, grpc_channel *channel, grpc_completion_queue *cq);
/* Every gRPC object r holds. */
void cri_relay_release(cri_relay *r);

grpc_arg cri_int_arg(const char *key, int value);
/*
 * The channel to the runtime (unix:///path): 16 MiB messages, reconnect
 * backoff capped at 1 s, the retry layer kept, no channelz, no HTTP proxy.
 */
grpc_channel *cri_runtime_channel(const char *target);

#endif
