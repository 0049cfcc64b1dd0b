/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: strict decoding of pulled records and pull intents. */
#include "engine_testing.h"
#include "internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A decoded record must serialise, and the result must decode to the same text. */
static void check_round_trip(const pg_record *rec)
{
    char *text;
    if (pg_record_serialize(rec, NULL, &text, NULL) != PG_OK)
        return; /* e.g. strings jansson accepted but cannot re-emit: not a crash */
    pg_record *again = NULL;
    if (pg_record_parse(text, strlen(text), &again, NULL) != PG_OK)
        __builtin_trap();
    char *text2 = NULL;
    if (pg_record_serialize(again, NULL, &text2, NULL) != PG_OK || strcmp(text, text2) != 0)
        __builtin_trap();
    free(text2);
    pg_record_free(again);
    free(text);
}

/* Every key finds the mapping of the image it names (keys as the kubelet writes them). */
static void check_keys_find_their_image(const pg_record *rec)
{
    for (size_t i = 0; i < rec->n_maps; i++) {
        char *name = NULL;
        if (pg_record_key_name(rec->maps[i].image_name, &name) != PG_OK)
            continue; /* out of memory */
        const pg_rec_mapping *by_key = pg_record_find(rec, rec->maps[i].image_name);
        const pg_rec_mapping *by_image = pg_record_find(rec, name ? name : rec->maps[i].image_name);
        if (!by_key || by_key != by_image)
            __builtin_trap();
        free(name);
    }
}

/* pullgate's own write of a pull folds every spelling of the image into one key. */
static void check_merge_pull_folds(pg_record *rec)
{
    char *name = NULL;
    if (!rec->n_maps || pg_record_key_name(rec->maps[0].image_name, &name) != PG_OK || !name) {
        free(name);
        return; /* no key, or the first one is its own name: nothing to fold */
    }
    if (pg_record_merge_pull(rec, name, NULL, NULL, NULL, NULL) == PG_OK) {
        if (!pg_record_find(rec, name))
            __builtin_trap();
        for (size_t i = 0; i < rec->n_maps; i++) {
            char *other = NULL;
            if (pg_record_key_name(rec->maps[i].image_name, &other) == PG_OK && other &&
                strcmp(other, name) == 0)
                __builtin_trap(); /* a spelling of the image survived the fold */
            free(other);
        }
    }
    free(name);
}

/* A namespace's fair share counts what it occupies: the charges of every namespace and the
 * pool bound the record as serialised (docs/interfaces.md §2). */
static void check_share_bounds_record(const pg_record *rec)
{
    size_t entries = 0;
    for (size_t m = 0; m < rec->n_maps; m++)
        entries += rec->maps[m].n_secrets + rec->maps[m].n_sas;
    if (entries > 1000)
        return; /* quadratic below */
    char *text = NULL;
    if (pg_record_serialize(rec, NULL, &text, NULL) != PG_OK)
        return;
    size_t bound = PG_SHARE_RECORD_SKELETON + 6 * strlen(rec->image_ref) +
                   (rec->last_updated_text ? 6 * strlen(rec->last_updated_text) : 0) +
                   pg_record_pool_bytes(rec);
    /* Each namespace once: charged at its first entry in record order. */
    for (size_t m = 0; m < rec->n_maps; m++)
        for (size_t i = 0; i < rec->maps[m].n_secrets + rec->maps[m].n_sas; i++) {
            const pg_pod_cred *c = i < rec->maps[m].n_secrets
                                       ? &rec->maps[m].secrets[i]
                                       : &rec->maps[m].sas[i - rec->maps[m].n_secrets];
            bool first = true;
            for (size_t m2 = 0; first && m2 <= m; m2++)
                for (size_t j = 0; first && j < rec->maps[m2].n_secrets + rec->maps[m2].n_sas &&
                                   (m2 < m || j < i);
                     j++) {
                    const pg_pod_cred *d = j < rec->maps[m2].n_secrets
                                               ? &rec->maps[m2].secrets[j]
                                               : &rec->maps[m2].sas[j - rec->maps[m2].n_secrets];
                    first = strcmp(c->namespace_, d->namespace_) != 0;
                }
            if (first)
                bound += pg_record_share(rec, c->namespace_).bytes;
        }
    if (strlen(text) + 1 > bound)
        __builtin_trap();
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pg_error err;
    pg_record *rec = NULL;
    if (pg_record_parse((const char *)data, size, &rec, &err) == PG_OK) {
        check_round_trip(rec);
        check_share_bounds_record(rec);
        check_keys_find_their_image(rec);
        check_merge_pull_folds(rec);
        pg_secret s = {"ns", "name", "uid", ""};
        pg_pull_credentials c = {.secrets = &s, .n_secrets = 1};
        if (rec->n_maps)
            pg_record_merge(rec, rec->maps[0].image_name, &c, NULL);
        pg_record_free(rec);
    }
    char *image = NULL;
    if (pg_intent_parse((const char *)data, size, &image, &err) == PG_OK)
        free(image);
    return 0;
}
