/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: hostile PullImageRequest bytes from the CRI socket through the
 * decoder, the admission rule and the credential attribution (annotation
 * parsing included), checked against the refusal rule: only a decoded request
 * with an image may be forwarded, its credentials are hashed (never the
 * empty-credential hash), and a pull is node-accessible only without
 * credentials. The same bytes are read as the method path and as the answers
 * the proxy decodes, and as a CRI-O configuration file (common/crio_auth.h: the TOML
 * shim must return 1 with a string, 0, or -1 with a reason, never throw). No network.
 */
#include "attribution.h"
#include "pull.h"
#include "crio_auth.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_request(const uint8_t *data, size_t size)
{
    cri_pull_request req;
    const char *why = NULL;
    cri_decode_result d =
        cri_pull_request_decode(data, size, "pullgate.dev/credentials", &req, &why);
    cri_admission a = cri_pull_admit(d, CRI_SLOT_HELD, CRI_RECORD_DURABLE);
    if ((a.step == CRI_STEP_FORWARD) != (d == CRI_DECODED))
        abort(); /* forwarded without being decoded, or a decoded pull refused */
    if (d != CRI_DECODED) {
        if (!why || a.step != CRI_STEP_REFUSE || strncmp(a.message, "pullgate: ", 10) != 0)
            abort();
        return;
    }
    if (!req.image || !*req.image)
        abort();
    if (req.has_auth &&
        (!pg_is_hex64(req.auth_hash) || strcmp(req.auth_hash, PG_EMPTY_CREDENTIAL_HASH) == 0))
        abort();
    cri_pull_creds creds;
    if (cri_pull_credentials(&req, NULL, &creds, NULL) == PG_OK) {
        /* Without node credential files, node-accessible means "no credentials". */
        if (creds.creds.node_pods_accessible != !req.has_auth)
            abort();
        for (size_t i = 0; i < creds.creds.n_secrets; i++)
            if (strcmp(creds.creds.secrets[i].credential_hash, PG_EMPTY_CREDENTIAL_HASH) == 0)
                abort();
        cri_pull_creds_clear(&creds);
    }
    cri_pull_request_clear(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_request(data, size);
    cri_method m = cri_method_parse((const char *)data, size);
    if (m.kind != CRI_METHOD_OTHER && !m.image_status)
        abort();
    char *image_ref = NULL;
    if (cri_pull_response_decode(data, size, &image_ref, NULL) == PG_OK)
        free(image_ref);
    char **aliases = NULL;
    if (cri_image_status_aliases(data, size, "busybox", &aliases, NULL) == PG_OK)
        pg_strv_free(aliases);
    (void)cri_image_status_present(data, size);
    pg_strv refs = {0};
    size_t n_images = 0;
    (void)cri_list_images_refs(data, size, &refs, &n_images, NULL);
    (void)cri_list_containers_refs(data, size, &refs, NULL);
    pg_strv_clear(&refs);
    char *dir = NULL;
    pg_error why = {0};
    int got = cri_crio_auth_dir_of_text((const char *)data, size, &dir, &why);
    if ((got != PG_OK && (dir || !why.message[0])) || (got == PG_OK && why.code != PG_OK))
        abort();
    free(dir);
    return 0;
}
