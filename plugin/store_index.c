/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The image -> imageRef index of the record store (pullgate-images/): one
 * entry per spelling of an image (as written, normalised, name@digest) and per
 * alias (an image ID or another reference of the same image).
 */
#include "image_identity.h"
#include "internal.h"
#include "store_index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* -------------------------------------------------------------- index */

static char *index_json(const char *image, const char *image_ref)
{
    json_t *o = json_pack("{s:s, s:s}", "image", image, "imageRef", image_ref);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return text;
}

/* images/<hash(key)> = {"image":key,"imageRef":ref}, staged in b; unchanged entries are not
 * rewritten. */
static int write_index(const pg_store *s, pg_st_batch *b, int fd, const char *key,
                       const char *image_ref, pg_error *err)
{
    file_name name;
    int rc = pg_record_file_name(key, name, err);
    if (rc != PG_OK)
        return rc;
    char *text = index_json(key, image_ref);
    if (!text)
        return pg_fail(err, PG_ERR_INVALID, "cannot serialise the image index entry of \"%.200s\"",
                       key);
    char *old = NULL;
    rc = pg_st_read_strict(fd, &s->dirs[0], SUB_IMAGES, name, MAX_INDEX_BYTES, &old, NULL, err);
    if (rc == PG_OK && strcmp(old, text) == 0)
        rc = PG_OK;
    else if (rc == PG_OK || rc == PG_ERR_NOT_FOUND || rc == PG_ERR_LIMIT)
        rc = pg_st_batch_stage(b, fd, s->dirs[0].path, SUB_IMAGES, name, text, strlen(text), err);
    free(old);
    free(text);
    return rc;
}

/* Index keys: as written, normalised, and name@digest (a tag beside a digest is decoration). */
int pg_st_update_index(const pg_store *s, pg_st_batch *b, const char *image, const char *normalised,
                       const char *digest_only, const char *image_ref, pg_error *err)
{
    int fd;
    int rc = pg_st_open_subdir(&s->dirs[0], SUB_IMAGES, &fd, err);
    if (rc != PG_OK)
        return rc;
    rc = write_index(s, b, fd, normalised, image_ref, err);
    if (rc == PG_OK && strcmp(image, normalised) != 0)
        rc = write_index(s, b, fd, image, image_ref, err);
    if (rc == PG_OK && digest_only && strcmp(digest_only, normalised) != 0)
        rc = write_index(s, b, fd, digest_only, image_ref, err);
    close(fd);
    return rc;
}

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

static int parse_index(const char *buf, size_t len, const record_dir *d, const char *name,
                       char **ref_out, pg_error *err)
{
    json_t *o;
    const char *image = NULL, *ref = NULL;
    file_name expected;
    int rc = decode_index(buf, len, d, name, &o, &image, &ref, err);
    if (rc == PG_OK)
        rc = pg_record_file_name(image, expected, err);
    if (rc == PG_OK && strcmp(expected, name) != 0) /* its own message names the file */
        rc = pg_st_mismatch(err, d, SUB_IMAGES, name, "image", image);
    else if (rc == PG_OK && !(*ref_out = strdup(ref)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    json_decref(o);
    return rc;
}

int pg_st_resolve_in_dir(const record_dir *d, const char *key, char **ref_out, pg_error *err)
{
    file_name name;
    int fd;
    bool owned = false;
    int rc = pg_record_file_name(key, name, err);
    if (rc == PG_OK)
        rc = pg_st_lookup_fd(d, SUB_IMAGES, &fd, &owned, err);
    if (rc != PG_OK)
        return rc;
    char *buf;
    size_t len;
    rc = pg_st_read_strict(fd, d, SUB_IMAGES, name, MAX_INDEX_BYTES, &buf, &len, err);
    if (owned)
        close(fd);
    if (rc != PG_OK)
        return rc;
    rc = parse_index(buf, len, d, name, ref_out, err);
    free(buf);
    return rc;
}

PG_API int pg_store_resolve_image(const pg_store *store, const char *image, char **ref_out,
                                  pg_error *err)
{
    *ref_out = NULL;
    int rc =
        store ? pg_st_check_input("image", image, err) : pg_fail(err, PG_ERR_INVALID, "no store");
    if (rc != PG_OK)
        return rc;
    pg_ref *ref = pg_ref_parse(image, NULL);
    const char *keys[2] = {ref ? pg_ref_string(ref) : image, image};
    size_t n_keys = ref && strcmp(keys[0], image) != 0 ? 2 : 1;
    rc = PG_ERR_NOT_FOUND;
    for (size_t i = 0; rc == PG_ERR_NOT_FOUND && i < store->n_dirs; i++)
        for (size_t k = 0; rc == PG_ERR_NOT_FOUND && k < n_keys; k++)
            rc = pg_st_resolve_in_dir(&store->dirs[i], keys[k], ref_out, err);
    pg_ref_free(ref);
    if (rc == PG_ERR_NOT_FOUND)
        return pg_fail(err, PG_ERR_NOT_FOUND, "no imageRef recorded for \"%.200s\"", image);
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
static bool entry_record_file(const pg_store *s, int images_fd, const char *entry, file_name record)
{
    char *buf = NULL, *ref = NULL;
    size_t len = 0;
    pg_error ignored = {0};
    bool ok = pg_st_read_strict(images_fd, &s->dirs[0], SUB_IMAGES, entry, MAX_INDEX_BYTES, &buf,
                                &len, &ignored) == PG_OK &&
              parse_index(buf, len, &s->dirs[0], entry, &ref, &ignored) == PG_OK &&
              pg_record_file_name(ref, record, &ignored) == PG_OK;
    free(buf);
    free(ref);
    return ok;
}

static bool no_record(int pulled_fd, const char *record)
{
    struct stat st;
    return fstatat(pulled_fd, record, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT;
}

bool pg_st_index_orphan(const pg_store *s, int images_fd, int pulled_fd, const char *entry)
{
    file_name record;
    return entry_record_file(s, images_fd, entry, record) && no_record(pulled_fd, record);
}

/* ------------------------------------------------------------ aliases */

/* Up to two index keys per alias: as written and its other spelling. */
typedef struct alias_keys {
    char **keys; /* NULL-terminated */
    size_t n;
} alias_keys;

static int add_key(alias_keys *k, const char *key, pg_error *err)
{
    for (size_t i = 0; i < k->n; i++)
        if (strcmp(k->keys[i], key) == 0)
            return PG_OK;
    char **grown = realloc(k->keys, (k->n + 2) * sizeof *grown);
    if (grown)
        k->keys = grown;
    char *copy = grown ? strdup(key) : NULL;
    if (!copy)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    k->keys[k->n++] = copy;
    k->keys[k->n] = NULL;
    return PG_OK;
}

/* An ID under both spellings; a reference as written and normalised. */
static int alias_spellings(alias_keys *k, const char *alias, pg_error *err)
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
    alias_keys k = {NULL, 0};
    int rc = PG_OK;
    /* Every alias is validated before anything is written: all or nothing. */
    for (size_t i = 0; rc == PG_OK && aliases && aliases[i]; i++)
        rc = alias_spellings(&k, aliases[i], err);
    if (rc != PG_OK) {
        pg_strv_free(k.keys);
        k.keys = NULL;
    }
    *keys = k.keys;
    return rc;
}

int pg_st_stage_aliases(const pg_store *s, pg_st_batch *b, char *const *keys, const char *image_ref,
                        pg_error *err)
{
    if (!keys || !keys[0])
        return PG_OK;
    int fd = -1;
    int rc = pg_st_open_subdir(&s->dirs[0], SUB_IMAGES, &fd, err);
    for (size_t i = 0; rc == PG_OK && keys[i]; i++)
        rc = write_index(s, b, fd, keys[i], image_ref, err);
    if (fd >= 0)
        close(fd);
    return rc;
}

/* The changed entries staged, then durable together (their data, then the directory). */
static int record_aliases_locked(const pg_store *s, const char *image_ref, char *const *keys,
                                 pg_error *err)
{
    pg_st_batch b;
    pg_st_batch_init(&b, 0);
    int rc = pg_st_stage_aliases(s, &b, keys, image_ref, err);
    if (rc == PG_OK)
        rc = pg_st_batch_commit(&b, b.n, err);
    pg_st_batch_free(&b);
    return rc;
}

PG_API int pg_store_record_aliases(pg_store *store, const char *image_ref,
                                   const char *const *aliases, pg_error *err)
{
    char **keys = NULL;
    int rc = pg_st_require_writable(store, err);
    if (rc == PG_OK)
        rc = pg_st_check_input("imageRef", image_ref, err);
    if (rc == PG_OK)
        rc = pg_st_alias_keys(aliases, &keys, err);
    int lock_fd = -1;
    if (rc == PG_OK && keys && keys[0])
        rc = pg_st_lock_store(store, &lock_fd, err);
    if (rc == PG_OK && keys && keys[0])
        rc = record_aliases_locked(store, image_ref, keys, err);
    pg_st_unlock_store(lock_fd);
    pg_strv_free(keys);
    return rc;
}
