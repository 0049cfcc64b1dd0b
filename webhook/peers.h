/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who gets a connection slot of an endpoint (peers.c; server.c asks at each
 * accept, before any byte is read). No I/O and no locking here: the caller
 * holds its own lock around a decision and acts on it. The policy (privileged
 * slots: the CIDR or a verified client certificate; anonymous ones share
 * max - reserved; who may be evicted, and by whom, so that shares converge) is
 * docs/webhook.md, "Connection slots: the API server always gets in".
 */
#ifndef PULLGATE_WEBHOOK_PEERS_H
#define PULLGATE_WEBHOOK_PEERS_H

#include "pullgate/pullgate.h"

#include <stddef.h>
#include <sys/socket.h>

#define WH_PEER_KEY_BYTES 17 /* family byte (4 or 6) + the address; all zero: unknown */
#define WH_CIDRS_MAX 32      /* --api-server-cidr entries */

typedef struct wh_cidr {
    unsigned char net[WH_PEER_KEY_BYTES]; /* a peer key with the host bits cleared */
    unsigned int bits;
} wh_cidr;

/* The address part of a peer (its port left out): one key per client address.
 * An IPv4-mapped IPv6 address is keyed as the IPv4 address it carries. */
void wh_peer_key(const struct sockaddr *sa, unsigned char key[WH_PEER_KEY_BYTES]);

/*
 * Appends "CIDR[,CIDR...]" to list (n entries, WH_CIDRS_MAX at most): IPv4 or
 * IPv6, a bare address meaning /32 or /128; host bits are cleared, as the
 * NetworkPolicy's ipBlock reads them. A prefix of 0 (every address) is refused.
 * PG_ERR_INVALID or PG_ERR_LIMIT (over WH_CIDRS_MAX) leave list and *n unchanged.
 */
int wh_cidrs_add(wh_cidr *list, size_t *n, const char *text, pg_error *err);
#define WH_CIDR_TEXT_MAX 64
/* The CIDR as text ("10.0.0.0/24"), for the log. */
void wh_cidr_text(const wh_cidr *c, char *out, size_t size);
/* 1 when key is inside one of the n CIDRs. */
int wh_cidrs_match(const wh_cidr *list, size_t n, const unsigned char key[WH_PEER_KEY_BYTES]);

/* One open connection as the policy sees it (server.c embeds it in its own record). */
typedef struct wh_slot {
    unsigned char peer[WH_PEER_KEY_BYTES];
    unsigned long long seq; /* accept order: lower is older */
    unsigned char api;      /* its address is inside --api-server-cidr */
    unsigned char verified; /* a request arrived over a verified client certificate */
    unsigned char busy;     /* a request is in progress (not evictable) */
    unsigned char shut;     /* shut down, leaving: holds no slot */
} wh_slot;

typedef struct wh_slot_limits {
    unsigned int max;      /* open slots in all */
    unsigned int per_peer; /* open slots of one address */
    unsigned int reserved; /* of max, never held by anonymous slots (< max) */
} wh_slot_limits;

typedef enum { WH_ADMIT, WH_ADMIT_EVICTING, WH_REFUSE } wh_admit_kind;

typedef struct wh_admission {
    wh_admit_kind kind;
    wh_slot *victim;    /* WH_ADMIT_EVICTING: shut it (an element of open) */
    const char *reason; /* evicting or refusing: "per-peer", "share" or "total" (static) */
} wh_admission;

/*
 * A new connection from peer (api: its address is inside the CIDR) against the
 * endpoint's n open slots. May reorder open[]. The caller marks the victim shut
 * and shuts its socket; the newcomer's slot is added by the caller once open.
 */
wh_admission wh_slots_admit(const wh_slot_limits *lim, wh_slot **open, size_t n,
                            const unsigned char peer[WH_PEER_KEY_BYTES], int api);

#endif
