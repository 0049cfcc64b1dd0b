/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: --api-server-cidr parsing and the slot admission (peers.c). The
 * input's first line is a CIDR list; its next three bytes the limits; every
 * following pair of bytes one event on an endpoint's slots: a connection from
 * one of 12 addresses (4 of them IPv4-mapped IPv6), one closing, a shut one
 * gone, a request starting or ending, a certificate verified. After each
 * decision the bounds must hold (open slots, per address, the anonymous share),
 * and a victim must be a slot that may be evicted: open, idle or in its
 * handshake, anonymous, of the newcomer's address at its per-peer bound, or of
 * a holder of at least two more anonymous slots than the newcomer's address
 * (any holder for a newcomer from the CIDR). Anything else traps.
 */
#include "peers.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>

#define SLOTS 40
#define ADDRESSES 12

typedef struct sim {
    wh_slot slots[SLOTS];
    int used[SLOTS];
    wh_slot *open[SLOTS];
    unsigned long long seq;
    wh_slot_limits lim;
    wh_cidr cidrs[WH_CIDRS_MAX];
    size_t n_cidrs;
} sim;

static void address(unsigned int i, unsigned char key[WH_PEER_KEY_BYTES])
{
    struct sockaddr_storage ss = {0};
    if (i % 3 == 2) { /* IPv4-mapped: the same keys as the IPv4 ones */
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 0};
        mapped[15] = (unsigned char)(i % 4);
        memcpy(&a->sin6_addr, mapped, 16);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        unsigned char v4[4] = {10, 0, 0, (unsigned char)(i % 8)};
        memcpy(&a->sin_addr, v4, 4);
    }
    wh_peer_key((struct sockaddr *)&ss, key);
}

static size_t collect(sim *m)
{
    size_t n = 0;
    for (int i = 0; i < SLOTS; i++)
        if (m->used[i])
            m->open[n++] = &m->slots[i];
    return n;
}

static int anonymous(const wh_slot *s) { return !s->shut && !s->api && !s->verified; }

/* Open slots, anonymous ones, those of key, anonymous ones of key. */
static void count(sim *m, const unsigned char *key, size_t *live, size_t *anon, size_t *same,
                  size_t *anon_same)
{
    *live = *anon = *same = *anon_same = 0;
    for (int i = 0; i < SLOTS; i++) {
        const wh_slot *s = &m->slots[i];
        if (!m->used[i] || s->shut)
            continue;
        int mine = memcmp(s->peer, key, WH_PEER_KEY_BYTES) == 0;
        *live += 1;
        *anon += anonymous(s);
        *same += mine;
        *anon_same += mine && anonymous(s);
    }
}

static void check_victim(sim *m, const wh_admission *a, const unsigned char *key, int api)
{
    const wh_slot *v = a->victim;
    if (!v || v->shut || v->busy || v->verified)
        __builtin_trap();
    size_t live, anon, same, anon_same, v_live, v_anon, v_same, v_anon_same;
    count(m, key, &live, &anon, &same, &anon_same);
    count(m, v->peer, &v_live, &v_anon, &v_same, &v_anon_same);
    if (strcmp(a->reason, "per-peer") == 0) {
        if (!api || memcmp(v->peer, key, WH_PEER_KEY_BYTES) != 0 || same < m->lim.per_peer)
            __builtin_trap();
        return;
    }
    if (!anonymous(v) || v_anon_same < (api ? 1 : anon_same + 2))
        __builtin_trap();
}

static void connect_from(sim *m, unsigned int who)
{
    unsigned char key[WH_PEER_KEY_BYTES];
    address(who, key);
    int api = wh_cidrs_match(m->cidrs, m->n_cidrs, key);
    size_t n = collect(m);
    wh_admission a = wh_slots_admit(&m->lim, m->open, n, key, api);
    if (a.kind == WH_REFUSE)
        return;
    if (a.kind == WH_ADMIT_EVICTING) {
        check_victim(m, &a, key, api);
        a.victim->shut = 1;
    }
    int free_slot = -1;
    for (int i = 0; i < SLOTS && free_slot < 0; i++)
        if (!m->used[i])
            free_slot = i;
    if (free_slot < 0)
        return; /* the simulation's own bound (a shut slot not yet gone): as if refused */
    wh_slot *s = &m->slots[free_slot];
    memset(s, 0, sizeof *s);
    memcpy(s->peer, key, WH_PEER_KEY_BYTES);
    s->api = (unsigned char)api;
    s->seq = m->seq++;
    m->used[free_slot] = 1;
    size_t live, anon, same, anon_same;
    count(m, key, &live, &anon, &same, &anon_same);
    if (live > m->lim.max || same > m->lim.per_peer || anon > m->lim.max - m->lim.reserved)
        __builtin_trap();
}

static void event(sim *m, uint8_t op, uint8_t arg)
{
    wh_slot *s = &m->slots[arg % SLOTS];
    int used = m->used[arg % SLOTS];
    switch (op % 6) {
    case 0: connect_from(m, arg % ADDRESSES); break;
    case 1: /* closed by its peer or the watchdog */
        if (used)
            s->shut = 1;
        break;
    case 2: /* its thread ended: the slot is gone */
        if (used && s->shut)
            m->used[arg % SLOTS] = 0;
        break;
    case 3: /* a request starts; with client certificates, over a verified one */
        if (used && !s->shut) {
            s->busy = 1;
            s->verified = s->verified || (arg & 0x80);
        }
        break;
    case 4:
        if (used)
            s->busy = 0;
        break;
    default: { /* the bounds of every open slot, whatever happened */
        size_t live = 0;
        for (int i = 0; i < SLOTS; i++)
            live += m->used[i] && !m->slots[i].shut;
        if (live > m->lim.max)
            __builtin_trap();
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static sim m;
    memset(&m, 0, sizeof m);
    const uint8_t *nl = memchr(data, '\n', size);
    size_t text_len = nl ? (size_t)(nl - data) : size;
    char text[512];
    if (text_len >= sizeof text)
        return 0;
    memcpy(text, data, text_len);
    text[text_len] = '\0';
    pg_error err = {0};
    size_t before = m.n_cidrs;
    if (wh_cidrs_add(m.cidrs, &m.n_cidrs, text, &err) != PG_OK && m.n_cidrs != before)
        __builtin_trap();
    if (m.n_cidrs > WH_CIDRS_MAX || memchr(err.message, '\0', sizeof err.message) == NULL)
        __builtin_trap();
    for (size_t i = 0; i < m.n_cidrs; i++) {
        char out[WH_CIDR_TEXT_MAX];
        wh_cidr_text(&m.cidrs[i], out, sizeof out);
    }
    if (!nl || size - text_len < 4)
        return 0;
    const uint8_t *p = nl + 1, *end = data + size;
    m.lim.max = 1u + p[0] % 24u;
    m.lim.per_peer = 1u + p[1] % m.lim.max;
    m.lim.reserved = p[2] % m.lim.max;
    for (p += 3; p + 1 < end; p += 2)
        event(&m, p[0], p[1]);
    return 0;
}
