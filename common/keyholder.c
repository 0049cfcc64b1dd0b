/* SPDX-License-Identifier: Apache-2.0 */
#include "keyholder.h"

#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct pg_key_ref {
    pg_mac_key *key;
    int refs;             /* the holder's own reference while current, plus one per user */
    pg_keyholder *holder; /* whose lock guards refs */
};

/* Which files a key was read from: the key file and PATH.previous (absent: all zero). */
typedef struct key_files_id {
    struct {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime, ctime;
        int present;
    } f[2];
} key_files_id;

struct pg_keyholder {
    char *path, *previous_path;
    pg_key_loader load;
    pg_key_logger log;
    pthread_mutex_t lock;
    pg_key_ref *current; /* NULL until a load succeeded */
    key_files_id id;     /* of the files current was read from (or the last failed load) */
    pg_error error;      /* code not PG_OK: the last load failed */
};

/* Symlinks followed: Secret volumes publish through them (a rotation swaps one). */
static void identify(const pg_keyholder *h, key_files_id *id)
{
    memset(id, 0, sizeof *id);
    const char *paths[2] = {h->path, h->previous_path};
    for (int i = 0; i < 2; i++) {
        struct stat st;
        if (stat(paths[i], &st) != 0)
            continue;
        id->f[i].present = 1;
        id->f[i].dev = st.st_dev;
        id->f[i].ino = st.st_ino;
        id->f[i].size = st.st_size;
        id->f[i].mtime = st.st_mtim;
        id->f[i].ctime = st.st_ctim;
    }
}

static void unref(pg_key_ref *r)
{
    if (r && --r->refs == 0) {
        pg_mac_key_free(r->key);
        free(r);
    }
}

/* Called with the lock held (or before the holder is shared). */
static void reload(pg_keyholder *h, const key_files_id *id, int first)
{
    pg_error e = {0};
    pg_mac_key *key = NULL;
    pg_key_ref *fresh = NULL;
    int rc = h->load(h->path, &key, &e);
    if (rc == PG_OK && !(fresh = calloc(1, sizeof *fresh))) {
        pg_mac_key_free(key);
        rc = pg_fail(&e, PG_ERR_NOMEM, "out of memory");
    }
    h->id = *id;
    if (rc != PG_OK) {
        if (!e.message[0])
            pg_fail(&e, rc, "%.200s: cannot be loaded", h->path);
        if (strcmp(e.message, h->error.message) != 0 && h->log)
            h->log("error",
                   first ? "annotation key unusable" : "annotation key unusable after a change",
                   e.message);
        e.code = rc;
        h->error = e;
        return;
    }
    *fresh = (pg_key_ref){.key = key, .refs = 1, .holder = h};
    unref(h->current);
    h->current = fresh;
    if (!first && h->log)
        h->log("info", h->error.code ? "annotation key usable again" : "annotation key reloaded",
               h->path);
    pg_error_clear(&h->error);
}

pg_keyholder *pg_keyholder_new(const char *path, pg_key_loader load, pg_key_logger log)
{
    pg_keyholder *h = calloc(1, sizeof *h);
    size_t n = strlen(path);
    if (h) {
        h->path = strdup(path);
        h->previous_path = malloc(n + sizeof PG_MAC_PREVIOUS_SUFFIX);
    }
    if (!h || !h->path || !h->previous_path) {
        if (h)
            free(h->path);
        free(h);
        return NULL;
    }
    memcpy(h->previous_path, path, n);
    memcpy(h->previous_path + n, PG_MAC_PREVIOUS_SUFFIX, sizeof PG_MAC_PREVIOUS_SUFFIX);
    h->load = load;
    h->log = log;
    pthread_mutex_init(&h->lock, NULL);
    key_files_id id;
    identify(h, &id);
    reload(h, &id, 1);
    return h;
}

void pg_keyholder_free(pg_keyholder *h)
{
    if (!h)
        return;
    unref(h->current);
    free(h->path);
    free(h->previous_path);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

pg_key_ref *pg_keyholder_get(pg_keyholder *h, pg_error *err)
{
    pg_key_ref *r = NULL;
    key_files_id id;
    identify(h, &id); /* outside the lock: two stat()s */
    pthread_mutex_lock(&h->lock);
    if (memcmp(&id, &h->id, sizeof id) != 0) /* both zeroed first: no padding differs */
        reload(h, &id, 0);
    if (h->error.code != PG_OK || !h->current) {
        if (err)
            *err = h->error.code != PG_OK ? h->error : (pg_error){PG_ERR_NOT_FOUND, "no key"};
    } else {
        r = h->current;
        r->refs++;
    }
    pthread_mutex_unlock(&h->lock);
    return r;
}

const pg_mac_key *pg_key_ref_key(const pg_key_ref *r) { return r ? r->key : NULL; }

void pg_key_ref_release(pg_key_ref *r)
{
    if (!r)
        return;
    pg_keyholder *h = r->holder;
    pthread_mutex_lock(&h->lock);
    unref(r);
    pthread_mutex_unlock(&h->lock);
}
