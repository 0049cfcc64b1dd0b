/* SPDX-License-Identifier: Apache-2.0 */
#include "secrets.h"

#include "memory.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kubernetes caps a Secret's data at 1 MiB; its base64 is 4/3 of that. */
#define MAX_ENCODED_BYTES (2u * 1024u * 1024u)

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
    default: return "cannot be used";
    }
}

static wh_secret_outcome fail(char *msg, size_t msg_size, const char *ns, const char *name,
                              const char *field, const char *why)
{
    snprintf(msg, msg_size, "secret %s/%.64s: data[\"%s\"] %s", ns, name, field, why);
    return WH_SECRET_FAILED;
}

/* The library call that parses and matches, bounded: by the review's matching
 * budget, and by the memory budget for its parse. */
static int add_dockerconfig(pg_annotation *a, const char *ns, const char *name, const char *uid,
                            const char *text, size_t len, size_t *matching_left)
{
    wh_json_stats st;
    wh_json_skim(text, len, &st);
    size_t images = pg_annotation_count(a), matching = st.objects * (images ? images : 1);
    if (matching > *matching_left)
        return PG_ERR_LIMIT;
    *matching_left -= matching;
    if (wh_parse_begin(wh_json_parse_cost(text, len)) != 0)
        return PG_ERR_NOMEM;
    pg_error err = {0};
    int rc = pg_annotation_add_dockerconfig(a, ns, name, uid, text, len, &err);
    wh_parse_end();
    OPENSSL_cleanse(err.message, sizeof err.message); /* never shown: see builder_failure */
    return rc;
}

wh_secret_outcome wh_secret_add(pg_annotation *a, const char *ns, const char *name,
                                const json_t *secret, size_t *matching_left, char *msg,
                                size_t msg_size)
{
    const char *type = wh_text_at(secret, "type");
    const char *field = dockerconfig_field(type);
    if (!field)
        return WH_SECRET_SKIPPED;
    const char *uid = wh_text_at(json_object_get(secret, "metadata"), "uid");
    if (!uid || !*uid) {
        snprintf(msg, msg_size, "malformed secret %s/%.64s: no metadata.uid", ns, name);
        return WH_SECRET_FAILED;
    }
    const json_t *data = json_object_get(json_object_get(secret, "data"), field);
    if (!json_is_string(data))
        return fail(msg, msg_size, ns, name, field, "is missing");
    unsigned char *text = NULL;
    size_t len = 0;
    if (base64_decode(json_string_value(data), json_string_length(data), &text, &len) != 0)
        return fail(msg, msg_size, ns, name, field, "is not base64");
    int rc = add_dockerconfig(a, ns, name, uid, (const char *)text, len, matching_left);
    OPENSSL_cleanse(text, len);
    free(text);
    if (rc != PG_OK)
        return fail(msg, msg_size, ns, name, field, builder_failure(rc));
    return WH_SECRET_ADDED;
}
