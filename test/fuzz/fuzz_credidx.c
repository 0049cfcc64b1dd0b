/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the credential index decoder (plugin/store/store_credidx.c).
 * Whatever the bytes, decoding never crashes and what it yields is a focused
 * record: at most the one mapping of the focus name, holding only recorded
 * credentials that match a presented one (the decision's own rule). Seeds
 * are real indexes written by pg_store_record_pulled for bench record 0.
 */
#include "annotation_mac.h" /* pg_presented_parse_keyed */
#include "engine_testing.h"
#include "internal.h"
#include "store_credidx.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define IMAGE_REF "3dd3f8d1db39a536c4f48318eda8e4a804f53fbc2b25b94e3aa98b201be050da"
#define NAME "registry.example.com/team-0/app-0"
/* A secret by hash and coordinates, a hash-less secret, a service account. */
#define PRESENTED                                                                              \
    "{\"" NAME "\":{\"kubernetesSecrets\":[{\"namespace\":\"team-0\",\"name\":\"regcred\","  \
    "\"uid\":\"uid-0\",\"credentialHash\":\"1355319d8ae6bf8dd5be0601399a1f504e13bdac88a3aec2" \
    "e5ee347118a32db7\"},{\"namespace\":\"team-0\",\"name\":\"other\",\"uid\":\"u\"}],"       \
    "\"kubernetesServiceAccounts\":[{\"namespace\":\"team-0\",\"name\":\"sa\",\"uid\":\"s\"}]}}"

static bool matches_presented(const pg_presented *p, const pg_pod_cred *r, bool secret)
{
    const pg_pod_cred *v = NULL;
    size_t n = secret ? pg_presented_secrets(p, NAME, &v) : pg_presented_sas(p, NAME, &v);
    for (size_t i = 0; i < n; i++)
        if (pg_pod_cred_matches(&v[i], r))
            return true;
    return false;
}

static void check_focused(const pg_presented *p, const pg_record *rec)
{
    if (strcmp(rec->image_ref, IMAGE_REF) != 0 || rec->n_maps > 1)
        __builtin_trap();
    if (rec->n_maps == 0)
        return;
    const pg_rec_mapping *m = &rec->maps[0];
    if (strcmp(m->image_name, NAME) != 0)
        __builtin_trap();
    for (size_t i = 0; i < m->n_secrets; i++)
        if (!matches_presented(p, &m->secrets[i], true))
            __builtin_trap();
    for (size_t i = 0; i < m->n_sas; i++)
        if (!matches_presented(p, &m->sas[i], false))
            __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static pg_presented *presented;
    if (!presented && pg_presented_parse_keyed(PRESENTED, strlen(PRESENTED), "team-0", NULL,
                                               &presented, NULL) != PG_OK)
        __builtin_trap();
    const pg_record_focus focus = {NAME, presented, NULL, NULL};
    pg_record *rec = NULL;
    if (pg_credidx_decode((const char *)data, size, IMAGE_REF, &focus, &rec) == PG_OK) {
        check_focused(presented, rec);
        pg_record_free(rec);
    } else if (rec) {
        __builtin_trap();
    }
    return 0;
}
