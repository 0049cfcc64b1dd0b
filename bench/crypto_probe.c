/* SPDX-License-Identifier: Apache-2.0 */
/*
 * crypto_probe MODE: what OpenSSL costs a short-lived process (the hook) for
 * one SHA-256 and one HMAC-SHA-256, by interface. Run under exec_bench, one
 * process per measurement, so every run pays the first-call cost a container
 * start pays. Built twice: against libcrypto.so and libcrypto.a.
 *
 *   none   return at once (the binary's load and relocation cost only)
 *   init   OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG), as the hook does
 *   evp    init + EVP_Digest(EVP_sha256()) + HMAC(EVP_sha256())  (the engine today)
 *   q      init + EVP_Q_digest("SHA256") + EVP_Q_mac("HMAC", "SHA256")  (OpenSSL 3 one-shots)
 *   ll     init + the deprecated SHA256_Init/Update/Final only (no provider fetch;
 *          information only: there is no provider-free HMAC, and the project
 *          does not build HMAC by hand)
 *
 * MODE-lean: the same, initialised with OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS |
 * OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS as well
 * (no error strings, no legacy name tables).
 *
 * With -t it prints the in-process time of each step (µs) to stdout.
 */
/* The deprecated low-level SHA-256 API, for the "ll" comparison only. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static const char message[] = "{\"username\":\"alice\",\"password\":\"s3cret\",\"email\":\"\"}";
static const unsigned char key[32] = "0123456789abcdef0123456789abcdef";

static int digest_evp(unsigned char *md)
{
    unsigned int len = 0;
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (!EVP_Digest(message, sizeof message - 1, md, &len, EVP_sha256(), NULL))
        return 1;
    if (!HMAC(EVP_sha256(), key, sizeof key, (const unsigned char *)message, sizeof message - 1, mac,
              &mac_len))
        return 1;
    return len == 32 && mac_len == 32 ? 0 : 1;
}

static int digest_q(unsigned char *md)
{
    size_t len = 0;
    unsigned char mac[EVP_MAX_MD_SIZE];
    size_t mac_len = 0;
    if (!EVP_Q_digest(NULL, "SHA256", NULL, message, sizeof message - 1, md, &len))
        return 1;
    if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, sizeof key,
                   (const unsigned char *)message, sizeof message - 1, mac, sizeof mac, &mac_len))
        return 1;
    return len == 32 && mac_len == 32 ? 0 : 1;
}

static int digest_ll(unsigned char *md)
{
    SHA256_CTX c;
    if (!SHA256_Init(&c) || !SHA256_Update(&c, message, sizeof message - 1) || !SHA256_Final(md, &c))
        return 1;
    return 0;
}

static int digest(const char *mode, unsigned char *md)
{
    if (strcmp(mode, "evp") == 0)
        return digest_evp(md);
    if (strcmp(mode, "q") == 0)
        return digest_q(md);
    if (strcmp(mode, "ll") == 0)
        return digest_ll(md);
    return 2;
}

int main(int argc, char **argv)
{
    int timed = argc > 2 && strcmp(argv[2], "-t") == 0;
    char mode[16];
    snprintf(mode, sizeof mode, "%s", argc > 1 ? argv[1] : "none");
    uint64_t flags = OPENSSL_INIT_NO_LOAD_CONFIG;
    char *lean = strstr(mode, "-lean");
    if (lean) {
        *lean = '\0';
        flags |= OPENSSL_INIT_NO_LOAD_CRYPTO_STRINGS | OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
                 OPENSSL_INIT_NO_ADD_ALL_DIGESTS;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    if (strcmp(mode, "none") == 0)
        return 0;
    double t0 = now_us();
    OPENSSL_init_crypto(flags, NULL);
    double t1 = now_us();
    int is_init = strcmp(mode, "init") == 0;
    int rc = is_init ? 0 : digest(mode, md);
    double t2 = now_us();
    /* A second round: what a long-lived host pays per call once warm. */
    if (rc == 0 && !is_init)
        rc = digest(mode, md);
    double t3 = now_us();
    if (timed)
        printf("%s%s init_us=%.1f first_us=%.1f second_us=%.1f\n", mode, lean ? "-lean" : "", t1 - t0, t2 - t1, t3 - t2);
    return rc;
}
