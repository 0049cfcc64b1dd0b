/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 2 of the record store: reading its files (a pulled record, credential
 * times, an image index entry) and projecting a record onto what a decision
 * reads of it (store_read.h).
 */
#include "store_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ records */

int pg_st_read_record_at(int pulled_fd, const record_dir *d, const char *name, pg_record **out,
                         pg_error *err)
{
    pg_autofree char *buf = NULL;
    size_t len;
    *out = NULL; /* defined on every path, so callers never read garbage */
    int rc =
        pg_st_read_strict(pulled_fd, d, SUB_PULLED, name, PG_MAX_RECORD_BYTES, &buf, &len, err);
    if (rc != PG_OK)
        return rc;
    pg_autorecord pg_record *rec = NULL;
    rc = pg_record_parse(buf, len, &rec, err);
    if (rc != PG_OK)
        return pg_st_prefix_error(err, rc, d->path, SUB_PULLED, name);
    file_name expected;
    rc = pg_record_file_name(rec->image_ref, expected, err);
    if (rc == PG_OK && strcmp(expected, name) != 0)
        rc = pg_st_mismatch(err, d, SUB_PULLED, name, "imageRef", rec->image_ref);
    if (rc == PG_OK && !(rec->dir = strdup(d->path)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_OK)
        *out = pg_steal(&rec);
    return rc;
}

/* ------------------------------------------------------ focused records */

bool pg_focus_keeps_secret(const pg_record_focus *f, const pg_pod_cred *r)
{
    if (pg_pod_binding_matches(f->pod_namespace, f->pod_uid, r))
        return true; /* the decision's pod rule */
    const pg_pod_cred *ps = NULL;
    size_t n = f->presented ? pg_presented_secrets(f->presented, f->image_name, &ps) : 0;
    for (size_t i = 0; i < n; i++)
        if (pg_pod_cred_matches(&ps[i], r)) /* the decision's own rule */
            return true;
    return false;
}

bool pg_focus_keeps_sa(const pg_record_focus *f, const pg_pod_cred *r)
{
    const pg_pod_cred *ps = NULL;
    size_t n = f->presented ? pg_presented_sas(f->presented, f->image_name, &ps) : 0;
    for (size_t i = 0; i < n; i++)
        if (pg_pod_cred_matches(&ps[i], r))
            return true;
    return false;
}

pg_record *pg_st_focused_new(const char *image_ref, const char *dir, const char *api_version,
                             time_t last_updated, const char *last_updated_text)
{
    pg_autorecord pg_record *rec = pg_record_new(image_ref, NULL);
    if (!rec)
        return NULL;
    rec->last_updated = last_updated;
    rec->dir = pg_strdup(dir);
    rec->last_updated_text = pg_strdup(last_updated_text ? last_updated_text : "");
    char *api = pg_strdup(api_version);
    if (api) {
        free(rec->api_version);
        rec->api_version = api;
    }
    return (dir && !rec->dir) || !rec->last_updated_text || !api ? NULL : pg_steal(&rec);
}

pg_rec_mapping *pg_st_focused_mapping(pg_record *rec, const char *image_name, bool node_accessible)
{
    rec->maps = calloc(1, sizeof *rec->maps);
    if (!rec->maps)
        return NULL;
    rec->maps[0].image_name = strdup(image_name);
    if (!rec->maps[0].image_name)
        return NULL; /* n_maps stays 0: pg_record_free frees maps alone */
    rec->maps[0].node_pods_accessible = node_accessible;
    rec->n_maps = 1;
    return &rec->maps[0];
}

/* A copy of c (hash kept only for secrets) appended to *v. */
static bool append_cred(pg_pod_cred **v, size_t *n, const pg_pod_cred *c, bool secret)
{
    pg_pod_cred *grown = realloc(*v, (*n + 1) * sizeof *grown);
    if (!grown)
        return false;
    *v = grown;
    pg_pod_cred copy = {strdup(c->namespace_), strdup(c->name), strdup(c->uid),
                        secret ? strdup(c->credential_hash ? c->credential_hash : "") : NULL, NULL};
    if (!copy.namespace_ || !copy.name || !copy.uid || (secret && !copy.credential_hash)) {
        pg_pod_cred_clear(&copy);
        return false;
    }
    grown[(*n)++] = copy;
    return true;
}

bool pg_st_append_secret(pg_rec_mapping *m, const pg_pod_cred *s)
{
    return append_cred(&m->secrets, &m->n_secrets, s, true);
}

bool pg_st_append_sa(pg_rec_mapping *m, const pg_pod_cred *sa)
{
    return append_cred(&m->sas, &m->n_sas, sa, false);
}

void pg_focused_clear(pg_focused *f)
{
    pg_record_free(f->rec);
    free(f->secret_times);
    free(f->sa_times);
    *f = (pg_focused){0};
}

int pg_record_project(const pg_record *full, const pg_record_focus *f, pg_record **out,
                      pg_error *err)
{
    *out = NULL;
    pg_autorecord pg_record *rec = pg_st_focused_new(full->image_ref, full->dir, full->api_version,
                                                     full->last_updated, full->last_updated_text);
    const pg_rec_mapping *m = rec ? pg_record_find(full, f->image_name) : NULL;
    bool ok = rec != NULL;
    pg_rec_mapping *fm =
        m && ok ? pg_st_focused_mapping(rec, f->image_name, m->node_pods_accessible) : NULL;
    ok = ok && (!m || fm);
    for (size_t j = 0; ok && fm && j < m->n_secrets; j++)
        if (pg_focus_keeps_secret(f, &m->secrets[j]))
            ok = pg_st_append_secret(fm, &m->secrets[j]);
    for (size_t j = 0; ok && fm && j < m->n_sas; j++)
        if (pg_focus_keeps_sa(f, &m->sas[j]))
            ok = pg_st_append_sa(fm, &m->sas[j]);
    if (!ok)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    *out = pg_steal(&rec);
    return PG_OK;
}

/* ---------------------------------------------------- credential times */

/*
 * credentialTTL applies per credential, but the kubelet's format has one
 * lastUpdatedTime per record. pullgate keeps, beside each record it writes,
 * pullgate-credtimes/<record file>: {"imageRef":..,"times":{<credential>:<unix s>}}.
 * Kubelet records stay byte-compatible; records without the side file use
 * their lastUpdatedTime.
 */
#define MAX_CREDTIMES_BYTES (16u << 20)

char *pg_st_credential_key(const char *image_name, const pg_pod_cred *s, const pg_pod_cred *sa)
{
    char *key = NULL;
    int n = s ? asprintf(&key, "secret\x1f%s\x1f%s\x1f%s\x1f%s\x1f%s", image_name, s->namespace_,
                         s->name, s->uid, s->credential_hash ? s->credential_hash : "")
              : asprintf(&key, "serviceAccount\x1f%s\x1f%s\x1f%s\x1f%s", image_name, sa->namespace_,
                         sa->name, sa->uid);
    return n < 0 ? NULL : key;
}

int pg_st_credtimes_read(int fd, const record_dir *d, const char *file, const char *image_ref,
                         json_t **times, pg_error *err)
{
    pg_autofree char *buf = NULL;
    size_t len;
    *times = NULL;
    int rc = pg_st_read_strict(fd, d, SUB_CREDTIMES, file, MAX_CREDTIMES_BYTES, &buf, &len, err);
    if (rc != PG_OK)
        return rc;
    pg_autojson json_t *o = pg_json_parse(buf, len, "credential times", err);
    const char *ref = NULL;
    json_t *t = NULL;
    if (!o || json_unpack(o, "{s:s, s:o}", "imageRef", &ref, "times", &t) != 0 ||
        !json_is_object(t) || strcmp(ref, image_ref) != 0)
        return pg_st_prefix_error(
            err, pg_fail(err, PG_ERR_CORRUPT, "not the credential times of %.200s", image_ref),
            d->path, SUB_CREDTIMES, file);
    *times = json_incref(t);
    return PG_OK;
}

int pg_st_credential_time(const json_t *times, const char *image_name, const pg_pod_cred *s,
                          const pg_pod_cred *sa, time_t fallback, time_t *out, pg_error *err)
{
    *out = fallback;
    if (!times)
        return PG_OK;
    pg_autofree char *key = pg_st_credential_key(image_name, s, sa);
    if (!key)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    json_t *t = json_object_get(times, key);
    if (json_is_integer(t))
        *out = (time_t)json_integer_value(t);
    return PG_OK;
}

/* ---------------------------------------------------- image index entries */

/* The entry's strings, borrowed from *o (caller releases it); CORRUPT naming the file if it is none. */
static int decode_index(const char *buf, size_t len, const record_dir *d, const char *name,
                        json_t **o, const char **image, const char **ref, pg_error *err)
{
    static const char *const keys[] = {"image", "imageRef", NULL};
    *o = pg_json_parse(buf, len, "image index entry", err);
    if (*o && json_is_object(*o) &&
        pg_json_only_keys(*o, keys, "image index entry", err) == PG_OK &&
        json_unpack(*o, "{s:s, s:s}", "image", image, "imageRef", ref) == 0 && **ref)
        return PG_OK;
    if (*o)
        pg_fail(err, PG_ERR_CORRUPT, "not an image index entry");
    return pg_st_prefix_error(err, PG_ERR_CORRUPT, d->path, SUB_IMAGES, name);
}

int pg_st_index_read(int fd, const record_dir *d, const char *name, char **ref_out, pg_error *err)
{
    pg_autofree char *buf = NULL;
    size_t len;
    *ref_out = NULL;
    int rc = pg_st_read_strict(fd, d, SUB_IMAGES, name, MAX_INDEX_BYTES, &buf, &len, err);
    if (rc != PG_OK)
        return rc;
    pg_autojson json_t *o = NULL;
    const char *image = NULL, *ref = NULL;
    file_name expected;
    rc = decode_index(buf, len, d, name, &o, &image, &ref, err);
    if (rc == PG_OK)
        rc = pg_record_file_name(image, expected, err);
    if (rc == PG_OK && strcmp(expected, name) != 0) /* its own message names the file */
        rc = pg_st_mismatch(err, d, SUB_IMAGES, name, "image", image);
    else if (rc == PG_OK && !(*ref_out = strdup(ref)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return rc;
}
