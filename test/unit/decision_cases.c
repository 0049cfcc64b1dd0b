/* SPDX-License-Identifier: Apache-2.0 */
#include "decision_cases.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void dc_make_record_dir(const char *path)
{
    ck_assert_int_eq(mkdir(path, 0700), 0);
    char *pulled = tu_sprintf("%s/pulled", path), *pulling = tu_sprintf("%s/pulling", path);
    ck_assert_int_eq(mkdir(pulled, 0700), 0);
    ck_assert_int_eq(mkdir(pulling, 0700), 0);
    free(pulled);
    free(pulling);
}

void dc_config_set(pg_config *cfg, const char *key, const char *value)
{
    pg_error err = {0};
    ck_assert_msg(pg_config_set(cfg, key, value, &err) == PG_OK, "%s=%s: %s", key, value,
                  err.message);
}

char *dc_record_path(const char *dir, const char *sub, const char *key)
{
    char name[7 + PG_HASH_HEX_LEN + 1];
    ck_assert_int_eq(pg_record_file_name(key, name, NULL), PG_OK);
    return tu_sprintf("%s/%s/%s", dir, sub, name);
}

void dc_write_at(const char *dir, const char *sub, const char *key, const char *content)
{
    char *path = dc_record_path(dir, sub, key);
    tu_write_file(path, content, -1, 0600);
    free(path);
}

char *dc_time_text(time_t t)
{
    char buf[32];
    pg_format_rfc3339(t, buf);
    return tu_sprintf("%s", buf);
}

char *dc_replace_all(const char *s, const char *marker, const char *text)
{
    size_t ml = strlen(marker), tl = strlen(text), n = 0;
    for (const char *p = strstr(s, marker); p; p = strstr(p + ml, marker))
        n++;
    char *out = malloc(strlen(s) + n * tl + 1), *o = out;
    ck_assert_ptr_nonnull(out);
    const char *p = s, *q;
    while ((q = strstr(p, marker))) {
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        memcpy(o, text, tl);
        o += tl;
        p = q + ml;
    }
    strcpy(o, p);
    return out;
}

char *dc_with_now(const char *s)
{
    char *now = dc_time_text(time(NULL));
    char *out = dc_replace_all(s, "@now", now);
    free(now);
    return out;
}

const char *dc_str(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

const char **dc_str_list(const json_t *arr)
{
    if (!json_is_array(arr))
        return NULL;
    const char **v = calloc(json_array_size(arr) + 1, sizeof *v);
    ck_assert_ptr_nonnull(v);
    for (size_t i = 0; i < json_array_size(arr); i++)
        v[i] = json_string_value(json_array_get(arr, i));
    return v;
}

const json_t *dc_raw_ref(const json_t *entry)
{
    if (json_is_array(entry) && json_array_size(entry) == 2)
        return json_array_get(entry, 0);
    return json_object_get(entry, "imageRef");
}

json_t *dc_load_cases(void)
{
    char *path = tu_testdata("decision-cases.json");
    size_t len;
    char *text = tu_read_file(path, &len);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    json_error_t je;
    json_t *cases = json_loadb(text, len, 0, &je);
    ck_assert_msg(json_is_array(cases) && json_array_size(cases) > 0, "%s: %s", path, je.text);
    free(text);
    free(path);
    return cases;
}

/* false when the configuration refuses a value (a case that expects a config-error). */
static bool config_try(pg_config *cfg, const char *key, const char *value, bool may_fail)
{
    pg_error err = {0};
    int rc = pg_config_set(cfg, key, value, &err);
    ck_assert_msg(rc == PG_OK || may_fail, "%s=%s: %s", key, value, err.message);
    return rc == PG_OK;
}

static bool apply_config(pg_config *cfg, const json_t *c, bool may_fail)
{
    const char *policy = dc_str(c, "policy"), *ttl = dc_str(c, "credentialTTL");
    bool ok = true;
    if (policy)
        ok = config_try(cfg, "policy", policy, may_fail) && ok;
    if (ttl)
        ok = config_try(cfg, "credentialTTL", ttl, may_fail) && ok;
    static const char *const lists[] = {"allowlist", "pinnedImages"};
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *item;
        json_array_foreach(json_object_get(c, lists[l]), i, item) ok =
            config_try(cfg, lists[l], json_string_value(item), may_fail) && ok;
    }
    return ok;
}

static void write_pulled_list(const json_t *records, const char *dir)
{
    size_t i;
    json_t *rec;
    json_array_foreach(records, i, rec)
    {
        char *raw = json_dumps(rec, JSON_COMPACT);
        char *json = dc_with_now(raw);
        dc_write_at(dir, "pulled", dc_str(rec, "imageRef"), json);
        free(json);
        free(raw);
    }
}

static void write_intents(const json_t *intents, const char *dir)
{
    size_t i;
    json_t *image;
    json_array_foreach(intents, i, image)
    {
        char *json = tu_sprintf("{\"kind\":\"ImagePullIntent\",\"apiVersion\":"
                                "\"kubelet.config.k8s.io/v1alpha1\",\"image\":\"%s\"}\n",
                                json_string_value(image));
        dc_write_at(dir, "pulling", json_string_value(image), json);
        free(json);
    }
}

/* rawPulledFiles entries: [imageRef, content] or {"imageRef":..,"content"|"data"|"text"|"raw":..}. */
static void write_raw_files(const json_t *raws, const char *dir)
{
    size_t i;
    json_t *entry;
    json_array_foreach(raws, i, entry)
    {
        const json_t *content = NULL;
        if (json_is_array(entry) && json_array_size(entry) == 2)
            content = json_array_get(entry, 1);
        static const char *const keys[] = {"content", "data", "text", "raw"};
        for (size_t k = 0; k < 4 && !content && json_is_object(entry); k++)
            content = json_object_get(entry, keys[k]);
        ck_assert_msg(json_is_string(dc_raw_ref(entry)) && content,
                      "unrecognised rawPulledFiles entry %zu", i);
        char *dumped = json_is_string(content) ? strdup(json_string_value(content))
                                               : json_dumps(content, JSON_COMPACT);
        char *text = dc_with_now(dumped);
        dc_write_at(dir, "pulled", json_string_value(dc_raw_ref(entry)), text);
        free(text);
        free(dumped);
    }
}

/* imageIndex: {"<identity>": "<imageRef>"}, pullgate's image index in the writable directory. */
static void write_index(const json_t *index, const char *dir)
{
    const char *key;
    json_t *ref;
    char *sub = tu_sprintf("%s/pullgate-images", dir);
    if (json_object_size(index))
        ck_assert_int_eq(mkdir(sub, 0700), 0);
    json_object_foreach((json_t *)index, key, ref)
    {
        json_t *o = json_pack("{s:s, s:s}", "image", key, "imageRef", json_string_value(ref));
        char *text = json_dumps(o, JSON_COMPACT);
        dc_write_at(dir, "pullgate-images", key, text);
        free(text);
        json_decref(o);
    }
    free(sub);
}

bool dc_setup(pg_config *cfg, const char *state, const char *ro, const json_t *c)
{
    bool may_fail = json_is_true(json_object_get(c, "expectConfigError"));
    if (!apply_config(cfg, json_object_get(c, "config"), may_fail))
        return false;
    write_index(json_object_get(c, "imageIndex"), state);
    write_pulled_list(json_object_get(c, "pulled"), state);
    write_pulled_list(json_object_get(c, "readOnlyPulled"), ro);
    write_intents(json_object_get(c, "intents"), state);
    write_intents(json_object_get(c, "readOnlyIntents"), ro);
    write_raw_files(json_object_get(c, "rawPulledFiles"), state);
    return true;
}

dc_request dc_request_of(const json_t *c)
{
    const json_t *req = json_object_get(c, "request");
    return (dc_request){{.image = dc_str(req, "image"),
                         .image_ref = dc_str(req, "imageRef"),
                         .namespace_ = dc_str(req, "namespace"),
                         .credentials = dc_str(req, "credentials")},
                        dc_str_list(json_object_get(req, "aliases")),
                        dc_str_list(json_object_get(req, "hints")), dc_str(req, "podUid")};
}

void dc_request_free(dc_request *q)
{
    free(q->aliases);
    free(q->hints);
    q->aliases = q->hints = NULL;
}
