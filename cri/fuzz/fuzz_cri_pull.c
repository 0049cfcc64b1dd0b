/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer: hostile PullImageRequest bytes from the CRI socket through the
 * decoder and the credential extraction (annotation parsing included), and
 * the same bytes read as the two answers the proxy decodes. No network.
 */
#include "pull.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cri_pull_request req;
    if (cri_pull_request_decode(data, size, "pullgate.dev/credentials", &req, NULL) == PG_OK) {
        cri_pull_creds creds;
        if (cri_pull_credentials(&req, NULL, false, &creds, NULL) == PG_OK)
            cri_pull_creds_clear(&creds);
        cri_pull_request_clear(&req);
    }
    char *image_ref = NULL;
    if (cri_pull_response_decode(data, size, &image_ref, NULL) == PG_OK)
        free(image_ref);
    char **aliases = NULL;
    if (cri_image_status_aliases(data, size, "busybox", &aliases, NULL) == PG_OK)
        pg_strv_free(aliases);
    return 0;
}
