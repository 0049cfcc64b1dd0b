/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Layer 2 of the record store (store_read.c): reading the store's files (a
 * pulled record, a record's credential times, an image index entry), each
 * through a descriptor of its subdirectory, and what a decision reads of a
 * record (its focus).
 * Private to the record store (store_impl.h: the layers).
 */
#ifndef PULLGATE_STORE_READ_H
#define PULLGATE_STORE_READ_H

#include "store_fs.h"

#include <jansson.h>
#include <stdbool.h>
#include <time.h>

/* Reads and checks pulled/<name> (content must match the name). NOT_FOUND when absent. */
int pg_st_read_record_at(int pulled_fd, const record_dir *d, const char *name, pg_record **out,
                         pg_error *err);

/*
 * What a decision reads of a record: one mapping (the image's name) and, in
 * it, only the recorded credentials that match a presented one (or are a
 * binding of the deciding pod). A *focused* record holds exactly that: the
 * imageRef, directory and times, the one mapping (with its nodePodsAccessible
 * flag, present even when empty) and only the kept credentials, in record
 * order. The decision over a focused record is the decision over the full one.
 */
typedef struct pg_record_focus {
    const char *image_name;        /* the credentialMapping key */
    const pg_presented *presented; /* NULL: no credentials presented */
    /* The pod's identity as the runtime sets it (NULL: unknown): pod bindings
     * of this pod are kept (pg_pod_binding_matches). */
    const char *pod_namespace, *pod_uid;
} pg_record_focus;

/* Whether the focus keeps a recorded secret (or service account). */
bool pg_focus_keeps_secret(const pg_record_focus *f, const pg_pod_cred *r);
bool pg_focus_keeps_sa(const pg_record_focus *f, const pg_pod_cred *r);
/* A focused record's parts: the record without mappings, its one mapping, a kept
 * credential appended (copied). NULL / false: out of memory. */
pg_record *pg_st_focused_new(const char *image_ref, const char *dir, const char *api_version,
                             time_t last_updated, const char *last_updated_text);
pg_rec_mapping *pg_st_focused_mapping(pg_record *rec, const char *image_name, bool node_accessible);
bool pg_st_append_secret(pg_rec_mapping *m, const pg_pod_cred *s);
bool pg_st_append_sa(pg_rec_mapping *m, const pg_pod_cred *sa);
/* A focused record as a lookup hands it out: with its credentials' times, in the
 * order of its mapping's secrets and service accounts (NULL: no credentials). */
typedef struct pg_focused {
    pg_record *rec;
    time_t *secret_times, *sa_times;
    bool maps_any; /* the full record maps some image */
} pg_focused;
void pg_focused_clear(pg_focused *f);
/* full projected onto focus (a new record; full is not changed). */
int pg_record_project(const pg_record *full, const pg_record_focus *focus, pg_record **out,
                      pg_error *err);

/* The key of one credential in the credential-times file; caller frees; NULL: ENOMEM. */
char *pg_st_credential_key(const char *image_name, const pg_pod_cred *s, const pg_pod_cred *sa);
/* The times object of pullgate-credtimes/<file> (fd: that subdirectory), which must
 * be image_ref's (new reference). NOT_FOUND when absent; CORRUPT when unusable. */
int pg_st_credtimes_read(int fd, const record_dir *d, const char *file, const char *image_ref,
                         json_t **times, pg_error *err);
/* When a credential was recorded: its entry in times, else fallback (NULL times: fallback). */
int pg_st_credential_time(const json_t *times, const char *image_name, const pg_pod_cred *s,
                          const pg_pod_cred *sa, time_t fallback, time_t *out, pg_error *err);

/* The imageRef of image index entry pullgate-images/<name> (fd: that subdirectory),
 * whose key must hash to name: *ref_out caller frees. NOT_FOUND when absent. */
int pg_st_index_read(int fd, const record_dir *d, const char *name, char **ref_out, pg_error *err);

#endif
