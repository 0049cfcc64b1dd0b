/* SPDX-License-Identifier: Apache-2.0 */
#include "bench_common.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void bench_sha256_hex(const char *s, char out[65])
{
    unsigned char md[32];
    unsigned int len = 0;
    EVP_Digest(s, strlen(s), md, &len, EVP_sha256(), NULL);
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[64] = '\0';
}

void bench_image_name(size_t i, char *out, size_t n)
{
    snprintf(out, n, "registry.example.com/team-%zu/app-%zu", i % 100, i);
}

void bench_image(size_t i, char *out, size_t n)
{
    snprintf(out, n, "registry.example.com/team-%zu/app-%zu:v1", i % 100, i);
}

void bench_image_ref(size_t i, char out[65])
{
    char s[64];
    snprintf(s, sizeof s, "image-%zu", i);
    bench_sha256_hex(s, out);
}

void bench_namespace(size_t i, char *out, size_t n) { snprintf(out, n, "team-%zu", i % 100); }

void bench_cred_hash(size_t i, char out[65])
{
    char s[64];
    snprintf(s, sizeof s, "cred-%zu", i);
    bench_sha256_hex(s, out);
}

void bench_annotation(size_t i, char *out, size_t n)
{
    char name[256], ns[64], hash[65];
    bench_image_name(i, name, sizeof name);
    bench_namespace(i, ns, sizeof ns);
    bench_cred_hash(i, hash);
    snprintf(out, n,
             "{\"%s\":{\"kubernetesSecrets\":[{\"namespace\":\"%s\",\"name\":\"regcred\","
             "\"uid\":\"uid-%zu\",\"credentialHash\":\"%s\"}]}}",
             name, ns, i, hash);
}

/* Renders record i into a malloc'd buffer (kubelet field order, trailing newline). */
static char *render(size_t i, size_t extra, size_t *len_out)
{
    char name[256], ns[64], ref[65], hash[65];
    bench_image_name(i, name, sizeof name);
    bench_namespace(i, ns, sizeof ns);
    bench_image_ref(i, ref);
    bench_cred_hash(i, hash);
    size_t cap = 1024 + extra * 200;
    char *b = malloc(cap);
    if (!b)
        return NULL;
    size_t n = (size_t)snprintf(b, cap,
                                "{\"kind\":\"ImagePulledRecord\",\"apiVersion\":\"kubelet.config.k8s.io/"
                                "v1alpha1\",\"lastUpdatedTime\":\"2025-06-01T10:00:00Z\",\"imageRef\":\"%s\","
                                "\"credentialMapping\":{\"%s\":{\"kubernetesSecrets\":[",
                                ref, name);
    /* Secrets sorted by namespace, name, uid: "other-*" sorts before "team-*". */
    for (size_t k = 0; k < extra; k++) {
        char h[65], s[64];
        snprintf(s, sizeof s, "other-%zu-%zu", i, k);
        bench_sha256_hex(s, h);
        n += (size_t)snprintf(b + n, cap - n,
                              "{\"uid\":\"uid-%06zu\",\"namespace\":\"other-%06zu\",\"name\":\"regcred\","
                              "\"credentialHash\":\"%s\"},",
                              k, k, h);
    }
    n += (size_t)snprintf(b + n, cap - n,
                          "{\"uid\":\"uid-%zu\",\"namespace\":\"%s\",\"name\":\"regcred\","
                          "\"credentialHash\":\"%s\"}]}}}\n",
                          i, ns, hash);
    *len_out = n;
    return b;
}

size_t bench_record_size(size_t i)
{
    size_t len = 0;
    free(render(i, 0, &len));
    return len;
}

int bench_write_records(const char *dir, size_t from, size_t to, size_t extra)
{
    char path[4096];
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return -1;
    chmod(dir, 0700);
    snprintf(path, sizeof path, "%s/pulled", dir);
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return -1;
    snprintf(path, sizeof path, "%s/pulling", dir);
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return -1;
    snprintf(path, sizeof path, "%s/pulled", dir);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    for (size_t i = from; i < to; i++) {
        char ref[65], name[80];
        bench_image_ref(i, ref);
        snprintf(name, sizeof name, "sha256-%s", ref);
        /* file name = sha256(imageRef) */
        char fh[65];
        bench_sha256_hex(ref, fh);
        snprintf(name, sizeof name, "sha256-%s", fh);
        size_t len;
        char *b = render(i, extra, &len);
        int fd = b ? openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600) : -1;
        int bad = fd < 0 || write(fd, b, len) != (ssize_t)len;
        if (fd >= 0)
            close(fd);
        free(b);
        if (bad) {
            close(dfd);
            return -1;
        }
    }
    close(dfd);
    return 0;
}
