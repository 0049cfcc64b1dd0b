/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The annotation builder (plugin/credentials/annotation_build.c) shared by pullgatectl annotate and
 * pullgate-webhook: image entries keyed by normalised name, in insertion order, deduplicated;
 * keyring-matched secret entries per image with hashes from the shared vectors; service
 * accounts on every image; credentials of another namespace refused; signed entries verify
 * with the verifier's function, in the pod's namespace only; the value parses back through
 * the hook's own annotation parser.
 */
#include "annotation_build.h"
#include "internal.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* From test/data/credential-hash-vectors.json: "plain" (alice / s3cret). */
#define PLAIN_HASH "84e602bef66066d26999b4f32a2afb963a80f8384d3cdf9145038d3c3da62d2b"
/* {"auths":{"registry.example.com":{"auth":base64("alice:s3cret")},
 *           "other.example.com":{"auth":base64("alice:s3cret")}}} */
#define DOCKERCONFIG                                                                           \
    "{\"auths\":{\"registry.example.com\":{\"auth\":\"YWxpY2U6czNjcmV0\"},"                    \
    "\"other.example.com\":{\"auth\":\"YWxpY2U6czNjcmV0\"}}}"

static pg_annotation *new_team_a(void)
{
    pg_error err = {0};
    pg_annotation *a = pg_annotation_new("team-a", &err);
    ck_assert_ptr_nonnull(a);
    return a;
}

static json_t *dump_json(const pg_annotation *a)
{
    pg_error err = {0};
    char *text = pg_annotation_dump(a, &err);
    ck_assert_ptr_nonnull(text);
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    ck_assert_ptr_nonnull(j);
    free(text);
    return j;
}

START_TEST(images_normalised_ordered_and_deduplicated)
{
    pg_annotation *a = new_team_a();
    pg_error err = {0};
    const char *name = NULL;
    ck_assert_int_eq(pg_annotation_add_image(a, "registry.example.com/team-a/app:1.0", &name, &err),
                     PG_OK);
    ck_assert_str_eq(name, "registry.example.com/team-a/app");
    ck_assert_int_eq(pg_annotation_add_image(a, "nginx:1.25", &name, &err), PG_OK);
    ck_assert_str_eq(name, "docker.io/library/nginx");
    ck_assert_int_eq(pg_annotation_add_image(a, "docker.io/library/nginx@sha256:"
                                                "0000000000000000000000000000000000000000000000"
                                                "000000000000000000",
                                             NULL, &err),
                     PG_OK);
    ck_assert_uint_eq(pg_annotation_count(a), 2);
    ck_assert_int_ne(pg_annotation_add_image(a, "Not//Valid", NULL, &err), PG_OK);
    ck_assert_uint_eq(pg_annotation_count(a), 2);
    char *text = pg_annotation_dump(a, &err);
    ck_assert_str_eq(text, "{\"registry.example.com/team-a/app\":{\"kubernetesSecrets\":[],"
                           "\"kubernetesServiceAccounts\":[]},\"docker.io/library/nginx\":{"
                           "\"kubernetesSecrets\":[],\"kubernetesServiceAccounts\":[]}}");
    free(text);
    pg_annotation_free(a);
}
END_TEST

START_TEST(dockerconfig_entries_per_image)
{
    pg_annotation *a = new_team_a();
    pg_error err = {0};
    ck_assert_int_eq(pg_annotation_add_image(a, "registry.example.com/team-a/app:1", NULL, &err),
                     PG_OK);
    ck_assert_int_eq(pg_annotation_add_image(a, "quay.io/x/y", NULL, &err), PG_OK);
    ck_assert_int_eq(pg_annotation_add_dockerconfig(a, "team-a", "regcred", "uid-1", DOCKERCONFIG,
                                                    strlen(DOCKERCONFIG), &err),
                     PG_OK);
    ck_assert_int_eq(pg_annotation_add_service_account(a, NULL, "team-a", "default", "uid-sa",
                                                       &err),
                     PG_OK);
    json_t *j = dump_json(a);
    json_t *app = json_object_get(j, "registry.example.com/team-a/app");
    json_t *secrets = json_object_get(app, "kubernetesSecrets");
    ck_assert_uint_eq(json_array_size(secrets), 1);
    json_t *s = json_array_get(secrets, 0);
    ck_assert_str_eq(json_string_value(json_object_get(s, "credentialHash")), PLAIN_HASH);
    ck_assert_str_eq(json_string_value(json_object_get(s, "uid")), "uid-1");
    /* No entry applies to quay.io: no secret, but the service account. */
    json_t *quay = json_object_get(j, "quay.io/x/y");
    ck_assert_uint_eq(json_array_size(json_object_get(quay, "kubernetesSecrets")), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(quay, "kubernetesServiceAccounts")), 1);
    json_decref(j);
    /* Malformed secret content is an error, not an empty result. */
    ck_assert_int_ne(pg_annotation_add_dockerconfig(a, "team-a", "bad", "u", "{x", 2, &err), PG_OK);
    pg_annotation_free(a);
}
END_TEST

START_TEST(foreign_namespace_refused)
{
    pg_annotation *a = new_team_a();
    pg_error err = {0};
    ck_assert_int_eq(pg_annotation_add_image(a, "nginx", NULL, &err), PG_OK);
    ck_assert_int_eq(
        pg_annotation_add_secret_hashes(a, "nginx", "team-b", "x", "u", PLAIN_HASH, NULL, &err),
        PG_ERR_INVALID);
    ck_assert_int_eq(pg_annotation_add_service_account(a, NULL, "team-b", "d", "u", &err),
                     PG_ERR_INVALID);
    ck_assert_int_eq(pg_annotation_add_dockerconfig(a, "team-b", "r", "u", DOCKERCONFIG,
                                                    strlen(DOCKERCONFIG), &err),
                     PG_ERR_INVALID);
    ck_assert_ptr_null(pg_annotation_new("", &err));
    pg_annotation_free(a);
}
END_TEST

START_TEST(signed_entries_verify_in_their_namespace_only)
{
    unsigned char bytes[32];
    for (int i = 0; i < 32; i++)
        bytes[i] = (unsigned char)(i * 7);
    pg_mac_key *key = NULL;
    pg_error err = {0};
    ck_assert_int_eq(pg_mac_key_from_bytes(bytes, sizeof bytes, &key, &err), PG_OK);
    pg_annotation *a = new_team_a();
    ck_assert_int_eq(pg_annotation_add_secret_hashes(a, "registry.example.com/team-a/app:1",
                                                     "team-a", "regcred", "uid-1", PLAIN_HASH, NULL,
                                                     &err),
                     PG_OK);
    ck_assert_int_eq(pg_annotation_sign(a, key, &err), PG_OK);
    ck_assert_int_eq(pg_annotation_sign(a, key, &err), PG_OK); /* re-signing replaces the MAC */
    json_t *j = dump_json(a);
    json_t *entry = json_object_get(j, "registry.example.com/team-a/app");
    ck_assert_int_eq(pg_annotation_mac_verify_entry(key, "team-a", "registry.example.com/team-a/app",
                                                    entry, &err),
                     PG_OK);
    ck_assert_int_ne(pg_annotation_mac_verify_entry(key, "team-b", "registry.example.com/team-a/app",
                                                    entry, &err),
                     PG_OK);
    /* The hook's parser accepts the value and presents the secret in team-a. */
    char *text = pg_annotation_dump(a, &err);
    pg_presented *p = NULL;
    ck_assert_int_eq(pg_presented_parse_keyed(text, strlen(text), "team-a", key, &p, &err), PG_OK);
    ck_assert_uint_eq(pg_presented_rejected(p, "registry.example.com/team-a/app"), 0);
    pg_presented_free(p);
    ck_assert_int_eq(pg_presented_parse_keyed(text, strlen(text), "team-b", key, &p, &err), PG_OK);
    ck_assert_uint_eq(pg_presented_rejected(p, "registry.example.com/team-a/app"), 1);
    pg_presented_free(p);
    free(text);
    json_decref(j);
    pg_annotation_free(a);
    pg_mac_key_free(key);
}
END_TEST

static Suite *annotation_build_suite(void)
{
    Suite *s = suite_create("annotation_build");
    TCase *tc = tcase_create("build");
    tcase_add_test(tc, images_normalised_ordered_and_deduplicated);
    tcase_add_test(tc, dockerconfig_entries_per_image);
    tcase_add_test(tc, foreign_namespace_refused);
    tcase_add_test(tc, signed_entries_verify_in_their_namespace_only);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(annotation_build_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
