/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The hook's JSON reader (hooks/oci_scan.c): it accepts exactly what jansson
 * (pg_json_parse) accepts, case by case at every rule's edge, keeps the same
 * annotations and state fields, and what the hook decides from a config.json
 * with a key twice, a truncated one or a malformed one is a refusal; the
 * reader's file read keeps pg_read_file_at's checks; its buffers are reused
 * and given back.
 */
#include "hook.h"
#include "testutil.h"

#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether jansson, as the hook used it, accepts buf. */
static int jansson_accepts(const char *buf, size_t len)
{
    json_error_t je;
    json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    json_decref(j);
    return j != NULL;
}

typedef struct scan_case {
    const char *json;
    int accept; /* what jansson answers, asserted too, so a case documents a rule */
} scan_case;

static const scan_case cases[] = {
    /* structure */
    {"{}", 1},
    {"[]", 1},
    {" \t\r\n{\"a\":1} \n", 1},
    {"\"x\"", 0},
    {"1", 0},
    {"", 0},
    {"{", 0},
    {"{\"a\":1", 0},
    {"{\"a\":1,}", 0},
    {"[1,]", 0},
    {"{\"a\" 1}", 0},
    {"{a:1}", 0},
    {"{\"a\":1} x", 0},
    {"{\"a\":1}{}", 0},
    {"\xef\xbb\xbf{}", 0},
    {"{\"a\":[1,[2,{\"b\":[]}]],\"c\":{}}", 1},
    /* literals */
    {"[true,false,null]", 1},
    {"[tru]", 0},
    {"[truex]", 0},
    {"[nul]", 0},
    {"[True]", 0},
    /* numbers */
    {"[0,-0,1,-1,10,0.5,-0.5,1e5,1E5,1e+5,1e-5,1.5e3,1e05]", 1},
    {"[00]", 0},
    {"[-01]", 0},
    {"[01.5]", 0},
    {"[.5]", 0},
    {"[2.]", 0},
    {"[-]", 0},
    {"[+1]", 0},
    {"[1e]", 0},
    {"[1e+]", 0},
    {"[0x10]", 0},
    {"[9223372036854775807]", 1},
    {"[9223372036854775808]", 0},
    {"[-9223372036854775808]", 1},
    {"[-9223372036854775809]", 0},
    {"[123456789012345678901234567890]", 0},
    {"[1e308]", 1},
    {"[1e309]", 0},
    {"[-1e309]", 0},
    {"[1e-400]", 1},
    {"[123456789012345678901234567890.0]", 1},
    /* strings and escapes */
    {"[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]", 1},
    {"[\"\\u00e9\\u20AC\"]", 1},
    {"[\"\\ud83d\\ude00\"]", 1},
    {"[\"\\ud800\"]", 0},
    {"[\"\\udc00\"]", 0},
    {"[\"\\ud800\\u0041\"]", 0},
    {"[\"\\ud800\\n\"]", 0},
    {"[\"\\u0000\"]", 0},
    {"{\"\\u0000\":1}", 0},
    {"[\"\\u12\"]", 0},
    {"[\"\\u12G4\"]", 0},
    {"[\"\\U0041\"]", 0},
    {"[\"\\x41\"]", 0},
    {"[\"\\'\"]", 0},
    {"[\"a\tb\"]", 0},
    {"[\"a\nb\"]", 0},
    {"[\"a\x7f b\"]", 1},
    {"[\"abc", 0},
    {"[\"abc\\", 0},
    /* UTF-8 as jansson checks it */
    {"[\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"]", 1},
    {"[\"\xc0\x80\"]", 0},
    {"[\"\xc1\xbf\"]", 0},
    {"[\"\xe0\x80\x80\"]", 0},
    {"[\"\xed\xa0\x80\"]", 0},
    {"[\"\xf0\x80\x80\x80\"]", 0},
    {"[\"\xf4\x90\x80\x80\"]", 0},
    {"[\"\xf5\x80\x80\x80\"]", 0},
    {"[\"\x80\"]", 0},
    {"[\"\xc3\"]", 0},
    {"[\"\xc3x\"]", 0},
    {"[\xc3\xa9]", 0},
    /* duplicate keys, in any object, by their decoded bytes */
    {"{\"a\":1,\"a\":2}", 0},
    {"{\"a\":1,\"b\":{\"c\":1,\"c\":1}}", 0},
    {"[{\"x\":1},{\"x\":1}]", 1},
    {"{\"a\":{\"x\":1},\"b\":{\"x\":1}}", 1},
    {"{\"a/\":1,\"a\\/\":2}", 0},
    {"{\"\\u00e9\":1,\"\xc3\xa9\":2}", 0},
    {"{\"a\":1,\"ab\":2,\"b\":3}", 1},
    {"{\"annotations\":{\"k\":\"1\",\"k\":\"2\"}}", 0},
    {"{\"annotations\":{\"k\":\"1\"},\"annotations\":{\"k\":\"1\"}}", 0},
};

START_TEST(accepts_exactly_what_jansson_accepts)
{
    hook_doc *doc = hook_doc_new();
    ck_assert_ptr_nonnull(doc);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const scan_case *c = &cases[i];
        size_t len = strlen(c->json);
        ck_assert_msg(jansson_accepts(c->json, len) == c->accept, "jansson on case %zu: %s", i,
                      c->json);
        pg_error err = {0};
        int rc = hook_doc_scan(doc, c->json, len, "annotations", "case", &err);
        ck_assert_msg((rc == PG_OK) == c->accept, "case %zu (%s): %s", i, c->json, err.message);
        if (rc != PG_OK)
            ck_assert_msg(rc == PG_ERR_INVALID &&
                              strncmp(err.message, "case: invalid JSON", 18) == 0,
                          "case %zu: %d %s", i, rc, err.message);
    }
    hook_doc_free(doc);
}
END_TEST

/* Nesting: every value counts, the root at 1; jansson stops above 2048. */
START_TEST(depth_is_bounded_as_jansson_bounds_it)
{
    hook_doc *doc = hook_doc_new();
    for (size_t depth = 2046; depth <= 2050; depth++) {
        for (int scalar = 0; scalar <= 1; scalar++) {
            char *s = malloc(2 * depth + 2);
            size_t n = 0;
            for (size_t i = 0; i < depth; i++)
                s[n++] = '[';
            if (scalar)
                s[n++] = '1';
            for (size_t i = 0; i < depth; i++)
                s[n++] = ']';
            pg_error err = {0};
            int ours = hook_doc_scan(doc, s, n, NULL, "deep", &err) == PG_OK;
            ck_assert_msg(ours == jansson_accepts(s, n), "depth %zu scalar %d", depth, scalar);
            ck_assert_int_eq(ours, depth + (size_t)scalar <= 2048);
            free(s);
        }
    }
    hook_doc_free(doc);
}
END_TEST

/* A NUL byte in the data is data: refused as jansson refuses it. */
START_TEST(nul_bytes_are_refused)
{
    static const char with_nul[] = "{\"a\":\"x\0y\"}";
    static const char trailing_nul[] = "{\"a\":1}\0";
    hook_doc *doc = hook_doc_new();
    pg_error err = {0};
    ck_assert_int_ne(hook_doc_scan(doc, with_nul, sizeof with_nul - 1, NULL, "t", &err), PG_OK);
    ck_assert_int_ne(hook_doc_scan(doc, trailing_nul, sizeof trailing_nul - 1, NULL, "t", &err),
                     PG_OK);
    ck_assert(!jansson_accepts(with_nul, sizeof with_nul - 1));
    ck_assert(!jansson_accepts(trailing_nul, sizeof trailing_nul - 1));
    /* jansson's lexer loses one NUL put back after a number or a literal: accepted by both. */
    static const char *const lost[] = {"{\"a\":1\0}", "[true\0,false\0]", "[1.5e3\0\t]"};
    static const size_t lost_len[] = {8, 14, 9};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_msg(jansson_accepts(lost[i], lost_len[i]), "jansson refuses lost NUL %zu", i);
        ck_assert_int_eq(hook_doc_scan(doc, lost[i], lost_len[i], NULL, "t", &err), PG_OK);
    }
    /* Two, or one after a string: refused by both. */
    static const char *const kept[] = {"{\"a\":1\0\0}", "{\"a\":\"x\"\0}", "[\0 1]"};
    static const size_t kept_len[] = {9, 10, 5};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_msg(!jansson_accepts(kept[i], kept_len[i]), "jansson accepts NUL %zu", i);
        ck_assert_int_ne(hook_doc_scan(doc, kept[i], kept_len[i], NULL, "t", &err), PG_OK);
    }
    hook_doc_free(doc);
}
END_TEST

/* CRI-O's 7 KiB config.json: the same annotations as jansson's tree, found by key. */
START_TEST(a_crio_config_gives_jansson_s_annotations)
{
    char *path = tu_testdata("oci-config-crio.json");
    size_t len;
    char *buf = tu_read_file(path, &len);
    ck_assert_ptr_nonnull(buf);
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    ck_assert_ptr_nonnull(root);
    const json_t *ann = json_object_get(root, "annotations");
    hook_doc *doc = hook_doc_new();
    pg_error err = {0};
    ck_assert_int_eq(hook_parse_bundle_config(doc, buf, len, &err), PG_OK);
    ck_assert_uint_eq(hook_doc_map_size(doc), json_object_size(ann));
    ck_assert_uint_ge(hook_doc_map_size(doc), 30);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)ann, key, v)
    {
        const char *ours = hook_doc_map_get(doc, key);
        ck_assert_ptr_nonnull(ours);
        ck_assert_str_eq(ours, json_string_value(v));
    }
    ck_assert_ptr_null(hook_doc_map_get(doc, "io.kubernetes.cri-o.Nonexistent"));
    ck_assert_str_eq(hook_doc_map_get(doc, "io.container.manager"), "cri-o");
    /* The root's other members are kept by kind only. */
    const char *version;
    ck_assert_int_eq(hook_doc_member(doc, "ociVersion", &version), HOOK_JSON_STRING);
    ck_assert_str_eq(version, json_string_value(json_object_get(root, "ociVersion")));
    ck_assert_int_eq(hook_doc_member(doc, "process", NULL), HOOK_JSON_OBJECT);
    ck_assert_int_eq(hook_doc_member(doc, "mounts", NULL), HOOK_JSON_OTHER);
    ck_assert_int_eq(hook_doc_member(doc, "nothing", NULL), HOOK_JSON_ABSENT);

    /* Every cut of it is refused but the whole (and the whole plus whitespace). */
    for (size_t cut = 0; cut < len; cut++) {
        int whole = strspn(buf + cut, " \t\r\n") == len - cut;
        ck_assert_int_eq(hook_parse_bundle_config(doc, buf, cut, &err) == PG_OK, whole);
    }
    json_decref(root);
    hook_doc_free(doc);
    free(buf);
    free(path);
}
END_TEST

/* What the hook decides from: refusals where the decision inputs are not well defined. */
START_TEST(the_hook_refuses_what_it_cannot_decide_from)
{
    static const struct {
        const char *json;
        const char *why; /* in the error */
    } refused[] = {
        {"{\"annotations\":{\"pullgate.dev/credentials\":\"a\",\"pullgate.dev/"
         "credentials\":\"b\"}}",
         "duplicate object key"},
        {"{\"annotations\":{\"io.container.manager\":\"cri-o\"},\"annotations\":{}}",
         "duplicate object key"},
        {"{\"annotations\":{\"io.kubernetes.pod.namespace\":\"a\"},\"linux\":{\"sysctl\":{\"k\":"
         "\"1\","
         "\"k\":\"2\"}}}",
         "duplicate object key"},
        {"{\"annotations\":{\"io.kubernetes.pod.namespace\":1}}", "is not a string"},
        {"{\"annotations\":{\"io.kubernetes.pod.namespace\":null}}", "is not a string"},
        {"{\"annotations\":[]}", "annotations is not an object"},
        {"{\"annotations\":\"x\"}", "annotations is not an object"},
        {"[{\"annotations\":{}}]", "not a JSON object"},
        {"{\"annotations\":{\"io.container.manager\":\"cri-o\"}", "invalid JSON"},
    };
    hook_doc *doc = hook_doc_new();
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        pg_error err = {0};
        int rc = hook_parse_bundle_config(doc, refused[i].json, strlen(refused[i].json), &err);
        ck_assert_msg(rc != PG_OK, "case %zu accepted", i);
        ck_assert_msg(strstr(err.message, refused[i].why), "case %zu: %s", i, err.message);
    }
    /* Absent annotations: an empty map, nothing found. */
    pg_error err = {0};
    static const char bare[] = "{\"ociVersion\":\"1\"}";
    ck_assert_int_eq(hook_parse_bundle_config(doc, bare, sizeof bare - 1, &err), PG_OK);
    ck_assert_uint_eq(hook_doc_map_size(doc), 0);
    ck_assert_ptr_null(hook_doc_map_get(doc, "io.container.manager"));
    /* A nested object named "annotations" is not the map. */
    static const char nested[] =
        "{\"process\":{\"annotations\":{\"io.container.manager\":\"cri-o\"}}}";
    ck_assert_int_eq(hook_parse_bundle_config(doc, nested, sizeof nested - 1, &err), PG_OK);
    ck_assert_ptr_null(hook_doc_map_get(doc, "io.container.manager"));
    hook_doc_free(doc);
}
END_TEST

START_TEST(the_state_gives_id_and_bundle)
{
    static const char state[] =
        "{\"ociVersion\":\"1.0.2\",\"id\":\"c\\u00e9\",\"status\":\"created\",\"pid\":42,"
        "\"bundle\":\"/run/b\",\"annotations\":{\"bundle\":\"/elsewhere\"}}";
    hook_doc *doc = hook_doc_new();
    hook_state st;
    pg_error err = {0};
    ck_assert_int_eq(hook_parse_state(doc, state, sizeof state - 1, &st, &err), PG_OK);
    ck_assert_str_eq(st.id, "c\xc3\xa9");
    ck_assert_str_eq(st.bundle, "/run/b");
    hook_state_clear(&st);
    static const char *const bad[] = {
        "{\"id\":\"c\"}",
        "{\"id\":\"\",\"bundle\":\"/b\"}",
        "{\"id\":1,\"bundle\":\"/b\"}",
        "{\"id\":\"c\",\"bundle\":\"b\"}",
        "{\"id\":\"c\",\"bundle\":\"/b\",\"bundle\":\"/c\"}",
        "{\"id\":\"c\",\"bundle\":\"/b\\u0000\"}",
        "[\"id\",\"bundle\"]",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(hook_parse_state(doc, bad[i], strlen(bad[i]), &st, &err) != PG_OK,
                      "state %zu accepted", i);
        ck_assert(!st.id && !st.bundle);
    }
    /* Without a reader of the caller's: a temporary one. */
    ck_assert_int_eq(hook_parse_state(NULL, state, sizeof state - 1, &st, &err), PG_OK);
    hook_state_clear(&st);
    hook_doc_free(doc);
}
END_TEST

/* One reader, many documents: nothing of one leaks into the next; trim gives back. */
START_TEST(a_reused_reader_forgets_the_previous_document)
{
    hook_doc *doc = hook_doc_new();
    pg_error err = {0};
    static const char first[] = "{\"annotations\":{\"a\":\"1\",\"b\":\"2\"},\"x\":\"y\"}";
    ck_assert_int_eq(hook_parse_bundle_config(doc, first, sizeof first - 1, &err), PG_OK);
    ck_assert_str_eq(hook_doc_map_get(doc, "b"), "2");
    static const char second[] = "{\"annotations\":{\"a\":\"3\"}}";
    ck_assert_int_eq(hook_parse_bundle_config(doc, second, sizeof second - 1, &err), PG_OK);
    ck_assert_str_eq(hook_doc_map_get(doc, "a"), "3");
    ck_assert_ptr_null(hook_doc_map_get(doc, "b"));
    ck_assert_int_eq(hook_doc_member(doc, "x", NULL), HOOK_JSON_ABSENT);
    /* A failed scan leaves nothing to find. */
    ck_assert_int_ne(hook_parse_bundle_config(doc, "{\"annotations\":{\"a\":\"4\"", 23, &err),
                     PG_OK);
    ck_assert_ptr_null(hook_doc_map_get(doc, "a"));
    /* A large document (2 MiB of annotations), then trim: the results are gone, scanning works. */
    size_t n = 40000;
    char *big = malloc(n * 48 + 64);
    size_t len = (size_t)sprintf(big, "{\"annotations\":{");
    for (size_t i = 0; i < n; i++)
        len += (size_t)sprintf(big + len, "%s\"key-%07zu\":\"value-%07zu-padding\"", i ? "," : "",
                               n - i, i);
    len += (size_t)sprintf(big + len, "}}");
    ck_assert_int_eq(hook_parse_bundle_config(doc, big, len, &err), PG_OK);
    ck_assert_uint_eq(hook_doc_map_size(doc), n);
    ck_assert_str_eq(hook_doc_map_get(doc, "key-0000001"), "value-0039999-padding");
    hook_doc_trim(doc);
    ck_assert_ptr_null(hook_doc_map_get(doc, "key-0000001"));
    ck_assert_int_eq(hook_parse_bundle_config(doc, second, sizeof second - 1, &err), PG_OK);
    ck_assert_str_eq(hook_doc_map_get(doc, "a"), "3");
    free(big);
    hook_doc_free(doc);
}
END_TEST

/* The read keeps pg_read_file_at's checks: no symlink, a regular file, bounded. */
START_TEST(the_config_read_refuses_what_pg_read_file_at_refuses)
{
    char *dir = tu_mkdtemp();
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_assert_int_ge(dfd, 0);
    hook_doc *doc = hook_doc_new();
    pg_error err = {0};
    const char *buf;
    size_t len;
    ck_assert_int_eq(hook_doc_read_at(doc, dfd, "config.json", 1024, &buf, &len, &err),
                     PG_ERR_NOT_FOUND);
    char *target = tu_sprintf("%s/real.json", dir), *cfg = tu_sprintf("%s/config.json", dir);
    tu_write_file(target, "{}", -1, 0644);
    ck_assert_int_eq(symlink(target, cfg), 0);
    ck_assert_int_eq(hook_doc_read_at(doc, dfd, "config.json", 1024, &buf, &len, &err),
                     PG_ERR_UNSAFE);
    unlink(cfg);
    ck_assert_int_eq(mkfifo(cfg, 0600), 0);
    ck_assert_int_eq(hook_doc_read_at(doc, dfd, "config.json", 1024, &buf, &len, &err),
                     PG_ERR_UNSAFE);
    unlink(cfg);
    tu_write_file(cfg, "{\"annotations\":{}}", -1, 0644);
    ck_assert_int_eq(hook_doc_read_at(doc, dfd, "config.json", 18, &buf, &len, &err), PG_OK);
    ck_assert_uint_eq(len, 18);
    ck_assert_str_eq(buf, "{\"annotations\":{}}");
    ck_assert_int_eq(hook_doc_read_at(doc, dfd, "config.json", 17, &buf, &len, &err), PG_ERR_LIMIT);
    /* Larger than the first buffer: read whole. */
    char *big = malloc(300000);
    memset(big, ' ', 299998);
    big[0] = '{';
    big[299998] = '}';
    big[299999] = '\0';
    tu_write_file(cfg, big, 299999, 0644);
    ck_assert_int_eq(hook_doc_read_at(doc, dfd, "config.json", 1 << 20, &buf, &len, &err), PG_OK);
    ck_assert_uint_eq(len, 299999);
    ck_assert_int_eq(memcmp(buf, big, len), 0);
    /* A file not root's (nor ours): refused. Only root can make one. */
    if (geteuid() == 0) {
        ck_assert_int_eq(chown(cfg, 4242, 4242), 0);
        ck_assert_int_eq(hook_doc_read_at(doc, dfd, "config.json", 1 << 20, &buf, &len, &err),
                         PG_ERR_UNSAFE);
    }
    free(big);
    close(dfd);
    hook_doc_free(doc);
    tu_rmrf(dir);
    free(target);
    free(cfg);
    free(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("hook_scan");
    TCase *tc = tcase_create("scan");
    tcase_add_test(tc, accepts_exactly_what_jansson_accepts);
    tcase_add_test(tc, depth_is_bounded_as_jansson_bounds_it);
    tcase_add_test(tc, nul_bytes_are_refused);
    tcase_add_test(tc, a_crio_config_gives_jansson_s_annotations);
    tcase_add_test(tc, the_hook_refuses_what_it_cannot_decide_from);
    tcase_add_test(tc, the_state_gives_id_and_bundle);
    tcase_add_test(tc, a_reused_reader_forgets_the_previous_document);
    tcase_add_test(tc, the_config_read_refuses_what_pg_read_file_at_refuses);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
