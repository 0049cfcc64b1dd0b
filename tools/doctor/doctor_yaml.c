/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The kubelet's configuration file (KubeletConfiguration, YAML or JSON) read
 * with libyaml's event parser into a jansson tree. Only what the doctor asks
 * about is used (a few top-level strings and the featureGates map), so every
 * scalar stays a string. Hostile input: aliases are refused (no expansion
 * bombs), nesting is bounded, only the first document is read.
 */
#include "cleanup.h"
#include "doctor.h"

#include <yaml.h>

#define MAX_DEPTH 64
#define MAX_NODES 100000

typedef struct yaml_reader {
    yaml_parser_t parser;
    size_t nodes;
    pg_error *err;
} yaml_reader;

static json_t *fail_at(yaml_reader *y, const char *what)
{
    pg_fail(y->err, PG_ERR_INVALID, "YAML line %zu: %s", y->parser.mark.line + 1, what);
    return NULL;
}

static json_t *read_node(yaml_reader *y, yaml_event_t *ev, int depth);

/* Reads events into container until its end event; keys (mappings) are scalars. */
static json_t *read_collection(yaml_reader *y, bool mapping, int depth)
{
    pg_autojson json_t *out = mapping ? json_object() : json_array();
    if (!out)
        return fail_at(y, "out of memory");
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&y->parser, &ev))
            return fail_at(y, y->parser.problem ? y->parser.problem : "syntax error");
        if (ev.type == (mapping ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT)) {
            yaml_event_delete(&ev);
            return pg_steal(&out);
        }
        pg_autofree char *key = NULL;
        if (mapping) {
            if (ev.type != YAML_SCALAR_EVENT) {
                yaml_event_delete(&ev);
                return fail_at(y, "a mapping key that is not a scalar");
            }
            key = strndup((const char *)ev.data.scalar.value, ev.data.scalar.length);
            yaml_event_delete(&ev);
            if (!key || !yaml_parser_parse(&y->parser, &ev))
                return fail_at(y, "a mapping key without a value");
        }
        json_t *value = read_node(y, &ev, depth + 1);
        yaml_event_delete(&ev);
        int rc = !value    ? -1
                 : mapping ? json_object_set_new(out, key, value)
                           : json_array_append_new(out, value);
        if (rc != 0)
            return value ? fail_at(y, "out of memory") : NULL;
    }
}

/* One node starting with ev (owned by the caller). */
static json_t *read_node(yaml_reader *y, yaml_event_t *ev, int depth)
{
    if (depth > MAX_DEPTH || ++y->nodes > MAX_NODES)
        return fail_at(y, "nested too deeply or too large");
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        return json_stringn((const char *)ev->data.scalar.value, ev->data.scalar.length);
    case YAML_SEQUENCE_START_EVENT: return read_collection(y, false, depth);
    case YAML_MAPPING_START_EVENT: return read_collection(y, true, depth);
    case YAML_ALIAS_EVENT: return fail_at(y, "aliases are not accepted");
    default: return fail_at(y, "unexpected YAML event");
    }
}

json_t *pgd_yaml_to_json(const char *text, size_t len, pg_error *err)
{
    yaml_reader y = {.err = err};
    if (!yaml_parser_initialize(&y.parser)) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    yaml_parser_set_input_string(&y.parser, (const unsigned char *)text, len);
    pg_autojson json_t *root = NULL;
    /* STREAM-START, DOCUMENT-START, then the root node; later documents are not read. */
    for (int i = 0; i < 3; i++) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&y.parser, &ev)) {
            fail_at(&y, y.parser.problem ? y.parser.problem : "syntax error");
            break;
        }
        yaml_event_type_t type = ev.type;
        if (type == YAML_STREAM_START_EVENT || type == YAML_DOCUMENT_START_EVENT) {
            yaml_event_delete(&ev);
            continue;
        }
        if (type == YAML_STREAM_END_EVENT)
            pg_fail(err, PG_ERR_INVALID, "an empty document");
        else
            root = read_node(&y, &ev, 0);
        yaml_event_delete(&ev);
        break;
    }
    yaml_parser_delete(&y.parser);
    if (root && !json_is_object(root)) {
        pg_fail(err, PG_ERR_INVALID, "the document is not a mapping");
        return NULL;
    }
    return pg_steal(&root);
}
