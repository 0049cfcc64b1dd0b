/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The resident hook's wire format (hooks/hook_proto.h) and the server's
 * request check (cri/hook_server.c): what one end encodes the other decodes
 * unchanged; every malformed header, length, flag or fd set is refused; and
 * the configuration identity the server compares.
 */
#include "hook_proto.h"
#include "hook_server.h"

#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char STATE[] = "{\"id\":\"c1\",\"bundle\":\"/b\"}";

static size_t encode_good(unsigned char *buf, size_t cap)
{
    hook_request req = {.stage = "createRuntime",
                        .stage_len = 13,
                        .config = "/etc/pg.json",
                        .config_len = 12,
                        .state = STATE,
                        .state_len = sizeof STATE - 1,
                        .config_explicit = 1};
    return hook_proto_encode_request(&req, buf, cap);
}

START_TEST(request_round_trip)
{
    unsigned char buf[256];
    size_t len = encode_good(buf, sizeof buf);
    ck_assert_uint_eq(len, HOOK_PROTO_REQ_HEADER + 13 + 12 + sizeof STATE - 1);
    hook_request got;
    ck_assert_int_eq(hook_proto_decode_request(buf, len, &got), 0);
    ck_assert_uint_eq(got.stage_len, 13);
    ck_assert_int_eq(memcmp(got.stage, "createRuntime", 13), 0);
    ck_assert_int_eq(memcmp(got.config, "/etc/pg.json", 12), 0);
    ck_assert_uint_eq(got.state_len, sizeof STATE - 1);
    ck_assert_int_eq(memcmp(got.state, STATE, got.state_len), 0);
    ck_assert_uint_eq(got.config_explicit, 1);
}
END_TEST

START_TEST(request_malformed)
{
    unsigned char buf[256], bad[256];
    size_t len = encode_good(buf, sizeof buf);
    hook_request got;
    /* Every prefix is refused: lengths must add up to exactly what arrived. */
    for (size_t n = 0; n < len; n++)
        ck_assert_int_eq(hook_proto_decode_request(buf, n, &got), -1);
    memcpy(bad, buf, len);
    bad[len] = ' ';
    ck_assert_int_eq(hook_proto_decode_request(bad, len + 1, &got), -1);
    /* Magic, version, an unknown flag, a zero or oversize stage. */
    size_t fields[] = {0, 4, 7, 8, 9};
    unsigned char values[] = {'X', 2, 0x80, 0, 0xff};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        memcpy(bad, buf, len);
        bad[fields[i]] = values[i];
        ck_assert_msg(hook_proto_decode_request(bad, len, &got) == -1, "field %zu", fields[i]);
    }
    /* Huge lengths cannot wrap the sum. */
    memcpy(bad, buf, len);
    memset(bad + 12, 0xff, 8);
    ck_assert_int_eq(hook_proto_decode_request(bad, len, &got), -1);
    /* A NUL inside the stage or a relative config path. */
    memcpy(bad, buf, len);
    bad[HOOK_PROTO_REQ_HEADER + 3] = '\0';
    ck_assert_int_eq(hook_proto_decode_request(bad, len, &got), -1);
    memcpy(bad, buf, len);
    bad[HOOK_PROTO_REQ_HEADER + 13] = 'e';
    ck_assert_int_eq(hook_proto_decode_request(bad, len, &got), -1);
}
END_TEST

START_TEST(request_bounds_on_encode)
{
    static unsigned char buf[HOOK_PROTO_MAX_REQUEST + 16];
    static char state[HOOK_PROTO_MAX_STATE + 1];
    memset(state, ' ', sizeof state);
    hook_request req = {.stage = "prestart",
                        .stage_len = 8,
                        .config = "/c",
                        .config_len = 2,
                        .state = state,
                        .state_len = HOOK_PROTO_MAX_STATE};
    ck_assert_uint_gt(hook_proto_encode_request(&req, buf, sizeof buf), 0);
    req.state_len++;
    ck_assert_uint_eq(hook_proto_encode_request(&req, buf, sizeof buf), 0);
    req.state_len = 10;
    ck_assert_uint_eq(hook_proto_encode_request(&req, buf, 20), 0); /* does not fit */
}
END_TEST

START_TEST(reply_round_trip_and_malformed)
{
    const char line[] = "pullgate: denied container c1 (namespace n, image i): why\n";
    hook_reply r = {
        .kind = HOOK_REPLY_DECISION, .status = 1, .line = line, .line_len = sizeof line - 1};
    unsigned char buf[HOOK_PROTO_MAX_REPLY];
    size_t len = hook_proto_encode_reply(&r, buf, sizeof buf);
    ck_assert_uint_eq(len, HOOK_PROTO_REPLY_HEADER + sizeof line - 1);
    hook_reply got;
    ck_assert_int_eq(hook_proto_decode_reply(buf, len, &got), 0);
    ck_assert_int_eq(got.kind, HOOK_REPLY_DECISION);
    ck_assert_int_eq(got.status, 1);
    ck_assert_int_eq(memcmp(got.line, line, got.line_len), 0);
    for (size_t n = 0; n < len; n++)
        ck_assert_int_eq(hook_proto_decode_reply(buf, n, &got), -1);
    unsigned char bad[HOOK_PROTO_MAX_REPLY];
    size_t fields[] = {0, 4, 6, 8};
    for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
        memcpy(bad, buf, len);
        bad[fields[i]] = 7; /* bad magic, version, kind; status 7 */
        ck_assert_msg(hook_proto_decode_reply(bad, len, &got) == -1, "field %zu", fields[i]);
    }
    memcpy(bad, buf, len);
    bad[HOOK_PROTO_REPLY_HEADER + 2] = '\0';
    ck_assert_int_eq(hook_proto_decode_reply(bad, len, &got), -1);
    hook_reply not_mine = {.kind = HOOK_REPLY_NOT_MINE};
    len = hook_proto_encode_reply(&not_mine, buf, sizeof buf);
    ck_assert_int_eq(hook_proto_decode_reply(buf, len, &got), 0);
    ck_assert_int_eq(got.kind, HOOK_REPLY_NOT_MINE);
    ck_assert_uint_eq(got.line_len, 0);
}
END_TEST

START_TEST(server_checks_fds_and_stage)
{
    unsigned char buf[256];
    size_t len = encode_good(buf, sizeof buf);
    hook_request got;
    int dir = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int file = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(dir, 0);
    ck_assert_int_ge(file, 0);
    int one[] = {dir}, two[] = {dir, dir}, notdir[] = {file};
    ck_assert_int_eq(cri_hook_check_request(buf, len, one, 1, &got), 0);
    ck_assert_int_eq(cri_hook_check_request(buf, len, one, 0, &got), -1);
    ck_assert_int_eq(cri_hook_check_request(buf, len, two, 2, &got), -1);
    ck_assert_int_eq(cri_hook_check_request(buf, len, notdir, 1, &got), -1);
    hook_request odd = {.stage = "teatime",
                        .stage_len = 7,
                        .config = "/c",
                        .config_len = 2,
                        .state = "{}",
                        .state_len = 2};
    len = hook_proto_encode_request(&odd, buf, sizeof buf);
    ck_assert_int_eq(cri_hook_check_request(buf, len, one, 1, &got), -1);
    close(dir);
    close(file);
}
END_TEST

START_TEST(config_identity)
{
    char path[] = "/tmp/pg-hook-cfg.XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "{}", 2), 2);
    cri_hook_config_id a, b, none1, none2;
    ck_assert_int_eq(cri_hook_config_identify(path, &a), 0);
    ck_assert_int_eq(cri_hook_config_identify(path, &b), 0);
    ck_assert_int_eq(cri_hook_config_same(&a, &b), 1);
    ck_assert_int_eq(cri_hook_config_identify(NULL, &none1), 0);
    ck_assert_int_eq(cri_hook_config_identify(NULL, &none2), 0);
    ck_assert_int_eq(cri_hook_config_same(&none1, &none2), 1);
    ck_assert_int_eq(cri_hook_config_same(&a, &none1), 0);
    /* Any write changes ctime: no longer the file the daemon parsed. */
    ck_assert_int_eq(fchmod(fd, 0640), 0);
    ck_assert_int_eq(cri_hook_config_identify(path, &b), 0);
    ck_assert_int_eq(cri_hook_config_same(&a, &b), 0);
    b = a;
    b.usable = 0;
    ck_assert_int_eq(cri_hook_config_same(&a, &b), 0);
    close(fd);
    unlink(path);
    ck_assert_int_eq(cri_hook_config_identify(path, &b), -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cri_hook_proto");
    TCase *tc = tcase_create("proto");
    tcase_add_test(tc, request_round_trip);
    tcase_add_test(tc, request_malformed);
    tcase_add_test(tc, request_bounds_on_encode);
    tcase_add_test(tc, reply_round_trip_and_malformed);
    tcase_add_test(tc, server_checks_fds_and_stage);
    tcase_add_test(tc, config_identity);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
