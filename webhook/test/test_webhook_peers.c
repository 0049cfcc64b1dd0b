/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of who gets a connection slot (peers.c):
 *  - peer keys: IPv4, IPv6, and an IPv4-mapped IPv6 address keyed as its IPv4 address;
 *  - --api-server-cidr: lists of IPv4/IPv6 CIDRs and bare addresses, host bits cleared as the
 *    NetworkPolicy reads them, and every malformed entry refused with the list unchanged;
 *  - admission: the per-peer bound (refused, except inside the CIDR where the address's oldest
 *    evictable slot gives way), the anonymous share and the reserve, evictions from the largest
 *    holder only when it holds two more than the newcomer's peer, never of a busy, verified
 *    or privileged slot.
 */
#include "peers.h"

#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------ helpers */

static void key_of(const char *addr, unsigned char key[WH_PEER_KEY_BYTES])
{
    struct sockaddr_storage ss = {0};
    if (strchr(addr, ':')) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        ck_assert_int_eq(inet_pton(AF_INET6, addr, &a->sin6_addr), 1);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        ck_assert_int_eq(inet_pton(AF_INET, addr, &a->sin_addr), 1);
    }
    wh_peer_key((struct sockaddr *)&ss, key);
}

static int matches(const wh_cidr *list, size_t n, const char *addr)
{
    unsigned char key[WH_PEER_KEY_BYTES];
    key_of(addr, key);
    return wh_cidrs_match(list, n, key);
}

/* An endpoint's open slots, as server.c keeps them. */
typedef struct pool {
    wh_slot slots[64];
    wh_slot *open[64];
    size_t n;
    unsigned long long seq;
} pool;

static wh_slot *add(pool *p, const char *addr, int api)
{
    ck_assert_uint_lt(p->n, 64);
    wh_slot *s = &p->slots[p->n++];
    memset(s, 0, sizeof *s);
    key_of(addr, s->peer);
    s->api = (unsigned char)api;
    s->seq = p->seq++;
    return s;
}

static wh_admission admit(pool *p, const wh_slot_limits *lim, const char *addr, int api)
{
    unsigned char key[WH_PEER_KEY_BYTES];
    key_of(addr, key);
    for (size_t i = 0; i < p->n; i++)
        p->open[i] = &p->slots[i];
    return wh_slots_admit(lim, p->open, p->n, key, api);
}

/* ------------------------------------------------------------ peer keys, CIDRs */

START_TEST(peer_keys)
{
    unsigned char a[WH_PEER_KEY_BYTES], b[WH_PEER_KEY_BYTES];
    key_of("10.1.2.3", a);
    ck_assert_int_eq(a[0], 4);
    ck_assert_int_eq(a[1], 10);
    ck_assert_int_eq(a[4], 3);
    key_of("::ffff:10.1.2.3", b);
    ck_assert_mem_eq(a, b, WH_PEER_KEY_BYTES);
    key_of("fd00::1", b);
    ck_assert_int_eq(b[0], 6);
    ck_assert_int_eq(b[1], 0xfd);
    ck_assert_int_eq(b[16], 1);
    wh_peer_key(NULL, b);
    unsigned char zero[WH_PEER_KEY_BYTES] = {0};
    ck_assert_mem_eq(b, zero, WH_PEER_KEY_BYTES);
}
END_TEST

START_TEST(cidr_lists)
{
    wh_cidr list[WH_CIDRS_MAX];
    size_t n = 0;
    pg_error err = {0};
    ck_assert_int_eq(wh_cidrs_add(list, &n, "10.0.0.77/24,fd00::5/64", &err), PG_OK);
    ck_assert_int_eq(wh_cidrs_add(list, &n, "192.168.1.7", &err), PG_OK);
    ck_assert_uint_eq(n, 3);
    char text[WH_CIDR_TEXT_MAX];
    wh_cidr_text(&list[0], text, sizeof text);
    ck_assert_str_eq(text, "10.0.0.0/24"); /* host bits cleared */
    wh_cidr_text(&list[1], text, sizeof text);
    ck_assert_str_eq(text, "fd00::/64");
    ck_assert(matches(list, n, "10.0.0.1"));
    ck_assert(matches(list, n, "10.0.0.255"));
    ck_assert(matches(list, n, "::ffff:10.0.0.9")); /* a dual-stack listener's IPv4 peer */
    ck_assert(!matches(list, n, "10.0.1.0"));
    ck_assert(matches(list, n, "fd00::ffff"));
    ck_assert(!matches(list, n, "fd00:0:0:1::1"));
    ck_assert(matches(list, n, "192.168.1.7"));
    ck_assert(!matches(list, n, "192.168.1.8"));
    ck_assert(!matches(list, 0, "10.0.0.1"));
    n = 0;
    ck_assert_int_eq(wh_cidrs_add(list, &n, "0.0.0.1/31", &err), 0);
    ck_assert(matches(list, n, "0.0.0.0") && matches(list, n, "0.0.0.1"));
    ck_assert(!matches(list, n, "0.0.0.2"));
}
END_TEST

START_TEST(cidr_errors)
{
    static const char *const bad[] = {"",
                                      "10.0.0.0/33",
                                      "10.0.0.0/",
                                      "10.0.0.0/0",
                                      "::/0",
                                      "fd00::/129",
                                      "10.0.0.0/+8",
                                      "10.0.0.0/-1",
                                      "10.0.0.0/08x",
                                      "010.0.0.1",
                                      "a.b.c.d",
                                      "10.0.0.0/24,",
                                      ",10.0.0.0/8",
                                      "10.0.0.0 /8",
                                      "10.0.0.0/8 ",
                                      "10.0.0",
                                      "::ffff:10.0.0.0/104",
                                      "10.0.0.0/1234",
                                      "1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa:bbbb/64"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        wh_cidr list[WH_CIDRS_MAX];
        size_t n = 1;
        pg_error err = {0};
        memset(list, 0xa5, sizeof list);
        wh_cidr before = list[1];
        ck_assert_msg(wh_cidrs_add(list, &n, bad[i], &err) == PG_ERR_INVALID, "accepted %s",
                      bad[i]);
        ck_assert_uint_eq(n, 1);
        ck_assert_mem_eq(&list[1], &before, sizeof before);
        ck_assert_msg(strncmp(err.message, "--api-server-cidr: ", 19) == 0, "%s", err.message);
    }
    /* more than WH_CIDRS_MAX in all */
    wh_cidr list[WH_CIDRS_MAX];
    size_t n = 0;
    pg_error err = {0};
    char text[2048] = "";
    for (int i = 0; i < WH_CIDRS_MAX; i++)
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s10.%d.0.0/16", i ? "," : "",
                 i);
    ck_assert_int_eq(wh_cidrs_add(list, &n, text, &err), 0);
    ck_assert_uint_eq(n, WH_CIDRS_MAX);
    ck_assert_int_eq(wh_cidrs_add(list, &n, "10.200.0.0/16", &err), PG_ERR_LIMIT);
    ck_assert_uint_eq(n, WH_CIDRS_MAX);
}
END_TEST

/* ------------------------------------------------------------ admission */

static const wh_slot_limits LIM = {.max = 8, .per_peer = 4, .reserved = 2};

START_TEST(admitted_within_the_bounds)
{
    pool p = {0};
    add(&p, "10.9.0.1", 0);
    add(&p, "10.9.0.2", 0);
    wh_admission a = admit(&p, &LIM, "10.9.0.1", 0);
    ck_assert_int_eq(a.kind, WH_ADMIT);
    ck_assert_ptr_null(a.victim);
}
END_TEST

START_TEST(per_peer_bound_refuses_outside_the_cidr)
{
    pool p = {0};
    for (int i = 0; i < 4; i++)
        add(&p, "10.9.0.1", 0);
    wh_admission a = admit(&p, &LIM, "10.9.0.1", 0);
    ck_assert_int_eq(a.kind, WH_REFUSE);
    ck_assert_str_eq(a.reason, "per-peer");
    /* a shut slot holds nothing */
    p.slots[0].shut = 1;
    ck_assert_int_eq(admit(&p, &LIM, "10.9.0.1", 0).kind, WH_ADMIT);
}
END_TEST

START_TEST(per_peer_bound_inside_the_cidr_evicts_the_oldest_handshake)
{
    pool p = {0};
    wh_slot *busy = add(&p, "10.0.0.1", 1);
    busy->busy = 1;
    wh_slot *verified = add(&p, "10.0.0.1", 1);
    verified->verified = 1;
    wh_slot *older = add(&p, "10.0.0.1", 1);
    add(&p, "10.0.0.1", 1);
    wh_admission a = admit(&p, &LIM, "10.0.0.1", 1);
    ck_assert_int_eq(a.kind, WH_ADMIT_EVICTING);
    ck_assert_ptr_eq(a.victim, older);
    ck_assert_str_eq(a.reason, "per-peer");
    /* nothing evictable: refused */
    for (size_t i = 2; i < p.n; i++)
        p.slots[i].busy = 1;
    a = admit(&p, &LIM, "10.0.0.1", 1);
    ck_assert_int_eq(a.kind, WH_REFUSE);
    ck_assert_str_eq(a.reason, "per-peer");
}
END_TEST

/* The anonymous share (max 8 - reserved 2 = 6) full: 4 from .1, 2 from .2. */
static void fill_share(pool *p)
{
    for (int i = 0; i < 4; i++)
        add(p, "10.9.0.1", 0);
    add(p, "10.9.0.2", 0);
    add(p, "10.9.0.2", 0);
}

START_TEST(share_full_evicts_from_the_largest_holder)
{
    pool p = {0};
    fill_share(&p);
    wh_admission a = admit(&p, &LIM, "10.9.0.3", 0);
    ck_assert_int_eq(a.kind, WH_ADMIT_EVICTING);
    ck_assert_ptr_eq(a.victim, &p.slots[0]); /* .1's oldest */
    ck_assert_str_eq(a.reason, "share");
    /* its oldest busy: the next oldest of .1 */
    p.slots[0].busy = 1;
    ck_assert_ptr_eq(admit(&p, &LIM, "10.9.0.3", 0).victim, &p.slots[1]);
    /* .2 (holding 2) may take from .1 (4 >= 2 + 2); .1, at its own bound, is refused */
    ck_assert_ptr_eq(admit(&p, &LIM, "10.9.0.2", 0).victim, &p.slots[1]);
    wh_admission self = admit(&p, &LIM, "10.9.0.1", 0);
    ck_assert_int_eq(self.kind, WH_REFUSE);
    ck_assert_str_eq(self.reason, "per-peer");
}
END_TEST

START_TEST(share_full_and_even_refuses)
{
    pool p = {0};
    add(&p, "10.9.0.1", 0);
    add(&p, "10.9.0.1", 0);
    for (int i = 2; i <= 5; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "10.9.0.%d", i);
        add(&p, addr, 0);
    }
    /* holders 2,1,1,1,1: a newcomer holding 1 would need a holder of 3; one holding 0 takes
     * from .1 (2 >= 0 + 2), the largest; .2 is refused (no ping-pong between 1 and 2) */
    ck_assert_int_eq(admit(&p, &LIM, "10.9.0.2", 0).kind, WH_REFUSE);
    wh_admission a = admit(&p, &LIM, "10.9.0.6", 0);
    ck_assert_int_eq(a.kind, WH_ADMIT_EVICTING);
    ck_assert_ptr_eq(a.victim, &p.slots[0]);
    /* every holder at 1: nobody can be displaced by an anonymous newcomer */
    pool q = {0};
    for (int i = 0; i < 6; i++) {
        char addr[32];
        snprintf(addr, sizeof addr, "10.9.1.%d", i);
        add(&q, addr, 0);
    }
    a = admit(&q, &LIM, "10.9.2.1", 0);
    ck_assert_int_eq(a.kind, WH_REFUSE);
    ck_assert_str_eq(a.reason, "share");
}
END_TEST

START_TEST(ties_go_to_the_oldest)
{
    pool p = {0};
    add(&p, "10.9.0.1", 0);
    add(&p, "10.9.0.2", 0); /* older than .1's second */
    add(&p, "10.9.0.1", 0);
    add(&p, "10.9.0.2", 0);
    add(&p, "10.9.0.3", 0);
    add(&p, "10.9.0.3", 0);
    p.slots[0].busy = 1; /* .1's oldest evictable is now slots[2], younger than slots[1] */
    wh_admission a = admit(&p, &LIM, "10.9.0.4", 0);
    ck_assert_ptr_eq(a.victim, &p.slots[1]);
}
END_TEST

START_TEST(the_reserve_is_for_the_cidr_and_verified)
{
    pool p = {0};
    fill_share(&p);
    /* the share is full, the reserve is not: an address of the CIDR gets in */
    ck_assert_int_eq(admit(&p, &LIM, "10.0.0.1", 1).kind, WH_ADMIT);
    /* verified slots hold no share: two anonymous slots promoted, two newcomers fit */
    p.slots[4].verified = 1;
    p.slots[5].verified = 1;
    ck_assert_int_eq(admit(&p, &LIM, "10.9.0.7", 0).kind, WH_ADMIT);
    add(&p, "10.9.0.7", 0);
    add(&p, "10.9.0.8", 0);
    /* 8 open: total full; an anonymous newcomer may take only anonymous slots */
    wh_admission a = admit(&p, &LIM, "10.9.0.9", 0);
    ck_assert_int_eq(a.kind, WH_ADMIT_EVICTING);
    ck_assert_ptr_eq(a.victim, &p.slots[0]);
}
END_TEST

START_TEST(the_cidr_displaces_anonymous_slots_only)
{
    pool p = {0};
    fill_share(&p);
    add(&p, "10.0.0.1", 1);
    add(&p, "10.0.0.2", 1);
    /* total full: the CIDR's newcomer takes the largest anonymous holder's oldest */
    wh_admission a = admit(&p, &LIM, "10.0.0.3", 1);
    ck_assert_int_eq(a.kind, WH_ADMIT_EVICTING);
    ck_assert_ptr_eq(a.victim, &p.slots[0]);
    ck_assert_str_eq(a.reason, "total");
    /* even from a holder of one */
    pool q = {0};
    for (int i = 0; i < 6; i++)
        add(&q, "10.0.0.1", 1);
    add(&q, "10.9.0.1", 0);
    add(&q, "10.0.0.2", 1);
    a = admit(&q, &LIM, "10.0.0.3", 1);
    ck_assert_ptr_eq(a.victim, &q.slots[6]);
    /* never a privileged or busy one */
    q.slots[6].busy = 1;
    a = admit(&q, &LIM, "10.0.0.3", 1);
    ck_assert_int_eq(a.kind, WH_REFUSE);
    ck_assert_str_eq(a.reason, "total");
}
END_TEST

START_TEST(verified_anonymous_addresses_are_never_evicted)
{
    wh_slot_limits lim = {.max = 4, .per_peer = 4, .reserved = 0};
    pool p = {0};
    for (int i = 0; i < 4; i++)
        add(&p, "10.9.0.1", 0)->verified = 1;
    wh_admission a = admit(&p, &lim, "10.9.0.2", 0);
    ck_assert_int_eq(a.kind, WH_REFUSE);
    ck_assert_str_eq(a.reason, "total");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("webhook_peers");
    TCase *t = tcase_create("peers");
    tcase_add_test(t, peer_keys);
    tcase_add_test(t, cidr_lists);
    tcase_add_test(t, cidr_errors);
    tcase_add_test(t, admitted_within_the_bounds);
    tcase_add_test(t, per_peer_bound_refuses_outside_the_cidr);
    tcase_add_test(t, per_peer_bound_inside_the_cidr_evicts_the_oldest_handshake);
    tcase_add_test(t, share_full_evicts_from_the_largest_holder);
    tcase_add_test(t, share_full_and_even_refuses);
    tcase_add_test(t, ties_go_to_the_oldest);
    tcase_add_test(t, the_reserve_is_for_the_cidr_and_verified);
    tcase_add_test(t, the_cidr_displaces_anonymous_slots_only);
    tcase_add_test(t, verified_anonymous_addresses_are_never_evicted);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    SRunner *r = srunner_create(suite());
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
