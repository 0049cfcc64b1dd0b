/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The serving certificate and key, reloaded when their files change, and the
 * optional client CA that every caller must present a certificate from
 * (kube-apiserver, through its AdmissionConfiguration kubeconfig), also
 * reloaded when its file changes (tlscert.c).
 */
#ifndef PULLGATE_WEBHOOK_TLSCERT_H
#define PULLGATE_WEBHOOK_TLSCERT_H

#include "pullgate/pullgate.h"

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <stddef.h>

typedef struct wh_tls wh_tls;

/* Loads the pair (the key must belong to the certificate). One per process. NULL with err.
 * Reloads (and failed ones) are logged (wlog.h). */
wh_tls *wh_tls_new(const char *cert_path, const char *key_path, pg_error *err);
void wh_tls_free(wh_tls *t);

/*
 * From now on every connection must present a client certificate that verifies
 * against the CAs in ca_path (extended key usage clientAuth). Fails when the
 * file holds no usable CA.
 */
int wh_tls_require_clients(wh_tls *t, const char *ca_path, pg_error *err);
/* When the serving certificate in use (after any pending reload) expires, in Unix
 * seconds; -1 when it cannot be read. For the expiry metric. */
long long wh_tls_not_after(wh_tls *t);
/* 1 when client certificates are required. */
int wh_tls_clients_required(void);
/* For a new connection, before its handshake: require and verify the client's
 * certificate during the handshake, so a caller without one is refused at TLS. */
void wh_tls_session_start(gnutls_session_t session);
/* 1 when no client certificate is required or the session's verifies now. */
int wh_tls_client_ok(gnutls_session_t session);

/* gnutls_certificate_retrieve_function2 for MHD_OPTION_HTTPS_CERT_CALLBACK. */
int wh_tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                    const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                    gnutls_pcert_st **pcert, unsigned int *pcert_length,
                    gnutls_privkey_t *privkey);

#endif
