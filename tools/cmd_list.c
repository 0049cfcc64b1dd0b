/* SPDX-License-Identifier: Apache-2.0 */
/* pullgatectl list / show: the pulled records of every record directory. */
#include "pgctl.h"
#include "internal.h"
#include "cleanup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_JSON = 256, OPT_IMAGE_REF };

static const struct option list_options[] = {{"json", no_argument, NULL, OPT_JSON},
                                             {"help", no_argument, NULL, 'h'},
                                             {NULL, 0, NULL, 0}};

static const struct option show_options[] = {
    {"image-ref", required_argument, NULL, OPT_IMAGE_REF},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

typedef struct view_options {
    const char *image_ref;
    int json;
} view_options;

static int set_view_option(void *ctx, int c, char *arg)
{
    view_options *o = ctx;
    switch (c) {
    case OPT_JSON: o->json = 1; break;
    case OPT_IMAGE_REF: o->image_ref = arg; break;
    default: return PGCTL_NOT_MINE;
    }
    return PGCTL_OK;
}

/* The record as kubelet JSON plus "dir"; NULL (message printed) on failure. */
static json_t *record_json(const pg_record *rec)
{
    pg_error err;
    pg_error_clear(&err);
    char *text = pg_record_to_json(rec, &err);
    if (!text) {
        pgctl_fail(&err, pg_record_image_ref(rec));
        return NULL;
    }
    pg_autojson json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    pg_free(text);
    const char *dir = pg_record_dir(rec);
    if (!json_is_object(j) || json_object_set_new(j, "dir", dir ? json_string(dir) : json_null())) {
        pgctl_error("%s: cannot encode the record", pg_record_image_ref(rec));
        return NULL;
    }
    return pg_steal(&j);
}

static size_t array_size(const json_t *mapping, const char *key)
{
    return json_array_size(json_object_get(mapping, key));
}

static int node_accessible(const json_t *mapping)
{
    return json_is_true(json_object_get(mapping, "nodePodsAccessible"));
}

/* ----------------------------------------------------------------- list */

typedef struct list_state {
    json_t *array; /* --json: collected records; NULL for human output */
    int bad_records;
    int failed;
} list_state;

static int print_record_line(const pg_record *rec, const json_t *j)
{
    char when[32];
    pg_format_rfc3339(pg_record_last_updated(rec), when);
    const char *dir = pg_record_dir(rec);
    int ok = printf("%s  %s  %s", pg_record_image_ref(rec), when, dir ? dir : "-") >= 0;
    const char *name;
    json_t *mapping;
    json_object_foreach(json_object_get(j, "credentialMapping"), name, mapping)
    {
        ok = ok && printf("  %s(secrets=%zu,serviceAccounts=%zu,nodeAccessible=%s)", name,
                          array_size(mapping, "kubernetesSecrets"),
                          array_size(mapping, "kubernetesServiceAccounts"),
                          node_accessible(mapping) ? "true" : "false") >= 0;
    }
    ok = ok && putchar('\n') != EOF;
    return ok ? 0 : -1;
}

static int list_one(const pg_record *rec, void *ud)
{
    list_state *st = ud;
    json_t *j = record_json(rec);
    if (!j) {
        st->failed = 1;
        return 0;
    }
    if (st->array) {
        if (json_array_append_new(st->array, j) != 0)
            st->failed = 1;
        return 0;
    }
    if (print_record_line(rec, j) != 0)
        st->failed = 1;
    json_decref(j);
    return 0;
}

static void report_bad_record(const char *path, const pg_error *why, void *ud)
{
    list_state *st = ud;
    st->bad_records++;
    pgctl_error("warning: %s is not a valid record: %s", path, why ? why->message : "?");
}

static int list_records(const pg_config *cfg, int json)
{
    pg_error err;
    pg_error_clear(&err);
    pg_store *store = pgctl_store_open_reading(cfg, &err);
    if (!store)
        return pgctl_fail(&err, "cannot open the record store");
    list_state st = {.array = json ? json_array() : NULL};
    int status = PGCTL_OK;
    if (json && !st.array)
        status = PGCTL_INTERNAL;
    else if (pg_store_list(store, list_one, report_bad_record, &st, &err) != PG_OK)
        status = pgctl_fail(&err, "cannot list the records");
    pg_store_free(store);
    if (status == PGCTL_OK && st.array)
        status = pgctl_print_json(json_incref(st.array), 1);
    json_decref(st.array);
    if (status == PGCTL_OK && (st.failed || st.bad_records))
        status = PGCTL_INTERNAL;
    return status;
}

static int run_list(const pg_config *cfg, int argc, char **argv)
{
    view_options o = {0};
    int status = pgctl_parse_options(
        argc, argv, list_options, set_view_option, &o,
        "Usage: " PGCTL_PROG " list [--json]\n"
        "\nLists the pulled records of the writable and the read-only record\n"
        "directories, one line per record: imageRef, lastUpdatedTime, directory, and\n"
        "per image name the number of secrets and service accounts and whether any\n"
        "pod on the node may use it. --json prints a JSON array of the kubelet\n"
        "records, each with an added \"dir\". Invalid record files are reported on\n"
        "standard error and make the exit status 3.");
    return status != PGCTL_OK ? status : list_records(cfg, o.json);
}

/* ----------------------------------------------------------------- show */

static void print_secrets(const json_t *mapping)
{
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(mapping, "kubernetesSecrets"), i, s)
    {
        const char *hash = json_string_value(json_object_get(s, "credentialHash"));
        printf("    secret %s/%s uid %s hash %.12s%s\n",
               json_string_value(json_object_get(s, "namespace")),
               json_string_value(json_object_get(s, "name")),
               json_string_value(json_object_get(s, "uid")), hash && *hash ? hash : "(none)",
               hash && *hash ? "..." : "");
    }
}

static void print_service_accounts(const json_t *mapping)
{
    size_t i;
    json_t *sa;
    json_array_foreach(json_object_get(mapping, "kubernetesServiceAccounts"), i, sa)
    {
        printf("    serviceAccount %s/%s uid %s\n",
               json_string_value(json_object_get(sa, "namespace")),
               json_string_value(json_object_get(sa, "name")),
               json_string_value(json_object_get(sa, "uid")));
    }
}

static void print_record_details(const pg_record *rec, const json_t *j)
{
    char when[32];
    pg_format_rfc3339(pg_record_last_updated(rec), when);
    const char *dir = pg_record_dir(rec);
    printf("imageRef:        %s\napiVersion:      %s\nlastUpdatedTime: %s\ndir:             %s\n"
           "credentialMapping:\n",
           pg_record_image_ref(rec), pg_record_api_version(rec), when, dir ? dir : "-");
    const char *name;
    json_t *mapping;
    json_object_foreach(json_object_get(j, "credentialMapping"), name, mapping)
    {
        printf("  %s\n    nodePodsAccessible: %s\n", name,
               node_accessible(mapping) ? "true" : "false");
        print_secrets(mapping);
        print_service_accounts(mapping);
    }
}

static int show_record(const pg_config *cfg, const view_options *o)
{
    pg_error err;
    pg_error_clear(&err);
    pg_store *store = pgctl_store_open_reading(cfg, &err);
    if (!store)
        return pgctl_fail(&err, "cannot open the record store");
    pg_record *rec = NULL;
    int status = PGCTL_OK;
    if (pg_store_get(store, o->image_ref, &rec, &err) != PG_OK)
        status = pgctl_fail(&err, o->image_ref);
    pg_store_free(store);
    if (status != PGCTL_OK)
        return status;
    json_t *j = record_json(rec);
    if (!j)
        status = PGCTL_INTERNAL;
    else if (o->json)
        status = pgctl_print_json(json_incref(j), 1);
    else
        print_record_details(rec, j);
    json_decref(j);
    pg_record_free(rec);
    return status;
}

static int run_show(const pg_config *cfg, int argc, char **argv)
{
    view_options o = {0};
    int status = pgctl_parse_options(
        argc, argv, show_options, set_view_option, &o,
        "Usage: " PGCTL_PROG " show --image-ref REF [--json]\n"
        "\nShows the pulled record of REF from the first record directory that has\n"
        "one (the writable one first). Exit status 2 when there is none.");
    if (status != PGCTL_OK)
        return status;
    if (!o.image_ref || !*o.image_ref)
        return pgctl_usage_error("show", "--image-ref REF is required");
    return show_record(cfg, &o);
}

const pgctl_command pgctl_cmd_list = {
    "list", "list the pulled records of every record directory", list_options, 1, run_list,
    NULL};
const pgctl_command pgctl_cmd_show = {
    "show", "show the pulled record of an image ID", show_options, 1, run_show, NULL};
