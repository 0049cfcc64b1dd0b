/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The include graph of a source tree, for the layering tests (test_plugin_layers.c,
 * test_store_layers.c, test_webhook_layers.c): who includes whom among a folder's
 * own files, read from the `#include "name"` lines. A header is known by its file
 * name (the build puts every folder of the engine on the include path), so names
 * must be unique within a tree. Failures to read are Check assertions.
 */
#ifndef PULLGATE_TEST_INCLUDE_GRAPH_H
#define PULLGATE_TEST_INCLUDE_GRAPH_H

#include <stdbool.h>
#include <stddef.h>

/* A .c, .h or .cc file. */
bool ig_is_source(const char *name);
/* a and b name the same module (the part before the first '.': store.c, store.h). */
bool ig_same_base(const char *a, const char *b);

/* Called for each `#include "inc"` of file; returns the violations it counts (and says
 * why in why). */
typedef int (*ig_include_fn)(const char *file, const char *inc, void *ud, char *why,
                             size_t why_len);
/* Calls fn for each quoted include of dir/file (`#  include` too); returns the sum. */
int ig_each_include(const char *dir, const char *file, ig_include_fn fn, void *ud, char *why,
                    size_t why_len);

/* One source file of the tree and the files of the tree it includes. */
typedef struct ig_node {
    char *folder; /* relative to the root, "" for the root itself */
    char *name;   /* file name */
    size_t *to;   /* indexes of the included nodes */
    size_t n_to;
} ig_node;

typedef struct ig_graph {
    ig_node *nodes;
    size_t n;
} ig_graph;

/* Every source file below root (one level of subfolders and the root itself; names
 * starting with "fuzz_" are left out: fuzzers may use any layer), and their includes of
 * each other; includes of files outside the tree are left out. */
void ig_read_tree(const char *root, ig_graph *g);
void ig_free(ig_graph *g);
/* "folder/name" (or "name" at the root) of node i; static storage, overwritten per call. */
const char *ig_path(const ig_graph *g, size_t i);
/* true when the includes go round in a circle; why names it ("a.h -> b.h -> a.h"). */
bool ig_find_circle(const ig_graph *g, char *why, size_t why_len);

#endif
