/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gen_records DIR COUNT [EXTRA_SECRETS]
 *   Writes COUNT synthetic kubelet pulled records into DIR/pulled/ (bulk
 *   setup, no fsync) — see bench_common.h for what record i holds.
 * gen_records --print-annotation I | --print-image I | --print-ref I | --print-ns I
 *   Prints what a pod of record I presents / names (for the hook's bundle).
 */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    char buf[8192];
    if (argc == 3 && strncmp(argv[1], "--print-", 8) == 0) {
        size_t i = strtoul(argv[2], NULL, 10);
        const char *what = argv[1] + 8;
        if (!strcmp(what, "annotation"))
            bench_annotation(i, buf, sizeof buf);
        else if (!strcmp(what, "image"))
            bench_image(i, buf, sizeof buf);
        else if (!strcmp(what, "ref"))
            bench_image_ref(i, buf);
        else if (!strcmp(what, "ns"))
            bench_namespace(i, buf, sizeof buf);
        else
            return 2;
        puts(buf);
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: gen_records DIR COUNT [EXTRA_SECRETS]\n");
        return 2;
    }
    size_t n = strtoul(argv[2], NULL, 10);
    size_t extra = argc > 3 ? strtoul(argv[3], NULL, 10) : 0;
    if (bench_write_records(argv[1], 0, n, extra) != 0) {
        perror("gen_records");
        return 1;
    }
    return 0;
}
