/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Image identity. One image has many spellings: its ID with and without
 * "sha256:", the reference the pod wrote, its normalised form, repo digests.
 * A lookup under one spelling that finds nothing proves nothing about the
 * others (docs/design.md "Image identity"), so every module that keys files
 * by an image's identity goes through these helpers.
 */
#include "cleanup.h"
#include "image_identity.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *pg_image_id_hex(const char *s)
{
    if (!s)
        return NULL;
    if (strncmp(s, PG_ID_PREFIX, strlen(PG_ID_PREFIX)) == 0)
        s += strlen(PG_ID_PREFIX);
    return pg_is_lower_hex(s, PG_ID_HEX_LEN) ? s : NULL;
}

int pg_identity_check(const char *s, pg_ref **ref_out, pg_error *err)
{
    if (ref_out)
        *ref_out = NULL;
    if (!s || !*s)
        return pg_fail(err, PG_ERR_INVALID, "empty image identity");
    if (pg_image_id_hex(s))
        return PG_OK;
    /* "sha256:<not 64 hex>" would parse as the tag of an image named "sha256":
     * never what a runtime means. Anything starting like an ID must be one. */
    if (strncasecmp(s, PG_ID_PREFIX, strlen(PG_ID_PREFIX)) == 0)
        return pg_fail(err, PG_ERR_INVALID,
                       "\"%.200s\" is not a well-formed image ID (sha256:<64 lowercase hex>)", s);
    pg_error why = {0};
    pg_ref *ref = pg_ref_parse(s, &why);
    if (!ref)
        return pg_fail(err, PG_ERR_INVALID,
                       "\"%.200s\" is neither an image ID (sha256:<64 hex>) nor an image reference: %s",
                       s, why.message);
    if (ref_out)
        *ref_out = ref;
    else
        pg_ref_free(ref);
    return PG_OK;
}

/* ------------------------------------------------------------- key sets */

int pg_keyset_add(pg_keyset *ks, const char *key, pg_error *err)
{
    for (size_t i = 0; i < ks->n; i++)
        if (strcmp(ks->v[i], key) == 0)
            return PG_OK;
    return pg_strv_push(ks, key, err);
}

void pg_keyset_free(pg_keyset *ks) { pg_strv_clear(ks); }

static int add_joined(pg_keyset *ks, const char *a, const char *b, const char *c, pg_error *err)
{
    pg_autofree char *key = NULL;
    if (asprintf(&key, "%s%s%s", a, b, c) < 0)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    return pg_keyset_add(ks, key, err);
}

/* name + every tag/digest suffix the kubelet or a runtime may have written. */
static int add_suffix_forms(pg_keyset *ks, const char *name, const pg_ref *ref, pg_error *err)
{
    const char *tag = pg_ref_tag(ref), *digest = pg_ref_digest(ref);
    int rc = PG_OK;
    if (digest) {
        rc = add_joined(ks, name, "@", digest, err);
        if (rc == PG_OK && tag) {
            pg_autofree char *tagged = NULL;
            if (asprintf(&tagged, "%s:%s", name, tag) < 0)
                return pg_fail(err, PG_ERR_NOMEM, "out of memory");
            rc = add_joined(ks, tagged, "@", digest, err);
        }
        return rc;
    }
    if (tag)
        rc = add_joined(ks, name, ":", tag, err);
    if (rc == PG_OK && (!tag || strcmp(tag, "latest") == 0)) {
        rc = pg_keyset_add(ks, name, err);
        if (rc == PG_OK)
            rc = add_joined(ks, name, ":", "latest", err);
    }
    return rc;
}

int pg_identity_add_keys(pg_keyset *ks, const char *s, const pg_ref *ref, pg_error *err)
{
    const char *hex = ref ? NULL : pg_image_id_hex(s);
    if (hex) {
        int rc = pg_keyset_add(ks, hex, err);
        return rc == PG_OK ? add_joined(ks, PG_ID_PREFIX, hex, "", err) : rc;
    }
    if (!ref)
        return pg_fail(err, PG_ERR_INVALID, "\"%.200s\" is not an image identity", s);
    int rc = pg_keyset_add(ks, s, err);
    if (rc == PG_OK)
        rc = pg_keyset_add(ks, pg_ref_string(ref), err);
    if (rc == PG_OK)
        rc = add_suffix_forms(ks, pg_ref_name(ref), ref, err);
    return rc;
}

int pg_identity_add_intent_keys(pg_keyset *ks, const char *s, const pg_ref *ref, pg_error *err)
{
    int rc = pg_identity_add_keys(ks, s, ref, err);
    if (rc != PG_OK || !ref || strcmp(pg_ref_domain(ref), "docker.io") != 0)
        return rc;
    const char *path = pg_ref_path(ref);
    bool official = strncmp(path, "library/", 8) == 0;
    const char *short_path = official ? path + 8 : path;
    const char *prefixes[] = {"", "docker.io/", "index.docker.io/"};
    /* Each prefix with the short path, then (official images) with "library/". */
    for (size_t i = 0; rc == PG_OK && i < 2 * 3; i++) {
        bool library = i % 2;
        pg_autofree char *name = NULL;
        if (library && !official)
            continue;
        if (asprintf(&name, "%s%s%s", prefixes[i / 2], library ? "library/" : "", short_path) < 0)
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        rc = add_suffix_forms(ks, name, ref, err);
    }
    return rc;
}
