/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wire format between the thin pullgate-hook and pullgate-cri's resident
 * hook server: one SOCK_SEQPACKET message each way over a root-only AF_UNIX
 * socket (docs/design.md, "The resident hook").
 *
 * Request (the bundle directory travels beside it as one SCM_RIGHTS fd):
 *   u32 magic "PGHQ", u16 version, u16 flags (bit 0: --config given),
 *   u32 stage_len, u32 config_len, u32 state_len,
 *   then stage, config path and OCI state bytes, back to back.
 * Reply:
 *   u32 magic "PGHR", u16 version, u16 kind (DECISION or NOT_MINE),
 *   u32 exit status, u32 line_len, then the stderr line.
 * Integers are little-endian. Both ends run on the same host, but spelling
 * the layout out keeps the parser a plain, fuzzable byte reader.
 * Only libc: the thin hook links this and must stay free of libcrypto.
 */
#ifndef PULLGATE_HOOK_PROTO_H
#define PULLGATE_HOOK_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define HOOK_PROTO_VERSION 1
#define HOOK_PROTO_REQ_MAGIC 0x51484750u   /* "PGHQ" little-endian */
#define HOOK_PROTO_REPLY_MAGIC 0x52484750u /* "PGHR" */
#define HOOK_PROTO_REQ_HEADER 20
#define HOOK_PROTO_REPLY_HEADER 16
#define HOOK_PROTO_FLAG_CONFIG_EXPLICIT 1u

#define HOOK_PROTO_MAX_STAGE 32
#define HOOK_PROTO_MAX_CONFIG 4096
/*
 * A larger OCI state goes to the local hook: one message must fit the
 * socket's send buffer (net.core.wmem_default, 208 KiB on Linux), and a
 * runtime's state with every annotation stays far below this.
 */
#define HOOK_PROTO_MAX_STATE (128u * 1024u)
#define HOOK_PROTO_MAX_REQUEST                                                                     \
    (HOOK_PROTO_REQ_HEADER + HOOK_PROTO_MAX_STAGE + HOOK_PROTO_MAX_CONFIG + HOOK_PROTO_MAX_STATE)
#define HOOK_PROTO_MAX_LINE 2048
#define HOOK_PROTO_MAX_REPLY (HOOK_PROTO_REPLY_HEADER + HOOK_PROTO_MAX_LINE)

typedef enum hook_reply_kind {
    HOOK_REPLY_DECISION = 1, /* status and line are the decision */
    HOOK_REPLY_NOT_MINE = 2  /* the daemon will not decide this one: decide locally */
} hook_reply_kind;

/* A request's fields; the strings point into the buffer they were decoded from. */
typedef struct hook_request {
    const char *stage;
    size_t stage_len;
    const char *config;
    size_t config_len;
    const char *state;
    size_t state_len;
    unsigned config_explicit;
} hook_request;

typedef struct hook_reply {
    hook_reply_kind kind;
    int status; /* 0 allow/audit, 1 deny */
    const char *line;
    size_t line_len;
} hook_reply;

/*
 * Encodes req into out (size cap); returns the message length, or 0 when a
 * field is over its bound or the message does not fit (then: decide locally).
 */
size_t hook_proto_encode_request(const hook_request *req, unsigned char *out, size_t cap);
/*
 * Decodes and validates a request of exactly len bytes: magic, version, no
 * unknown flag, each length within its bound and the sum equal to len, stage
 * and config path without NUL bytes, the config path absolute. The strings
 * point into buf and are NOT NUL-terminated. Returns 0, or -1 on any error.
 */
int hook_proto_decode_request(const unsigned char *buf, size_t len, hook_request *req);

size_t hook_proto_encode_reply(const hook_reply *reply, unsigned char *out, size_t cap);
/* As decode_request, for a reply: a known kind, status 0 or 1, the line bounded. */
int hook_proto_decode_reply(const unsigned char *buf, size_t len, hook_reply *reply);

#endif
