/* SPDX-License-Identifier: Apache-2.0 */
#include "log.h"
#include "internal.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LINE_MAX_BYTES 4096
#define VALUE_MAX_BYTES 512 /* per value: a 4 KiB image name is cut, never the line */

static atomic_int log_threshold = CRI_LOG_INFO;
static const char *const level_names[] = {"error", "warning", "info", "debug"};

void cri_log_set_level(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (name && strcmp(name, level_names[i]) == 0)
            atomic_store(&log_threshold, i);
}

int cri_log_enabled(cri_log_level level) { return (int)level <= atomic_load(&log_threshold); }

typedef struct line {
    char buf[LINE_MAX_BYTES];
    size_t len;
} line;

static void put_char(line *l, char c)
{
    if (l->len + 1 < sizeof l->buf)
        l->buf[l->len++] = c;
}

static void put_str(line *l, const char *s)
{
    for (; *s; s++)
        put_char(l, *s);
}

/* Quoted, with \" \\ and control bytes escaped; cut at VALUE_MAX_BYTES. */
static void put_value(line *l, const char *v)
{
    put_char(l, '"');
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)(v ? v : ""); *p; p++, n++) {
        if (n == VALUE_MAX_BYTES) {
            put_str(l, "...");
            break;
        }
        if (*p == '"' || *p == '\\') {
            put_char(l, '\\');
            put_char(l, (char)*p);
        } else if (*p < 0x20 || *p == 0x7f) {
            char hex[3];
            pg_hex_encode(p, 1, hex);
            put_str(l, "\\x");
            put_str(l, hex);
        } else {
            put_char(l, (char)*p);
        }
    }
    put_char(l, '"');
}

void cri_log(cri_log_level level, const char *msg, ...)
{
    if (!cri_log_enabled(level))
        return;
    line l = {.len = 0};
    put_str(&l, "pullgate-cri: level=");
    put_str(&l, level_names[level]);
    put_str(&l, " msg=");
    put_value(&l, msg);
    va_list ap;
    va_start(ap, msg);
    const char *key;
    while ((key = va_arg(ap, const char *))) {
        const char *value = va_arg(ap, const char *);
        put_char(&l, ' ');
        put_str(&l, key);
        put_char(&l, '=');
        put_value(&l, value);
    }
    va_end(ap);
    put_char(&l, '\n');
    if (l.buf[l.len - 1] != '\n')
        l.buf[l.len - 1] = '\n';
    /* One write per line: lines of concurrent threads never interleave. */
    ssize_t w = write(STDERR_FILENO, l.buf, l.len);
    (void)w;
}
