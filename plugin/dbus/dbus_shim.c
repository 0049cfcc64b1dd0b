/* SPDX-License-Identifier: Apache-2.0 */
#define PG_DBUS_SHIM_IMPL
#include "dbus_shim.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define PG_LIBDBUS_SONAME "libdbus-1.so.3"

pg_dbus_api pg_dbus_fn;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char load_error[256];

static void load(void)
{
    void *h = dlopen(PG_LIBDBUS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(load_error, sizeof load_error, "%s", dlerror());
        return;
    }
    pg_dbus_api api;
#define PG_DBUS_RESOLVE(f)                                                              \
    if (!(*(void **)&api.f = dlsym(h, #f))) {                                           \
        snprintf(load_error, sizeof load_error, "%s: no symbol %s", PG_LIBDBUS_SONAME, #f); \
        return; /* h stays loaded: harmless, and dlclose of libdbus is unsafe */        \
    }
    PG_DBUS_FUNCS(PG_DBUS_RESOLVE)
#undef PG_DBUS_RESOLVE
    pg_dbus_fn = api;
}

int pg_dbus_load(pg_error *err)
{
    pthread_once(&once, load);
    if (load_error[0])
        return pg_fail(err, PG_ERR_IO, "cannot load %s: %s", PG_LIBDBUS_SONAME, load_error);
    return PG_OK;
}
