/* SPDX-License-Identifier: Apache-2.0 */
#include "keyholder.h"

#include "files.h"
#include "wlog.h"

#include <openssl/crypto.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct wh_key_ref {
    pg_mac_key *key;
    int refs;             /* the holder's own reference while current, plus one per review */
    wh_keyholder *holder; /* whose lock guards refs */
};

struct wh_keyholder {
    char *path;
    pthread_mutex_t lock;
    wh_key_ref *current;
    wh_file_id id;   /* of the file current was read from */
    char error[512]; /* non-empty: the file changed and is unusable */
};

/* Secret volumes publish through symlinks: followed, but no access for others. */
static wh_key_ref *load(const char *path, char *msg, size_t msg_size)
{
    char *bytes;
    size_t len;
    if (wh_read_file(path, PG_MAC_KEY_MAX_BYTES, 1, &bytes, &len, msg, msg_size) != 0)
        return NULL;
    pg_error err = {0};
    wh_key_ref *r = calloc(1, sizeof *r);
    if (!r)
        snprintf(msg, msg_size, "out of memory");
    else if (pg_mac_key_from_bytes(bytes, len, &r->key, &err) != PG_OK) {
        snprintf(msg, msg_size, "%.200s: %.250s", path, err.message);
        free(r);
        r = NULL;
    } else
        r->refs = 1;
    OPENSSL_cleanse(bytes, len);
    free(bytes);
    return r;
}

static void unref(wh_key_ref *r)
{
    if (r && --r->refs == 0) {
        pg_mac_key_free(r->key);
        free(r);
    }
}

wh_keyholder *wh_keyholder_new(const char *path, char *msg, size_t msg_size)
{
    wh_keyholder *h = calloc(1, sizeof *h);
    if (!h || !(h->path = strdup(path))) {
        free(h);
        snprintf(msg, msg_size, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&h->lock, NULL);
    if (wh_file_id_of(path, &h->id) != 0 || !(h->current = load(path, msg, msg_size))) {
        if (!msg[0])
            snprintf(msg, msg_size, "%.200s: cannot stat", path);
        wh_keyholder_free(h);
        return NULL;
    }
    h->current->holder = h;
    return h;
}

void wh_keyholder_free(wh_keyholder *h)
{
    if (!h)
        return;
    unref(h->current);
    free(h->path);
    pthread_mutex_destroy(&h->lock);
    free(h);
}

/* Called with the lock held. */
static void reload_if_changed(wh_keyholder *h)
{
    wh_file_id id;
    char msg[sizeof h->error] = "";
    if (wh_file_id_of(h->path, &id) != 0)
        snprintf(msg, sizeof msg, "%.200s: cannot stat", h->path);
    else if (wh_file_id_equal(&id, &h->id) && !h->error[0])
        return;
    wh_key_ref *fresh = msg[0] ? NULL : load(h->path, msg, sizeof msg);
    if (fresh)
        fresh->holder = h;
    if (!fresh) {
        if (strcmp(msg, h->error) != 0)
            wh_log("error", "annotation key unusable after a change; refusing reviews", msg);
        snprintf(h->error, sizeof h->error, "%s", msg);
        return;
    }
    unref(h->current);
    h->current = fresh;
    h->id = id;
    if (h->error[0])
        wh_log("info", "annotation key usable again", h->path);
    else
        wh_log("info", "annotation key reloaded", h->path);
    h->error[0] = '\0';
}

wh_key_ref *wh_keyholder_get(wh_keyholder *h, char *msg, size_t msg_size)
{
    wh_key_ref *r = NULL;
    pthread_mutex_lock(&h->lock);
    reload_if_changed(h);
    if (h->error[0])
        snprintf(msg, msg_size, "%s", h->error);
    else {
        r = h->current;
        r->refs++;
    }
    pthread_mutex_unlock(&h->lock);
    return r;
}

const pg_mac_key *wh_key_ref_key(const wh_key_ref *r) { return r ? r->key : NULL; }

void wh_key_ref_release(wh_key_ref *r)
{
    if (!r)
        return;
    wh_keyholder *h = r->holder;
    pthread_mutex_lock(&h->lock);
    unref(r);
    pthread_mutex_unlock(&h->lock);
}
