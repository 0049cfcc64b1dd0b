/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-wire: containerd's configuration, edited as text. toml++ (common/toml.cc) says where
 * each runtime handler's header and keys are; the edit replaces a value in place, inserts
 * lines after a header, or deletes a key's lines, and touches nothing else, so comments and
 * layout stay (a rewritten pod_annotations array loses comments inside its brackets). The
 * result is parsed again and must differ from the input in exactly the intended keys: any
 * layout this does not understand is refused rather than guessed at.
 */
#include "cleanup.h"
#include "pg_toml.h"
#include "wire.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_EDITS (4 * PGW_MAX_HANDLERS + 4)

/* A replacement of text[start, end) by repl (owned). */
typedef struct edit {
    size_t start, end;
    char *repl;
} edit;

typedef struct doc {
    const char *text;
    size_t len;
    size_t *line_start; /* byte offset of each 1-based line; [n_lines + 1] = len */
    size_t n_lines;
    json_t *map;  /* pg_toml_key_places' answer */
    json_t *data; /* the document as JSON */
    const char *plugin;
    edit edits[MAX_EDITS];
    size_t n_edits;
} doc;

/* What wire will not edit: PG_ERR_INVALID with why. */
#define refuse(err, ...) pg_fail(err, PG_ERR_INVALID, __VA_ARGS__)

/* ------------------------------------------------------------- positions */

static int index_lines(doc *d, pg_error *err)
{
    size_t n = 1;
    for (size_t i = 0; i < d->len; i++)
        n += d->text[i] == '\n';
    d->line_start = calloc(n + 2, sizeof *d->line_start);
    if (!d->line_start)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    size_t line = 1;
    d->line_start[1] = 0;
    for (size_t i = 0; i < d->len; i++)
        if (d->text[i] == '\n')
            d->line_start[++line] = i + 1;
    d->n_lines = line;
    d->line_start[line + 1] = d->len;
    return PG_OK;
}

/* Byte offset of a 1-based (line, column); toml++ counts columns in code points. */
static size_t offset_of(const doc *d, long line, long col)
{
    if (line < 1 || (size_t)line > d->n_lines)
        return d->len;
    size_t at = d->line_start[line], end = d->line_start[line + 1];
    for (long c = 1; c < col && at < end; c++) {
        at++;
        while (at < end && ((unsigned char)d->text[at] & 0xC0) == 0x80)
            at++;
    }
    return at;
}

static long num(const json_t *e, const char *key)
{
    return (long)json_integer_value(json_object_get(e, key));
}

/* The map entry whose path is prefix + name (name NULL: prefix itself). */
static const json_t *find_entry(const doc *d, const char *const *prefix, const char *name)
{
    size_t np = 0;
    while (prefix[np])
        np++;
    size_t i;
    json_t *e;
    json_array_foreach(d->map, i, e)
    {
        const json_t *path = json_object_get(e, "path");
        if (json_array_size(path) != np + (name ? 1 : 0))
            continue;
        bool same = true;
        for (size_t k = 0; same && k < np; k++)
            same = strcmp(json_string_value(json_array_get(path, k)), prefix[k]) == 0;
        if (same && name)
            same = strcmp(json_string_value(json_array_get(path, np)), name) == 0;
        if (same)
            return e;
    }
    return NULL;
}

static bool blank(const char *s, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (s[i] != ' ' && s[i] != '\t')
            return false;
    return true;
}

/* ----------------------------------------------------------------- edits */

static int add_edit(doc *d, size_t start, size_t end, const char *repl, pg_error *err)
{
    if (d->n_edits == MAX_EDITS)
        return pg_fail(err, PG_ERR_LIMIT, "too many runtime handlers to edit");
    char *copy = strdup(repl);
    if (!copy)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    d->edits[d->n_edits++] = (edit){start, end, copy};
    return PG_OK;
}

static int by_start_desc(const void *a, const void *b)
{
    const edit *x = a, *y = b;
    return x->start < y->start ? 1 : x->start > y->start ? -1 : 0;
}

/* The text with every edit applied (from the end, so offsets stay valid). */
static char *apply_edits(doc *d, size_t *out_len)
{
    qsort(d->edits, d->n_edits, sizeof d->edits[0], by_start_desc);
    size_t len = d->len;
    for (size_t i = 0; i < d->n_edits; i++)
        len += strlen(d->edits[i].repl);
    char *out = malloc(len + 1);
    if (!out)
        return NULL;
    memcpy(out, d->text, d->len);
    size_t cur = d->len;
    for (size_t i = 0; i < d->n_edits; i++) {
        const edit *e = &d->edits[i];
        size_t rl = strlen(e->repl);
        memmove(out + e->start + rl, out + e->end, cur - e->end);
        memcpy(out + e->start, e->repl, rl);
        cur = cur - (e->end - e->start) + rl;
    }
    out[cur] = '\0';
    *out_len = cur;
    return out;
}

/* ------------------------------------------------------------- handlers */

static char *toml_value(json_t *v) /* a string or an array of strings, as TOML */
{
    char *s = json_dumps(v, JSON_ENCODE_ANY);
    json_decref(v);
    return s;
}

/* A TOML key as written in a header: bare when it can be, else a basic string. */
static void append_key(char *out, size_t n, const char *key)
{
    bool bare = *key != '\0';
    for (const char *c = key; *c; c++)
        bare = bare && (isalnum((unsigned char)*c) || *c == '_' || *c == '-');
    size_t used = strlen(out);
    if (bare) {
        snprintf(out + used, n - used, "%s%s", used ? "." : "", key);
    } else {
        char *q = toml_value(json_string(key));
        snprintf(out + used, n - used, "%s%s", used ? "." : "", q ? q : "\"?\"");
        free(q);
    }
}

/* The header line's indentation, and the inside of the handler table for new keys. */
typedef struct handler_place {
    size_t insert_at; /* byte offset where new lines go */
    char indent[64];  /* of the header */
    char key_indent[66];
    bool new_header; /* the table has no header of its own: write one */
    char header[1024];
} handler_place;

/* Whether the table entry e has a [header] of its own (not only [its.sub.tables]). */
static bool own_header(const doc *d, const json_t *e)
{
    size_t at = offset_of(d, num(e, "line"), num(e, "col"));
    if (at >= d->len || d->text[at] != '[' || (at + 1 < d->len && d->text[at + 1] == '['))
        return false;
    if (num(e, "kline") != num(e, "line"))
        return false;
    size_t p = offset_of(d, num(e, "kline"), num(e, "kend"));
    while (p < d->len &&
           (d->text[p] == ' ' || d->text[p] == '\t' || d->text[p] == '"' || d->text[p] == '\''))
        p++;
    return p < d->len && d->text[p] == ']';
}

static int place_handler(const doc *d, const char *const *prefix, const char *name,
                         handler_place *hp, pg_error *err)
{
    const json_t *e = find_entry(d, prefix, name);
    if (!e)
        return pg_fail(err, PG_ERR_INTERNAL, "runtime handler %s not found in the text", name);
    if (json_is_true(json_object_get(e, "inline")))
        return refuse(
            err,
            "runtime handler %s is an inline table: write it as a [...runtimes.%s] table to "
            "wire it",
            name, name);
    size_t line_at = d->line_start[num(e, "line")];
    size_t col_at = offset_of(d, num(e, "line"), num(e, "col"));
    if (d->text[col_at] != '[')
        return refuse(err,
                      "runtime handler %s is written with dotted keys: write it as a "
                      "[...runtimes.%s] table to wire it",
                      name, name);
    size_t ind = col_at - line_at;
    if (!blank(d->text, line_at, col_at) || ind + 3 > sizeof hp->indent)
        return refuse(err, "runtime handler %s: its header does not start its line", name);
    memcpy(hp->indent, d->text + line_at, ind);
    hp->indent[ind] = '\0';
    hp->new_header = !own_header(d, e);
    snprintf(hp->key_indent, sizeof hp->key_indent, "%s  ", hp->indent);
    if (hp->new_header) { /* only [..runtimes.NAME.options]: a header before the first one */
        hp->insert_at = line_at;
        hp->header[0] = '\0';
        for (const char *const *k = prefix; *k; k++)
            append_key(hp->header, sizeof hp->header, *k);
        append_key(hp->header, sizeof hp->header, name);
    } else {
        long next = num(e, "eline") + 1;
        hp->insert_at = (size_t)next <= d->n_lines ? d->line_start[next] : d->len;
    }
    return PG_OK;
}

/* Deletes the lines of key `key` of a handler (the key alone on them, comments after it). */
static int delete_key(doc *d, const json_t *e, const char *name, const char *key, pg_error *err)
{
    size_t kstart = offset_of(d, num(e, "kline"), num(e, "kcol"));
    size_t vend = offset_of(d, num(e, "eline"), num(e, "ecol"));
    size_t from = d->line_start[num(e, "kline")];
    size_t to = d->line_start[num(e, "eline") + 1];
    size_t rest = vend;
    while (rest < to && (d->text[rest] == ' ' || d->text[rest] == '\t'))
        rest++;
    if (!blank(d->text, from, kstart) ||
        !(rest == to || d->text[rest] == '#' || d->text[rest] == '\n' || d->text[rest] == '\r'))
        return refuse(err, "runtime handler %s: %s shares its line with other keys", name, key);
    return add_edit(d, from, to, "", err);
}

/* Replaces key's value in place; the rest of its line (a comment) stays. */
static int replace_value(doc *d, const json_t *e, const char *value, pg_error *err)
{
    size_t start = offset_of(d, num(e, "line"), num(e, "col"));
    size_t end = offset_of(d, num(e, "eline"), num(e, "ecol"));
    return add_edit(d, start, end, value, err);
}

/* pod_annotations with (wire) or without (unwire) the key; NULL when unchanged. */
static json_t *new_annotations(const json_t *old, const char *key, int remove)
{
    if (!remove && pgd_json_array_has(old, key))
        return NULL;
    if (remove && !pgd_json_array_has(old, key))
        return NULL;
    json_t *out = json_array();
    size_t i;
    json_t *v;
    json_array_foreach(
        old, i, v) if (!(remove && json_is_string(v) && strcmp(json_string_value(v), key) == 0))
        json_array_append(out, v);
    if (!remove)
        json_array_append_new(out, json_string(key));
    return out;
}

/* The edits of one handler, and its expected JSON (applied to `expect`). */
static int edit_handler(doc *d, const char *const *prefix, const char *name, json_t *handler,
                        json_t *expect_handler, const pgw_cd_params *p, pgw_handler *h,
                        pg_error *err)
{
    handler_place hp;
    int rc = place_handler(d, prefix, name, &hp, err);
    if (rc != PG_OK)
        return rc;
    char lines[8192] = "";
    const char *spec = json_string_value(json_object_get(handler, "base_runtime_spec"));
    snprintf(h->name, sizeof h->name, "%s", name);
    snprintf(h->spec_before, sizeof h->spec_before, "%s", spec ? spec : "");
    snprintf(h->spec_after, sizeof h->spec_after, "%s", spec ? spec : "");
    const char *sub[16];
    size_t k = 0;
    for (; prefix[k] && k < 14; k++)
        sub[k] = prefix[k];
    sub[k++] = name;
    sub[k] = NULL;
    const json_t *spec_e = json_object_get(handler, "base_runtime_spec")
                               ? find_entry(d, sub, "base_runtime_spec")
                               : NULL;
    const json_t *ann_e =
        json_object_get(handler, "pod_annotations") ? find_entry(d, sub, "pod_annotations") : NULL;
    /* base_runtime_spec */
    if (!p->remove && (!spec || !*spec)) {
        pg_autofree char *text = toml_value(json_string(p->gen_spec));
        if (!text)
            return pg_fail(err, PG_ERR_NOMEM, "out of memory");
        if (spec_e)
            rc = replace_value(d, spec_e, text, err);
        else
            snprintf(lines + strlen(lines), sizeof lines - strlen(lines),
                     "%sbase_runtime_spec = %s\n", hp.key_indent, text);
        json_object_set_new(expect_handler, "base_runtime_spec", json_string(p->gen_spec));
        snprintf(h->spec_after, sizeof h->spec_after, "%s", p->gen_spec);
    } else if (p->remove && spec && strcmp(spec, p->gen_spec) == 0) {
        rc = spec_e ? delete_key(d, spec_e, name, "base_runtime_spec", err)
                    : pg_fail(err, PG_ERR_INTERNAL, "base_runtime_spec of %s not found", name);
        json_object_del(expect_handler, "base_runtime_spec");
        h->spec_after[0] = '\0';
    }
    if (rc != PG_OK)
        return rc;
    /* pod_annotations */
    const json_t *old = json_object_get(handler, "pod_annotations");
    if (old && !json_is_array(old))
        return refuse(err, "runtime handler %s: pod_annotations is not an array", name);
    pg_autojson json_t *ann = new_annotations(old, p->annotation, p->remove);
    if (ann && ann_e && json_array_size(ann) == 0) {
        rc = delete_key(d, ann_e, name, "pod_annotations", err);
        json_object_del(expect_handler, "pod_annotations");
    } else if (ann) {
        json_object_set(expect_handler, "pod_annotations", ann);
        pg_autofree char *text = toml_value(json_incref(ann));
        if (!text)
            rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
        else if (ann_e)
            rc = replace_value(d, ann_e, text, err);
        else
            snprintf(lines + strlen(lines), sizeof lines - strlen(lines),
                     "%spod_annotations = %s\n", hp.key_indent, text);
    }
    if (rc != PG_OK || !lines[0])
        return rc;
    char block[9300];
    /* a header on the file's last line, without a newline after it */
    const char *nl = hp.insert_at == d->len && d->len && d->text[d->len - 1] != '\n' ? "\n" : "";
    if (hp.new_header)
        snprintf(block, sizeof block, "%s%s[%s]\n%s\n", nl, hp.indent, hp.header, lines);
    else
        snprintf(block, sizeof block, "%s%s", nl, lines);
    return add_edit(d, hp.insert_at, hp.insert_at, block, err);
}

/* ------------------------------------------------------------- document */

/* The CRI plugin's name for a configuration version, or NULL with err set. */
static const char *cri_plugin(const doc *d, pg_error *err)
{
    json_t *version = json_object_get(d->data, "version");
    long v = json_is_integer(version) ? (long)json_integer_value(version) : 1;
    if (json_object_get(d->data, "imports")) {
        refuse(err,
               "it imports other files (a conf.d layout, which a tool may manage): wire the file "
               "that defines the runtime handlers by hand");
        return NULL;
    }
    if (v == 2)
        return "io.containerd.grpc.v1.cri";
    if (v == 3)
        return "io.containerd.cri.v1.runtime";
    pg_fail(err, PG_ERR_INVALID,
            "configuration version %ld: only version 2 (containerd 1.6, 1.7) and 3 (2.x) are "
            "wired; convert it (containerd config migrate) or wire it by hand",
            v);
    return NULL;
}

static bool plugin_disabled(const doc *d)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(d->data, "disabled_plugins"), i, v)
    {
        const char *s = json_string_value(v);
        if (s &&
            (strcmp(s, d->plugin) == 0 || strcmp(s, "cri") == 0 ||
             (strstr(d->plugin, "grpc.v1.cri") && strcmp(s, "io.containerd.grpc.v1.cri") == 0)))
            return true;
    }
    return false;
}

/* No handler in the file: containerd's own runc handler, written out with the keys. */
static int add_runc_handler(doc *d, const char *const *prefix, json_t *expect,
                            const pgw_cd_params *p, pgw_cd_result *out, pg_error *err)
{
    const char *def = json_string_value(
        pgd_json_path(d->data, (const char *const[]){"plugins", d->plugin, "containerd",
                                                     "default_runtime_name", NULL}));
    if (def && strcmp(def, "runc") != 0)
        return refuse(err, "default_runtime_name is \"%s\" but no runtime handler is defined", def);
    char header[1024] = "";
    for (const char *const *k = prefix; *k; k++)
        append_key(header, sizeof header, *k);
    append_key(header, sizeof header, "runc");
    pg_autofree char *spec = toml_value(json_string(p->gen_spec));
    pg_autofree char *ann = toml_value(json_pack("[s]", p->annotation));
    char block[6000];
    snprintf(block, sizeof block,
             "%s\n[%s]\n  runtime_type = \"io.containerd.runc.v2\"\n  base_runtime_spec = %s\n"
             "  pod_annotations = %s\n",
             d->len && d->text[d->len - 1] != '\n' ? "\n" : "", header, spec ? spec : "\"\"",
             ann ? ann : "[]");
    json_t *h = json_pack("{s:s, s:s, s:[s]}", "runtime_type", "io.containerd.runc.v2",
                          "base_runtime_spec", p->gen_spec, "pod_annotations", p->annotation);
    json_t *node = expect;
    for (const char *const *k = prefix; *k; k++) {
        json_t *next = json_object_get(node, *k);
        if (!next) {
            next = json_object();
            json_object_set_new(node, *k, next);
        }
        node = next;
    }
    json_object_set_new(node, "runc", h);
    pgw_handler *ph = &out->handlers[out->n_handlers++];
    snprintf(ph->name, sizeof ph->name, "runc");
    ph->spec_before[0] = '\0';
    snprintf(ph->spec_after, sizeof ph->spec_after, "%s", p->gen_spec);
    return add_edit(d, d->len, d->len, block, err);
}

static int load_doc(doc *d, const char *text, size_t len, pg_error *err)
{
    d->text = text;
    d->len = len;
    char *map = pg_toml_key_places(text, len, err);
    if (!map) {
        pg_error_prefix(err, "not TOML it can parse");
        return PG_ERR_INVALID;
    }
    json_error_t jerr;
    d->map = json_loads(map, 0, &jerr);
    free(map);
    if (!json_is_array(d->map))
        return pg_fail(err, PG_ERR_INTERNAL, "the TOML map does not parse: %s", jerr.text);
    if (!(d->data = pgd_toml_to_json(text, len, err)))
        return PG_ERR_INVALID;
    return index_lines(d, err);
}

static void free_doc(doc *d)
{
    for (size_t i = 0; i < d->n_edits; i++)
        free(d->edits[i].repl);
    free(d->line_start);
    json_decref(d->map);
    json_decref(d->data);
}
/* A doc released when its block is left (cleanup.h). */
#define autodoc __attribute__((cleanup(free_doc)))

/* The edited text means what was intended: the expected document, and nothing else. */
static int verify(const char *text, size_t len, const json_t *expect, pg_error *err)
{
    pg_error e = {0};
    json_t *got = pgd_toml_to_json(text, len, &e);
    bool same = got && json_equal(got, (json_t *)expect);
    json_decref(got);
    if (!same)
        return pg_fail(err, PG_ERR_INVALID,
                       "its layout defeats a safe edit (the edited file would %s): wire it by "
                       "hand (" PG_DOC_DIR "/examples/containerd/README.md)",
                       got ? "mean more than intended" : "not parse");
    return PG_OK;
}

int pgw_containerd_edit(const char *text, size_t len, const pgw_cd_params *p, pgw_cd_result *out,
                        pg_error *err)
{
    memset(out, 0, sizeof *out);
    autodoc doc d = {0};
    int rc = load_doc(&d, text, len, err);
    if (rc != PG_OK)
        return rc;
    if (!(d.plugin = cri_plugin(&d, err)))
        return PG_ERR_INVALID;
    if (plugin_disabled(&d))
        return refuse(err, "containerd's CRI plugin (%s) is disabled in it: no kubelet uses it",
                      d.plugin);
    const char *const prefix[] = {"plugins", d.plugin, "containerd", "runtimes", NULL};
    pg_autojson json_t *expect = json_deep_copy(d.data);
    json_t *runtimes = pgd_json_path(d.data, prefix);
    if (runtimes && !json_is_object(runtimes))
        return refuse(err, "runtimes is not a table");
    if (json_object_size(runtimes) == 0 && !p->remove &&
        (rc = add_runc_handler(&d, prefix, expect, p, out, err)) != PG_OK)
        return rc;
    const char *name;
    json_t *handler;
    json_object_foreach(runtimes, name, handler)
    {
        if (!json_is_object(handler))
            return refuse(err, "runtime handler %s is not a table", name);
        if (out->n_handlers == PGW_MAX_HANDLERS)
            return pg_fail(err, PG_ERR_LIMIT, "more than %d runtime handlers", PGW_MAX_HANDLERS);
        json_t *eh = json_object_get(pgd_json_path(expect, prefix), name);
        rc = edit_handler(&d, prefix, name, handler, eh, p, &out->handlers[out->n_handlers++], err);
        if (rc != PG_OK)
            return rc;
    }
    pg_autofree char *edited = apply_edits(&d, &out->len);
    if (!edited)
        return pg_fail(err, PG_ERR_NOMEM, "out of memory");
    rc = verify(edited, out->len, expect, err);
    if (rc == PG_OK)
        out->text = pg_steal(&edited);
    return rc;
}
