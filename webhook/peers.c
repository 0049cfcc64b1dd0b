/* SPDX-License-Identifier: Apache-2.0 */
/* Connection slots: peer keys, the API server's CIDRs, who is admitted or evicted (peers.h). */
#include "peers.h"

#include "internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void wh_peer_key(const struct sockaddr *sa, unsigned char key[WH_PEER_KEY_BYTES])
{
    memset(key, 0, WH_PEER_KEY_BYTES);
    if (sa && sa->sa_family == AF_INET) {
        key[0] = 4;
        memcpy(key + 1, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) { /* a dual-stack listener's IPv4 peer: one key for both */
            key[0] = 4;
            memcpy(key + 1, a->s6_addr + 12, 4);
        } else {
            key[0] = 6;
            memcpy(key + 1, a->s6_addr, 16);
        }
    }
}

/* Clears every bit of the address after the first bits. */
static void clear_host_bits(unsigned char *addr, unsigned int width, unsigned int bits)
{
    for (unsigned int i = bits; i < width; i++)
        addr[i / 8] &= (unsigned char)~(0x80u >> (i % 8));
}

/* 1 to 3 decimal digits, nothing else. */
static int parse_prefix(const char *text, unsigned int *bits)
{
    size_t n = strlen(text);
    if (n == 0 || n > 3 || strspn(text, "0123456789") != n)
        return -1;
    *bits = (unsigned int)strtoul(text, NULL, 10);
    return 0;
}

static int parse_cidr(const char *s, size_t len, wh_cidr *out, pg_error *err)
{
    char text[WH_CIDR_TEXT_MAX];
    if (len == 0 || len >= sizeof text)
        return pg_fail(err, PG_ERR_INVALID, "--api-server-cidr: an empty or overlong entry");
    memcpy(text, s, len);
    text[len] = '\0';
    char *slash = strchr(text, '/');
    unsigned int bits = 0;
    if (slash)
        *slash = '\0';
    int v6 = strchr(text, ':') != NULL;
    unsigned int width = v6 ? 128 : 32;
    unsigned char addr[16] = {0};
    if (inet_pton(v6 ? AF_INET6 : AF_INET, text, addr) != 1 ||
        (slash && parse_prefix(slash + 1, &bits) != 0) || (slash && bits > width))
        return pg_fail(err, PG_ERR_INVALID, "--api-server-cidr: %.*s is not an address or a CIDR",
                       (int)len, s);
    if (!slash)
        bits = width;
    if (bits == 0)
        return pg_fail(err, PG_ERR_INVALID, "--api-server-cidr: %.*s matches every address",
                       (int)len, s);
    if (v6 && IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)addr))
        return pg_fail(err, PG_ERR_INVALID, "--api-server-cidr: write %.*s as IPv4", (int)len, s);
    clear_host_bits(addr, width, bits);
    memset(out, 0, sizeof *out);
    out->net[0] = v6 ? 6 : 4;
    memcpy(out->net + 1, addr, width / 8);
    out->bits = bits;
    return PG_OK;
}

int wh_cidrs_add(wh_cidr *list, size_t *n, const char *text, pg_error *err)
{
    size_t count = *n;
    wh_cidr parsed[WH_CIDRS_MAX];
    const char *p = text;
    for (;;) {
        size_t len = strcspn(p, ",");
        if (count >= WH_CIDRS_MAX)
            return pg_fail(err, PG_ERR_LIMIT, "--api-server-cidr: more than %d entries",
                           WH_CIDRS_MAX);
        int rc = parse_cidr(p, len, &parsed[count - *n], err);
        if (rc != PG_OK)
            return rc;
        count++;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    memcpy(list + *n, parsed, (count - *n) * sizeof *parsed);
    *n = count;
    return PG_OK;
}

void wh_cidr_text(const wh_cidr *c, char *out, size_t size)
{
    char addr[INET6_ADDRSTRLEN] = "?";
    inet_ntop(c->net[0] == 6 ? AF_INET6 : AF_INET, c->net + 1, addr, sizeof addr);
    snprintf(out, size, "%s/%u", addr, c->bits);
}

static int inside(const wh_cidr *c, const unsigned char key[WH_PEER_KEY_BYTES])
{
    if (key[0] != c->net[0])
        return 0;
    unsigned char addr[16];
    memcpy(addr, key + 1, 16);
    clear_host_bits(addr, key[0] == 6 ? 128 : 32, c->bits);
    return memcmp(addr, c->net + 1, key[0] == 6 ? 16 : 4) == 0;
}

int wh_cidrs_match(const wh_cidr *list, size_t n, const unsigned char key[WH_PEER_KEY_BYTES])
{
    for (size_t i = 0; i < n; i++)
        if (inside(&list[i], key))
            return 1;
    return 0;
}

/* ------------------------------------------------------------ admission */

static int evictable(const wh_slot *s) { return !s->shut && !s->busy && !s->verified; }
static int anonymous(const wh_slot *s) { return !s->shut && !s->api && !s->verified; }
static int same_peer(const wh_slot *s, const unsigned char *peer)
{
    return memcmp(s->peer, peer, WH_PEER_KEY_BYTES) == 0;
}

static int by_peer_then_age(const void *a, const void *b)
{
    const wh_slot *x = *(wh_slot *const *)a, *y = *(wh_slot *const *)b;
    int c = memcmp(x->peer, y->peer, WH_PEER_KEY_BYTES);
    if (c)
        return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * The oldest evictable anonymous slot of the peer that holds the most anonymous slots, if it
 * holds at least `need` (busy ones counted). An anonymous newcomer needs a peer holding two
 * more than its own: a slot moves only from a larger holder to a smaller one, so the shares
 * converge and a peer cannot take slots back and forth by reconnecting; one from the CIDR
 * needs any holder.
 */
static wh_slot *fair_share_victim(wh_slot **open, size_t n, const unsigned char *peer, int api)
{
    size_t m = 0, own = 0;
    for (size_t i = 0; i < n; i++)
        if (anonymous(open[i])) {
            own += same_peer(open[i], peer) ? 1 : 0;
            open[m++] = open[i];
        }
    size_t need = api ? 1 : own + 2;
    qsort(open, m, sizeof *open, by_peer_then_age);
    wh_slot *best = NULL;
    size_t best_count = 0;
    for (size_t i = 0; i < m;) {
        size_t j = i;
        wh_slot *oldest = NULL;
        for (; j < m && same_peer(open[j], open[i]->peer); j++)
            if (!oldest && evictable(open[j]))
                oldest = open[j];
        size_t count = j - i;
        if (oldest && count >= need &&
            (!best || count > best_count || (count == best_count && oldest->seq < best->seq)))
            best = oldest, best_count = count;
        i = j;
    }
    return best;
}

static wh_admission decide(wh_slot *victim, const char *reason)
{
    return (wh_admission){
        .kind = victim ? WH_ADMIT_EVICTING : WH_REFUSE, .victim = victim, .reason = reason};
}

wh_admission wh_slots_admit(const wh_slot_limits *lim, wh_slot **open, size_t n,
                            const unsigned char peer[WH_PEER_KEY_BYTES], int api)
{
    size_t live = 0, anon = 0, same = 0;
    wh_slot *own_oldest = NULL;
    for (size_t i = 0; i < n; i++) {
        wh_slot *s = open[i];
        if (s->shut)
            continue;
        live++;
        anon += anonymous(s) ? 1 : 0;
        if (!same_peer(s, peer))
            continue;
        same++;
        if (evictable(s) && (!own_oldest || s->seq < own_oldest->seq))
            own_oldest = s;
    }
    /* Only an address of the API server gives one of its slots for another (its count and
     * every pool stay as they were): the API server may share it with others (a hostNetwork
     * pod of its node), and its handshake then displaces theirs, oldest first. Any other
     * address at its bound is refused, which costs nothing. */
    if (same >= lim->per_peer)
        return decide(api ? own_oldest : NULL, "per-peer");
    int share_full = !api && anon + lim->reserved >= lim->max;
    if (!share_full && live < lim->max)
        return (wh_admission){.kind = WH_ADMIT};
    return decide(fair_share_victim(open, n, peer, api), share_full ? "share" : "total");
}
