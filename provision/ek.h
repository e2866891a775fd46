/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <openssl/x509.h>
#include <tss2/tss2_esys.h>

#include "ek-cert.h"
#include "macro.h"
#include "tpm.h"

/*
 * The EK side of provisioning (design §2 step 1): prove, once, at install
 * time, that a key we created in the endorsement hierarchy (the "EK signing
 * key") lives in the same TPM as an EK that a manufacturer certified.
 *
 *   1. The EK certificate comes from TPM NV (or a file) and its chain is
 *      verified against the configured manufacturer CA store.
 *   2. The EK is re-created from the TCG EK Credential Profile template that
 *      matches the certificate, and its public key must equal the
 *      certificate's.
 *   3. A random challenge is wrapped in software (OpenSSL, never the TPM's own
 *      MakeCredential) to the certified EK public key, bound to the name of the
 *      key to attest. Only the TPM holding the EK's private key can unwrap it,
 *      and it releases the challenge only if an object with exactly that name
 *      is loaded in it (TPM2_ActivateCredential).
 *
 * Threat model: the install-time OS is trusted, the bus is not. An interposer
 * that substitutes the EK public or the key cannot make the certified TPM
 * return the challenge, so every substitution ends in TG_ERR_EK_CERT or
 * TG_ERR_EK_PROOF. The challenge, the seed and every key derived from it are
 * tg_secrets, wiped on every path.
 */

typedef struct tg_ek_options {
        const char *cert_file;          /* PEM or DER EK certificate; NULL: read it from TPM NV */
        const char *ca_store;           /* manufacturer CA stores: a whitespace-separated list of PEM files
                                         * (several certs) or directories of them; required */
        const char *intermediates_file; /* optional extra untrusted intermediates (PEM) */
} tg_ek_options;

typedef struct tg_ek_result {
        uint32_t nv_index;           /* NV index the certificate came from; 0 when it came from a file */
        const char *template_name;   /* "L-1 (RSA-2048)", "H-3 (ECC P-384)", ...: static string */
        char *cert_subject;          /* RFC 2253, owned */
        char *cert_issuer;           /* RFC 2253, owned */
        uint8_t cert_sha256[32];     /* SHA-256 of the certificate's DER encoding */
        tg_ek_anchor anchor;         /* the manufacturer root the chain ends at */
} tg_ek_result;

void tg_ek_result_done(tg_ek_result *r);

/*
 * The proof in two steps, so that the key to attest can be created in a
 * session salted to the certified EK (its endorsement authorization then
 * never crosses the bus in clear):
 *
 * tg_ek_certified_load() verifies the certificate chain, re-creates the EK
 * that matches the certificate's key and starts an HMAC session salted to
 * it. auth_session authorizes the endorsement hierarchy (and an owner-read
 * certificate index) until then: a session salted to a key already trusted
 * (provisioning salts it to the NULL key, checked against the kernel's
 * null_name when there is one), or ESYS_TR_PASSWORD when the hierarchy has
 * no password. The hierarchy's auth value, if any, has been set by the caller
 * with Esys_TR_SetAuth(ESYS_TR_RH_ENDORSEMENT).
 *
 * tg_ek_certified_session() is that session, for the caller's endorsement
 * authorizations (the creation of the key to attest).
 *
 * tg_ek_certified_prove() proves key/key_name: the loaded object (the EK
 * signing key, empty auth) and the name the caller computed for it.
 *
 * Errors: -TG_ERR_EK_CERT (no usable/trusted certificate, or it does not
 * belong to this TPM), -TG_ERR_EK_PROOF (the TPM would not return the
 * challenge: interposer suspected), -TG_ERR_AUTH_NEEDED (endorsement
 * hierarchy password needed), or another TPM/transport error. ret is written
 * only on success.
 */
typedef struct tg_ek_certified tg_ek_certified;
int tg_ek_certified_load(tg_tpm *tpm, const tg_ek_options *opts, ESYS_TR auth_session, tg_ek_certified **ret);
ESYS_TR tg_ek_certified_session(const tg_ek_certified *ek);
int tg_ek_certified_prove(tg_tpm *tpm, tg_ek_certified *ek, ESYS_TR key, const TPM2B_NAME *key_name,
                          tg_ek_result *ret);
void tg_ek_certified_free(tg_ek_certified *ek);
DEFINE_TRIVIAL_CLEANUP_FUNC(tg_ek_certified *, tg_ek_certified_free);

/*
 * Whether any EK certificate index of the TCG templates is defined in NV.
 * audit_session: a session salted to a key the caller trusts (the NULL key
 * that matches the kernel's null_name), in which the listing is read as an
 * audit session: an interposer that hides the certificates (to make
 * 'provision --trust-on-first-use' pin a key of its own) then fails the
 * response HMAC. ESYS_TR_NONE, or a session salted to a key nobody
 * verified: the answer is the bus's word.
 */
int tg_ek_cert_in_nv(tg_tpm *tpm, ESYS_TR audit_session, bool *ret_present);

/* Both steps for an already loaded key (tests). */
int tg_ek_attest_key(tg_tpm *tpm, const tg_ek_options *opts, ESYS_TR auth_session, ESYS_TR key,
                     const TPM2B_NAME *key_name, tg_ek_result *ret);

/* ---- Building blocks, exposed for the unit tests. ---- */

/* One TCG EK Credential Profile template (v2.5, tables "L-1", "L-2", "H-1" ...). */
typedef struct tg_ek_template {
        const char *name;
        uint32_t nv_index;      /* EK certificate NV index of this template */
        TPMI_ALG_PUBLIC type;   /* TPM2_ALG_RSA or TPM2_ALG_ECC */
        uint16_t rsa_bits;
        TPMI_ECC_CURVE curve;
        TPMI_ALG_HASH name_alg;
        uint16_t aes_bits;
        bool high_range;        /* attributes 0x000300F2, PolicyB, empty unique */
} tg_ek_template;

/* All templates, in the order we prefer their certificates (ECC first: cheaper EK). */
const tg_ek_template *tg_ek_templates(size_t *ret_n);
/* The template whose certificate lives at nv_index, or NULL. */
const tg_ek_template *tg_ek_template_by_nv_index(uint32_t nv_index);
/* True when the certificate's public key has the type and size of the template. */
bool tg_ek_template_fits_key(const tg_ek_template *t, EVP_PKEY *key);
/* The exact TPM2B_PUBLIC to pass to CreatePrimary(endorsement). */
int tg_ek_template_public(const tg_ek_template *t, TPM2B_PUBLIC *ret);

/* Reads and parses the EK certificate at an NV index (for tpmguard doctor's re-check). */
int tg_ek_cert_read_nv(tg_tpm *tpm, uint32_t nv_index, X509 **ret);
/*
 * Adds the certificates of the TPM's EK chain NV indices (0x01C00100 to
 * 0x01C001FF, TCG EK Credential Profile; Intel PTT keeps its platform CAs
 * there) as intermediates. An index that does not parse is skipped: they only
 * ever help.
 */
int tg_ek_trust_add_nv_chain(tg_ek_trust *t, tg_tpm *tpm);
