/* SPDX-License-Identifier: Apache-2.0 */
/* The include graph of a source tree (include_graph.h). */
#include "include_graph.h"

#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testutil.h"

static bool has_suffix(const char *name, const char *suffix)
{
    size_t n = strlen(name), s = strlen(suffix);
    return n > s && strcmp(name + n - s, suffix) == 0;
}

bool ig_is_source(const char *name)
{
    return has_suffix(name, ".c") || has_suffix(name, ".h") || has_suffix(name, ".cc");
}

bool ig_same_base(const char *a, const char *b)
{
    size_t n = strcspn(a, ".");
    return n == strcspn(b, ".") && strncmp(a, b, n) == 0;
}

int ig_each_include(const char *dir, const char *file, ig_include_fn fn, void *ud, char *why,
                    size_t why_len)
{
    char *path = tu_sprintf("%s/%s", dir, file);
    char *text = tu_read_file(path, NULL);
    ck_assert_msg(text != NULL, "read %s", path);
    free(path);
    int bad = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char inc[128];
        if (sscanf(line, " # include \"%127[^\"]\"", inc) == 1)
            bad += fn(file, inc, ud, why, why_len);
    }
    free(text);
    return bad;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void add_node(ig_graph *g, const char *folder, const char *name)
{
    for (size_t i = 0; i < g->n; i++)
        ck_assert_msg(strcmp(g->nodes[i].name, name) != 0,
                      "%s is in %s/ and in %s/: names must be unique", name, g->nodes[i].folder,
                      folder);
    g->nodes = realloc(g->nodes, (g->n + 1) * sizeof *g->nodes);
    ck_assert_ptr_nonnull(g->nodes);
    g->nodes[g->n++] = (ig_node){.folder = strdup(folder), .name = strdup(name)};
}

/* The source files of root/folder (and, at the root, of its subfolders). */
static void list_folder(const char *root, const char *folder, ig_graph *g)
{
    char *dir = folder[0] ? tu_sprintf("%s/%s", root, folder) : tu_sprintf("%s", root);
    DIR *d = opendir(dir);
    ck_assert_msg(d != NULL, "cannot list %s", dir);
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        char *sub = tu_sprintf("%s/%s", dir, de->d_name);
        if (is_dir(sub)) {
            if (!folder[0])
                list_folder(root, de->d_name, g);
        } else if (ig_is_source(de->d_name) && strncmp(de->d_name, "fuzz_", 5) != 0) {
            add_node(g, folder, de->d_name);
        }
        free(sub);
    }
    closedir(d);
    free(dir);
}

/* The node of an include's file name ("store_fs.h", "store/store_fs.h"), or -1: outside the tree. */
static long find_node(const ig_graph *g, const char *inc)
{
    const char *slash = strrchr(inc, '/');
    const char *name = slash ? slash + 1 : inc;
    for (size_t i = 0; i < g->n; i++)
        if (strcmp(g->nodes[i].name, name) == 0)
            return slash && (strlen(g->nodes[i].folder) != (size_t)(slash - inc) ||
                             strncmp(inc, g->nodes[i].folder, (size_t)(slash - inc)) != 0)
                       ? -1
                       : (long)i;
    return -1;
}

typedef struct edge_ctx {
    ig_graph *g;
    size_t from;
} edge_ctx;

static int add_edge(const char *file, const char *inc, void *ud, char *why, size_t why_len)
{
    (void)file, (void)why, (void)why_len;
    edge_ctx *c = ud;
    long to = find_node(c->g, inc);
    if (to < 0)
        return 0;
    ig_node *from = &c->g->nodes[c->from];
    from->to = realloc(from->to, (from->n_to + 1) * sizeof *from->to);
    ck_assert_ptr_nonnull(from->to);
    from->to[from->n_to++] = (size_t)to;
    return 0;
}

void ig_read_tree(const char *root, ig_graph *g)
{
    *g = (ig_graph){0};
    list_folder(root, "", g);
    for (size_t i = 0; i < g->n; i++) {
        char *dir = g->nodes[i].folder[0] ? tu_sprintf("%s/%s", root, g->nodes[i].folder)
                                          : tu_sprintf("%s", root);
        char why[8];
        edge_ctx c = {g, i};
        ig_each_include(dir, g->nodes[i].name, add_edge, &c, why, sizeof why);
        free(dir);
    }
}

void ig_free(ig_graph *g)
{
    for (size_t i = 0; i < g->n; i++) {
        free(g->nodes[i].folder);
        free(g->nodes[i].name);
        free(g->nodes[i].to);
    }
    free(g->nodes);
    *g = (ig_graph){0};
}

const char *ig_path(const ig_graph *g, size_t i)
{
    static char path[512];
    const ig_node *n = &g->nodes[i];
    snprintf(path, sizeof path, "%s%s%s", n->folder, n->folder[0] ? "/" : "", n->name);
    return path;
}

enum { WHITE, GREY, BLACK }; /* not visited, on the current path, done */

/* Depth-first from i; on a back edge, writes the circle (from the grey node back to it). */
static bool visit(const ig_graph *g, size_t i, unsigned char *colour, size_t *stack, size_t depth,
                  char *why, size_t why_len)
{
    colour[i] = GREY;
    stack[depth] = i;
    for (size_t k = 0; k < g->nodes[i].n_to; k++) {
        size_t j = g->nodes[i].to[k];
        if (colour[j] == GREY) {
            size_t start = 0;
            while (stack[start] != j)
                start++;
            why[0] = '\0';
            for (size_t s = start; s <= depth; s++)
                snprintf(why + strlen(why), why_len - strlen(why), "%s -> ", ig_path(g, stack[s]));
            snprintf(why + strlen(why), why_len - strlen(why), "%s", ig_path(g, j));
            return true;
        }
        if (colour[j] == WHITE && visit(g, j, colour, stack, depth + 1, why, why_len))
            return true;
    }
    colour[i] = BLACK;
    return false;
}

bool ig_find_circle(const ig_graph *g, char *why, size_t why_len)
{
    unsigned char *colour = calloc(g->n + 1, 1);
    size_t *stack = calloc(g->n + 1, sizeof *stack);
    ck_assert(colour && stack);
    bool found = false;
    for (size_t i = 0; i < g->n && !found; i++)
        if (colour[i] == WHITE)
            found = visit(g, i, colour, stack, 0, why, why_len);
    free(colour);
    free(stack);
    return found;
}
