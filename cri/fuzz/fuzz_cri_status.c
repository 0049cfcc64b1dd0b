/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: hostile ImageStatusRequest bytes from the CRI socket through the
 * verification pulls' decoding (pod annotations, the credentials annotation,
 * config.seen), the candidate namespace read from that annotation and the loop
 * bound's key. Checked: a decoded request names an image; "no pod
 * annotations" never carries a credentials annotation; a namespace is only
 * ever one an item names (non-empty, no NUL). No network, no store.
 */
#include "pull.h"
#include "verify_memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static cri_verify_memory *memory;
    if (!memory)
        memory = cri_verify_memory_new(64, 1000, NULL);
    cri_status_request r;
    if (cri_status_request_decode(data, size, "pullgate.dev/credentials", &r, NULL) != PG_OK) {
        if (r.image || r.annotation || r.config_seen)
            abort(); /* a refused request leaves nothing behind */
        return 0;
    }
    if (!r.image || !*r.image || (r.annotation && !r.has_pod_annotations))
        abort();
    if (r.annotation) {
        if (strlen(r.annotation) != r.annotation_len)
            abort();
        char *ns = NULL;
        if (pg_presented_namespace(r.annotation, r.annotation_len, &ns, NULL) == PG_OK && ns &&
            !*ns)
            abort();
        free(ns);
    }
    uint8_t key[32];
    cri_verify_key(r.image, r.annotation, r.annotation_len, r.config_seen, key);
    static int64_t now;
    now += 7;
    if (cri_verify_memory_ask(memory, key, now) && (size & 1))
        cri_verify_memory_pulled(memory, key, now);
    cri_status_request_clear(&r);
    /* The same bytes as a credentials annotation. */
    char *ns = NULL;
    if (pg_presented_namespace((const char *)data, size, &ns, NULL) == PG_OK && ns && !*ns)
        abort();
    free(ns);
    return 0;
}
