/* SPDX-License-Identifier: Apache-2.0 */
#include "secrets.h"

#include "cleanup.h"
#include "memory.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Kubernetes caps a Secret's data at 1 MiB; its base64 is 4/3 of that. */
#define MAX_ENCODED_BYTES (2u * 1024u * 1024u)
#define CALIBRATION_ENTRIES 256
#define CALIBRATION_IMAGES 64
#define MEASURED_FROM 4096u /* entries x images: smaller calls time the overhead */

/* Picoseconds per entry x image: a machine-wide estimate (the program's, not the
 * library's), raised at once by a slower call, lowered slowly by faster ones. */
static atomic_ullong cost_ps = 2000000ull;

/* Standard base64 (what the API server puts in Secret.data) into a buffer the caller
 * wipes and frees; -1 when it is not base64 (nothing of it is kept). */
static int base64_decode(const char *in, size_t len, unsigned char **out, size_t *out_len)
{
    if (len > MAX_ENCODED_BYTES)
        return -1;
    size_t cap = len / 4 * 3 + 4;
    unsigned char *buf = malloc(cap);
    EVP_ENCODE_CTX *ctx = EVP_ENCODE_CTX_new();
    int n = 0, tail = 0, ok = buf && ctx;
    if (ok) {
        EVP_DecodeInit(ctx);
        ok = EVP_DecodeUpdate(ctx, buf, &n, (const unsigned char *)in, (int)len) >= 0 &&
             EVP_DecodeFinal(ctx, buf + n, &tail) == 1;
    }
    EVP_ENCODE_CTX_free(ctx);
    if (!ok) {
        if (buf)
            OPENSSL_cleanse(buf, cap);
        free(buf);
        return -1;
    }
    *out = buf;
    *out_len = (size_t)n + (size_t)tail;
    return 0;
}

/* The data field holding the dockerconfig for the secret's type, or NULL for another type. */
static const char *dockerconfig_field(const char *type)
{
    if (type && strcmp(type, "kubernetes.io/dockerconfigjson") == 0)
        return ".dockerconfigjson";
    if (type && strcmp(type, "kubernetes.io/dockercfg") == 0)
        return ".dockercfg";
    return NULL; /* Opaque and every other type: the kubelet ignores them for pulls */
}

/* Why the builder refused the dockerconfig, from its code alone: its message could
 * quote parser context, and the parser's input is the secret. */
static const char *builder_failure(int code)
{
    switch (code) {
    case PG_ERR_NOMEM: return "is larger than the memory budget allows now";
    case PG_ERR_INVALID: return "is not a valid docker config";
    case PG_ERR_LIMIT: return "has more entries than one review matches against its images";
    case PG_ERR_TIMEOUT: return "cannot be matched against the images within the time limit";
    default: return "cannot be used";
    }
}

static int fail(pg_error *err, int code, const char *ns, const char *name, const char *field,
                const char *why)
{
    return pg_fail(err, code, "secret %s/%.64s: data[\"%s\"] %s", ns, name, field, why);
}

unsigned long long wh_matching_cost_ps(void) { return atomic_load(&cost_ps); }

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void learn_cost(size_t matching, long long elapsed_ns)
{
    if (matching < MEASURED_FROM || elapsed_ns <= 0)
        return;
    unsigned long long seen = (unsigned long long)elapsed_ns * 1000ull / matching,
                       old = atomic_load(&cost_ps);
    atomic_store(&cost_ps, seen > old ? seen : (old * 7 + seen) / 8);
}

/* The library call that parses and matches, bounded: by the review's matching
 * budget and deadline, and by the memory budget for its parse. */
static int add_dockerconfig(pg_annotation *a, const char *ns, const char *name, const char *uid,
                            const char *text, size_t len, pg_dockerconfig_form form,
                            wh_matching *m)
{
    wh_json_stats st;
    wh_json_skim(text, len, &st);
    size_t images = pg_annotation_count(a), matching = st.objects * (images ? images : 1);
    if (matching > m->left)
        return PG_ERR_LIMIT;
    m->left -= matching;
    long double ms = (long double)matching * atomic_load(&cost_ps) / 1e9L;
    if (ms >= (long double)(m->deadline_ms - pg_monotonic_ms()))
        return PG_ERR_TIMEOUT; /* the call would end past the deadline */
    if (wh_parse_begin(wh_json_parse_cost(text, len)) != 0)
        return PG_ERR_NOMEM;
    pg_error err = {0};
    long long t0 = now_ns();
    int rc = pg_annotation_add_dockerconfig_as(a, ns, name, uid, text, len, form, &err);
    learn_cost(matching, now_ns() - t0);
    wh_parse_end();
    OPENSSL_cleanse(err.message, sizeof err.message); /* never shown: see builder_failure */
    return rc;
}

void wh_matching_calibrate(void)
{
    pg_autofree char *text = malloc(64 + CALIBRATION_ENTRIES * 64); /* no real credential */
    pg_annotation *a = pg_annotation_new("calibration", NULL);
    if (!text || !a) {
        pg_annotation_free(a);
        return;
    }
    size_t n = (size_t)sprintf(text, "{\"auths\":{");
    for (int i = 0; i < CALIBRATION_ENTRIES; i++)
        n += (size_t)sprintf(text + n, "%s\"r%d.calibration.invalid\":{\"auth\":\"dTpw\"}",
                             i ? "," : "", i);
    n += (size_t)sprintf(text + n, "}}");
    for (int i = 0; i < CALIBRATION_IMAGES; i++) {
        char image[64];
        snprintf(image, sizeof image, "r%d.calibration.invalid/i%d", i, i);
        pg_annotation_add_image(a, image, NULL, NULL);
    }
    atomic_store(&cost_ps, 0);
    for (int round = 0; round < 2; round++) { /* the slower of two */
        long long t0 = now_ns();
        pg_annotation_add_dockerconfig(a, "calibration", "c", "u", text, n, NULL);
        learn_cost((size_t)CALIBRATION_ENTRIES * CALIBRATION_IMAGES, now_ns() - t0);
    }
    pg_annotation_free(a);
}

int wh_secret_is_pull_secret(const json_t *secret)
{
    return dockerconfig_field(wh_text_at(secret, "type")) != NULL;
}

int wh_secret_add(pg_annotation *a, const char *ns, const char *name, const json_t *secret,
                  wh_matching *m, pg_error *err)
{
    const char *field = dockerconfig_field(wh_text_at(secret, "type"));
    if (!field)
        return pg_fail(err, PG_ERR_IO, "secret %s/%.64s: not a pull secret type", ns, name);
    const char *uid = wh_text_at(json_object_get(secret, "metadata"), "uid");
    if (!uid || !*uid)
        return pg_fail(err, PG_ERR_IO, "malformed secret %s/%.64s: no metadata.uid", ns, name);
    const json_t *data = json_object_get(json_object_get(secret, "data"), field);
    if (!json_is_string(data))
        return fail(err, PG_ERR_IO, ns, name, field, "is missing");
    unsigned char *text = NULL;
    size_t len = 0;
    if (base64_decode(json_string_value(data), json_string_length(data), &text, &len) != 0)
        return fail(err, PG_ERR_IO, ns, name, field, "is not base64");
    /* The form by the type, as the kubelet reads it: .dockerconfigjson's "auths" only. */
    pg_dockerconfig_form form =
        strcmp(field, ".dockercfg") == 0 ? PG_DOCKERCONFIG_BARE : PG_DOCKERCONFIG_AUTHS;
    int rc = add_dockerconfig(a, ns, name, uid, (const char *)text, len, form, m);
    OPENSSL_cleanse(text, len);
    free(text);
    if (rc != PG_OK)
        return fail(err, rc == PG_ERR_NOMEM ? PG_ERR_NOMEM : PG_ERR_IO, ns, name, field,
                    builder_failure(rc));
    return PG_OK;
}
