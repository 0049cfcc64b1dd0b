/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client side of the resident hook exchange (hook_proto.h): connect to a
 * root-owned server, send one request with the bundle directory as an fd,
 * receive one reply, all within one deadline. Used by the thin pullgate-hook
 * and by pullgatectl doctor's probe of pullgate-cri's hook socket. Only libc
 * and pg_monotonic_ms(): the thin hook links this and stays free of libcrypto.
 */
#ifndef PULLGATE_HOOK_CLIENT_H
#define PULLGATE_HOOK_CLIENT_H

#include "hook_proto.h"

#include <stddef.h>
#include <stdint.h>

/* Why an exchange failed, for callers that report it (the doctor); the hook only falls back. */
typedef enum hook_client_error {
    HOOK_CLIENT_OK = 0,
    HOOK_CLIENT_NO_SERVER, /* no socket, nothing listening, or the path is too long */
    HOOK_CLIENT_NOT_ROOT,  /* the server does not run as uid 0: never trusted */
    HOOK_CLIENT_TIMEOUT,   /* no answer before the deadline */
    HOOK_CLIENT_BAD_REPLY  /* a send error, or a reply that does not decode */
} hook_client_error;

/*
 * Sends msg (len bytes, encoded by hook_proto_encode_request) with bundle_fd
 * to the server on path and decodes its one reply into *reply (pointing into
 * buf, cap bytes) before deadline (pg_monotonic_ms() time). Returns 0, or -1
 * with *why (may be NULL) saying what failed.
 */
int hook_client_exchange_why(const char *path, const unsigned char *msg, size_t len, int bundle_fd,
                             int64_t deadline, unsigned char *buf, size_t cap, hook_reply *reply,
                             hook_client_error *why);

#endif
