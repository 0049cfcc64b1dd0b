/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: pg_dockerconfig_hashes on an arbitrary document.
 * The first line of the input (up to 256 bytes) is the image, the rest the JSON. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char default_image[] = "registry.example.com/app";
    const uint8_t *nl = memchr(data, '\n', size < 256 ? size : 256);
    size_t image_len = nl ? (size_t)(nl - data) : 0;
    /* memcpy, not strndup: fuzz data has no terminating NUL, and strict ASan
     * string checks (strict_string_checks=1) treat strndup's source as a C string. */
    char *image = malloc(nl ? image_len + 1 : sizeof default_image);
    if (!image)
        return 0;
    if (nl) {
        memcpy(image, data, image_len);
        image[image_len] = '\0';
    } else {
        memcpy(image, default_image, sizeof default_image);
    }
    const char *json = (const char *)data + (nl ? image_len + 1 : 0);
    size_t json_len = size - (size_t)(json - (const char *)data);

    char **hashes = NULL;
    pg_error err = {0};
    int rc = pg_dockerconfig_hashes(json, json_len, image, &hashes, &err);
    if (rc == PG_OK) {
        if (!hashes)
            __builtin_trap();
        for (char **h = hashes; *h; h++)
            if (strlen(*h) != PG_HASH_HEX_LEN)
                __builtin_trap();
    } else if (hashes || err.code != rc) {
        __builtin_trap();
    }
    pg_strv_free(hashes);
    free(image);
    return 0;
}
