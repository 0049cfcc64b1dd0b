/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRI-O's namespaced auth (common/crio_auth.h, docs/interfaces.md §10):
 *  - the configuration read as CRI-O reads it: crio.conf, then every file below crio.conf.d in
 *    lexical order (depth first, as Go's filepath.Walk), the last setting of
 *    [crio.image] namespaced_auth_dir winning; "" turns it off;
 *    unset means CRI-O's default (on from 1.35, absent before); a file that cannot be read,
 *    trusted or parsed counts as on (fail closed);
 *  - the attribution: a pull without credentials for a pod namespace, when the runtime may
 *    hold the namespace's credentials, is recorded as the namespace marker (a service account of
 *    that namespace), never node-wide; without a namespace, or when the runtime holds none, it
 *    stays node-accessible.
 */
#include "cri_subset.pb-c.h"
#include "attribution.h"
#include "pull.h"
#include "crio_auth.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(chmod(path, mode), 0);
}

typedef struct crio_dir {
    char root[64], config[128], dropins[128];
} crio_dir;

static void crio_dir_make(crio_dir *d)
{
    snprintf(d->root, sizeof d->root, "/tmp/pg-crio-auth.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(d->root));
    snprintf(d->config, sizeof d->config, "%s/crio.conf", d->root);
    snprintf(d->dropins, sizeof d->dropins, "%s/crio.conf.d", d->root);
    ck_assert_int_eq(mkdir(d->dropins, 0755), 0);
}

static void crio_dir_remove(const crio_dir *d)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->root);
    ck_assert_int_eq(system(cmd), 0);
}

static void dropin(const crio_dir *d, const char *name, const char *text, mode_t mode)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", d->dropins, name);
    write_file(path, text, mode);
}

static bool namespaced(const crio_dir *d, const char *version)
{
    cri_crio_auth a;
    cri_crio_auth_read(d->config, d->dropins, version, &a);
    ck_assert_msg(a.why[0], "no reason given");
    return a.namespaced;
}

START_TEST(crio_configuration_as_crio_reads_it)
{
    crio_dir d;
    crio_dir_make(&d);
    /* Nothing set: CRI-O's default, on from 1.35; before it the option did not exist. */
    ck_assert(namespaced(&d, "1.35.0"));
    ck_assert(namespaced(&d, "v1.36.1-dev"));
    ck_assert(!namespaced(&d, "1.34.2"));
    ck_assert(namespaced(&d, "")); /* unknown version: fail closed */
    ck_assert(namespaced(&d, NULL));
    ck_assert(namespaced(&d, "garbage"));
    /* Turned off in crio.conf, on again by a drop-in, off by a later one (name order). */
    write_file(d.config, "[crio.image]\nnamespaced_auth_dir = \"\"\n", 0644);
    ck_assert(!namespaced(&d, "1.35.0"));
    dropin(&d, "10-on.conf", "[crio.image]\nnamespaced_auth_dir = \"/etc/crio/auth\"\n", 0644);
    ck_assert(namespaced(&d, "1.35.0"));
    ck_assert(namespaced(&d, "1.34.0")); /* set: whatever the version says */
    dropin(&d, "20-off.conf", "[crio]\n[crio.image]\nnamespaced_auth_dir = \"\"\n", 0644);
    ck_assert(!namespaced(&d, "1.35.0"));
    dropin(&d, "15-other.conf", "[crio.runtime]\nhooks_dir = [\"/x\"]\n", 0644);
    ck_assert(!namespaced(&d, "1.35.0"));
    /* CRI-O walks every file below the directory, whatever its name, subdirectories too. */
    dropin(&d, "30-any-name.toml", "[crio.image]\nnamespaced_auth_dir = \"/x\"\n", 0644);
    ck_assert(namespaced(&d, "1.35.0"));
    char sub[256];
    snprintf(sub, sizeof sub, "%s/35-sub", d.dropins);
    ck_assert_int_eq(mkdir(sub, 0755), 0);
    dropin(&d, "35-sub/x", "[crio.image]\nnamespaced_auth_dir = \"\"\n", 0644);
    ck_assert(!namespaced(&d, "1.35.0")); /* 35-sub/x comes after 30-any-name.toml */
    /* Anything that cannot be read, trusted or understood: on (fail closed). */
    dropin(&d, "40-writable.conf", "[crio.image]\nnamespaced_auth_dir = \"\"\n", 0666);
    ck_assert(namespaced(&d, "1.35.0"));
    dropin(&d, "40-writable.conf", "[crio.image\nnamespaced_auth_dir = \"\"\n", 0644);
    ck_assert(namespaced(&d, "1.35.0"));
    dropin(&d, "40-writable.conf", "[crio.image]\nnamespaced_auth_dir = 0\n", 0644);
    ck_assert(namespaced(&d, "1.35.0"));
    dropin(&d, "40-writable.conf", "crio = 1\n", 0644);
    ck_assert(namespaced(&d, "1.35.0"));
    char link[256];
    snprintf(link, sizeof link, "%s/40-writable.conf", d.dropins);
    ck_assert_int_eq(unlink(link), 0);
    ck_assert(!namespaced(&d, "1.35.0"));
    ck_assert_int_eq(symlink("/dev/null", link), 0);
    ck_assert(namespaced(&d, "1.35.0"));
    crio_dir_remove(&d);
}
END_TEST

START_TEST(versions)
{
    ck_assert(cri_version_at_least("1.35.0", 1, 35));
    ck_assert(cri_version_at_least("v2.0", 1, 35));
    ck_assert(!cri_version_at_least("1.34.9", 1, 35));
    ck_assert(!cri_version_at_least("1", 1, 35));
    ck_assert(!cri_version_at_least("", 0, 0));
    ck_assert(!cri_version_at_least("-1.40", 0, 0));
}
END_TEST

static ProtobufCBinaryData bin(const char *s)
{
    ProtobufCBinaryData b = {s ? strlen(s) : 0, (uint8_t *)s};
    return b;
}

/* A PullImage without credentials, for a pod of ns (NULL: no sandbox_config). */
static void attribute(const char *ns, bool runtime_auth, cri_pull_creds *c)
{
    Runtime__V1__ImageSpec spec = RUNTIME__V1__IMAGE_SPEC__INIT;
    Runtime__V1__PodSandboxMetadata md = RUNTIME__V1__POD_SANDBOX_METADATA__INIT;
    Runtime__V1__PodSandboxConfig sc = RUNTIME__V1__POD_SANDBOX_CONFIG__INIT;
    Runtime__V1__PullImageRequest req = RUNTIME__V1__PULL_IMAGE_REQUEST__INIT;
    spec.image = bin("registry.example.com/team-a/app:1.0");
    req.image = &spec;
    if (ns) {
        md.name = bin("pod-1");
        md.uid = bin("pod-uid-1");
        md.namespace_ = bin(ns);
        sc.metadata = &md;
        req.sandbox_config = &sc;
    }
    size_t len = runtime__v1__pull_image_request__get_packed_size(&req);
    uint8_t *buf = malloc(len + 1);
    ck_assert_ptr_nonnull(buf);
    runtime__v1__pull_image_request__pack(&req, buf);
    cri_pull_request r;
    const char *why = NULL;
    ck_assert_int_eq(cri_pull_request_decode(buf, len, "pullgate.dev/credentials", &r, &why),
                     CRI_DECODED);
    free(buf);
    cri_attribution a = {.runtime_namespace_auth = runtime_auth,
                         .runtime_auth_why = "CRI-O: namespaced_auth_dir = \"/etc/crio/auth\""};
    pg_error err = {0};
    ck_assert_int_eq(cri_pull_credentials(&r, &a, c, &err), PG_OK);
    cri_pull_request_clear(&r);
}

START_TEST(an_uncredentialed_pull_is_bound_to_the_namespace_the_runtime_may_hold)
{
    cri_pull_creds c;
    attribute("team-a", true, &c);
    ck_assert_int_eq(c.source, CRI_CREDS_RUNTIME_NAMESPACE);
    ck_assert_int_eq(c.creds.node_pods_accessible, 0);
    ck_assert_uint_eq(c.creds.n_secrets, 0);
    ck_assert_uint_eq(c.creds.n_service_accounts, 1);
    ck_assert_str_eq(c.creds.service_accounts[0].namespace_, "team-a");
    ck_assert_str_eq(c.creds.service_accounts[0].name, PG_NAMESPACE_MARKER_NAME);
    ck_assert_str_eq(c.creds.service_accounts[0].uid, "");
    ck_assert_ptr_nonnull(strstr(c.detail, "namespaced_auth_dir"));
    cri_pull_creds_clear(&c);

    attribute("team-a", false, &c); /* a runtime without namespace credentials */
    ck_assert_int_eq(c.source, CRI_CREDS_NONE);
    ck_assert_int_eq(c.creds.node_pods_accessible, 1);
    cri_pull_creds_clear(&c);

    attribute(NULL, true, &c); /* no namespace: CRI-O consults no namespace's file */
    ck_assert_int_eq(c.source, CRI_CREDS_NONE);
    ck_assert_int_eq(c.creds.node_pods_accessible, 1);
    cri_pull_creds_clear(&c);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cri_runtime_auth");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, crio_configuration_as_crio_reads_it);
    tcase_add_test(tc, versions);
    tcase_add_test(tc, an_uncredentialed_pull_is_bound_to_the_namespace_the_runtime_may_hold);
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
