/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the bundle's config.json as the hook reads it
 * (hook_read_bundle_annotations: bounded O_NOFOLLOW read, the hook's JSON
 * reader, annotations must be map[string]string), then runtime identification
 * under each configured runtime (hook_identify) and log-line sanitising of
 * every identity field. The input is written to <tmpdir>/config.json per run
 * so the real file reader is exercised; the directory lives on /dev/shm when
 * present.
 *
 * Differential, against jansson (the full parse the hook made before,
 * pg_json_parse: JSON_REJECT_DUPLICATES): the reader (hooks/oci_scan.c)
 * accepts the input exactly when jansson does; accepted, the root's members
 * have the same kinds and string values and the annotations are the same
 * map; and the hook accepts the file exactly when the checks it made on the
 * jansson tree pass. Same decision inputs, so the same decision. The reader
 * is reused for every scan of an input, after a different document, as a
 * resident worker reuses its own (one reader per input: no state between runs).
 */
#include "hook.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char bundle[64];

static void remove_bundle_dir(void)
{
    char path[96];
    snprintf(path, sizeof path, "%s/config.json", bundle);
    unlink(path);
    rmdir(bundle);
}

static void make_bundle_dir(void)
{
    if (bundle[0])
        return;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(bundle, sizeof bundle, "%s/pg-fuzz-oci-XXXXXX", base);
    if (!mkdtemp(bundle))
        abort();
    atexit(remove_bundle_dir); /* libFuzzer exits through exit() when its time is up */
}

static void write_config(const uint8_t *data, size_t size)
{
    char path[96];
    snprintf(path, sizeof path, "%s/config.json", bundle);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        abort();
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0)
            abort();
        done += (size_t)w;
    }
    close(fd);
}

/* A sanitised field must be one printable line whatever the annotation held. */
static void check_sanitized(const char *s)
{
    char out[64];
    hook_sanitize(s, out, sizeof out);
    for (const unsigned char *p = (const unsigned char *)out; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            __builtin_trap();
}

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

/* The root's members as jansson has them (the sizes are compared through the map below). */
static void check_root(const hook_doc *doc, const json_t *root)
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

/* The annotations: the same members both ways round (equal sizes, each of ours in jansson's). */
static void check_map(const hook_doc *doc, const json_t *root)
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

/* What the hook accepted from a jansson tree before (oci_input.c at 1.1.0's start). */
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

/* A document that leaves keys, a map and strings behind in the reader's buffers. */
static const char warm[] = "{\"ociVersion\":\"1.0.2\",\"annotations\":{\"io.container.manager\":"
                           "\"cri-o\",\"z\":\"\\u00e9\"},\"n\":[1,2.5e3,{\"k\":null}]}";

/* The reader against jansson on the bytes; the file read against jansson's verdict. */
static void check_against_jansson(hook_doc *doc, const uint8_t *data, size_t size, int file_ok)
{
    pg_error err = {0};
    check(hook_doc_scan(doc, warm, sizeof warm - 1, "annotations", "warm", &err) == PG_OK);
    json_error_t je;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    int ok = hook_doc_scan(doc, (const char *)data, size, "annotations", "fuzz", &err) == PG_OK;
    check(ok == (root != NULL));
    if (ok) {
        check_root(doc, root);
        check_map(doc, root);
    }
    check(file_ok == (root && jansson_config_ok(root)));
    hook_doc_trim(doc);
    json_decref(root);
}

/* Invariants the decision relies on, for every runtime setting. */
static void check_identity(const hook_doc *ann, pg_runtime configured)
{
    hook_identity id;
    pg_error err = {0};
    if (hook_identify(configured, ann, &id, &err) != PG_OK) {
        if (!err.message[0])
            __builtin_trap();
        return;
    }
    if (id.kind == HOOK_APPLICATION && (!id.namespace_ || !id.namespace_[0]))
        __builtin_trap(); /* an application container always has a namespace */
    if (id.runtime == PG_RUNTIME_CONTAINERD && id.image_ref)
        __builtin_trap(); /* containerd never names the image ID: it is resolved */
    check_sanitized(id.namespace_);
    check_sanitized(id.image);
    check_sanitized(id.image_ref);
    for (size_t i = 0; id.hints && id.hints[i]; i++)
        check_sanitized(id.hints[i]);
    hook_identity_clear(&id);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    make_bundle_dir();
    write_config(data, size);
    hook_doc *ann = hook_doc_new();
    if (!ann)
        return 0;
    pg_error err = {0};
    int file_ok = hook_read_bundle_annotations(bundle, ann, &err) == PG_OK;
    if (!file_ok) {
        if (!err.message[0])
            __builtin_trap();
    } else {
        if (!hook_doc_root_is_object(ann))
            __builtin_trap();
        check_identity(ann, PG_RUNTIME_AUTO);
        check_identity(ann, PG_RUNTIME_CRIO);
        check_identity(ann, PG_RUNTIME_CONTAINERD);
    }
    check_against_jansson(ann, data, size, file_ok);
    hook_doc_free(ann);
    return 0;
}
