/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Single-line structured logs on stderr (journald keeps them): logfmt pairs,
 *   level=info msg=pull method=/runtime.v1.ImageService/PullImage image="..." ...
 * Values are quoted and escaped, so a hostile image name cannot forge a line.
 * Credentials are never passed here.
 */
#ifndef PULLGATE_CRI_LOG_H
#define PULLGATE_CRI_LOG_H

typedef enum cri_log_level {
    CRI_LOG_ERROR = 0,
    CRI_LOG_WARNING = 1,
    CRI_LOG_INFO = 2,
    CRI_LOG_DEBUG = 3
} cri_log_level;

/* The process's threshold (config logLevel: error|warning|info|debug). */
void cri_log_set_level(const char *name);
int cri_log_enabled(cri_log_level level);

/* cri_log(level, msg, key1, value1, key2, value2, ..., NULL); a NULL value prints "". */
void cri_log(cri_log_level level, const char *msg, ...) __attribute__((sentinel));

#endif
