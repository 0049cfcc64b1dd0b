/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: hook_read_state, the OCI state JSON the runtime writes to
 * the hook's stdin. The input reaches the parser through a memfd so the real
 * bounded, deadline-guarded reader runs too (a memfd is always readable, so
 * the deadline never fires and runs stay deterministic).
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
    int rc = hook_read_state(fd, &st, &err);
    close(fd);
    if (rc == PG_OK)
        check_state(&st);
    else if (st.id || st.bundle || !err.message[0])
        __builtin_trap(); /* a failure must leave nothing allocated and say why */
    hook_state_clear(&st);
    return 0;
}
