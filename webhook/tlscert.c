/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The serving certificate, reloaded when its files change (cert-manager and
 * packaging/kubernetes/make-certs.sh rotate them). libmicrohttpd asks for the
 * certificate on every TLS handshake through GnuTLS's retrieve callback; the
 * callback checks the files at most once a second and swaps in a new pair
 * only when the key matches the certificate, so a half-written rotation keeps
 * the old pair in service.
 *
 * Client certificates (optional, --client-ca-file): each new session is set
 * to require one and to verify it in the handshake against a trust list of
 * our own (not libmicrohttpd's, so the CA file can be reloaded like the
 * serving pair), for TLS client authentication.
 *
 * GnuTLS's callbacks have no user-data argument, hence the one module-level
 * pointer (set once by wh_tls_new before the server starts).
 */
#include "tlscert.h"

#include "cleanup.h"
#include "files.h"
#include "internal.h"
#include "wlog.h"

#include <gnutls/abstract.h>
#include <gnutls/x509.h>
#include <openssl/crypto.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_CHAIN 8
#define MAX_PEM_BYTES (256u * 1024u)
#define CHECK_INTERVAL_MS 1000
/* A retired pair may still be in use by a handshake that started before the
 * swap; handshakes are bounded by the connection timeout, so free it later. */
#define RETIRE_AFTER_MS (5LL * 60 * 1000)
#define MAX_RETIRED 16

typedef struct pair {
    gnutls_pcert_st chain[MAX_CHAIN];
    unsigned int n;
    gnutls_privkey_t key;
    long long retired_ms;
} pair;

struct wh_tls {
    char *cert_path, *key_path;
    pthread_mutex_t lock;
    pair *current;
    pair *retired[MAX_RETIRED];
    size_t n_retired;
    wh_file_id cert_id, key_id;
    long long checked_ms;
    /* client certificates: NULL path = not required */
    char *client_ca_path;
    gnutls_x509_trust_list_t client_trust;
    wh_file_id client_ca_id;
    long long client_checked_ms;
};

static wh_tls *the_tls; /* see the file comment */

static void pair_free(pair *p)
{
    if (!p)
        return;
    for (unsigned int i = 0; i < p->n; i++)
        gnutls_pcert_deinit(&p->chain[i]);
    if (p->key)
        gnutls_privkey_deinit(p->key);
    free(p);
}

/* The private key belongs to the leaf certificate. */
static int key_matches(pair *p)
{
    gnutls_pubkey_t from_key;
    gnutls_datum_t a = {0}, b = {0};
    int ok = 0;
    if (gnutls_pubkey_init(&from_key) < 0)
        return 0;
    if (gnutls_pubkey_import_privkey(from_key, p->key, 0, 0) == 0 &&
        gnutls_pubkey_export2(from_key, GNUTLS_X509_FMT_DER, &a) == 0 &&
        gnutls_pubkey_export2(p->chain[0].pubkey, GNUTLS_X509_FMT_DER, &b) == 0)
        ok = a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
    gnutls_free(a.data);
    gnutls_free(b.data);
    gnutls_pubkey_deinit(from_key);
    return ok;
}

/* The certificate chain and its key from their PEM texts into p. */
static int import_pair(pair *p, const gnutls_datum_t *cert, const char *cert_path,
                       const gnutls_datum_t *key, const char *key_path, pg_error *err)
{
    p->n = MAX_CHAIN;
    int g = gnutls_pcert_list_import_x509_raw(p->chain, &p->n, cert, GNUTLS_X509_FMT_PEM, 0);
    if (g < 0 || p->n == 0) {
        p->n = 0;
        return pg_fail(err, PG_ERR_INVALID, "%.200s: %s", cert_path,
                       g < 0 ? gnutls_strerror(g) : "no certificate");
    }
    if ((g = gnutls_privkey_init(&p->key)) < 0 ||
        (g = gnutls_privkey_import_x509_raw(p->key, key, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0)
        return pg_fail(err, PG_ERR_INVALID, "%.200s: %s", key_path, gnutls_strerror(g));
    if (!key_matches(p))
        return pg_fail(err, PG_ERR_INVALID, "%.200s does not belong to %.200s", key_path,
                       cert_path);
    return PG_OK;
}

static int load_pair(const char *cert_path, const char *key_path, pair **out, pg_error *err)
{
    pg_autofree char *cert = NULL;
    char *key = NULL; /* wiped before it is freed */
    size_t cert_len = 0, key_len = 0;
    pair *p = calloc(1, sizeof *p);
    int rc = p ? PG_OK : pg_fail(err, PG_ERR_NOMEM, "out of memory");
    if (rc == PG_OK)
        rc = wh_read_file(cert_path, MAX_PEM_BYTES, 0, &cert, &cert_len, err);
    if (rc == PG_OK)
        rc = wh_read_file(key_path, MAX_PEM_BYTES, 1, &key, &key_len, err);
    if (rc == PG_OK)
        rc = import_pair(p, &(gnutls_datum_t){(unsigned char *)cert, (unsigned int)cert_len},
                         cert_path, &(gnutls_datum_t){(unsigned char *)key, (unsigned int)key_len},
                         key_path, err);
    if (key) {
        OPENSSL_cleanse(key, key_len);
        free(key);
    }
    if (rc != PG_OK) {
        pair_free(p);
        return rc;
    }
    *out = p;
    return PG_OK;
}

static void retire(wh_tls *t, pair *old, long long now)
{
    size_t kept = 0;
    for (size_t i = 0; i < t->n_retired; i++) {
        if (now - t->retired[i]->retired_ms > RETIRE_AFTER_MS)
            pair_free(t->retired[i]);
        else
            t->retired[kept++] = t->retired[i];
    }
    t->n_retired = kept;
    if (t->n_retired == MAX_RETIRED) { /* rotations faster than handshakes: drop the oldest */
        pair_free(t->retired[0]);
        memmove(t->retired, t->retired + 1, (MAX_RETIRED - 1) * sizeof t->retired[0]);
        t->n_retired--;
    }
    old->retired_ms = now;
    t->retired[t->n_retired++] = old;
}

/* Called with the lock held: swaps in a changed pair once per CHECK_INTERVAL_MS. */
static void maybe_reload(wh_tls *t)
{
    long long now = pg_monotonic_ms();
    if (now - t->checked_ms < CHECK_INTERVAL_MS)
        return;
    t->checked_ms = now;
    wh_file_id cert_id, key_id;
    if (wh_file_id_of(t->cert_path, &cert_id) != 0 || wh_file_id_of(t->key_path, &key_id) != 0)
        return; /* mid-rotation: keep serving the old pair */
    if (wh_file_id_equal(&cert_id, &t->cert_id) && wh_file_id_equal(&key_id, &t->key_id))
        return;
    pair *fresh = NULL;
    pg_error err = {0};
    if (load_pair(t->cert_path, t->key_path, &fresh, &err) != PG_OK) {
        wh_log("warning", "certificate reload failed, serving the previous one", err.message);
        return; /* retried on the next check: the ids are not updated */
    }
    retire(t, t->current, now);
    t->current = fresh;
    t->cert_id = cert_id;
    t->key_id = key_id;
    wh_log("info", "serving certificate reloaded", t->cert_path);
}

int wh_tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                    const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                    gnutls_pcert_st **pcert, unsigned int *pcert_length,
                    gnutls_privkey_t *privkey)
{
    (void)session, (void)req_ca_rdn, (void)nreqs, (void)pk_algos, (void)pk_algos_length;
    wh_tls *t = the_tls;
    if (!t)
        return -1;
    pthread_mutex_lock(&t->lock);
    maybe_reload(t);
    *pcert = t->current->chain;
    *pcert_length = t->current->n;
    *privkey = t->current->key;
    pthread_mutex_unlock(&t->lock);
    return 0;
}

long long wh_tls_not_after(wh_tls *t)
{
    if (!t)
        return -1;
    gnutls_x509_crt_t crt;
    if (gnutls_x509_crt_init(&crt) < 0)
        return -1;
    long long not_after = -1;
    pthread_mutex_lock(&t->lock);
    maybe_reload(t); /* a rotation shows at the next scrape, handshakes or not */
    if (t->current && t->current->n &&
        gnutls_x509_crt_import(crt, &t->current->chain[0].cert, GNUTLS_X509_FMT_DER) == 0)
        not_after = (long long)gnutls_x509_crt_get_expiration_time(crt);
    pthread_mutex_unlock(&t->lock);
    gnutls_x509_crt_deinit(crt);
    return not_after;
}

wh_tls *wh_tls_new(const char *cert_path, const char *key_path, pg_error *err)
{
    if (the_tls) {
        pg_fail(err, PG_ERR_INTERNAL, "one serving certificate per process");
        return NULL;
    }
    wh_tls *t = calloc(1, sizeof *t);
    if (t)
        pthread_mutex_init(&t->lock, NULL);
    if (!t || !(t->cert_path = strdup(cert_path)) || !(t->key_path = strdup(key_path))) {
        pg_fail(err, PG_ERR_NOMEM, "out of memory");
        wh_tls_free(t);
        return NULL;
    }
    int rc = wh_file_id_of(cert_path, &t->cert_id) == 0 && wh_file_id_of(key_path, &t->key_id) == 0
                 ? load_pair(cert_path, key_path, &t->current, err)
                 : pg_fail(err, PG_ERR_IO, "cannot read %.200s or %.200s", cert_path, key_path);
    if (rc != PG_OK) {
        wh_tls_free(t);
        return NULL;
    }
    t->checked_ms = pg_monotonic_ms();
    the_tls = t;
    return t;
}

void wh_tls_free(wh_tls *t)
{
    if (!t)
        return;
    if (the_tls == t)
        the_tls = NULL;
    if (t->client_trust)
        gnutls_x509_trust_list_deinit(t->client_trust, 1);
    free(t->client_ca_path);
    pair_free(t->current);
    for (size_t i = 0; i < t->n_retired; i++)
        pair_free(t->retired[i]);
    free(t->cert_path);
    free(t->key_path);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* ------------------------------------------------------ client certificates */

static int load_trust(const char *path, gnutls_x509_trust_list_t *out, pg_error *err)
{
    char *pem;
    size_t len;
    int rc = wh_read_file(path, MAX_PEM_BYTES, 0, &pem, &len, err);
    if (rc != PG_OK)
        return rc;
    gnutls_x509_trust_list_t list = NULL;
    gnutls_datum_t d = {(unsigned char *)pem, (unsigned int)len};
    int n = gnutls_x509_trust_list_init(&list, 0);
    if (n == 0)
        n = gnutls_x509_trust_list_add_trust_mem(list, &d, NULL, GNUTLS_X509_FMT_PEM, 0, 0);
    free(pem);
    if (n <= 0) {
        if (list)
            gnutls_x509_trust_list_deinit(list, 1);
        return pg_fail(err, PG_ERR_INVALID, "%.200s: %s", path,
                       n < 0 ? gnutls_strerror(n) : "no CA certificate");
    }
    *out = list;
    return PG_OK;
}

int wh_tls_require_clients(wh_tls *t, const char *ca_path, pg_error *err)
{
    if (wh_file_id_of(ca_path, &t->client_ca_id) != 0)
        return pg_fail(err, PG_ERR_IO, "%.200s: cannot stat", ca_path);
    int rc = load_trust(ca_path, &t->client_trust, err); /* freed with t */
    if (rc == PG_OK && !(t->client_ca_path = strdup(ca_path)))
        rc = pg_fail(err, PG_ERR_NOMEM, "out of memory");
    t->client_checked_ms = pg_monotonic_ms();
    return rc;
}

int wh_tls_clients_required(void) { return the_tls && the_tls->client_ca_path; }

/* Called with the lock held: a changed CA file is swapped in once it parses. */
static void maybe_reload_client_ca(wh_tls *t)
{
    long long now = pg_monotonic_ms();
    if (now - t->client_checked_ms < CHECK_INTERVAL_MS)
        return;
    t->client_checked_ms = now;
    wh_file_id id;
    gnutls_x509_trust_list_t list;
    pg_error err = {0};
    if (wh_file_id_of(t->client_ca_path, &id) != 0 || wh_file_id_equal(&id, &t->client_ca_id))
        return;
    if (load_trust(t->client_ca_path, &list, &err) != PG_OK) {
        wh_log("warning", "client CA reload failed, keeping the previous one", err.message);
        return;
    }
    gnutls_x509_trust_list_deinit(t->client_trust, 1);
    t->client_trust = list;
    t->client_ca_id = id;
    wh_log("info", "client CA reloaded", t->client_ca_path);
}

/* 0 when the peer's chain verifies against the client CAs for client authentication. */
static int verify_peer(gnutls_session_t session)
{
    wh_tls *t = the_tls;
    unsigned int n = 0;
    const gnutls_datum_t *der = gnutls_certificate_get_peers(session, &n);
    if (!t || !t->client_ca_path || !der || n == 0)
        return -1;
    if (n > MAX_CHAIN)
        n = MAX_CHAIN;
    gnutls_x509_crt_t chain[MAX_CHAIN];
    unsigned int got = 0;
    for (; got < n; got++) {
        chain[got] = NULL;
        if (gnutls_x509_crt_init(&chain[got]) < 0 ||
            gnutls_x509_crt_import(chain[got], &der[got], GNUTLS_X509_FMT_DER) < 0) {
            if (chain[got])
                gnutls_x509_crt_deinit(chain[got]);
            break;
        }
    }
    unsigned int status = 1;
    int rc = -1;
    if (got == n) {
        gnutls_typed_vdata_st purpose = {GNUTLS_DT_KEY_PURPOSE_OID,
                                         (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0};
        pthread_mutex_lock(&t->lock);
        maybe_reload_client_ca(t);
        rc = gnutls_x509_trust_list_verify_crt2(t->client_trust, chain, n, &purpose, 1, 0, &status,
                                                NULL);
        pthread_mutex_unlock(&t->lock);
    }
    for (unsigned int i = 0; i < got; i++)
        gnutls_x509_crt_deinit(chain[i]);
    return rc == 0 && status == 0 ? 0 : -1;
}

static int verify_in_handshake(gnutls_session_t session)
{
    return verify_peer(session) == 0 ? 0 : GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR;
}

void wh_tls_session_start(gnutls_session_t session)
{
    if (!wh_tls_clients_required() || !session)
        return;
    gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_function(session, verify_in_handshake);
}

int wh_tls_client_ok(gnutls_session_t session)
{
    return !wh_tls_clients_required() || (session && verify_peer(session) == 0);
}
