/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target, differential: the hook's JSON reader (hooks/oci_scan.c)
 * against jansson, the full parse the hook used before (pg_json_parse:
 * json_loadb with JSON_REJECT_DUPLICATES). For every input:
 *  - the reader accepts it exactly when jansson does;
 *  - accepted, the root has the same kind and the same members, each of the
 *    same kind, every string member the same bytes;
 *  - the "annotations" map has the same members with the same string values
 *    (and the same non-string ones);
 *  - what the hook decides from is the same: hook_parse_bundle_config and
 *    hook_parse_state succeed exactly when the checks the hook made on the
 *    jansson tree succeed, with the same annotations and the same id/bundle.
 * One reader per input (no state between runs), reused for every scan of it
 * after a first, different document, as a resident worker reuses its own.
 */
#include "hook.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static hook_doc *doc;

/* A document that leaves keys, a map and strings behind in the reader's buffers. */
static const char warm[] =
    "{\"ociVersion\":\"1.0.2\",\"id\":\"x\",\"bundle\":\"/b\",\"annotations\":"
    "{\"io.container.manager\":\"cri-o\",\"z\":\"\\u00e9\"},\"n\":[1,2.5e3]}";

static void check(int ok)
{
    if (!ok)
        __builtin_trap();
}

static hook_json_kind kind_of(const json_t *v)
{
    if (json_is_string(v))
        return HOOK_JSON_STRING;
    return json_is_object(v) ? HOOK_JSON_OBJECT : HOOK_JSON_OTHER;
}

static int same_string(const json_t *v, const char *s)
{
    return s && strlen(s) == json_string_length(v) &&
           memcmp(s, json_string_value(v), json_string_length(v)) == 0;
}

/* The root's members, as jansson has them. */
static void check_root(const json_t *root)
{
    check(hook_doc_root_is_object(doc) == json_is_object(root));
    if (!json_is_object(root))
        return;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v)
    {
        const char *value;
        check(hook_doc_member(doc, key, &value) == kind_of(v));
        if (json_is_string(v))
            check(same_string(v, value));
    }
}

/* The map: the same members both ways round (equal sizes, each of ours in jansson's). */
static void check_map(const json_t *root)
{
    const json_t *ann = json_is_object(root) ? json_object_get(root, "annotations") : NULL;
    if (!json_is_object(ann)) {
        check(hook_doc_map_size(doc) == 0);
        return;
    }
    check(hook_doc_map_size(doc) == json_object_size(ann));
    for (size_t i = 0; i < hook_doc_map_size(doc); i++) {
        const char *key, *value;
        check(hook_doc_map_entry(doc, i, &key, &value) == 0);
        const json_t *v = json_object_get(ann, key);
        check(v != NULL);
        check(json_is_string(v) ? same_string(v, value) : value == NULL);
        check(hook_doc_map_get(doc, key) == value);
    }
}

/* What the hook accepted from a jansson tree before (oci_input.c at 1.1.0). */
static int jansson_config_ok(const json_t *root)
{
    if (!json_is_object(root))
        return 0;
    const json_t *ann = json_object_get(root, "annotations");
    if (!ann)
        return 1;
    if (!json_is_object(ann))
        return 0;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)ann, key, v)
    {
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
            return 0;
    }
    return 1;
}

static int jansson_state_string(const json_t *root, const char *key)
{
    const json_t *v = json_object_get(root, key);
    return json_is_string(v) && json_string_length(v) > 0 &&
           strlen(json_string_value(v)) == json_string_length(v);
}

static int jansson_state_ok(const json_t *root)
{
    return json_is_object(root) && jansson_state_string(root, "id") &&
           jansson_state_string(root, "bundle") &&
           json_string_value(json_object_get(root, "bundle"))[0] == '/';
}

static void check_decision_inputs(const char *buf, size_t size, const json_t *root)
{
    pg_error err = {0};
    int ok = hook_parse_bundle_config(doc, buf, size, &err) == PG_OK;
    check(ok == (root && jansson_config_ok(root)));
    check(ok || err.message[0]);
    if (ok)
        check_map(root);
    if (size > HOOK_MAX_STATE_BYTES)
        return;
    hook_state st;
    ok = hook_parse_state(doc, buf, size, &st, &err) == PG_OK;
    check(ok == (root && jansson_state_ok(root)));
    if (ok) {
        check(same_string(json_object_get(root, "id"), st.id));
        check(same_string(json_object_get(root, "bundle"), st.bundle));
    } else {
        check(!st.id && !st.bundle);
    }
    hook_state_clear(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!(doc = hook_doc_new()))
        return 0;
    pg_error warm_err = {0};
    check(hook_doc_scan(doc, warm, sizeof warm - 1, "annotations", "warm", &warm_err) == PG_OK);
    const char *buf = (const char *)data;
    json_error_t je;
    json_t *root = json_loadb(buf, size, JSON_REJECT_DUPLICATES, &je);
    pg_error err = {0};
    int ok = hook_doc_scan(doc, buf, size, "annotations", "fuzz", &err) == PG_OK;
    check(ok == (root != NULL));
    if (ok) {
        check_root(root);
        check_map(root);
    }
    check_decision_inputs(buf, size, root);
    hook_doc_trim(doc);
    hook_doc_free(doc);
    doc = NULL;
    json_decref(root);
    return 0;
}
