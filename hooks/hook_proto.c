/* SPDX-License-Identifier: Apache-2.0 */
/* The resident hook's wire format (hook_proto.h): plain, bounded byte reading. */
#include "hook_proto.h"

#include <string.h>

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)(v & 0xff);
    p[1] = (unsigned char)(v >> 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint16_t get_u16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t hook_proto_encode_request(const hook_request *req, unsigned char *out, size_t cap)
{
    if (req->stage_len > HOOK_PROTO_MAX_STAGE || req->config_len > HOOK_PROTO_MAX_CONFIG ||
        req->state_len > HOOK_PROTO_MAX_STATE)
        return 0;
    size_t total = HOOK_PROTO_REQ_HEADER + req->stage_len + req->config_len + req->state_len;
    if (total > cap)
        return 0;
    put_u32(out, HOOK_PROTO_REQ_MAGIC);
    put_u16(out + 4, HOOK_PROTO_VERSION);
    put_u16(out + 6, req->config_explicit ? HOOK_PROTO_FLAG_CONFIG_EXPLICIT : 0);
    put_u32(out + 8, (uint32_t)req->stage_len);
    put_u32(out + 12, (uint32_t)req->config_len);
    put_u32(out + 16, (uint32_t)req->state_len);
    unsigned char *p = out + HOOK_PROTO_REQ_HEADER;
    memcpy(p, req->stage, req->stage_len);
    p += req->stage_len;
    memcpy(p, req->config, req->config_len);
    p += req->config_len;
    if (req->state_len)
        memcpy(p, req->state, req->state_len);
    return total;
}

int hook_proto_decode_request(const unsigned char *buf, size_t len, hook_request *req)
{
    memset(req, 0, sizeof *req);
    if (len < HOOK_PROTO_REQ_HEADER || get_u32(buf) != HOOK_PROTO_REQ_MAGIC ||
        get_u16(buf + 4) != HOOK_PROTO_VERSION)
        return -1;
    uint16_t flags = get_u16(buf + 6);
    uint32_t stage_len = get_u32(buf + 8), config_len = get_u32(buf + 12),
             state_len = get_u32(buf + 16);
    if ((flags & ~HOOK_PROTO_FLAG_CONFIG_EXPLICIT) || stage_len == 0 ||
        stage_len > HOOK_PROTO_MAX_STAGE || config_len == 0 || config_len > HOOK_PROTO_MAX_CONFIG ||
        state_len > HOOK_PROTO_MAX_STATE)
        return -1;
    /* Each bounded above, so the sum cannot overflow. */
    if ((size_t)HOOK_PROTO_REQ_HEADER + stage_len + config_len + state_len != len)
        return -1;
    const char *p = (const char *)buf + HOOK_PROTO_REQ_HEADER;
    req->stage = p;
    req->stage_len = stage_len;
    req->config = p + stage_len;
    req->config_len = config_len;
    req->state = p + stage_len + config_len;
    req->state_len = state_len;
    req->config_explicit = flags & HOOK_PROTO_FLAG_CONFIG_EXPLICIT;
    if (memchr(req->stage, '\0', stage_len) || memchr(req->config, '\0', config_len) ||
        req->config[0] != '/')
        return -1;
    return 0;
}

size_t hook_proto_encode_reply(const hook_reply *reply, unsigned char *out, size_t cap)
{
    if (reply->line_len > HOOK_PROTO_MAX_LINE)
        return 0;
    size_t total = HOOK_PROTO_REPLY_HEADER + reply->line_len;
    if (total > cap)
        return 0;
    put_u32(out, HOOK_PROTO_REPLY_MAGIC);
    put_u16(out + 4, HOOK_PROTO_VERSION);
    put_u16(out + 6, (uint16_t)reply->kind);
    put_u32(out + 8, (uint32_t)reply->status);
    put_u32(out + 12, (uint32_t)reply->line_len);
    if (reply->line_len)
        memcpy(out + HOOK_PROTO_REPLY_HEADER, reply->line, reply->line_len);
    return total;
}

int hook_proto_decode_reply(const unsigned char *buf, size_t len, hook_reply *reply)
{
    memset(reply, 0, sizeof *reply);
    if (len < HOOK_PROTO_REPLY_HEADER || get_u32(buf) != HOOK_PROTO_REPLY_MAGIC ||
        get_u16(buf + 4) != HOOK_PROTO_VERSION)
        return -1;
    uint16_t kind = get_u16(buf + 6);
    uint32_t status = get_u32(buf + 8), line_len = get_u32(buf + 12);
    if ((kind != HOOK_REPLY_DECISION && kind != HOOK_REPLY_NOT_MINE) || status > 1 ||
        line_len > HOOK_PROTO_MAX_LINE || (size_t)HOOK_PROTO_REPLY_HEADER + line_len != len)
        return -1;
    reply->kind = (hook_reply_kind)kind;
    reply->status = (int)status;
    reply->line = (const char *)buf + HOOK_PROTO_REPLY_HEADER;
    reply->line_len = line_len;
    /* The line goes to the runtime's stderr as is: one line, no NUL. */
    if (memchr(reply->line, '\0', line_len))
        return -1;
    return 0;
}
