/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the credentials annotation parsed with an HMAC key
 * (pg_presented_parse_keyed, docs/annotation-hmac.md). Invariants for every
 * input: nothing outside the pod's namespace is presented, and an image name
 * presents credentials only if some entry under that name carries a MAC that
 * verifies for the namespace (checked independently of the parser's bookkeeping).
 * The key is the documented example key (bytes 0x00..0x1f); seeds are signed with it.
 */
#include "annotation_mac.h"

#include <stdlib.h>
#include <string.h>

#define POD_NAMESPACE "team-a"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pg_mac_key *fuzz_key(void)
{
    static pg_mac_key *key;
    if (!key) {
        unsigned char bytes[32];
        for (int i = 0; i < 32; i++)
            bytes[i] = (unsigned char)i;
        if (pg_mac_key_from_bytes(bytes, sizeof bytes, &key, NULL) != PG_OK)
            abort();
    }
    return key;
}

/* Does any entry whose key normalises to name verify? */
static int some_entry_verifies(const json_t *root, const char *name)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)root, key, val)
    {
        char *normalised = pg_image_name(key, NULL);
        int same = normalised && strcmp(normalised, name) == 0;
        pg_free(normalised);
        if (same && pg_annotation_mac_verify_entry(fuzz_key(), POD_NAMESPACE, name, val, NULL) ==
                        PG_OK)
            return 1;
    }
    return 0;
}

static void check_name(const pg_presented *p, const json_t *root, const char *name)
{
    const pg_pod_cred *s;
    const pg_pod_cred *sa;
    size_t n_s = pg_presented_secrets(p, name, &s), n_sa = pg_presented_sas(p, name, &sa);
    for (size_t i = 0; i < n_s; i++)
        if (strcmp(s[i].namespace_, POD_NAMESPACE) != 0)
            __builtin_trap();
    for (size_t i = 0; i < n_sa; i++)
        if (strcmp(sa[i].namespace_, POD_NAMESPACE) != 0)
            __builtin_trap();
    if ((n_s || n_sa) && !some_entry_verifies(root, name))
        __builtin_trap(); /* credentials presented without a valid MAC */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pg_presented *p = NULL;
    if (pg_presented_parse_keyed((const char *)data, size, POD_NAMESPACE, fuzz_key(), &p, NULL) !=
        PG_OK)
        return 0;
    json_t *root = json_loadb((const char *)data, size, 0, NULL);
    if (!root)
        __builtin_trap(); /* the parser accepted what jansson cannot load */
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        char *name = pg_image_name(key, NULL);
        if (name)
            check_name(p, root, name);
        pg_free(name);
    }
    json_decref(root);
    pg_presented_free(p);
    return 0;
}
