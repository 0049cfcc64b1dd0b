/* SPDX-License-Identifier: Apache-2.0 */
/* The verification pulls' loop bound (verify_memory.h): a small table, scanned. */
#include "verify_memory.h"

#include "cleanup.h"
#include "cri_testing.h" /* cri_verify_memory_size */

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    uint8_t key[32];
    int64_t since_ms; /* asked, or pulled: the TTL runs from the last change */
    bool used;
    bool pulled;
} entry;

struct cri_verify_memory {
    entry *v;
    size_t cap;
    int64_t ttl_ms;
};

cri_verify_memory *cri_verify_memory_new(size_t cap, int64_t ttl_ms, pg_error *err)
{
    if (!cap) {
        pg_fail(err, PG_ERR_INVALID, "no room");
        return NULL;
    }
    pg_autofree cri_verify_memory *m = calloc(1, sizeof *m);
    if (!m || !(m->v = calloc(cap, sizeof *m->v))) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    m->cap = cap;
    m->ttl_ms = ttl_ms;
    return pg_steal(&m);
}

void cri_verify_memory_free(cri_verify_memory *m)
{
    if (!m)
        return;
    free(m->v);
    free(m);
}

static bool expired(const cri_verify_memory *m, const entry *e, int64_t now_ms)
{
    return now_ms - e->since_ms > m->ttl_ms || now_ms < e->since_ms;
}

/* The live entry of key (an expired one is dropped), or NULL. */
static entry *find(cri_verify_memory *m, const uint8_t key[32], int64_t now_ms)
{
    for (size_t i = 0; i < m->cap; i++) {
        entry *e = &m->v[i];
        if (!e->used || memcmp(e->key, key, 32) != 0)
            continue;
        if (!expired(m, e, now_ms))
            return e;
        e->used = false;
    }
    return NULL;
}

/* A free or expired slot, else the oldest one (forgetting it costs one more pull). */
static entry *room(cri_verify_memory *m, int64_t now_ms)
{
    entry *oldest = &m->v[0];
    for (size_t i = 0; i < m->cap; i++) {
        entry *e = &m->v[i];
        if (!e->used || expired(m, e, now_ms))
            return e;
        if (e->since_ms < oldest->since_ms)
            oldest = e;
    }
    return oldest;
}

bool cri_verify_memory_ask(cri_verify_memory *m, const uint8_t key[32], int64_t now_ms)
{
    entry *e = find(m, key, now_ms);
    if (e && e->pulled)
        return false;
    if (!e) {
        e = room(m, now_ms);
        memcpy(e->key, key, 32);
        e->used = true;
        e->pulled = false;
    }
    e->since_ms = now_ms;
    return true;
}

bool cri_verify_memory_pulled(cri_verify_memory *m, const uint8_t key[32], int64_t now_ms)
{
    entry *e = find(m, key, now_ms);
    if (!e)
        return false;
    e->pulled = true;
    e->since_ms = now_ms;
    return true;
}

size_t cri_verify_memory_size(const cri_verify_memory *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->cap; i++)
        n += m->v[i].used;
    return n;
}
