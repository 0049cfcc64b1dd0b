/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pullgate-doctor [--config FILE] [OPTIONS]: run by `pullgatectl doctor` (which
 * passes its --config). One line per check, grouped, ✔ / ‼ / ✘ with the fix, the
 * command that repairs it and where the documentation explains it; pullgate-cri's
 * status; a summary. --json for a machine (docs/doctor.schema.json). Exit 0 when
 * no check fails (warnings allowed), 1 when one does, 2 on a usage error
 * (pullgatectl(8), "doctor").
 */
#include "cleanup.h"
#include "doctor.h"
#include "options.h"

#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "pullgatectl doctor"
#define DEFAULT_TIMEOUT_MS 3000
#define MAX_CHECKS 16

static void usage(FILE *out)
{
    fputs("Usage: pullgatectl [--config FILE] doctor [--json] [--runtime auto|containerd|cri-o]\n"
          "           [--containerd-config FILE] [--crio-config FILE] [--crio-config-dir DIR]\n"
          "           [--crio-hooks-dir DIR]... [--kubelet-config FILE] [--kubelet-version V]\n"
          "           [--kubelet-flags-file FILE] [--hook-socket PATH] [--systemd-dir DIR]\n"
          "           [--hook-path PATH] [--proc-root DIR] [--timeout-ms N]\n"
          "\nChecks this node's wiring, one line per check in six groups (configuration,\n"
          "store, runtime wiring, pullgate-cri, kubelet, key): a check mark, a warning (a\n"
          "supported mode, or a part not there yet) or a cross, with the fix, a command\n"
          "that repairs it where one exists, and its section of lifecycle.md. Then\n"
          "pullgate-cri's status from its metrics, and a summary. The checks: the\n"
          "configuration, the state directory, the read-only record directories, the HMAC\n"
          "key, the runtime and pullgate-cri answering CRI Version, pullgate-cri's hook\n"
          "socket deciding for this configuration, the kubelet's image service endpoint and\n"
          "its own KEP-2535 check, the hook in containerd's base_runtime_spec (with\n"
          "pod_annotations) or CRI-O's hooks.d, one configuration file on both sides, and\n"
          "CRI-O's namespaced auth.\n"
          "Only the node's own files count: root's, not writable by others, no symlink; a\n"
          "process's relative paths are resolved in its own working directory.\n"
          "Exit 0 when no check fails (warnings allowed), 1 otherwise.\n"
          "--json: the same for a machine (schema: doctor.schema.json beside lifecycle.md).\n"
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
    while ((c = getopt_long(argc, argv, ":h", pgd_doctor_options, NULL)) != -1) {
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
        case OPT_SYSTEMD_DIR: o->systemd_dir = optarg; break;
        case OPT_KUBELET_FLAGS: o->kubelet_flags = optarg; break;
        case OPT_HOOK_PATH: o->hook_path = optarg; break;
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
        case OPT_VERSION: printf("pullgate-doctor %s\n", PG_VERSION_STRING); return -1;
        case ':': return usage_error("option '%s' requires an argument", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    return 0;
}

/* The groups, in the order they are shown. */
static const char *const groups[] = {"configuration", "store",   "runtime wiring",
                                     "pullgate-cri",  "kubelet", "key"};

static const char *const level_marks[] = {"\u2714", "\u203c", "\u2718"};
static const char *const level_names[] = {"ok", "warning", "failure"};

/* Where a check is explained: its section of lifecycle.md where the packages put the docs
 * (the same anchor in the source tree's docs/lifecycle.md). */
static void doc_anchor(const pgd_result *r, char *out, size_t n)
{
    snprintf(out, n, "%s/lifecycle.md#doctor-%s", PG_DOC_DIR, r->name);
}

static void format_duration(double seconds, char *out, size_t n)
{
    long s = seconds > 0 && seconds < 1e10 ? (long)seconds : 0;
    if (s >= 86400)
        snprintf(out, n, "%ldd %ldh", s / 86400, s % 86400 / 3600);
    else if (s >= 3600)
        snprintf(out, n, "%ldh %ldm", s / 3600, s % 3600 / 60);
    else if (s >= 60)
        snprintf(out, n, "%ldm %lds", s / 60, s % 60);
    else
        snprintf(out, n, "%lds", s);
}

static void print_status(const pgd_status *st)
{
    if (!st->available) {
        printf("status (pullgate-cri)\n  not available: %s\n", st->why);
        return;
    }
    printf("status (pullgate-cri, %s)\n", st->source);
    double now = (double)time(NULL);
    char up[64] = "unknown", ago[64];
    if (!isnan(st->start_time))
        format_duration(now - st->start_time, up, sizeof up);
    printf("  version %s, up %s\n", st->version[0] ? st->version : "unknown", up);
    if (!isnan(st->pulled) && !isnan(st->intents))
        printf("  on disk: %.0f pulled records, %.0f pull intents\n", st->pulled, st->intents);
    if (!isnan(st->denials_hour))
        printf("  container starts denied in the last hour: %.0f\n", st->denials_hour);
    if (isnan(st->last_prune))
        printf("  last prune: not reported by this version\n");
    else if (st->last_prune <= 0)
        printf("  last prune: none since it started (criPruneInterval; pullgate-prune.timer runs "
               "its own)\n");
    else {
        format_duration(now - st->last_prune, ago, sizeof ago);
        printf("  last prune: %s ago\n", ago);
    }
}

static void count_levels(const pgd_result *r, size_t n, size_t counts[3])
{
    counts[0] = counts[1] = counts[2] = 0;
    for (size_t i = 0; i < n; i++)
        counts[r[i].level]++;
}

static void print_text(const pgd_result *r, size_t n, const pgd_status *st)
{
    char doc[512];
    for (size_t g = 0; g < sizeof groups / sizeof groups[0]; g++) {
        printf("%s\n", groups[g]);
        for (size_t i = 0; i < n; i++) {
            if (strcmp(r[i].group, groups[g]) != 0)
                continue;
            printf("  %s %s: %s\n", level_marks[r[i].level], r[i].name, r[i].detail);
            if (r[i].level == PGD_OK)
                continue;
            if (r[i].fix[0])
                printf("      fix: %s\n", r[i].fix);
            if (r[i].command[0])
                printf("      run: %s\n", r[i].command);
            doc_anchor(&r[i], doc, sizeof doc);
            printf("      see: %s\n", doc);
        }
    }
    print_status(st);
    size_t c[3];
    count_levels(r, n, c);
    printf("%zu checks: %zu %s, %zu %s, %zu %s; exit %d\n", n, c[PGD_OK], level_marks[PGD_OK],
           c[PGD_WARN], level_marks[PGD_WARN], c[PGD_FAIL], level_marks[PGD_FAIL],
           c[PGD_FAIL] ? 1 : 0);
}

/* A number, or null when the metric was not exported. */
static json_t *number_or_null(double v) { return isnan(v) ? json_null() : json_real(v); }

static json_t *status_json(const pgd_status *st)
{
    if (!st->available)
        return json_pack("{s:b, s:s, s:s}", "available", 0, "source", st->source, "reason",
                         st->why);
    double now = (double)time(NULL);
    return json_pack("{s:b, s:s, s:s?, s:o, s:o, s:o, s:o, s:o, s:o}", "available", 1, "source",
                     st->source, "version", st->version[0] ? st->version : NULL, "startTime",
                     number_or_null(st->start_time), "uptimeSeconds",
                     number_or_null(isnan(st->start_time) ? NAN : now - st->start_time),
                     "pulledRecords", number_or_null(st->pulled), "pullIntents",
                     number_or_null(st->intents), "denialsLastHour",
                     number_or_null(st->denials_hour), "lastPruneTime",
                     number_or_null(isnan(st->last_prune) || st->last_prune <= 0
                                        ? NAN
                                        : st->last_prune));
}

static int print_json(const pgd_result *r, size_t n, const pgd_status *st)
{
    size_t c[3];
    count_levels(r, n, c);
    json_t *checks = json_array();
    char doc[512];
    for (size_t i = 0; checks && i < n; i++) {
        doc_anchor(&r[i], doc, sizeof doc);
        json_array_append_new(
            checks, json_pack("{s:s, s:s, s:s, s:b, s:s, s:s, s:s, s:s}", "name", r[i].name,
                              "group", r[i].group, "level", level_names[r[i].level], "ok",
                              r[i].level != PGD_FAIL, "detail", r[i].detail, "fix", r[i].fix,
                              "command", r[i].command, "doc", doc));
    }
    json_t *doc_json = json_pack(
        "{s:i, s:b, s:i, s:{s:i, s:i, s:i, s:i}, s:o, s:o}", "schemaVersion",
        PGD_JSON_SCHEMA_VERSION, "ok", c[PGD_FAIL] == 0, "exitStatus", c[PGD_FAIL] ? 1 : 0,
        "summary", "checks", (int)n, "ok", (int)c[PGD_OK], "warnings", (int)c[PGD_WARN],
        "failures", (int)c[PGD_FAIL], "checks", checks, "status", status_json(st));
    pg_autofree char *text = doc_json ? json_dumps(doc_json, JSON_INDENT(2)) : NULL;
    json_decref(doc_json);
    if (!text)
        return -1;
    puts(text);
    return 0;
}

/* Every check, in the order they run (later ones use what earlier ones learnt). */
static size_t run_checks(pgd_node *node, pgd_result *r)
{
    static const struct {
        const char *name, *group;
    } checks[] = {{"config", "configuration"},
                  {"state-dir", "store"},
                  {"record-dirs", "store"},
                  {"hmac-key", "key"},
                  {"runtime", "runtime wiring"},
                  {"cri-proxy", "pullgate-cri"},
                  {"hook-socket", "pullgate-cri"},
                  {"kubelet", "kubelet"},
                  {"kubelet-policy", "kubelet"},
                  {"hook", "runtime wiring"},
                  {"pod-annotations", "runtime wiring"},
                  {"same-config", "runtime wiring"},
                  {"crio-namespaced-auth", "runtime wiring"}};
    size_t n = sizeof checks / sizeof checks[0];
    for (size_t i = 0; i < n; i++)
        r[i].name = checks[i].name, r[i].group = checks[i].group;
    pgd_check_config(node, &r[0]);
    pgd_check_state_dir(node, &r[1]);
    pgd_check_record_dirs(node, &r[2]);
    pgd_check_hmac_key(node, &r[3]);
    pgd_find_cri_process(node);
    pgd_check_runtime(node, &r[4]);
    pgd_check_cri_proxy(node, &r[5]);
    pgd_check_hook_socket(node, &r[6]);
    pgd_check_kubelet(node, &r[7], &r[8]);
    pgd_check_hook_wiring(node, &r[9], &r[10]);
    pgd_check_same_config(node, &r[11]);
    pgd_check_crio_namespaced_auth(node, &r[12]);
    return n;
}

int main(int argc, char **argv)
{
    pg_autofree const char **dirs = calloc((size_t)argc + 1, sizeof *dirs);
    size_t n_dirs = 0;
    pgd_options o = {.config_path = PG_DEFAULT_CONFIG_PATH,
                     .proc_root = "/proc",
                     .crio_config = "/etc/crio/crio.conf",
                     .crio_config_dir = PGD_CRIO_CONFIG_DIR,
                     .runtime = "auto",
                     .systemd_dir = "/etc/systemd/system",
                     .kubelet_flags = "/var/lib/kubelet/kubeadm-flags.env",
                     .hook_path = PG_HOOK_INSTALL_DIR "/pullgate-hook",
                     .timeout_ms = DEFAULT_TIMEOUT_MS};
    if (!dirs)
        return 3;
    int rc = parse(argc, argv, &o, dirs, &n_dirs);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    o.crio_hooks_dirs = n_dirs ? dirs : NULL;

    pgd_node node = {.opt = &o};
    pgd_result r[MAX_CHECKS];
    memset(r, 0, sizeof r);
    size_t n = run_checks(&node, r);
    pgd_status st;
    pgd_read_status(&node, &st);

    size_t c[3];
    count_levels(r, n, c);
    if (o.json)
        rc = print_json(r, n, &st) == 0 ? 0 : 3;
    else
        print_text(r, n, &st);
    pg_config_free(node.cfg);
    pg_strv_free(node.cri_argv);
    if (fflush(stdout) != 0)
        return 3;
    return rc ? rc : c[PGD_FAIL] ? 1 : 0;
}
