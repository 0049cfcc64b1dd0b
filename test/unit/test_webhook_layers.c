/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-webhook's layering (docs/design.md, "pullgate-webhook"): every file
 * of webhook/ includes only its own header and the headers of lower layers, so
 * no file imports from one that depends on it (no circle, no arrow up), and
 * nothing below the webhook (common/, plugin/) includes a webhook header. Reads
 * the sources named by PG_SOURCE_DIR; a new webhook file must be given a layer
 * here (the fuzzers and tests, which may use any layer, are left out).
 */
#include <check.h>
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "include_graph.h"
#include "testutil.h"

typedef struct layer {
    const char *base; /* file name without .c / .h */
    int level;
} layer;

static const layer layers[] = {
    {"memory", 0},  {"wlog", 0},   {"files", 0},   {"peers", 0},     {"skim", 0},   {"secrets", 1},
    {"tlscert", 1}, {"review", 2}, {"kubeapi", 3}, {"whmetrics", 3}, {"server", 4}, {"main", 5},
};

#define N_LAYERS (sizeof layers / sizeof layers[0])

/* The layer of a file name (with its extension), -1 when it has none. */
static int level_of(const char *file)
{
    size_t n = strcspn(file, ".");
    for (size_t i = 0; i < N_LAYERS; i++)
        if (strlen(layers[i].base) == n && strncmp(layers[i].base, file, n) == 0)
            return layers[i].level;
    return -1;
}

/* Inside webhook/: a webhook header of a lower layer, or the file's own. */
static int downward_only(const char *file, const char *inc, void *ud, char *why, size_t why_len)
{
    (void)ud;
    int from = level_of(file), to = level_of(inc);
    if (to < 0 || to < from || ig_same_base(inc, file))
        return 0; /* a lower layer's, its own, or not the webhook's (common/, plugin/) */
    snprintf(why, why_len, "webhook/%s (layer %d) includes %s (layer %d)", file, from, inc, to);
    return 1;
}

/* Below the webhook: no webhook header at all. */
static int no_webhook_header(const char *file, const char *inc, void *ud, char *why, size_t why_len)
{
    (void)ud;
    if (level_of(inc) < 0)
        return 0;
    snprintf(why, why_len, "%s includes the webhook's %s", file, inc);
    return 1;
}

START_TEST(webhook_files_include_only_lower_layers)
{
    const char *src = getenv("PG_SOURCE_DIR");
    ck_assert_msg(src != NULL, "PG_SOURCE_DIR not set");
    char *dir = tu_sprintf("%s/webhook", src);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    size_t files = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (!ig_is_source(de->d_name) || strncmp(de->d_name, "fuzz_", 5) == 0)
            continue;
        ck_assert_msg(level_of(de->d_name) >= 0, "webhook/%s has no layer (test_webhook_layers.c)",
                      de->d_name);
        char why[256] = "";
        ck_assert_msg(ig_each_include(dir, de->d_name, downward_only, NULL, why, sizeof why) == 0,
                      "%s", why);
        files++;
    }
    closedir(d);
    ck_assert_uint_ge(files, 20); /* the webhook's files were found */
    free(dir);
}
END_TEST

/* Every source file below dir (subfolders too): none may include a webhook header. */
static size_t scan_below(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot list %s", dir);
    size_t files = 0;
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        char *sub = tu_sprintf("%s/%s", dir, de->d_name);
        DIR *child = opendir(sub);
        if (child) {
            closedir(child);
            files += scan_below(sub);
        } else if (ig_is_source(de->d_name)) {
            ck_assert_msg(level_of(de->d_name) < 0, "%s shares a webhook header's name", sub);
            char why[256] = "";
            ck_assert_msg(
                ig_each_include(dir, de->d_name, no_webhook_header, NULL, why, sizeof why) == 0,
                "%s/%s", dir, why);
            files++;
        }
        free(sub);
    }
    closedir(d);
    return files;
}

/* common/ and the engine sit below the webhook: an include of a webhook header is an arrow up
 * (none of them names a header of its own like one of the webhook's). */
START_TEST(nothing_below_includes_the_webhook)
{
    const char *src = getenv("PG_SOURCE_DIR");
    ck_assert_msg(src != NULL, "PG_SOURCE_DIR not set");
    static const char *const below[] = {"common", "plugin", "include", NULL};
    size_t files = 0;
    for (const char *const *b = below; *b; b++) {
        char *dir = tu_sprintf("%s/%s", src, *b);
        files += scan_below(dir);
        free(dir);
    }
    ck_assert_uint_ge(files, 40);
}
END_TEST

/* The checks can fail: an upward include, a same-layer one and a webhook header below are
 * caught; a lower layer's, a file's own and an outside header pass. */
START_TEST(an_upward_include_is_caught)
{
    static const struct {
        const char *file, *text;
        int bad;
    } cases[] = {
        {"secrets.c", "#include \"secrets.h\"\n#include \"skim.h\"\n#include \"internal.h\"\n", 0},
        {"secrets.h", "#include \"review.h\"\n", 1}, /* the old circle's half */
        {"skim.c", "#include \"review.h\"\n", 1},    /* the old arrow up */
        {"review.c", "#include \"secrets.h\"\n#  include \"kubeapi.h\"\n", 1},
        {"kubeapi.h", "#include \"whmetrics.h\"\n", 1}, /* same layer */
        {"main.c", "#include \"server.h\"\n#include \"memory.h\"\n", 0},
    };
    char *dir = tu_mkdtemp();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *f = tu_sprintf("%s/%s", dir, cases[i].file), why[256] = "";
        tu_write_file(f, cases[i].text, -1, 0600);
        ck_assert_msg(ig_each_include(dir, cases[i].file, downward_only, NULL, why, sizeof why) ==
                          cases[i].bad,
                      "%s: %s", cases[i].file, why);
        free(f);
    }
    char *f = tu_sprintf("%s/metrics.c", dir), why[256] = "";
    tu_write_file(f, "#include \"metrics.h\"\n#include \"review.h\"\n", -1, 0600);
    ck_assert_int_eq(ig_each_include(dir, "metrics.c", no_webhook_header, NULL, why, sizeof why),
                     1);
    ck_assert_msg(strstr(why, "review.h") != NULL, "%s", why);
    free(f);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("webhook_layers");
    TCase *tc = tcase_create("layers");
    tcase_add_test(tc, webhook_files_include_only_lower_layers);
    tcase_add_test(tc, nothing_below_includes_the_webhook);
    tcase_add_test(tc, an_upward_include_is_caught);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
