/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 3 of the record store: the per-credential times files
 * (pullgate-credtimes/, their format in store_read.c) beside the records
 * pullgate writes: written under the lock in a pull's batch, before the
 * record when the order matters (docs/design.md, "Durability").
 */
#include "store_credtimes.h"

#include <stdlib.h>
#include <string.h>

static bool same(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

/* Whether this credential is one of the pull being recorded. */
static bool pulled_now(const pull *p, const char *image_name, const pg_pod_cred *s,
                       const pg_pod_cred *sa)
{
    const pg_pull_credentials *c = p->creds;
    if (!c || strcmp(image_name, p->image_name) != 0)
        return false;
    for (size_t i = 0; s && i < c->n_secrets; i++) {
        const pg_secret *in = &c->secrets[i];
        pg_pod_cred view = {(char *)in->namespace_, (char *)in->name, (char *)in->uid,
                            (char *)in->credential_hash, NULL};
        /* The very entry, or the one of its namespace it was merged into (same credential). */
        if ((same(in->namespace_, s->namespace_) && same(in->name, s->name) &&
             same(in->uid, s->uid) && same(in->credential_hash, s->credential_hash)) ||
            (in->namespace_ && in->name && in->uid && in->credential_hash &&
             pg_pod_cred_same_credential(&view, s)))
            return true;
    }
    for (size_t i = 0; sa && i < c->n_service_accounts; i++)
        if (same(c->service_accounts[i].namespace_, sa->namespace_) &&
            same(c->service_accounts[i].name, sa->name) &&
            same(c->service_accounts[i].uid, sa->uid))
            return true;
    return false;
}

static int credtimes_add(json_t *out, const json_t *old, const pull *p, const char *image_name,
                         const pg_pod_cred *s, const pg_pod_cred *sa, time_t now, time_t previous)
{
    pg_autofree char *key = pg_st_credential_key(image_name, s, sa);
    if (!key)
        return PG_ERR_NOMEM;
    json_t *was = old ? json_object_get(old, key) : NULL;
    json_int_t t = pulled_now(p, image_name, s, sa) ? (json_int_t)now
                   : json_is_integer(was)           ? json_integer_value(was)
                                                    : (json_int_t)previous;
    return json_object_set_new(out, key, json_integer(t)) == 0 ? PG_OK : PG_ERR_NOMEM;
}

json_t *pg_st_credtimes_keys(const pg_record *rec)
{
    json_t *keys = json_object();
    for (size_t m = 0; keys && m < rec->n_maps; m++) {
        const pg_rec_mapping *map = &rec->maps[m];
        size_t n = map->n_secrets + map->n_sas;
        for (size_t i = 0; keys && i < n; i++) {
            char *key = i < map->n_secrets
                            ? pg_st_credential_key(map->image_name, &map->secrets[i], NULL)
                            : pg_st_credential_key(map->image_name, NULL,
                                                   &map->sas[i - map->n_secrets]);
            if (!key || json_object_set_new(keys, key, json_true()) != 0) {
                json_decref(keys);
                keys = NULL;
            }
            free(key);
        }
    }
    return keys;
}

/*
 * The times of credentials the record on disk still has but the merge
 * replaced (a secret's new hash): the side file becomes durable before the
 * new record does, so until then it must still cover the old one. The next
 * write drops them (they are no longer in its on-disk record).
 */
static int carry_superseded(json_t *times, const json_t *old, const json_t *old_keys)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)old_keys, key, v)
    {
        json_t *was = old ? json_object_get(old, key) : NULL;
        if (json_is_integer(was) && !json_object_get(times, key) &&
            json_object_set(times, key, was) != 0)
            return PG_ERR_NOMEM;
    }
    return PG_OK;
}

/* Whether the old side file gives every credential of the old record a time. */
static bool covers(const json_t *old, const json_t *old_keys)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)old_keys, key, v)
    {
        if (!json_is_integer(json_object_get(old, key)))
            return false;
    }
    return true;
}

int pg_st_credtimes_update_locked(const record_dir *w, pg_st_batch *b, const pg_record *rec,
                                  const json_t *old_keys, const char *file, const pull *p,
                                  time_t previous, bool *ordered, json_t **times_out,
                                  pg_error *err)
{
    *times_out = NULL;
    pg_autoclose int fd = -1;
    int rc = pg_st_open_subdir(w, SUB_CREDTIMES, &fd, err);
    if (rc != PG_OK)
        return rc;
    pg_autojson json_t *old = NULL;
    pg_error ignored = {0};
    /* An unusable old side file is replaced: its times fall back to the record's. */
    pg_st_credtimes_read(fd, w, file, rec->image_ref, &old, &ignored);
    *ordered = old_keys && !(old && covers(old, old_keys));
    pg_autojson json_t *times = json_object();
    rc = times ? PG_OK : PG_ERR_NOMEM;
    for (size_t m = 0; rc == PG_OK && m < rec->n_maps; m++) {
        const pg_rec_mapping *map = &rec->maps[m];
        for (size_t i = 0; rc == PG_OK && i < map->n_secrets; i++)
            rc = credtimes_add(times, old, p, map->image_name, &map->secrets[i], NULL,
                               rec->last_updated, previous);
        for (size_t i = 0; rc == PG_OK && i < map->n_sas; i++)
            rc = credtimes_add(times, old, p, map->image_name, NULL, &map->sas[i],
                               rec->last_updated, previous);
    }
    if (rc == PG_OK && old_keys)
        rc = carry_superseded(times, old, old_keys);
    pg_autojson json_t *o =
        rc == PG_OK ? json_pack("{s:s, s:O}", "imageRef", rec->image_ref, "times", times) : NULL;
    pg_autofree char *text = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (!text)
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    else
        rc = pg_st_batch_stage(b, fd, w->path, SUB_CREDTIMES, file, text, strlen(text), err);
    if (rc == PG_OK)
        *times_out = json_incref(times);
    return rc;
}
