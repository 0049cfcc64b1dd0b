/* SPDX-License-Identifier: Apache-2.0 */
#include "wlog.h"

#include "cleanup.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER; /* stderr is process-wide */

static void timestamp(char out[40])
{
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    size_t n = strftime(out, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 40 - n, ".%03ldZ", now.tv_nsec / 1000000);
}

void wh_log_fields(const char *level, const char *msg, const json_t *fields)
{
    char ts[40];
    timestamp(ts);
    pg_autojson json_t *line = json_pack("{s:s, s:s, s:s}", "time", ts, "level", level, "msg", msg);
    if (line && fields)
        json_object_update(line, (json_t *)fields);
    pg_autofree char *text = line ? json_dumps(line, JSON_COMPACT) : NULL;
    pthread_mutex_lock(&log_lock);
    if (text)
        fprintf(stderr, "%s\n", text);
    else
        fprintf(stderr, "{\"level\":\"error\",\"msg\":\"cannot format a log line\"}\n");
    fflush(stderr);
    pthread_mutex_unlock(&log_lock);
}

void wh_log(const char *level, const char *msg, const char *detail)
{
    pg_autojson json_t *fields = detail ? json_pack("{s:s?}", "detail", detail) : NULL;
    wh_log_fields(level, msg, fields);
}
