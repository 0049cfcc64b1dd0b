/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The credentials annotation value (annotation_build.h): image name ->
 * {"kubernetesSecrets":[...], "kubernetesServiceAccounts":[...], "hmac"?}.
 * Entries keep insertion order so the output is deterministic for a given
 * pod (the webhook must be side-effect free and give the same answer twice).
 */
#include "annotation_build.h"

#include <stdlib.h>
#include <string.h>

#define SECRETS_FIELD "kubernetesSecrets"
#define SAS_FIELD "kubernetesServiceAccounts"

struct pg_annotation {
    char *namespace_;
    json_t *value; /* object: image name -> entry */
};

static int nomem(pg_error *err) { return pg_fail(err, PG_ERR_NOMEM, "out of memory"); }

pg_annotation *pg_annotation_new(const char *pod_namespace, pg_error *err)
{
    if (!pod_namespace || !*pod_namespace) {
        pg_fail(err, PG_ERR_INVALID, "annotation: no pod namespace");
        return NULL;
    }
    pg_annotation *a = calloc(1, sizeof *a);
    if (a && (a->namespace_ = pg_strdup(pod_namespace)) && (a->value = json_object()))
        return a;
    pg_annotation_free(a);
    nomem(err);
    return NULL;
}

void pg_annotation_free(pg_annotation *a)
{
    if (!a)
        return;
    free(a->namespace_);
    json_decref(a->value);
    free(a);
}

size_t pg_annotation_count(const pg_annotation *a) { return a ? json_object_size(a->value) : 0; }

static json_t *new_entry(void)
{
    json_t *e = json_object();
    if (e && (json_object_set_new(e, SECRETS_FIELD, json_array()) != 0 ||
              json_object_set_new(e, SAS_FIELD, json_array()) != 0)) {
        json_decref(e);
        e = NULL;
    }
    return e;
}

/* The entry of image (normalised; created when absent). */
static int entry_for(pg_annotation *a, const char *image, json_t **entry_out,
                     const char **name_out, pg_error *err)
{
    pg_error local = {0};
    char *name = pg_image_name(image, &local);
    if (!name) {
        if (err)
            *err = local;
        return local.code ? local.code : PG_ERR_INVALID;
    }
    json_t *entry = json_object_get(a->value, name);
    if (!entry) {
        entry = new_entry();
        if (!entry || json_object_set_new(a->value, name, entry) != 0) {
            free(name);
            return nomem(err);
        }
    }
    if (name_out)
        *name_out = json_object_iter_key(json_object_iter_at(a->value, name));
    free(name);
    *entry_out = entry;
    return PG_OK;
}

int pg_annotation_add_image(pg_annotation *a, const char *image, const char **name_out,
                            pg_error *err)
{
    if (!a || !image)
        return pg_fail(err, PG_ERR_INVALID, "annotation: no image");
    json_t *entry;
    return entry_for(a, image, &entry, name_out, err);
}

/* A pod can only use credentials of its own namespace: anything else is a producer bug. */
static int check_credential(const pg_annotation *a, const char *ns, const char *name,
                            const char *uid, pg_error *err)
{
    if (!ns || !name || !uid || !*name)
        return pg_fail(err, PG_ERR_INVALID, "annotation: credential without namespace or name");
    if (strcmp(ns, a->namespace_) != 0)
        return pg_fail(err, PG_ERR_INVALID,
                       "annotation: credential namespace \"%.64s\" is not the pod's \"%.64s\"", ns,
                       a->namespace_);
    return PG_OK;
}

static int append_credential(json_t *entry, const char *field, const char *ns, const char *name,
                             const char *uid, const char *hash, pg_error *err)
{
    json_t *o = json_pack("{s:s, s:s, s:s}", "namespace", ns, "name", name, "uid", uid);
    if (o && hash && *hash && json_object_set_new(o, "credentialHash", json_string(hash)) != 0) {
        json_decref(o);
        o = NULL;
    }
    if (!o || json_array_append_new(json_object_get(entry, field), o) != 0)
        return nomem(err);
    return PG_OK;
}

int pg_annotation_add_secret_hash(pg_annotation *a, const char *image, const char *ns,
                                         const char *name, const char *uid, const char *hash,
                                         pg_error *err)
{
    if (!a || !image)
        return pg_fail(err, PG_ERR_INVALID, "annotation: no image");
    int rc = check_credential(a, ns, name, uid, err);
    if (rc != PG_OK)
        return rc;
    json_t *entry;
    if ((rc = entry_for(a, image, &entry, NULL, err)) != PG_OK)
        return rc;
    return append_credential(entry, SECRETS_FIELD, ns, name, uid, hash, err);
}

int pg_annotation_add_dockerconfig(pg_annotation *a, const char *ns, const char *name,
                                          const char *uid, const char *dockerconfig, size_t len,
                                          pg_error *err)
{
    if (!a || !dockerconfig)
        return pg_fail(err, PG_ERR_INVALID, "annotation: no dockerconfig");
    int rc = check_credential(a, ns, name, uid, err);
    const char *image;
    json_t *entry;
    json_object_foreach(a->value, image, entry)
    {
        char **hashes = NULL;
        if (rc == PG_OK)
            rc = pg_dockerconfig_hashes(dockerconfig, len, image, &hashes, err);
        for (size_t i = 0; rc == PG_OK && hashes[i]; i++)
            rc = append_credential(entry, SECRETS_FIELD, ns, name, uid, hashes[i], err);
        pg_strv_free(hashes);
        if (rc != PG_OK)
            return rc;
    }
    return rc;
}

int pg_annotation_add_service_account(pg_annotation *a, const char *image, const char *ns,
                                             const char *name, const char *uid, pg_error *err)
{
    if (!a)
        return pg_fail(err, PG_ERR_INVALID, "annotation: NULL argument");
    int rc = check_credential(a, ns, name, uid, err);
    if (rc != PG_OK)
        return rc;
    if (image) {
        json_t *entry;
        if ((rc = entry_for(a, image, &entry, NULL, err)) != PG_OK)
            return rc;
        return append_credential(entry, SAS_FIELD, ns, name, uid, NULL, err);
    }
    const char *key;
    json_t *entry;
    json_object_foreach(a->value, key, entry)
    {
        if ((rc = append_credential(entry, SAS_FIELD, ns, name, uid, NULL, err)) != PG_OK)
            return rc;
    }
    return PG_OK;
}

int pg_annotation_sign(pg_annotation *a, const pg_mac_key *key, pg_error *err)
{
    if (!a || !key)
        return pg_fail(err, PG_ERR_INVALID, "annotation: no key");
    const char *image;
    json_t *entry;
    json_object_foreach(a->value, image, entry)
    {
        char mac[PG_MAC_HEX_LEN + 1];
        /* Any stale "hmac" is ignored by the MAC and replaced here. */
        int rc = pg_annotation_mac_of_entry(key, a->namespace_, image, entry, mac, err);
        if (rc != PG_OK)
            return rc;
        if (json_object_set_new(entry, PG_MAC_FIELD, json_string(mac)) != 0)
            return nomem(err);
    }
    return PG_OK;
}

char *pg_annotation_dump(const pg_annotation *a, pg_error *err)
{
    if (!a) {
        pg_fail(err, PG_ERR_INVALID, "annotation: NULL argument");
        return NULL;
    }
    char *text = json_dumps(a->value, JSON_COMPACT);
    if (!text)
        nomem(err);
    return text;
}
