/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The doctor's parsers of node files it does not trust: the kubelet's YAML
 * configuration (libyaml -> jansson, doctor_yaml.c) and containerd's / CRI-O's
 * TOML (toml++ -> JSON text -> jansson, common/toml.cc), flag lookup in a
 * NUL-separated command line, pullgate-cri's /metrics text (the status
 * section's samples), and pullgate-wire's edit of containerd's TOML
 * (wire_containerd.c: key places from common/toml.cc, text edits, re-parse), both
 * ways; an edit it accepts must parse and a second wire must change nothing. The
 * first byte picks one. Seeds: test/fuzz/corpus/doctor_parse.
 */
#include "doctor.h"
#include "wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void flags(const char *text, size_t len)
{
    char *argv[64] = {0};
    size_t n = 0;
    for (size_t i = 0; i < len && n < 63;) {
        size_t l = strnlen(text + i, len - i);
        char *arg = malloc(l + 1); /* the input is not NUL-terminated: no str* on it */
        if (!arg)
            break;
        memcpy(arg, text + i, l);
        arg[l] = '\0';
        argv[n++] = arg;
        i += l + 1;
    }
    static const char *const names[] = {"config", "container-runtime-endpoint", "feature-gates",
                                        ""};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        (void)pgd_flag(argv, names[k]);
    (void)pgd_same_endpoint(argv[0], argv[1]);
    for (size_t i = 0; i < n; i++)
        free(argv[i]);
}

/* wire (then wire again: no change) or unwire; a crash, a leak or a second change is a bug. */
static void wire_edit(const char *text, size_t len, int remove)
{
    pgw_cd_params p = {.remove = remove,
                       .annotation = "pullgate.dev/credentials",
                       .gen_spec = "/etc/containerd/pullgate-base-runtime-spec.json"};
    pgw_cd_result r, again;
    pg_error err = {0};
    if (pgw_containerd_edit(text, len, &p, &r, &err) != PG_OK)
        return;
    if (!remove && pgw_containerd_edit(r.text, r.len, &p, &again, &err) == PG_OK) {
        if (again.len != r.len || memcmp(again.text, r.text, r.len) != 0)
            abort(); /* wire is not idempotent on this input */
        free(again.text);
    }
    free(r.text);
}

/* The samples the status section reads, with and without a label to copy out. */
static void metrics(const char *text, size_t len)
{
    char version[64];
    double v;
    if (pgd_prom_sample(text, len, "pullgate_build_info", "version", version, sizeof version,
                        &v) == 0 &&
        strlen(version) >= sizeof version)
        abort();
    static const char *const names[] = {"pullgate_cri_start_timestamp_seconds",
                                        "pullgate_cri_ondisk_pulledrecords", "x"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        (void)pgd_prom_sample(text, len, names[k], NULL, NULL, 0, &v);
    (void)pgd_prom_sample(text, len, "pullgate_build_info", "version", version, 1, &v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (64u << 10))
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    pg_error err = {0};
    json_t *j = NULL;
    switch (data[0] % 6) {
    case 0: j = pgd_yaml_to_json(text, len, &err); break;
    case 1: j = pgd_toml_to_json(text, len, &err); break;
    case 3: wire_edit(text, len, 0); break;
    case 4: wire_edit(text, len, 1); break;
    case 5: metrics(text, len); break;
    default: flags(text, len); break;
    }
    json_decref(j);
    return 0;
}
