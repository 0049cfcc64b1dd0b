/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kubelet's dockerconfigjson keyring (keyring.c) for the producers of the
 * credentials annotation (annotation_build.c) and pullgate-cri (the node's own
 * docker config files): a document parsed once, then looked up per image.
 * Not installed.
 */
#ifndef PULLGATE_KEYRING_H
#define PULLGATE_KEYRING_H

#include "internal.h"

/* The two hashes of one dockerconfig entry (docs/interfaces.md §3, §4). */
typedef struct pg_cred_hashes {
    char hash[PG_HASH_HEX_LEN + 1];      /* H: the kubelet's credentialHash (with the email) */
    char auth_hash[PG_HASH_HEX_LEN + 1]; /* A: the same hash with the email omitted */
    bool usable; /* a username or a password: an entry with neither proves nothing */
} pg_cred_hashes;

/* A parsed kubernetes.io/dockerconfigjson ({"auths":{...}}) or legacy bare map. */
typedef struct pg_dockerconfig pg_dockerconfig;

/* Which of the two forms a document is read as. */
typedef enum pg_dockerconfig_form {
    PG_DOCKERCONFIG_SNIFF, /* by the content: an "auths" member picks the first form */
    PG_DOCKERCONFIG_AUTHS, /* {"auths":{...}} only; any other member is ignored */
    PG_DOCKERCONFIG_BARE   /* the bare map of .dockercfg / kubernetes.io/dockercfg */
} pg_dockerconfig_form;

/*
 * Parses a document (at most PG_MAX_DOCKERCONFIG_BYTES) in the given form and hashes every
 * entry. Error messages never quote the document (it holds passwords); the parsed strings
 * are wiped before they are freed. The caller still owns and wipes json.
 */
int pg_dockerconfig_parse_as(const char *json, size_t len, pg_dockerconfig_form form,
                             pg_dockerconfig **out, pg_error *err);

/*
 * The form the kubelet reads a node credential file in, by its name
 * (kubernetes pkg/credentialprovider/config.go): a file named .dockercfg is the
 * bare map (ReadDockercfgFile, readDockerConfigFileFromBytes), config.json only
 * its "auths" (ReadDockerConfigJSONFile, readDockerConfigJSONFileFromBytes).
 * The kubelet reads no other name; pullgate reads any other name as config.json,
 * the form that never turns a bare map into credentials.
 */
pg_dockerconfig_form pg_dockerconfig_form_of_file(const char *path);
void pg_dockerconfig_free(pg_dockerconfig *dc);
/* A config released (its hashes wiped) when its block is left (cleanup.h). */
static inline void pg_cleanup_dockerconfig(pg_dockerconfig **dc) { pg_dockerconfig_free(*dc); }
#define pg_autodockerconfig __attribute__((cleanup(pg_cleanup_dockerconfig)))

/*
 * The entries that apply to image by the kubelet keyring's rules, in its lookup
 * order (most specific first), usable or not. *out (may be NULL when *n is 0)
 * is released with pg_cred_hashes_free(*out, *n).
 */
int pg_dockerconfig_lookup(const pg_dockerconfig *dc, const char *image, pg_cred_hashes **out,
                           size_t *n, pg_error *err);
void pg_cred_hashes_free(pg_cred_hashes *v, size_t n);

#endif
