/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine's floors (docs/design.md, the module table): each folder of
 * plugin/ is a floor, and a file includes only headers of its own folder or of a
 * lower floor: never one above, never one of a sibling folder on the same floor,
 * and the includes never go round in a circle (inside a folder either). The floor
 * of a file is its folder's; a new folder must be given a floor here, and a new file
 * a folder (plugin/ itself holds only module.c, the top). The store's
 * finer layers inside plugin/store/ are test_store_layers.c's. Reads the sources
 * named by PG_SOURCE_DIR.
 */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "include_graph.h"
#include "testutil.h"

static const struct {
    const char *folder;
    int floor;
} floors[] = {
    {"base", 0},        /* errors, bounded reads, strict JSON, configuration, internal.h */
    {"records", 1},     /* references, kubelet records, image identity */
    {"credentials", 1}, /* Go compatibility, hashes, keyring, the annotation */
    {"dbus", 1},        /* the signals */
    {"store", 2},       /* the record store and its caches */
    {"decide", 3},      /* policy and the decision */
    {"", 4},            /* the library's face: the module table */
};

/* The files plugin/ itself holds: every other one belongs in a folder. */
static const char *const top_files[] = {"module.c", NULL};

/* The floor of a file in folder, -1 when it has none. */
static int floor_of(const char *folder, const char *name)
{
    bool top = false;
    for (const char *const *t = top_files; *t; t++)
        top = top || strcmp(*t, name) == 0;
    if (!folder[0] && !top)
        return -1;
    for (size_t i = 0; i < sizeof floors / sizeof floors[0]; i++)
        if (strcmp(floors[i].folder, folder) == 0)
            return floors[i].floor;
    return -1;
}

/* Counts the upward and sideways includes of the tree at root, its folders without a
 * floor, and a circle; why tells the first one found. */
static int layering_violations(const char *root, size_t *files, char *why, size_t why_len)
{
    ig_graph g;
    ig_read_tree(root, &g);
    int bad = 0;
    for (size_t i = 0; i < g.n; i++) {
        const ig_node *n = &g.nodes[i];
        int from = floor_of(n->folder, n->name);
        if (from < 0) {
            if (!bad++)
                snprintf(why, why_len,
                         "plugin/%s: in no folder with a floor (test_plugin_layers.c)",
                         ig_path(&g, i));
            continue;
        }
        for (size_t k = 0; k < n->n_to; k++) {
            const ig_node *t = &g.nodes[n->to[k]];
            int to = floor_of(t->folder, t->name);
            if (strcmp(t->folder, n->folder) == 0 || (to >= 0 && to < from))
                continue;
            char *target = tu_sprintf("%s", ig_path(&g, n->to[k]));
            if (!bad++)
                snprintf(why, why_len, "plugin/%s (floor %d) includes %s (floor %d)",
                         ig_path(&g, i), from, target, to);
            free(target);
        }
    }
    char circle[512];
    if (ig_find_circle(&g, circle, sizeof circle) && !bad++)
        snprintf(why, why_len, "a circle: %s", circle);
    *files = g.n;
    ig_free(&g);
    return bad;
}

START_TEST(engine_files_include_only_lower_floors)
{
    const char *src = getenv("PG_SOURCE_DIR");
    ck_assert_msg(src != NULL, "PG_SOURCE_DIR not set");
    char *root = tu_sprintf("%s/plugin", src), why[768] = "";
    size_t files = 0;
    ck_assert_msg(layering_violations(root, &files, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_ge(files, 50); /* the engine's files were found */
    free(root);
}
END_TEST

/* A tree of empty files, one per "folder/name" path, with the given text in file (added
 * when the tree has no such path). */
static char *plant(const char *const *paths, const char *file, const char *text)
{
    char *root = tu_mkdtemp();
    for (const char *const *p = paths; *p; p++) {
        char *path = tu_sprintf("%s/%s", root, *p);
        char *slash = strrchr(path, '/');
        *slash = '\0';
        mkdir(path, 0700);
        *slash = '/';
        tu_write_file(path, "", -1, 0600);
        free(path);
    }
    char *path = tu_sprintf("%s/%s", root, file);
    tu_write_file(path, text, -1, 0600);
    free(path);
    return root;
}

/* The check can fail: an include up, one sideways, a folder without a floor and a circle
 * are each caught; includes down, inside a folder and of outside headers pass. */
START_TEST(an_upward_include_and_a_circle_are_caught)
{
    static const char *const tree[] = {
        "base/internal.h",       "records/record.c",   "credentials/keyring.h",
        "credentials/keyring.c", "store/store_read.h", "store/store_fs.h",
        "decide/decide.c",       "module.c",           NULL};
    static const struct {
        const char *file, *text, *named;
        int bad;
    } cases[] = {
        {"decide/decide.c",
         "#include \"internal.h\"\n#include \"store_read.h\"\n#include \"keyring.h\"\n"
         "#include <jansson.h>\n#include \"pullgate/pullgate.h\"\n",
         "", 0},
        {"module.c", "#include \"internal.h\"\n# include \"store/store_fs.h\"\n", "", 0},
        {"base/internal.h", "#include \"store_read.h\"\n", "store/store_read.h", 1},  /* up */
        {"store/store_fs.h", "#include \"decide.c\"\n", "decide/decide.c", 1},        /* up */
        {"records/record.c", "#include \"keyring.h\"\n", "credentials/keyring.h", 1}, /* sideways */
        {"credentials/keyring.h", "#include \"keyring.c\"\n", "", 0},
        {"store/store_read.h", "#include \"store_read.h\"\n", "circle", 1}, /* itself */
        {"store.c", "", "plugin/store.c: in no folder", 1}, /* the flat plugin/ of 1.0.0 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *root = plant(tree, cases[i].file, cases[i].text), why[768] = "";
        size_t files = 0;
        ck_assert_msg(layering_violations(root, &files, why, sizeof why) == cases[i].bad, "%s: %s",
                      cases[i].file, why);
        ck_assert_msg(strstr(why, cases[i].named) != NULL, "%s: %s", cases[i].file, why);
        ck_assert_uint_ge(files, 8);
        tu_rmrf(root);
        free(root);
    }
}
END_TEST

/* A circle of two headers inside one folder (no include up), and a folder without a floor. */
START_TEST(a_circle_inside_a_folder_is_caught)
{
    static const char *const tree[] = {"store/store_fs.h", "store/store_read.h", NULL};
    char *root = plant(tree, "store/store_fs.h", "#include \"store_read.h\"\n"), why[768] = "";
    char *other = tu_sprintf("%s/store/store_read.h", root);
    tu_write_file(other, "#include \"store_fs.h\"\n", -1, 0600);
    size_t files = 0;
    ck_assert_int_eq(layering_violations(root, &files, why, sizeof why), 1);
    ck_assert_msg(
        strstr(why, "circle: store/store_fs.h -> store/store_read.h -> store/store_fs.h") ||
            strstr(why, "circle: store/store_read.h -> store/store_fs.h -> store/store_read.h"),
        "%s", why);
    free(other);
    other = tu_sprintf("%s/tools", root);
    mkdir(other, 0700);
    free(other);
    other = tu_sprintf("%s/tools/cmd.c", root);
    tu_write_file(other, "", -1, 0600);
    ck_assert_int_eq(layering_violations(root, &files, why, sizeof why), 2);
    free(other);
    tu_rmrf(root);
    free(root);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plugin_layers");
    TCase *tc = tcase_create("layers");
    tcase_add_test(tc, engine_files_include_only_lower_floors);
    tcase_add_test(tc, an_upward_include_and_a_circle_are_caught);
    tcase_add_test(tc, a_circle_inside_a_folder_is_caught);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
