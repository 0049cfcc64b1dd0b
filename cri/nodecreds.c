/* SPDX-License-Identifier: Apache-2.0 */
#include "nodecreds.h"

#include "keyring.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct node_file {
    char *path;
    bool seen; /* an identity below was taken */
    struct stat id;
    pg_dockerconfig *dc; /* NULL: missing, or not usable */
} node_file;

struct cri_node_creds {
    node_file *files;
    size_t n;
};

cri_node_creds *cri_node_creds_new(const char *const *paths, pg_error *err)
{
    size_t n = 0;
    while (paths && paths[n])
        n++;
    cri_node_creds *nc = calloc(1, sizeof *nc);
    if (nc && n)
        nc->files = calloc(n, sizeof *nc->files);
    while (nc && nc->files && nc->n < n && (nc->files[nc->n].path = pg_strdup(paths[nc->n])))
        nc->n++;
    if (!nc || nc->n < n) { /* nc->n: the paths copied so far, each freed with it */
        cri_node_creds_free(nc);
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    return nc;
}

void cri_node_creds_free(cri_node_creds *nc)
{
    if (!nc)
        return;
    for (size_t i = 0; i < nc->n; i++) {
        free(nc->files[i].path);
        pg_dockerconfig_free(nc->files[i].dc);
    }
    free(nc->files);
    free(nc);
}

static bool same_identity(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Reads one file with the configuration's checks; the text is wiped (it holds passwords). */
static int load_file(node_file *f, cri_node_creds_warn warn, pg_error *err)
{
    char *text = NULL;
    size_t len = 0;
    pg_error why = {0};
    int rc = pg_read_file_at(AT_FDCWD, f->path, PG_MAX_DOCKERCONFIG_BYTES,
                             PG_READ_CHECK_OWNER | PG_READ_CHECK_MODE, &text, &len, &why);
    if (rc == PG_OK) {
        /* The form by the file's name, as the kubelet reads it (keyring.h). */
        rc = pg_dockerconfig_parse_as(text, len, pg_dockerconfig_form_of_file(f->path), &f->dc,
                                      &why);
        OPENSSL_cleanse(text, len);
        free(text);
    }
    if (rc == PG_ERR_NOMEM)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc != PG_OK && rc != PG_ERR_NOT_FOUND && warn)
        warn(f->path, why.message);
    return PG_OK;
}

int cri_node_creds_refresh(cri_node_creds *nc, cri_node_creds_warn warn, pg_error *err)
{
    for (size_t i = 0; nc && i < nc->n; i++) {
        node_file *f = &nc->files[i];
        struct stat st;
        bool present = lstat(f->path, &st) == 0;
        if (present && f->seen && same_identity(&st, &f->id))
            continue;
        pg_dockerconfig_free(f->dc);
        f->dc = NULL;
        f->seen = present;
        if (!present)
            continue;
        f->id = st;
        /* A file replaced between lstat and open is read as it is then; its new
         * identity differs from the one kept, so the next look reads it again. */
        int rc = load_file(f, warn, err);
        if (rc != PG_OK)
            return rc;
    }
    return PG_OK;
}

int cri_node_creds_holds(const cri_node_creds *nc, const char *image, const char *auth_hash,
                         bool *holds, pg_error *err)
{
    *holds = false;
    for (size_t i = 0; nc && i < nc->n && !*holds; i++) {
        if (!nc->files[i].dc)
            continue;
        pg_cred_hashes *v = NULL;
        size_t n = 0;
        pg_error why = {0};
        int rc = pg_dockerconfig_lookup(nc->files[i].dc, image, &v, &n, &why);
        if (rc == PG_ERR_NOMEM)
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        for (size_t k = 0; rc == PG_OK && k < n; k++)
            if (v[k].usable && strcmp(v[k].auth_hash, auth_hash) == 0)
                *holds = true;
        pg_cred_hashes_free(v, n);
    }
    return PG_OK;
}
