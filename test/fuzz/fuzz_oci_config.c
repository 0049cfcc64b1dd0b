/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the bundle's config.json as the hook reads it
 * (hook_read_bundle_annotations: bounded O_NOFOLLOW read, strict JSON,
 * annotations must be map[string]string), then runtime identification under
 * each configured runtime (hook_identify) and log-line sanitising of every
 * identity field. The input is written to <tmpdir>/config.json per run so the
 * real file reader is exercised; the directory lives on /dev/shm when present.
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
    if (hook_read_bundle_annotations(bundle, ann, &err) != PG_OK) {
        if (!err.message[0])
            __builtin_trap();
    } else {
        if (!hook_doc_root_is_object(ann))
            __builtin_trap();
        check_identity(ann, PG_RUNTIME_AUTO);
        check_identity(ann, PG_RUNTIME_CRIO);
        check_identity(ann, PG_RUNTIME_CONTAINERD);
    }
    hook_doc_free(ann);
    return 0;
}
