/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one cleanup idiom: a variable declared with one of these is released
 * when its block is left, whichever way (GCC's and clang's cleanup attribute,
 * as systemd and crun use it), so a function with several failure exits needs
 * no hand-written release tail. Initialise every such variable where it is
 * declared (NULL, -1) and hand what it holds on with pg_steal.
 *
 *     pg_autofree char *text = NULL;
 *     pg_autojson json_t *doc = NULL;
 *     pg_autoclose int fd = open(...);
 *     ...
 *     *out = pg_steal(&text);   (the caller owns it now; nothing is freed here)
 *
 * Secrets are not for these: a buffer that held one is wiped before it is
 * freed, with its length (pg_buf_wipe_free, OPENSSL_cleanse).
 */
#ifndef PULLGATE_CLEANUP_H
#define PULLGATE_CLEANUP_H

#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

static inline void pg_cleanup_free(void *pp) { free(*(void **)pp); }
static inline void pg_cleanup_json(json_t **j) { json_decref(*j); }
static inline void pg_cleanup_close(int *fd)
{
    if (*fd >= 0)
        close(*fd);
}

#define pg_autofree __attribute__((cleanup(pg_cleanup_free)))
#define pg_autojson __attribute__((cleanup(pg_cleanup_json)))
#define pg_autoclose __attribute__((cleanup(pg_cleanup_close)))

/* What *pp holds, leaving NULL there: ownership leaves the scope. */
static inline void *pg_steal(void *pp)
{
    void **p = pp;
    void *v = *p;
    *p = NULL;
    return v;
}

#endif
