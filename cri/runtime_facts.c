/* SPDX-License-Identifier: Apache-2.0 */
#include "runtime_facts.h"

#include "cri_subset.pb-c.h"
#include "grpc_unary.h"
#include "grpc_util.h"
#include "log.h"
#include "crio_auth.h"
#include "thread.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VERSION_METHOD "/runtime.v1.RuntimeService/Version"
#define VERSION_TIMEOUT_MS 2000
#define RETRY_MS 1000

struct cri_runtime_facts {
    grpc_channel *channel;
    pg_runtime configured;
    char *crio_config, *crio_config_dir;
    cri_thread t; /* t.wake is also broadcast once the runtime is known */
    bool known, crio;           /* under t.lock */
    char name[64], version[64]; /* under t.lock, once known */
};

static void copy_field(char *dst, size_t n, const ProtobufCBinaryData *f)
{
    size_t len = f->data && f->len < n - 1 ? f->len : f->data ? n - 1 : 0;
    if (len) /* an absent field has no data at all */
        memcpy(dst, f->data, len);
    dst[len] = '\0';
    for (size_t i = 0; i < len; i++) /* a log value, never a control byte */
        if ((unsigned char)dst[i] < 0x20 || dst[i] == 0x7f)
            dst[i] = '?';
}

/* One Version call: true once the runtime answered with a decodable VersionResponse. */
static bool ask_version(cri_runtime_facts *f, char *name, char *version, size_t n)
{
    grpc_slice answer;
    grpc_status_code st;
    if (pg_grpc_unary_call(f->channel, VERSION_METHOD, "", 0, VERSION_TIMEOUT_MS, &answer, &st,
                           NULL) != PG_OK)
        return false;
    Runtime__V1__VersionResponse *v = runtime__v1__version_response__unpack(
        NULL, GRPC_SLICE_LENGTH(answer), GRPC_SLICE_START_PTR(answer));
    grpc_slice_unref(answer);
    if (!v)
        return false;
    copy_field(name, n, &v->runtime_name);
    copy_field(version, n, &v->runtime_version);
    runtime__v1__version_response__free_unpacked(v, NULL);
    return true;
}

/* The facts thread's body (cri_thread): entered and left with the lock held. */
static void facts_run(void *arg)
{
    cri_runtime_facts *f = arg;
    char name[64], version[64];
    while (!f->t.stopping) {
        pthread_mutex_unlock(&f->t.lock);
        bool answered = ask_version(f, name, version, sizeof name);
        pthread_mutex_lock(&f->t.lock);
        if (answered) {
            f->known = true;
            f->crio = f->configured == PG_RUNTIME_CRIO || strcmp(name, "cri-o") == 0;
            memcpy(f->name, name, sizeof name);
            memcpy(f->version, version, sizeof version);
            cri_log(CRI_LOG_INFO, "runtime identified", "runtimeName", name, "runtimeVersion",
                    version, NULL);
            return; /* exiting wakes the waiters */
        }
        int64_t next = pg_monotonic_ms() + RETRY_MS;
        while (!f->t.stopping && pg_monotonic_ms() < next)
            cri_thread_wait(&f->t, next);
    }
}

static void facts_free(cri_runtime_facts *f)
{
    if (f->channel)
        grpc_channel_destroy(f->channel);
    free(f->crio_config);
    free(f->crio_config_dir);
    free(f);
}

cri_runtime_facts *cri_runtime_facts_start(const char *endpoint, pg_runtime configured,
                                           const char *crio_config, const char *crio_config_dir,
                                           pg_error *err)
{
    cri_runtime_facts *f = calloc(1, sizeof *f);
    if (!f) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        return NULL;
    }
    f->configured = configured;
    f->crio_config = pg_strdup(crio_config);
    f->crio_config_dir = pg_strdup(crio_config_dir);
    f->channel = cri_runtime_channel(endpoint);
    int rc = f->channel && f->crio_config && f->crio_config_dir
                 ? cri_thread_start(&f->t, facts_run, f, "runtime facts", err)
                 : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc != PG_OK) {
        facts_free(f);
        return NULL;
    }
    return f;
}

bool cri_runtime_facts_namespaced_auth(cri_runtime_facts *f, cri_crio_auth *out)
{
    memset(out, 0, sizeof *out);
    if (!f) {
        snprintf(out->why, sizeof out->why, "no runtime facts");
        return false;
    }
    pthread_mutex_lock(&f->t.lock);
    bool known = f->known, crio = f->crio || f->configured == PG_RUNTIME_CRIO;
    char name[64], version[64];
    memcpy(name, f->name, sizeof name);
    memcpy(version, f->version, sizeof version);
    pthread_mutex_unlock(&f->t.lock);
    if (!known && !crio) {
        snprintf(out->why, sizeof out->why,
                 "the runtime has not answered Version yet: it may be CRI-O");
        return out->namespaced = true;
    }
    if (!crio) {
        snprintf(out->why, sizeof out->why, "runtime %s holds no credentials per namespace", name);
        return false;
    }
    cri_crio_auth a;
    cri_crio_auth_read(f->crio_config, f->crio_config_dir, known ? version : NULL, &a);
    *out = a;
    snprintf(out->why, sizeof out->why, "CRI-O: %.500s", a.why);
    return a.namespaced;
}

bool cri_runtime_facts_wait(cri_runtime_facts *f, int timeout_ms)
{
    struct timespec until = cri_timespec_at(pg_monotonic_ms() + timeout_ms);
    pthread_mutex_lock(&f->t.lock);
    int e = 0;
    while (!f->known && !f->t.exited && e != ETIMEDOUT)
        e = pthread_cond_timedwait(&f->t.wake, &f->t.lock, &until);
    bool known = f->known;
    pthread_mutex_unlock(&f->t.lock);
    return known;
}

int cri_runtime_facts_stop(cri_runtime_facts *f, int timeout_ms)
{
    if (!f)
        return 1;
    if (!cri_thread_stop(&f->t, timeout_ms))
        return 0;
    facts_free(f);
    return 1;
}
