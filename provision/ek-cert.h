/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * X.509 trust for EK certificates (ek-cert.c): parsing, the manufacturer CA
 * stores and chain verification. See ek.h for the threat model: a
 * certificate that chains to a manufacturer root says which public key is
 * the EK; it proves nothing about the TPM that answers until ek.c's
 * ActivateCredential does. Nothing here talks to the TPM.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <openssl/x509.h>

#include "macro.h"

/* The root CA of the store that anchored a verified chain. */
typedef struct tg_ek_anchor {
        char *vendor;                /* from the store's MANIFEST, else the root's O=; owned */
        char *subject;               /* RFC 2253, owned */
        uint8_t sha256[32];          /* SHA-256 of the root's DER encoding */
} tg_ek_anchor;

void tg_ek_anchor_done(tg_ek_anchor *a);

/*
 * Length of the DER certificate at the start of buf: the outer SEQUENCE's
 * header plus content. Bytes after it are NV padding and are accepted only if
 * all 0x00 or all 0xFF.
 */
int tg_ek_cert_der_length(const uint8_t *buf, size_t size, size_t *ret);
/* A certificate from PEM or DER bytes (DER possibly zero-padded). */
int tg_ek_cert_parse(const uint8_t *buf, size_t size, X509 **ret);
/*
 * The manufacturer trust: the CA stores (ca_stores is a whitespace-separated
 * list; each a PEM file, or a directory of PEM/DER files with an optional
 * MANIFEST and distrust list, see ek-store.h) whose self-signed certificates
 * are the trust anchors and whose other certificates, with those of the
 * optional intermediates file, may complete a chain. A certificate whose
 * SHA-256 a distrust list of any store names is neither. A store of a list of
 * several that does not exist is skipped (it can only remove trust); a single
 * one that does not exist is an error.
 */
typedef struct tg_ek_trust tg_ek_trust;
int tg_ek_trust_load(const char *ca_stores, const char *intermediates_file, tg_ek_trust **ret);
void tg_ek_trust_free(tg_ek_trust *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(tg_ek_trust *, tg_ek_trust_free);
/*
 * Adds an intermediate that may help build a chain (never an anchor), unless
 * a distrust list names it. Returns 1 when added, 0 when distrusted.
 */
int tg_ek_trust_add_untrusted(tg_ek_trust *t, X509 *cert);
/* How many trust anchors (self-signed roots) the loaded stores hold. */
size_t tg_ek_trust_anchor_count(const tg_ek_trust *t);
/* Chain verification; each failure class has its own message naming cause and next step. */
int tg_ek_cert_verify(const tg_ek_trust *trust, X509 *cert);
/* The same, and on success the root that anchored the chain (ret_anchor may be NULL). */
int tg_ek_cert_verify_anchor(const tg_ek_trust *trust, X509 *cert, tg_ek_anchor *ret_anchor);

/* A certificate's subject or issuer on one line (malloc'ed), NULL on failure. */
char *tg_ek_name_oneline(const X509_NAME *name);
/* SHA-256 of a certificate's DER encoding. */
bool tg_ek_cert_sha256(X509 *c, uint8_t out[32]);

DEFINE_TRIVIAL_CLEANUP_FUNC(X509 *, X509_free);
