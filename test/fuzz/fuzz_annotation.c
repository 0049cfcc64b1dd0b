/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: pg_presented_parse (the pod-controlled credentials annotation). */
#include "internal.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pg_presented *p = NULL;
    pg_error err = {0};
    if (pg_presented_parse((const char *)data, size, "team-a", &p, &err) == PG_OK) {
        const pg_pod_cred *s;
        const pg_pod_cred *sa;
        size_t n = pg_presented_secrets(p, "docker.io/library/nginx", &s);
        for (size_t i = 0; i < n; i++)
            if (strcmp(s[i].namespace_, "team-a") != 0)
                __builtin_trap(); /* namespace filtering must hold for every input */
        n = pg_presented_sas(p, "registry.example.com/team-a/app", &sa);
        for (size_t i = 0; i < n; i++)
            if (strcmp(sa[i].namespace_, "team-a") != 0)
                __builtin_trap();
    }
    pg_presented_free(p);
    return 0;
}
