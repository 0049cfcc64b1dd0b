/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image -> imageRef index of the record store (pullgate-images/): one
 * entry per spelling of an image (as written, normalised, name@digest) and per
 * alias (an image ID or another reference of the same image).
 */
#include "image_identity.h"
#include "internal.h"
#include "store_index.h"

#include <stdio.h>
#include <string.h>

/* -------------------------------------------------------------- index */

static char *index_json(const char *image, const char *image_ref)
{
    pg_autojson json_t *o = json_pack("{s:s, s:s}", "image", image, "imageRef", image_ref);
    return o ? json_dumps(o, JSON_COMPACT) : NULL;
}

/* images/<hash(key)> = {"image":key,"imageRef":ref}, staged in b; unchanged entries are not
 * rewritten. */
static int write_index(const record_dir *w, pg_st_batch *b, int fd, const char *key,
                       const char *image_ref, pg_error *err)
{
    file_name name;
    int rc = pg_record_file_name(key, name, err);
    if (rc != PG_OK)
        return rc;
    pg_autofree char *text = index_json(key, image_ref), *old = NULL;
    if (!text)
        return pg_fail(err, PG_ERR_INVALID, "cannot serialise the image index entry of \"%.200s\"",
                       key);
    rc = pg_st_read_strict(fd, w, SUB_IMAGES, name, MAX_INDEX_BYTES, &old, NULL, err);
    if (rc == PG_OK && strcmp(old, text) == 0)
        return PG_OK;
    if (rc == PG_OK || rc == PG_ERR_NOT_FOUND || rc == PG_ERR_LIMIT)
        rc = pg_st_batch_stage(b, fd, w->path, SUB_IMAGES, name, text, strlen(text), err);
    return rc;
}

/* Index keys: as written, normalised, and name@digest (a tag beside a digest is decoration). */
int pg_st_update_index(const record_dir *w, pg_st_batch *b, const char *image,
                       const char *normalised, const char *digest_only, const char *image_ref,
                       pg_error *err)
{
    pg_autoclose int fd = -1;
    int rc = pg_st_open_subdir(w, SUB_IMAGES, &fd, err);
    if (rc == PG_OK)
        rc = write_index(w, b, fd, normalised, image_ref, err);
    if (rc == PG_OK && strcmp(image, normalised) != 0)
        rc = write_index(w, b, fd, image, image_ref, err);
    if (rc == PG_OK && digest_only && strcmp(digest_only, normalised) != 0)
        rc = write_index(w, b, fd, digest_only, image_ref, err);
    return rc;
}

/* ------------------------------------------------------ prune's upkeep */

/*
 * An index entry is evidence that its image was pulled. Entries are written
 * only with their record (or for an imageRef being recorded), so once prune
 * removed a record (durably), the entries naming its imageRef describe an
 * image that is gone and go too; an entry whose record is missing for any
 * other reason (pg_store_delete, a crash between the two) goes at the next
 * prune. An entry that cannot be read is left alone (evidence is never
 * destroyed on a guess).
 */

/* The imageRef's record file, when the entry is readable and names one. */
static bool entry_record_file(const record_dir *w, int images_fd, const char *entry,
                              file_name record)
{
    pg_autofree char *ref = NULL;
    pg_error ignored = {0};
    return pg_st_index_read(images_fd, w, entry, &ref, &ignored) == PG_OK &&
           pg_record_file_name(ref, record, &ignored) == PG_OK;
}

bool pg_st_index_orphan(const record_dir *w, int images_fd, int pulled_fd, const char *entry)
{
    file_name record;
    return entry_record_file(w, images_fd, entry, record) && pg_st_absent_at(pulled_fd, record);
}

/* ------------------------------------------------------------ aliases */

/* Up to two index keys per alias (as written and its other spelling), once each. */
static int add_key(pg_strv *k, const char *key, pg_error *err)
{
    for (size_t i = 0; i < k->n; i++)
        if (strcmp(k->v[i], key) == 0)
            return PG_OK;
    return pg_strv_push(k, key, err);
}

/* An ID under both spellings; a reference as written and normalised. */
static int alias_spellings(pg_strv *k, const char *alias, pg_error *err)
{
    pg_ref *ref = NULL;
    int rc = pg_st_check_input("alias", alias, err);
    if (rc == PG_OK)
        rc = pg_identity_check(alias, &ref, err);
    if (rc == PG_OK)
        rc = add_key(k, alias, err);
    const char *hex = rc == PG_OK ? pg_image_id_hex(alias) : NULL;
    if (hex) {
        char prefixed[sizeof PG_ID_PREFIX + PG_ID_HEX_LEN];
        snprintf(prefixed, sizeof prefixed, "%s%s", PG_ID_PREFIX, hex);
        rc = add_key(k, hex == alias ? prefixed : hex, err);
    } else if (rc == PG_OK) {
        rc = add_key(k, pg_ref_string(ref), err);
    }
    pg_ref_free(ref);
    return rc;
}

int pg_st_alias_keys(const char *const *aliases, char ***keys, pg_error *err)
{
    pg_strv k = {0};
    int rc = PG_OK;
    /* Every alias is validated before anything is written: all or nothing. */
    for (size_t i = 0; rc == PG_OK && aliases && aliases[i]; i++)
        rc = alias_spellings(&k, aliases[i], err);
    if (rc != PG_OK)
        pg_strv_clear(&k);
    *keys = k.v;
    return rc;
}

int pg_st_stage_aliases(const record_dir *w, pg_st_batch *b, char *const *keys,
                        const char *image_ref, pg_error *err)
{
    if (!keys || !keys[0])
        return PG_OK;
    pg_autoclose int fd = -1;
    int rc = pg_st_open_subdir(w, SUB_IMAGES, &fd, err);
    for (size_t i = 0; rc == PG_OK && keys[i]; i++)
        rc = write_index(w, b, fd, keys[i], image_ref, err);
    return rc;
}
