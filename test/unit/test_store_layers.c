/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record store's layering (plugin/store/store_impl.h): every file of
 * plugin/store/ includes only its own layer's header and the headers of layers
 * below it, so no file imports from a file that depends on it: the layers below
 * the store itself never see struct pg_store (store_impl.h), and store_lookup.h
 * (for the engine above the store) is included by no other store file. The
 * store's floor among the engine's folders is test_plugin_layers.c's. Reads the
 * sources named by PG_SOURCE_DIR; a new store file must be given a layer here.
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
    {"store_trace", 0},   {"lookup_cache", 0}, {"record_cache", 0},   {"store_fs", 1},
    {"store_read", 2},    {"store_intent", 3}, {"store_index", 3},    {"store_credtimes", 3},
    {"store_credidx", 3}, {"store_names", 3},  {"store_dircache", 3}, {"store_impl", 4},
    {"store", 5},         {"store_prune", 5},  {"store_lookup", 6},
};

/* The layer of a file name (with its extension), -1 when it has none. */
static int level_of(const char *file)
{
    size_t n = strcspn(file, ".");
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        if (strlen(layers[i].base) == n && strncmp(layers[i].base, file, n) == 0)
            return layers[i].level;
    return -1;
}

/* An include of a store file of the same or a higher layer (includes of the engine's other
 * headers, internal.h, image_identity.h, are test_plugin_layers.c's). */
static int downward_only(const char *file, const char *inc, void *ud, char *why, size_t why_len)
{
    (void)ud;
    int level = level_of(file), to = level_of(inc);
    if (to < 0 || to < level || ig_same_base(inc, file))
        return 0;
    snprintf(why, why_len, "%s (layer %d) includes %s (layer %d)", file, level, inc, to);
    return 1;
}

/* Checks one file's includes of store headers; returns the violations found. */
static int check_file(const char *dir, const char *file, char *why, size_t why_len)
{
    return ig_each_include(dir, file, downward_only, NULL, why, why_len);
}

START_TEST(store_files_include_only_lower_layers)
{
    const char *src = getenv("PG_SOURCE_DIR");
    ck_assert_msg(src != NULL, "PG_SOURCE_DIR not set");
    char *dir = tu_sprintf("%s/plugin/store", src);
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    struct dirent *de;
    size_t files = 0;
    while ((de = readdir(d)) != NULL) {
        if (!ig_is_source(de->d_name))
            continue;
        ck_assert_msg(level_of(de->d_name) >= 0, "%s has no layer (test_store_layers.c)",
                      de->d_name);
        char why[256] = "";
        ck_assert_msg(check_file(dir, de->d_name, why, sizeof why) == 0, "%s", why);
        files++;
    }
    closedir(d);
    ck_assert_uint_ge(files, 25); /* the store's files were found */
    free(dir);
}
END_TEST

/* The check itself can fail: an upward include and a same-layer one are caught. */
START_TEST(an_upward_include_is_caught)
{
    char *dir = tu_mkdtemp();
    char *f = tu_sprintf("%s/store_index.c", dir);
    tu_write_file(f,
                  "#include \"store_index.h\"\n#include \"store_read.h\"\n#include \"store.h\"\n",
                  -1, 0600);
    char why[256] = "";
    ck_assert_int_eq(check_file(dir, "store_index.c", why, sizeof why), 1);
    ck_assert_msg(strstr(why, "store.h") != NULL, "%s", why);
    free(f);
    f = tu_sprintf("%s/store_names.c", dir);
    tu_write_file(f, "#include \"store_names.h\"\n#include \"store_credidx.h\"\n", -1, 0600);
    ck_assert_int_eq(check_file(dir, "store_names.c", why, sizeof why), 1);
    free(f);
    f = tu_sprintf("%s/store_fs.h", dir); /* a lower layer seeing the store */
    tu_write_file(f, "#include \"store_impl.h\"\n", -1, 0600);
    ck_assert_int_eq(check_file(dir, "store_fs.h", why, sizeof why), 1);
    free(f);
    f = tu_sprintf("%s/store.c", dir);
    tu_write_file(f, "#include \"store_read.h\"\n#include \"store_lookup.h\"\n", -1, 0600);
    ck_assert_int_eq(check_file(dir, "store.c", why, sizeof why), 1);
    free(f);
    tu_rmrf(dir);
    free(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store_layers");
    TCase *tc = tcase_create("layers");
    tcase_add_test(tc, store_files_include_only_lower_layers);
    tcase_add_test(tc, an_upward_include_is_caught);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
