/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: pg_presented_parse_keyed (the pod-controlled credentials
 * annotation), with and without a key, so v1 items, sealed v2 items and the
 * MAC paths are all reached. Properties checked on every input: namespace
 * filtering holds; every presented secret carries both hashes, each empty or
 * 64 lowercase hex, never the empty-credential hash.
 */
#include "annotation_mac.h"
#include "internal.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_secrets(const pg_presented *p, const char *image)
{
    const pg_pod_cred *s;
    size_t n = pg_presented_secrets(p, image, &s);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(s[i].namespace_, "team-a") != 0)
            __builtin_trap(); /* namespace filtering must hold for every input */
        const char *h[] = {s[i].credential_hash, s[i].auth_hash};
        for (size_t k = 0; k < 2; k++)
            if (!h[k] || (*h[k] && !pg_is_hex64(h[k])) ||
                strcmp(h[k], PG_EMPTY_CREDENTIAL_HASH) == 0)
                __builtin_trap();
    }
}

static void parse_once(const uint8_t *data, size_t size, const pg_mac_key *key)
{
    pg_presented *p = NULL;
    pg_error err = {0};
    if (pg_presented_parse_keyed((const char *)data, size, "team-a", key, &p, &err) == PG_OK) {
        check_secrets(p, "docker.io/library/nginx");
        check_secrets(p, "registry.example.com/team-a/app");
        const pg_pod_cred *sa;
        size_t n = pg_presented_sas(p, "registry.example.com/team-a/app", &sa);
        for (size_t i = 0; i < n; i++)
            if (strcmp(sa[i].namespace_, "team-a") != 0)
                __builtin_trap();
    }
    pg_presented_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static pg_mac_key *key;
    if (!key) { /* the test vectors' key (test/data/annotation-v2-vectors.json) */
        unsigned char bytes[32];
        for (unsigned i = 0; i < sizeof bytes; i++)
            bytes[i] = (unsigned char)i;
        if (pg_mac_key_from_bytes(bytes, sizeof bytes, &key, NULL) != PG_OK)
            __builtin_trap();
    }
    parse_once(data, size, NULL);
    parse_once(data, size, key);
    return 0;
}
