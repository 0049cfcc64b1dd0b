/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: hostile bytes as a request to pullgate-cri's hook server, through
 * the check the server runs before it decides (header, lengths, flags, stage,
 * config path, exactly one directory fd), as a reply to the thin hook, and as
 * the local decisions spool pullgate-cri folds (hooks/local_spool.c: what the
 * hook tells pullgate-cri through a file rather than the socket). The first
 * input byte picks how many fds arrive (0, 1 directory, 2, or one that is not
 * a directory). A request that passes is re-encoded: it must come out byte for
 * byte as it went in. Every spool line is a decision within the vocabulary and
 * its bounds, or reported as not one.
 */
#include "hook.h"
#include "hook_proto.h"
#include "hook_server.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int dir_fd = -1, file_fd = -1;

static void check_word(const char *w)
{
    size_t n = strlen(w);
    if (n == 0 || n > 40 || strspn(w, "abcdefghijklmnopqrstuvwxyz-") != n)
        abort();
}

static void on_spool_line(void *ctx, long long when, const char *result, const char *reason)
{
    (*(size_t *)ctx)++;
    if (!result != !reason || when < 0)
        abort();
    if (result) {
        check_word(result);
        check_word(reason);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (dir_fd < 0) {
        dir_fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        file_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    }
    if (size == 0)
        return 0;
    int fds[2] = {dir_fd, dir_fd};
    size_t n_fds = data[0] % 4 == 0 ? 0 : data[0] % 4 == 2 ? 2 : 1;
    if (data[0] % 4 == 3)
        fds[0] = file_fd;
    hook_request req;
    if (cri_hook_check_request(data + 1, size - 1, fds, n_fds, &req) == 0) {
        static unsigned char again[HOOK_PROTO_MAX_REQUEST];
        size_t len = hook_proto_encode_request(&req, again, sizeof again);
        if (len != size - 1 || memcmp(again, data + 1, len) != 0)
            abort();
    }
    hook_reply reply;
    (void)hook_proto_decode_reply(data + 1, size - 1, &reply);
    size_t lines = 0;
    if (hook_spool_parse((const char *)data + 1, size - 1, on_spool_line, &lines) != lines)
        abort();
    return 0;
}
