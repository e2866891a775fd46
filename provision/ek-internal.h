/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Shared by the three parts of the EK code (not a public header of the trust
 * floor): ek-cert.c (X.509 trust: the manufacturer CA stores and chain
 * verification), makecred.c (KDFa/KDFe and MakeCredential in software) and
 * ek.c (the TPM side: templates, NV certificates, EK re-creation,
 * ActivateCredential).
 */
#include <openssl/x509.h>
#include <tss2/tss2_tpm2_types.h>

#include "ek-store.h"
#include "ek.h"

struct tg_ek_trust {
        X509_STORE *anchors;       /* the stores' self-signed roots */
        STACK_OF(X509) *known;     /* every certificate of the stores, for diagnostics */
        STACK_OF(X509) *untrusted; /* the stores' other certificates plus the intermediates file */
        STACK_OF(X509) *distrusted; /* certificates dropped by a distrust list, for diagnostics */
        tg_ek_manifest **manifests; /* of the store directories that have one: vendor names */
        size_t n_manifests;
        tg_ek_fingerprints distrust; /* every store's distrust lists, for helpers added later */
};

static inline const char *strna(const char *s) {
        return s ?: "(unknown)";
}

/* A certificate's subject or issuer on one line (malloc'ed), NULL on failure. */
char *tg_ek_name_oneline(const X509_NAME *name);
/* SHA-256 of a certificate's DER encoding. */
bool tg_ek_cert_sha256(X509 *c, uint8_t out[32]);
/* "sha256" etc. for OpenSSL, and the digest size; NULL / 0 for other algorithms. */
const char *tg_ek_hash_name(TPMI_ALG_HASH hash);
size_t tg_ek_hash_size(TPMI_ALG_HASH hash);
