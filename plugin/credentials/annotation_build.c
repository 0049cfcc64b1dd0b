/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The credentials annotation value (annotation_build.h). Entries keep insertion
 * order so the output is deterministic for a given pod (the webhook must be
 * side-effect free and give the same answer twice).
 */
#include "annotation_build.h"

#include "annotation_seal.h"
#include "cleanup.h"
#include "keyring.h"

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
    pg_autojson json_t *e = json_object();
    if (!e || json_object_set_new(e, SECRETS_FIELD, json_array()) != 0 ||
        json_object_set_new(e, SAS_FIELD, json_array()) != 0)
        return NULL;
    return pg_steal(&e);
}

/* The entry of image (normalised; created when absent). */
static int entry_for(pg_annotation *a, const char *image, json_t **entry_out,
                     const char **name_out, pg_error *err)
{
    pg_error local = {0};
    pg_autofree char *name = pg_image_name(image, &local);
    if (!name) {
        if (err)
            *err = local;
        return local.code ? local.code : PG_ERR_INVALID;
    }
    json_t *entry = json_object_get(a->value, name);
    if (!entry && (!(entry = new_entry()) || json_object_set_new(a->value, name, entry) != 0))
        return nomem(err);
    if (name_out)
        *name_out = json_object_iter_key(json_object_iter_at(a->value, name));
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
                             const char *uid, const char *hash, const char *auth_hash,
                             pg_error *err)
{
    pg_autojson json_t *o = json_pack("{s:s, s:s, s:s}", "namespace", ns, "name", name, "uid", uid);
    bool hashed = hash && *hash;
    /* authHash only when it differs: the entry had an email (interfaces.md §4). */
    bool email = hashed && auth_hash && strcmp(auth_hash, hash) != 0;
    if (!o || (hashed && json_object_set_new(o, "credentialHash", json_string(hash)) != 0) ||
        (email && json_object_set_new(o, "authHash", json_string(auth_hash)) != 0) ||
        json_array_append_new(json_object_get(entry, field), pg_steal(&o)) != 0)
        return nomem(err);
    return PG_OK;
}

static int check_hashes(const char *hash, const char *auth_hash, pg_error *err)
{
    const char *both[] = {hash, auth_hash};
    for (size_t i = 0; i < 2; i++) {
        if (both[i] && *both[i] && !pg_is_hex64(both[i]))
            return pg_fail(err, PG_ERR_INVALID, "annotation: a hash is not 64 lowercase hex");
        if (both[i] && strcmp(both[i], PG_EMPTY_CREDENTIAL_HASH) == 0)
            return pg_fail(err, PG_ERR_INVALID, "annotation: the hash of empty credentials "
                                                "proves nothing and is never presented");
    }
    if (auth_hash && *auth_hash && !(hash && *hash))
        return pg_fail(err, PG_ERR_INVALID, "annotation: an auth hash needs a credentialHash");
    return PG_OK;
}

int pg_annotation_add_secret_hashes(pg_annotation *a, const char *image, const char *ns,
                                    const char *name, const char *uid, const char *hash,
                                    const char *auth_hash, pg_error *err)
{
    if (!a || !image)
        return pg_fail(err, PG_ERR_INVALID, "annotation: no image");
    int rc = check_credential(a, ns, name, uid, err);
    if (rc == PG_OK)
        rc = check_hashes(hash, auth_hash, err);
    json_t *entry;
    if (rc == PG_OK)
        rc = entry_for(a, image, &entry, NULL, err);
    if (rc != PG_OK)
        return rc;
    return append_credential(entry, SECRETS_FIELD, ns, name, uid, hash, auth_hash, err);
}

/* The usable entries of dc that apply to image, one item each. */
static int add_matching_entries(json_t *entry, const pg_dockerconfig *dc, const char *image,
                                const char *ns, const char *name, const char *uid,
                                pg_error *err)
{
    pg_cred_hashes *pairs = NULL;
    size_t n = 0;
    int rc = pg_dockerconfig_lookup(dc, image, &pairs, &n, err);
    for (size_t i = 0; rc == PG_OK && i < n; i++)
        if (pairs[i].usable) /* no username, no password: proves nothing (E0) */
            rc = append_credential(entry, SECRETS_FIELD, ns, name, uid, pairs[i].hash,
                                   pairs[i].auth_hash, err);
    pg_cred_hashes_free(pairs, n);
    return rc;
}

int pg_annotation_add_dockerconfig(pg_annotation *a, const char *ns, const char *name,
                                   const char *uid, const char *dockerconfig, size_t len,
                                   pg_error *err)
{
    return pg_annotation_add_dockerconfig_as(a, ns, name, uid, dockerconfig, len,
                                             PG_DOCKERCONFIG_SNIFF, err);
}

int pg_annotation_add_dockerconfig_as(pg_annotation *a, const char *ns, const char *name,
                                      const char *uid, const char *dockerconfig, size_t len,
                                      pg_dockerconfig_form form, pg_error *err)
{
    if (!a || !dockerconfig)
        return pg_fail(err, PG_ERR_INVALID, "annotation: no dockerconfig");
    int rc = check_credential(a, ns, name, uid, err);
    pg_autodockerconfig pg_dockerconfig *dc = NULL;
    if (rc == PG_OK) /* parsed once for every image */
        rc = pg_dockerconfig_parse_as(dockerconfig, len, form, &dc, err);
    const char *image;
    json_t *entry;
    json_object_foreach(a->value, image, entry)
    {
        if (rc == PG_OK)
            rc = add_matching_entries(entry, dc, image, ns, name, uid, err);
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
        return append_credential(entry, SAS_FIELD, ns, name, uid, NULL, NULL, err);
    }
    const char *key;
    json_t *entry;
    json_object_foreach(a->value, key, entry)
    {
        if ((rc = append_credential(entry, SAS_FIELD, ns, name, uid, NULL, NULL, err)) != PG_OK)
            return rc;
    }
    return PG_OK;
}

/* Replaces an item's clear hashes (credentialHash, authHash) by their sealed form,
 * "sealedHashes" (annotation v2). */
static int seal_item(const pg_mac_key *key, json_t *item, pg_error *err)
{
    const char *hash = json_string_value(json_object_get(item, "credentialHash"));
    if (!hash)
        return PG_OK; /* coordinates only, or sealed already */
    const char *auth = json_string_value(json_object_get(item, "authHash"));
    char sealed[PG_SEALED_LEN + 1];
    int rc = pg_seal_hashes(key, json_string_value(json_object_get(item, "namespace")),
                            json_string_value(json_object_get(item, "name")),
                            json_string_value(json_object_get(item, "uid")), hash,
                            auth ? auth : hash, sealed, err);
    if (rc != PG_OK)
        return rc;
    if (json_object_set_new(item, PG_SEALED_FIELD, json_string(sealed)) != 0 ||
        json_object_del(item, "credentialHash") != 0)
        return nomem(err);
    json_object_del(item, "authHash"); /* absent when it equalled credentialHash */
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
        size_t i;
        json_t *item;
        json_array_foreach(json_object_get(entry, SECRETS_FIELD), i, item)
        {
            int rc = seal_item(key, item, err);
            if (rc != PG_OK)
                return rc;
        }
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
