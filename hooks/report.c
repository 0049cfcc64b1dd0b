/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reporting a decision: stderr (runc embeds it in its error, which reaches
 * the kubelet), syslog (crun discards hook stderr, so this is the record that
 * always survives) and D-Bus (best effort, bounded by the notifier).
 */
#include "hook.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>

#define FIELD_MAX 256  /* id, namespace, image, imageRef as printed */
#define REASON_MAX 600 /* a pg_decision text plus sanitising expansion */

/* Length of the valid, printable UTF-8 sequence at s, or 0 when it is not one. */
static size_t utf8_unit(const unsigned char *s)
{
    if (s[0] < 0x20 || s[0] == 0x7f)
        return 0; /* ASCII control or DEL */
    size_t len = pg_utf8_valid_len(s);
    /* C1 controls (U+0080..U+009F) can act as line breaks or terminal escapes. */
    if (len == 2 && s[0] == 0xc2 && s[1] < 0xa0)
        return 0;
    /* U+2028 / U+2029 are line separators to some log viewers. */
    if (len == 3 && s[0] == 0xe2 && s[1] == 0x80 && (s[2] == 0xa8 || s[2] == 0xa9))
        return 0;
    return len;
}

void hook_sanitize(const char *s, char *out, size_t n)
{
    if (n < 5) {
        if (n)
            out[0] = '\0';
        return;
    }
    const unsigned char *p = (const unsigned char *)(s ? s : HOOK_UNKNOWN);
    size_t o = 0, room = n - 4; /* keep space for "..." and the NUL */
    while (*p) {
        size_t unit = utf8_unit(p);
        size_t produced = unit ? unit : 1;
        if (o + produced > room) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (unit)
            memcpy(out + o, p, unit);
        else
            out[o] = '?';
        o += produced;
        p += unit ? unit : 1;
    }
    out[o] = '\0';
}

/* logLevel names as the kubelet/klog family spells them; unknown = info. */
static int syslog_priority_of(const char *level)
{
    if (!level)
        return LOG_INFO;
    if (strcasecmp(level, "debug") == 0 || strcasecmp(level, "trace") == 0)
        return LOG_DEBUG;
    if (strcasecmp(level, "warn") == 0 || strcasecmp(level, "warning") == 0)
        return LOG_WARNING;
    if (strcasecmp(level, "error") == 0)
        return LOG_ERR;
    return LOG_INFO;
}

void hook_log_open(const char *log_level)
{
    int upto = syslog_priority_of(log_level);
    /* Denials are security events: logged at LOG_WARNING whatever the level. */
    if (upto < LOG_WARNING)
        upto = LOG_WARNING;
    setlogmask(LOG_UPTO(upto));
    openlog("pullgate-hook", LOG_PID | LOG_NDELAY, LOG_AUTHPRIV);
}

typedef struct printable {
    char id[FIELD_MAX], ns[FIELD_MAX], image[FIELD_MAX], ref[FIELD_MAX], stage[64];
    char reason[REASON_MAX];
} printable;

static void make_printable(const hook_subject *who, const pg_decision *dec, printable *pr)
{
    hook_sanitize(who->container_id, pr->id, sizeof pr->id);
    hook_sanitize(who->namespace_, pr->ns, sizeof pr->ns);
    hook_sanitize(who->image, pr->image, sizeof pr->image);
    hook_sanitize(who->image_ref, pr->ref, sizeof pr->ref);
    hook_sanitize(who->stage, pr->stage, sizeof pr->stage);
    hook_sanitize(dec->text[0] ? dec->text : "no reason given", pr->reason, sizeof pr->reason);
}

static void log_decision(const printable *pr, const pg_decision *dec, pg_mode mode)
{
    const char *verb = dec->allow ? "allowed" : mode == PG_MODE_AUDIT ? "audit: would deny"
                                                                      : "denied";
    syslog(dec->allow ? LOG_INFO : LOG_WARNING,
           "%s container %s (namespace %s, image %s, imageRef %s, stage %s): %s [%s]", verb, pr->id,
           pr->ns, pr->image, pr->ref, pr->stage, pr->reason,
           dec->reason ? pg_reason_name(dec->reason) : "not-kubernetes");
}

static const char *known(const char *raw, const char *printable_value)
{
    return raw ? printable_value : "";
}

/* The stderr line: only a denial (or audit's would-deny) has one; "" otherwise. */
static int format_line(const printable *pr, const pg_decision *dec, pg_mode mode, char *line,
                       size_t n)
{
    line[0] = '\0';
    if (dec->allow)
        return 0;
    if (mode == PG_MODE_AUDIT) {
        snprintf(line, n, "pullgate: audit: would deny container %s (namespace %s, image %s): %s\n",
                 pr->id, pr->ns, pr->image, pr->reason);
        return 0;
    }
    snprintf(line, n, "pullgate: denied container %s (namespace %s, image %s): %s\n", pr->id,
             pr->ns, pr->image, pr->reason);
    return 1;
}

int hook_report_line(const hook_subject *who, const pg_decision *dec, pg_mode mode, char *line,
                     size_t n)
{
    printable pr;
    make_printable(who, dec, &pr);
    return format_line(&pr, dec, mode, line, n);
}

void hook_report_sinks(const hook_subject *who, const pg_decision *dec, pg_mode mode,
                       pg_notifier *notifier)
{
    printable pr;
    make_printable(who, dec, &pr);
    log_decision(&pr, dec, mode);
    /* The bus only hears about a decision already made; it can never change it. Fields not
     * known are sent empty there (a machine reads them), not as HOOK_UNKNOWN. */
    if (notifier)
        pg_notify_container(notifier, dec->allow, known(who->container_id, pr.id),
                            known(who->namespace_, pr.ns), known(who->image, pr.image),
                            known(who->image_ref, pr.ref), pr.reason);
}

int hook_report(const hook_subject *who, const pg_decision *dec, pg_mode mode,
                pg_notifier *notifier)
{
    char line[HOOK_LINE_MAX];
    hook_report_sinks(who, dec, mode, notifier);
    int status = hook_report_line(who, dec, mode, line, sizeof line);
    fputs(line, stderr);
    return status;
}
