/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: hook_spool_parse, the local decisions spool pullgate-cri reads
 * (hooks/local_spool.c). Every line is either a decision whose words are within the
 * vocabulary and their bound, or reported as not one; the count of lines matches.
 */
#include "hook.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct seen {
    size_t lines;
} seen;

static void check_word(const char *w)
{
    size_t n = strlen(w);
    if (n == 0 || n > 40 || strspn(w, "abcdefghijklmnopqrstuvwxyz-") != n)
        abort();
}

static void on_line(void *ctx, long long when, const char *result, const char *reason)
{
    seen *s = ctx;
    s->lines++;
    if (!result != !reason || when < 0)
        abort();
    if (result) {
        check_word(result);
        check_word(reason);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    seen s = {0};
    size_t lines = hook_spool_parse((const char *)data, size, on_line, &s);
    if (lines != s.lines)
        abort();
    return 0;
}
