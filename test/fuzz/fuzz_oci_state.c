/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: hook_read_state_spent, the OCI state JSON the runtime writes to
 * the hook's stdin. The input reaches the parser through a memfd so the real
 * bounded, deadline-guarded reader runs too (a memfd is always readable, so
 * the deadline never fires and runs stay deterministic). Differential: the
 * state is accepted exactly when the checks the hook made on jansson's tree
 * (pg_json_parse, before the hook's own reader) pass, with the same id and
 * bundle (fuzz_oci_config holds the reader itself to jansson).
 */
#include "hook.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fd_holding(const uint8_t *data, size_t size)
{
    int fd = memfd_create("oci-state", MFD_CLOEXEC);
    if (fd < 0)
        abort(); /* an environment failure, not a finding: stop loudly */
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(fd, data + done, size - done);
        if (w <= 0)
            abort();
        done += (size_t)w;
    }
    if (lseek(fd, 0, SEEK_SET) != 0)
        abort();
    return fd;
}

static int jansson_state_string(const json_t *root, const char *key)
{
    const json_t *v = json_object_get(root, key);
    return json_is_string(v) && json_string_length(v) > 0 &&
           strlen(json_string_value(v)) == json_string_length(v);
}

/* What the hook accepted from a jansson tree before (oci_input.c at 1.1.0's start). */
static int jansson_state_ok(const json_t *root)
{
    return json_is_object(root) && jansson_state_string(root, "id") &&
           jansson_state_string(root, "bundle") &&
           json_string_value(json_object_get(root, "bundle"))[0] == '/';
}

static int same_string(const json_t *v, const char *s)
{
    return s && strlen(s) == json_string_length(v) &&
           memcmp(s, json_string_value(v), json_string_length(v)) == 0;
}

/* The same verdict and fields as jansson's tree gave (inputs the reader reads whole). */
static void check_against_jansson(const uint8_t *data, size_t size, int rc, const hook_state *st)
{
    if (size > HOOK_MAX_STATE_BYTES)
        return;
    json_error_t je;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &je);
    int ok = root && jansson_state_ok(root);
    if ((rc == PG_OK) != ok)
        __builtin_trap();
    if (ok && (!same_string(json_object_get(root, "id"), st->id) ||
               !same_string(json_object_get(root, "bundle"), st->bundle)))
        __builtin_trap();
    json_decref(root);
}

/* What a successful parse promises the hook: an id and an absolute bundle path. */
static void check_state(const hook_state *st)
{
    if (!st->id || !st->id[0] || !st->bundle || st->bundle[0] != '/')
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = fd_holding(data, size);
    hook_state st = {0};
    pg_error err = {0};
    int rc = hook_read_state_spent(NULL, fd, 0, &st, &err);
    close(fd);
    if (rc == PG_OK)
        check_state(&st);
    else if (st.id || st.bundle || !err.message[0])
        __builtin_trap(); /* a failure must leave nothing allocated and say why */
    check_against_jansson(data, size, rc, &st);
    hook_state_clear(&st);
    return 0;
}
