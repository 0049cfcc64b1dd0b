/* SPDX-License-Identifier: Apache-2.0 */
/* pullgate-doctor: the node's own pullgate files (configuration, record directories, key). */
#include "annotation_mac.h"
#include "doctor.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

void pgd_check_config(pgd_node *n, pgd_result *r)
{
    const pgd_options *o = n->opt;
    pg_error err = {0};
    n->cfg = pg_config_new(&err);
    if (!n->cfg) {
        pgd_fail(r, "", "%s", err.message);
        return;
    }
    struct stat st;
    if (!o->config_explicit && lstat(o->config_path, &st) != 0 && errno == ENOENT) {
        pgd_pass(r, "%s does not exist: the built-in defaults apply", o->config_path);
        return;
    }
    if (pg_config_load_file(n->cfg, o->config_path, &err) != PG_OK) {
        pg_config_free(n->cfg);
        n->cfg = NULL;
        pgd_fail(r,
                 "fix the file (pullgatectl --config FILE check-config names the key); "
                 "until then the hook denies every Kubernetes container",
                 "%s", err.message);
        return;
    }
    const char *policy = pg_config_policy(n->cfg) == PG_POLICY_NEVER_VERIFY    ? "NeverVerify"
                         : pg_config_policy(n->cfg) == PG_POLICY_ALWAYS_VERIFY ? "AlwaysVerify"
                         : pg_config_policy(n->cfg) == PG_POLICY_NEVER_VERIFY_ALLOWLISTED
                             ? "NeverVerifyAllowlistedImages"
                             : "NeverVerifyPreloadedImages";
    /* Audit is a supported mode (a first rollout), but nothing is enforced: say so. */
    if (pg_config_mode(n->cfg) == PG_MODE_AUDIT)
        pgd_warn(r,
                 "when the audit log shows only the denials you expect, set \"mode\": "
                 "\"enforce\" and restart pullgate-cri",
                 "%s is valid (policy %s), mode audit: denials are logged, nothing is blocked",
                 o->config_path, policy);
    else
        pgd_pass(r, "%s is valid (policy %s, mode enforce)", o->config_path, policy);
}

#define CONFIG_FIRST "fix pullgate's configuration first (see config)"

/* The repair of a directory the records live in: root's, 0700, entries not writable by others. */
static void dir_command(pgd_result *r, const char *dir, bool children)
{
    char q[4200];
    if (!pgd_sh_word(dir, q, sizeof q))
        return;
    if (children)
        pgd_command(r, "chown -R root:root %s && chmod -R go-rwx %s", q, q);
    else
        pgd_command(r, "mkdir -p %s && chown root:root %s && chmod 0700 %s", q, q, q);
}

/* Every entry directly below dir must be root's and not group/other-writable. */
static int children_safe(const char *dir, pg_error *why)
{
    DIR *d = opendir(dir);
    if (!d)
        return pg_fail_errno(why, errno, "%s", dir);
    int rc = PG_OK;
    struct dirent *e;
    while (rc == PG_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        rc = pgd_root_owned_safe(path, why);
    }
    closedir(d);
    return rc;
}

void pgd_check_state_dir(pgd_node *n, pgd_result *r)
{
    if (!n->cfg) {
        pgd_fail(r, CONFIG_FIRST, "no usable configuration names it");
        return;
    }
    const char *dir = pg_config_state_dir(n->cfg);
    const char *fix = "make it root's, mode 0700 (the records decide who may run what: only root "
                      "may write them, and which pods pulled what is nobody else's business)";
    struct stat st;
    pg_error why = {0};
    if (lstat(dir, &st) != 0) {
        pgd_fail(r, fix, "%s: %s (pullgate-cri cannot record pulls)", dir, strerror(errno));
        dir_command(r, dir, false);
    } else if (!S_ISDIR(st.st_mode)) {
        pgd_fail(r, "move it away and create the directory", "%s: stateDir is not a directory",
                 dir);
    } else if (pgd_root_owned_safe(dir, &why) != PG_OK) {
        pgd_fail(r, fix, "%s", why.message);
        dir_command(r, dir, false);
    } else if (st.st_mode & 0077) {
        pgd_fail(r, fix, "%s has mode %04o: others may read which pods pulled what", dir,
                 (unsigned)(st.st_mode & 07777));
        dir_command(r, dir, false);
    } else if (children_safe(dir, &why) != PG_OK) {
        pgd_fail(r, "make every entry root's and writable by root only",
                 "%s (decisions that need it deny)", why.message);
        dir_command(r, dir, true);
    } else {
        pgd_pass(r, "%s: root, mode %04o, its entries root's and not writable by others", dir,
                 (unsigned)(st.st_mode & 07777));
    }
}

void pgd_check_record_dirs(pgd_node *n, pgd_result *r)
{
    if (!n->cfg) {
        pgd_fail(r, CONFIG_FIRST, "no usable configuration names them");
        return;
    }
    const char *const *dirs = pg_config_read_only_dirs(n->cfg);
    size_t present = 0, total = 0;
    pg_error why = {0};
    for (size_t i = 0; dirs && dirs[i]; i++, total++) {
        struct stat st;
        int there = lstat(dirs[i], &st) == 0;
        if (!there && errno == ENOENT)
            continue; /* skipped by the store: the kubelet writes none before its gate is on */
        if (pgd_root_owned_safe(dirs[i], &why) != PG_OK) {
            pgd_fail(r,
                     "make it root's and writable by root only, or drop it from "
                     "readOnlyRecordDirs",
                     "%s (every decision that reads it denies)", why.message);
            char q[4200];
            if (there && S_ISDIR(st.st_mode) && pgd_sh_word(dirs[i], q, sizeof q))
                pgd_command(r, "chown root:root %s && chmod go-w %s", q, q);
            return;
        }
        present++;
    }
    pgd_pass(r, "%zu read-only record director%s configured, %zu present and safe", total,
             total == 1 ? "y" : "ies", present);
}

void pgd_check_hmac_key(pgd_node *n, pgd_result *r)
{
    if (!n->cfg) {
        pgd_fail(r, CONFIG_FIRST, "no usable configuration names it");
        return;
    }
    const char *path = pg_config_hmac_key_file(n->cfg);
    if (!path || !*path) {
        /* A supported mode (a cluster whose webhook runs --unkeyed-annotations), not a fault. */
        pgd_warn(r,
                 "to bind annotations to their namespace: copy the key pullgate-webhook signs "
                 "with (its --hmac-key-file, the Secret's annotation.key) to "
                 "/etc/pullgate/annotation.key, root's, mode 0600, set \"hmacKeyFile\" to it "
                 "and restart pullgate-cri",
                 "hmacKeyFile is not set (unkeyed): annotations are not bound to their "
                 "namespace, and a keyed webhook's annotations cannot be read");
        return;
    }
    pg_mac_key *key = NULL;
    pg_error err = {0};
    /* The loader the hook and pullgate-cri use: same checks (root, 0600/0400, size). */
    if (pg_mac_key_load(path, &key, &err) != PG_OK) {
        pgd_fail(r, "install the webhook's key there: root-owned, mode 0400 or 0600",
                 "%s (every annotation is refused)", err.message);
        struct stat st;
        char q[4200];
        /* Only the owner or mode of a key that is there can be fixed by a command. */
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode) &&
            (st.st_uid != 0 || (st.st_mode & 077)) && pgd_sh_word(path, q, sizeof q))
            pgd_command(r, "chown root:root %s && chmod 0600 %s", q, q);
        return;
    }
    pg_mac_key_free(key);
    pgd_pass(r, "%s: present and private (root, no access for others)", path);
}
