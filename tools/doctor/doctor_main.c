/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-doctor [--config FILE] [OPTIONS]: run by `pullgatectl doctor` (which
 * passes its --config). One line per check, ✔ or ✘ with the fix; --json for a
 * machine. Exit 0 when every check holds, 1 when one does not, 2 on a usage
 * error (pullgatectl(8), "doctor").
 */
#include "doctor.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "pullgatectl doctor"
#define DEFAULT_TIMEOUT_MS 3000
#define MAX_CHECKS 16

enum {
    OPT_CONFIG = 256,
    OPT_JSON,
    OPT_PROC_ROOT,
    OPT_CONTAINERD_CONFIG,
    OPT_CRIO_CONFIG,
    OPT_CRIO_CONFIG_DIR,
    OPT_CRIO_HOOKS_DIR,
    OPT_KUBELET_CONFIG,
    OPT_KUBELET_VERSION,
    OPT_HOOK_SOCKET,
    OPT_RUNTIME,
    OPT_TIMEOUT
};

static const struct option options[] = {
    {"config", required_argument, NULL, OPT_CONFIG},
    {"json", no_argument, NULL, OPT_JSON},
    {"proc-root", required_argument, NULL, OPT_PROC_ROOT},
    {"containerd-config", required_argument, NULL, OPT_CONTAINERD_CONFIG},
    {"crio-config", required_argument, NULL, OPT_CRIO_CONFIG},
    {"crio-config-dir", required_argument, NULL, OPT_CRIO_CONFIG_DIR},
    {"crio-hooks-dir", required_argument, NULL, OPT_CRIO_HOOKS_DIR},
    {"kubelet-config", required_argument, NULL, OPT_KUBELET_CONFIG},
    {"kubelet-version", required_argument, NULL, OPT_KUBELET_VERSION},
    {"hook-socket", required_argument, NULL, OPT_HOOK_SOCKET},
    {"runtime", required_argument, NULL, OPT_RUNTIME},
    {"timeout-ms", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

static void usage(FILE *out)
{
    fputs("Usage: pullgatectl [--config FILE] doctor [--json] [--runtime auto|containerd|cri-o]\n"
          "           [--containerd-config FILE] [--crio-config FILE] [--crio-config-dir DIR]\n"
          "           [--crio-hooks-dir DIR]... [--kubelet-config FILE] [--kubelet-version V]\n"
          "           [--hook-socket PATH] [--proc-root DIR] [--timeout-ms N]\n"
          "\nChecks this node's wiring, one line per check (a check mark or a cross with the\n"
          "fix): the configuration, the state directory, the HMAC key, the runtime and\n"
          "pullgate-cri answering CRI Version, pullgate-cri's hook socket deciding for this\n"
          "configuration, the kubelet's endpoints and its own KEP-2535 check, the hook in\n"
          "containerd's base_runtime_spec (with pod_annotations) or CRI-O's hooks.d, one\n"
          "configuration file on both sides, and CRI-O's namespaced auth. Exit 0 when all\n"
          "hold, 1 otherwise.\n"
          "The path options point it at another node's files (tests).\n",
          out);
}

static int __attribute__((format(printf, 1, 2))) usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pullgatectl: doctor: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'pullgatectl doctor --help'.\n", stderr);
    return 2;
}

static int parse(int argc, char **argv, pgd_options *o, const char **dirs, size_t *n_dirs)
{
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (c) {
        case OPT_CONFIG: o->config_path = optarg, o->config_explicit = 1; break;
        case OPT_JSON: o->json = 1; break;
        case OPT_PROC_ROOT: o->proc_root = optarg; break;
        case OPT_CONTAINERD_CONFIG: o->containerd_config = optarg; break;
        case OPT_CRIO_CONFIG: o->crio_config = optarg; break;
        case OPT_CRIO_CONFIG_DIR: o->crio_config_dir = optarg; break;
        case OPT_CRIO_HOOKS_DIR: dirs[(*n_dirs)++] = optarg; break;
        case OPT_KUBELET_CONFIG: o->kubelet_config = optarg; break;
        case OPT_KUBELET_VERSION: o->kubelet_version = optarg; break;
        case OPT_HOOK_SOCKET: o->hook_socket = optarg; break;
        case OPT_RUNTIME:
            if (strcmp(optarg, "auto") && strcmp(optarg, "containerd") && strcmp(optarg, "cri-o"))
                return usage_error("--runtime: auto, containerd or cri-o, not '%s'", optarg);
            o->runtime = optarg;
            break;
        case OPT_TIMEOUT: {
            char *end;
            long ms = strtol(optarg, &end, 10);
            if (*end || ms < 100 || ms > 60000)
                return usage_error("--timeout-ms: 100 to 60000, not '%s'", optarg);
            o->timeout_ms = (int)ms;
            break;
        }
        case 'h': usage(stdout); return -1;
        case ':': return usage_error("option '%s' requires an argument", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    return 0;
}

static void print_text(const pgd_result *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        printf("%s %s: %s", r[i].ok ? "\u2714" : "\u2718", r[i].name, r[i].detail);
        if (!r[i].ok && r[i].fix[0])
            printf(" \u2014 fix: %s", r[i].fix);
        putchar('\n');
    }
}

static int print_json(const pgd_result *r, size_t n, bool all_ok)
{
    json_t *checks = json_array();
    for (size_t i = 0; checks && i < n; i++)
        json_array_append_new(checks, json_pack("{s:s, s:b, s:s, s:s}", "name", r[i].name, "ok",
                                                r[i].ok, "detail", r[i].detail, "fix", r[i].fix));
    json_t *doc = json_pack("{s:b, s:o}", "ok", all_ok, "checks", checks);
    char *text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;
    json_decref(doc);
    if (!text)
        return -1;
    puts(text);
    free(text);
    return 0;
}

int main(int argc, char **argv)
{
    const char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
    size_t n_dirs = 0;
    pgd_options o = {.config_path = PG_DEFAULT_CONFIG_PATH,
                     .proc_root = "/proc",
                     .containerd_config = "/etc/containerd/config.toml",
                     .crio_config = "/etc/crio/crio.conf",
                     .crio_config_dir = "/etc/crio/crio.conf.d",
                     .runtime = "auto",
                     .timeout_ms = DEFAULT_TIMEOUT_MS};
    if (!dirs)
        return 3;
    int rc = parse(argc, argv, &o, dirs, &n_dirs);
    if (rc != 0) {
        free(dirs);
        return rc < 0 ? 0 : rc;
    }
    o.crio_hooks_dirs = n_dirs ? dirs : NULL;

    pgd_node node = {.opt = &o};
    pgd_result r[MAX_CHECKS];
    memset(r, 0, sizeof r);
    static const char *const names[] = {
        "config",      "state-dir", "record-dirs",    "hmac-key", "runtime",         "cri-proxy",
        "hook-socket", "kubelet",   "kubelet-policy", "hook",     "pod-annotations", "same-config",
        "crio-namespaced-auth"};
    size_t n = sizeof names / sizeof names[0];
    for (size_t i = 0; i < n; i++)
        r[i].name = names[i];
    pgd_check_config(&node, &r[0]);
    pgd_check_state_dir(&node, &r[1]);
    pgd_check_record_dirs(&node, &r[2]);
    pgd_check_hmac_key(&node, &r[3]);
    pgd_find_cri_process(&node);
    pgd_check_runtime(&node, &r[4]);
    pgd_check_cri_proxy(&node, &r[5]);
    pgd_check_hook_socket(&node, &r[6]);
    pgd_check_kubelet(&node, &r[7], &r[8]);
    pgd_check_hook_wiring(&node, &r[9], &r[10]);
    pgd_check_same_config(&node, &r[11]);
    pgd_check_crio_namespaced_auth(&node, &r[12]);

    bool all_ok = true;
    for (size_t i = 0; i < n; i++)
        all_ok = all_ok && r[i].ok;
    if (o.json)
        rc = print_json(r, n, all_ok) == 0 ? 0 : 3;
    else
        print_text(r, n);
    pg_config_free(node.cfg);
    free(dirs);
    if (fflush(stdout) != 0)
        return 3;
    return rc ? rc : all_ok ? 0 : 1;
}
