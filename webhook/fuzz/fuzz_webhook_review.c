/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: AdmissionReview parsing, annotation computation and patch
 * building (review.c) with the Kubernetes API behind a stub that answers
 * fixed objects: no network. The answer must always be well-formed: HTTP 200
 * with an AdmissionReview naming the same uid, or HTTP 400.
 */
#include "review.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const SECRET_JSON =
    "{\"kind\":\"Secret\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"regcred\","
    "\"namespace\":\"team-a\",\"uid\":\"uid-1\"},\"type\":\"kubernetes.io/dockerconfigjson\","
    /* {"auths":{"registry.example.com":{"auth":"YWxpY2U6czNjcmV0"}}} */
    "\"data\":{\".dockerconfigjson\":\"eyJhdXRocyI6eyJyZWdpc3RyeS5leGFtcGxlLmNvbSI6eyJhdXRoIjoi"
    "WVd4cFkyVTZjek5qY21WMCJ9fX0=\"}}";
static const char *const LEGACY_JSON =
    "{\"kind\":\"Secret\",\"metadata\":{\"uid\":\"uid-2\"},\"type\":\"kubernetes.io/dockercfg\","
    /* {"docker.io":{"username":"a","password":"b"}} */
    "\"data\":{\".dockercfg\":\"eyJkb2NrZXIuaW8iOnsidXNlcm5hbWUiOiJhIiwicGFzc3dvcmQiOiJiIn19\"}}";
static const char *const SA_JSON =
    "{\"kind\":\"ServiceAccount\",\"metadata\":{\"name\":\"default\",\"uid\":\"uid-sa\"},"
    "\"imagePullSecrets\":[{\"name\":\"regcred\"},{\"name\":\"legacy\"},{\"name\":\"gone\"}]}";

/* Names pick the answer: "gone*" 404, "fail*" an API failure, the rest fixed objects. */
static void stub_get_one(wh_get_req *req)
{
    if (strncmp(req->name, "gone", 4) == 0) {
        req->result = WH_NOT_FOUND;
        return;
    }
    if (strncmp(req->name, "fail", 4) == 0) {
        pg_fail(&req->err, PG_ERR_IO, "HTTP 500");
        req->result = WH_FAILED;
        return;
    }
    const char *text = strcmp(req->resource, "serviceaccounts") == 0 ? SA_JSON
                       : strncmp(req->name, "legacy", 6) == 0         ? LEGACY_JSON
                                                                      : SECRET_JSON;
    req->obj = json_loads(text, 0, NULL);
    req->result = req->obj ? WH_FOUND : WH_FAILED;
}

static void stub_get(void *ctx, const char *ns, wh_get_req *reqs, size_t n, int64_t deadline_ms)
{
    (void)ctx, (void)ns, (void)deadline_ms;
    for (size_t i = 0; i < n; i++)
        stub_get_one(&reqs[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static pg_mac_key *key;
    if (!key) {
        unsigned char bytes[32];
        for (size_t i = 0; i < sizeof bytes; i++)
            bytes[i] = (unsigned char)i;
        if (pg_mac_key_from_bytes(bytes, sizeof bytes, &key, NULL) != PG_OK)
            abort();
    }
    /* The first byte picks sealing, the annotation key and a cut body; the rest is the review. */
    int signed_ = size > 0 && (data[0] & 1);
    const char *annotation = size > 0 && (data[0] & 2) ? "example.com/a~b" : "pullgate.dev/credentials";
    int cut = size > 0 && (data[0] & 4);
    if (size > 0) {
        data++;
        size--;
    }
    wh_review_config cfg = {.annotation_key = annotation,
                            .key = signed_ ? key : NULL,
                            .get = stub_get,
                            .deadline_ms = pg_monotonic_ms() + 60000,
                            .cut = cut ? "cut" : NULL};
    wh_review_result res;
    wh_review_handle(&cfg, (const char *)data, size, &res);
    if (!res.body || (res.http_status != 200 && res.http_status != 400 && res.http_status != 413 &&
                      res.http_status != 500))
        abort();
    /* A readable uid in the first bytes is always answered 200 (never a call failure). */
    char uid[WH_MAX_UID_BYTES + 1];
    json_t *whole =
        json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
    int parsed = whole != NULL;
    json_decref(whole);
    if (res.http_status != 200 && res.http_status != 500 &&
        wh_review_uid_of_prefix((const char *)data, size, uid, sizeof uid) == 0 && (cut || !parsed))
        abort();
    if (res.http_status == 200) {
        json_t *out = json_loads(res.body, 0, NULL);
        json_t *resp = json_object_get(out, "response");
        if (!json_is_string(json_object_get(resp, "uid")) ||
            !json_is_boolean(json_object_get(resp, "allowed")))
            abort();
        json_decref(out);
    }
    wh_review_result_free(&res);
    return 0;
}
