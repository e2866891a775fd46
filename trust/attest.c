/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Verification of TPM2_Certify in software.
 *
 * Threat model. Everything handed to tg_certify_verify() except the pinned
 * signer public key, the expected names and the nonce came back over the TPM
 * bus, so an active interposer controls every byte of the attestation and of
 * the signature. It may:
 *   - forge an attestation outright (caught by the ECDSA signature, which
 *     only the TPM holding the pinned EK signing key can make);
 *   - replay a genuine attestation from an earlier boot or an earlier call
 *     (caught by extraData, which must equal the caller's fresh nonce);
 *   - get the genuine TPM to certify a key of its choosing, or the TPM's own
 *     NULL key after a reset (caught by the certified name, which must equal
 *     the name of the key the kernel recorded, or that the caller verified);
 *   - substitute a different signer, including another key in the same TPM
 *     (caught by qualifiedSigner and by verifying with the pinned key only);
 *   - answer CreatePrimary with a key of its own, load that key into the
 *     real TPM and redirect Certify's object handle to it (Certify
 *     authorizes the object with a password session, which binds no name),
 *     so that the genuine signer certifies the interposer's key over our
 *     nonce. The certified name then matches the substituted public area, so
 *     two more checks are needed, and each alone would not do:
 *       * tg_null_key_public_check(): the public area must be exactly the
 *         NULL key template, fixedTPM and fixedParent included. The TPM
 *         refuses LoadExternal of a private part whose public area has
 *         fixedTPM or fixedParent set (Part 3, 12.3) and Import of one (it
 *         is not duplicable); it creates such a key's private part itself
 *         (sensitiveDataOrigin) and never lets it out, so nobody holds the
 *         private key of a fixedTPM key. A public-only LoadExternal of the
 *         template with the interposer's point is no way around it: an
 *         object without its sensitive part has no authValue to authorize
 *         Certify's ADMIN role with (and adminWithPolicy is clear). Alone it
 *         is not enough: a fixedTPM key of this template can also live
 *         under another parent (a child of an owner storage key, or an
 *         owner primary), whose seed survives a TPM reset, which would hide
 *         a reset from the boot anchor.
 *       * the certified qualifiedName must be that of a NULL-hierarchy
 *         primary of that name. Alone it is not enough: a NULL primary
 *         the TPM made from *another* template — decrypt but not
 *         restricted — has exactly that qualified name, and the TPM runs
 *         ECDH_ZGen with such a key for anyone who asks (its authValue is
 *         empty), so an interposer has the TPM compute our salt. Nor do we
 *         rely on how a TPM names a key loaded with LoadExternal into the
 *         NULL hierarchy: libtpms (swtpm) reports its plain name as its
 *         qualified name, which this check refuses, but a TPM that reported
 *         H(TPM_RH_NULL ‖ name) would pass the interposer's own key here.
 *     Together: a restricted key the TPM made itself and never lets out, as
 *     a primary of the NULL hierarchy.
 *   - feed malformed structures to the parser (tss2-mu checks bounds before
 *     every read, and the attestation must be consumed exactly, so no
 *     trailing bytes can ride along under a valid signature).
 * The magic TPM2_GENERATED_VALUE means "the TPM made this structure" only
 * because the signer is a *restricted* signing key: such a key refuses to
 * sign external data that starts with that magic. This is why the signer
 * public key must carry the EK signing key template, not merely be P-256.
 *
 * Order of checks. We parse strictly first (the magic from the raw bytes,
 * then the whole structure): the parser is bounds checked and
 * it is the only code that touches the bytes before they are authenticated,
 * and a structure that does not parse exactly is rejected without further
 * work. Then we verify the signature over the raw attestationData bytes as
 * received (never over a re-marshalled copy, which could hide a difference in
 * encoding). Only then do we compare the fields. This order makes the alerts
 * precise: a bad signature means "forged or tampered in transit", while a
 * field mismatch under a valid signature means "the real TPM signed something
 * other than what we asked for" — a replay, a reset (new NULL seed, so a
 * different NULL key), or a substituted object. Every check must pass in
 * either order, so the order changes only what the administrator is told.
 *
 * Nothing here is secret: the nonce travels in the clear to the TPM, and the
 * names and keys are public. Comparisons are constant time anyway, so that
 * no future caller that binds a secret into extraData leaks it by timing.
 */
#include <inttypes.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>

#include "attest.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "tpm.h"

#define ECDSA_P256_COORD_SIZE 32

DEFINE_TRIVIAL_CLEANUP_FUNC(ECDSA_SIG *, ECDSA_SIG_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(BIGNUM *, BN_free);

static void openssl_freep(uint8_t **p) {
        OPENSSL_free(*p);
}

static bool tpm2b_equal(const uint8_t *a, size_t a_size, const uint8_t *b, size_t b_size) {
        /* Sizes are public; contents are compared in constant time. */
        return a_size == b_size && memeq_const(a, b, a_size);
}

/* The pinned signer must be exactly an EK signing key: ECC P-256, restricted, sign, ECDSA-SHA256. */
static int check_signer_public(const TPMT_PUBLIC *signer) {
        TPM2B_PUBLIC tmpl;
        const TPMS_ECC_PARMS *want, *have = &signer->parameters.eccDetail;

        tg_template_ek_signing_key(&tmpl);
        want = &tmpl.publicArea.parameters.eccDetail;

        if (signer->type != TPM2_ALG_ECC || have->curveID != TPM2_ECC_NIST_P256)
                return log_error_rc(-TG_ERR_INVALID,
                                    "The pinned EK signing key is not an ECC P-256 key (type 0x%04x, curve 0x%04x). "
                                    "The pinned key file is damaged or foreign: re-run 'tpmguard provision'.",
                                    signer->type, signer->type == TPM2_ALG_ECC ? have->curveID : 0);
        if (signer->nameAlg != tmpl.publicArea.nameAlg ||
            signer->objectAttributes != tmpl.publicArea.objectAttributes ||
            signer->authPolicy.size != 0 ||
            have->symmetric.algorithm != want->symmetric.algorithm ||
            have->scheme.scheme != want->scheme.scheme ||
            have->scheme.details.ecdsa.hashAlg != want->scheme.details.ecdsa.hashAlg ||
            have->kdf.scheme != want->kdf.scheme)
                return log_error_rc(-TG_ERR_INVALID,
                                    "The pinned EK signing key does not have the EK signing key template "
                                    "(restricted ECDSA-SHA256 signing key, attributes 0x%08x). "
                                    "Re-run 'tpmguard provision'.", tmpl.publicArea.objectAttributes);
        return 0;
}

/* TPMS_SIGNATURE_ECDSA → DER ECDSA-Sig-Value, after checking algorithm and sizes. */
static int ecdsa_signature_to_der(const TPMT_SIGNATURE *sig, uint8_t **ret, size_t *ret_size) {
        _cleanup_(ECDSA_SIG_freep) ECDSA_SIG *esig = NULL;
        _cleanup_(BN_freep) BIGNUM *r = NULL, *s = NULL;
        _cleanup_(openssl_freep) uint8_t *der = NULL;
        const TPMS_SIGNATURE_ECDSA *e = &sig->signature.ecdsa;
        int der_size;

        if (sig->sigAlg != TPM2_ALG_ECDSA)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Certify signature uses algorithm 0x%04x, not ECDSA as the EK signing key must: "
                                    "interposer suspected.", sig->sigAlg);
        if (e->hash != TPM2_ALG_SHA256)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Certify signature uses hash 0x%04x, not SHA-256 as the EK signing key must: "
                                    "interposer suspected.", e->hash);
        if (e->signatureR.size == 0 || e->signatureR.size > ECDSA_P256_COORD_SIZE ||
            e->signatureS.size == 0 || e->signatureS.size > ECDSA_P256_COORD_SIZE)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Certify signature has r/s of %u/%u bytes, not 1..32 as for P-256: "
                                    "interposer suspected.", e->signatureR.size, e->signatureS.size);

        r = BN_bin2bn(e->signatureR.buffer, e->signatureR.size, NULL);
        s = BN_bin2bn(e->signatureS.buffer, e->signatureS.size, NULL);
        esig = ECDSA_SIG_new();
        if (!r || !s || !esig)
                return -TG_ERR_NOMEM;
        if (ECDSA_SIG_set0(esig, r, s) != 1)
                return -TG_ERR_NOMEM;
        r = s = NULL; /* owned by esig now */

        der_size = i2d_ECDSA_SIG(esig, &der);
        if (der_size <= 0)
                return -TG_ERR_NOMEM;
        *ret = TAKE_PTR(der);
        *ret_size = (size_t) der_size;
        return 0;
}

static int verify_signature(const TPM2B_ATTEST *attest, const TPMT_SIGNATURE *sig, const TPMT_PUBLIC *signer) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *pkey = NULL;
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = NULL;
        _cleanup_(openssl_freep) uint8_t *der = NULL;
        size_t der_size = 0;
        int r;

        r = ecdsa_signature_to_der(sig, &der, &der_size);
        if (r < 0)
                return r;

        r = tg_public_to_evp(signer, &pkey);
        if (r < 0)
                return log_error_rc(-TG_ERR_INVALID,
                                    "The pinned EK signing key's public point is unusable. "
                                    "Re-run 'tpmguard provision'.");

        md = EVP_MD_CTX_new();
        if (!md)
                return -TG_ERR_NOMEM;
        if (EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, pkey) != 1)
                return log_error_rc(-TG_ERR_INVALID, "OpenSSL cannot set up ECDSA-SHA256 verification.");

        /* 1 = valid; 0 = invalid; < 0 = malformed DER or r/s out of range. All but 1 fail. */
        if (EVP_DigestVerify(md, der, der_size, attest->attestationData, attest->size) != 1)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Certify signature does not verify with the pinned EK signing key: "
                                    "the attestation was forged or altered on the TPM bus. Interposer suspected.");
        return 0;
}

int tg_ek_signing_key_qualified_name(const TPM2B_NAME *ek_signing_key_name, TPM2B_NAME *ret) {
        return tg_primary_qualified_name(TPM2_RH_ENDORSEMENT, ek_signing_key_name, ret);
}

int tg_null_key_qualified_name(const TPM2B_NAME *null_key_name, TPM2B_NAME *ret) {
        return tg_primary_qualified_name(TPM2_RH_NULL, null_key_name, ret);
}

int tg_null_key_public_check(const TPMT_PUBLIC *public) {
        uint8_t want[sizeof(TPMT_PUBLIC)], have[sizeof(TPMT_PUBLIC)];
        size_t want_size = 0, have_size = 0;
        TPM2B_PUBLIC tmpl;
        TPMT_PUBLIC stripped;

        /*
         * Byte for byte, not field by field: whatever the TPM returned is marshalled as ESAPI will
         * hash and salt to it, with only the point cleared, and compared with the marshalled
         * template. A field this code does not know about cannot slip through.
         */
        if (public->type != TPM2_ALG_ECC ||
            public->unique.ecc.x.size != 32 || public->unique.ecc.y.size != 32)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The NULL key the TPM returned is not a P-256 point (type 0x%04x): the key was "
                                    "substituted on the TPM bus. Interposer suspected; unlock with the recovery "
                                    "passphrase.", public->type);
        stripped = *public;
        stripped.unique.ecc.x.size = stripped.unique.ecc.y.size = 0;
        tg_template_srk_ecc(&tmpl);
        if (Tss2_MU_TPMT_PUBLIC_Marshal(&tmpl.publicArea, want, sizeof want, &want_size) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPMT_PUBLIC_Marshal(&stripped, have, sizeof have, &have_size) != TSS2_RC_SUCCESS ||
            want_size != have_size || memcmp(want, have, want_size) != 0)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The NULL key the TPM returned does not have the NULL key template (attributes "
                                    "0x%08x, want 0x%08x): a key that is not fixed to the TPM was substituted on the "
                                    "TPM bus. Interposer suspected; unlock with the recovery passphrase.",
                                    public->objectAttributes, tmpl.publicArea.objectAttributes);
        return 0;
}

int tg_certify_verify(const TPM2B_ATTEST *attest, const TPMT_SIGNATURE *sig,
                      const TPMT_PUBLIC *signer_public, const TPM2B_NAME *expected_signer_qn,
                      const uint8_t *nonce, size_t nonce_size,
                      const TPM2B_NAME *expected_certified_name, const TPM2B_NAME *expected_certified_qn,
                      tg_attest_info *ret_info) {
        TPMS_ATTEST a = {};
        size_t off = 0;
        TSS2_RC rc;
        int r;

        if (!attest || !sig || !signer_public || !expected_signer_qn || !expected_certified_name ||
            !expected_certified_qn)
                return log_error_rc(-TG_ERR_INVALID, "tg_certify_verify: missing argument.");
        /* A certification without a fresh nonce could be a replay; refuse to verify one. */
        if (!nonce || nonce_size == 0 || nonce_size > sizeof((TPM2B_DATA) {}).buffer)
                return log_error_rc(-TG_ERR_INVALID,
                                    "tg_certify_verify: nonce of %zu bytes; 1..%zu bytes are required.",
                                    nonce_size, sizeof((TPM2B_DATA) {}).buffer);
        if (expected_signer_qn->size > sizeof expected_signer_qn->name ||
            expected_certified_name->size > sizeof expected_certified_name->name ||
            expected_certified_qn->size > sizeof expected_certified_qn->name)
                return log_error_rc(-TG_ERR_INVALID, "tg_certify_verify: expected name of impossible size.");

        r = check_signer_public(signer_public);
        if (r < 0)
                return r;

        /* 1. Parse strictly. */
        if (attest->size > sizeof attest->attestationData)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Attestation claims %u bytes, more than a TPM2B_ATTEST holds: interposer suspected.",
                                    attest->size);
        /* The magic is read from the raw bytes, before the parser: tpm2-tss >= 4.0.2
         * (Debian 13's 4.1; the CVE-2024-29040 fix) rejects a wrong magic inside
         * Tss2_MU_TPMS_ATTEST_Unmarshal, tpm2-tss 3.2 (Debian 12) accepts it and leaves
         * the check to us. Checking first refuses it on both, with the same alert. A
         * restricted signing key never signs external data that starts with the magic,
         * so data without it is no attestation the TPM made (stops an interposer handing
         * us a TPM2_Sign signature over bytes of its choosing). */
        if (attest->size >= sizeof(uint32_t)) {
                uint32_t magic = (uint32_t) attest->attestationData[0] << 24 |
                                 (uint32_t) attest->attestationData[1] << 16 |
                                 (uint32_t) attest->attestationData[2] << 8 |
                                 (uint32_t) attest->attestationData[3];
                if (magic != TPM2_GENERATED_VALUE)
                        return log_alert_rc(-TG_ERR_INTERPOSER,
                                            "Attestation magic is 0x%08" PRIx32 ", not TPM_GENERATED_VALUE: the data "
                                            "was not made by the TPM. Interposer suspected.", magic);
        }
        rc = Tss2_MU_TPMS_ATTEST_Unmarshal(attest->attestationData, attest->size, &off, &a);
        if (rc != TSS2_RC_SUCCESS)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Attestation from TPM2_Certify is malformed (%s): interposer suspected.",
                                    Tss2_RC_Decode(rc));
        if (off != attest->size)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Attestation from TPM2_Certify has %zu trailing bytes: interposer suspected.",
                                    (size_t) attest->size - off);
        if (a.clockInfo.safe != TPM2_YES && a.clockInfo.safe != TPM2_NO)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Attestation clock 'safe' flag is 0x%02x, neither YES nor NO: interposer suspected.",
                                    a.clockInfo.safe);

        /* 2. Authenticate the raw bytes. */
        r = verify_signature(attest, sig, signer_public);
        if (r < 0)
                return r;

        /* 3. Compare what the genuine TPM signed with what we asked it for. */
        if (a.type != TPM2_ST_ATTEST_CERTIFY)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Attestation is of type 0x%04x, not a TPM2_Certify result: interposer suspected.",
                                    a.type);
        if (!tpm2b_equal(a.extraData.buffer, a.extraData.size, nonce, nonce_size))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Attestation does not carry this call's nonce: a replayed attestation. "
                                    "Interposer suspected.");
        if (!tpm2b_equal(a.qualifiedSigner.name, a.qualifiedSigner.size,
                         expected_signer_qn->name, expected_signer_qn->size))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Attestation was signed by a key other than the pinned EK signing key "
                                    "(qualifiedSigner differs): interposer suspected.");
        if (!tpm2b_equal(a.attested.certify.name.name, a.attested.certify.name.size,
                         expected_certified_name->name, expected_certified_name->size))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Attestation certifies a different key than the one it was asked to certify "
                                    "(the NULL key this verification created, or the pinned persistent key): "
                                    "interposer or TPM reset suspected.");
        /*
         * The certified key must be a primary of the NULL hierarchy: a fixedTPM key of the right
         * template under another parent (whose seed survives a reset) has another qualified name.
         * See the threat model above for why the template check does not make this redundant.
         */
        if (!tpm2b_equal(a.attested.certify.qualifiedName.name, a.attested.certify.qualifiedName.size,
                         expected_certified_qn->name, expected_certified_qn->size))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "Attestation certifies a key that is not a primary of the NULL hierarchy "
                                    "(qualifiedName differs): a key other than the TPM's NULL key was certified. "
                                    "Interposer suspected.");

        if (ret_info)
                *ret_info = (tg_attest_info) {
                        .clock = a.clockInfo.clock,
                        .reset_count = a.clockInfo.resetCount,
                        .restart_count = a.clockInfo.restartCount,
                        .safe = a.clockInfo.safe == TPM2_YES,
                        .firmware_version = a.firmwareVersion,
                };
        return 0;
}


int tg_attest_info_to_json(const tg_attest_info *info, json_object **ret) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        char hex[2 + 16 + 1];

        if (!o)
                return -TG_ERR_NOMEM;
        snprintf(hex, sizeof hex, "0x%016" PRIx64, info->firmware_version);

        struct { const char *key; json_object *value; } fields[] = {
                { "clock",                json_object_new_uint64(info->clock) },
                { "reset_count",          json_object_new_uint64(info->reset_count) },
                { "restart_count",        json_object_new_uint64(info->restart_count) },
                { "safe",                 json_object_new_boolean(info->safe) },
                { "firmware_version",     json_object_new_uint64(info->firmware_version) },
                { "firmware_version_hex", json_object_new_string(hex) },
        };
        int r = 0;

        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                if (r == 0 && fields[i].value && json_object_object_add(o, fields[i].key, fields[i].value) == 0)
                        continue;
                json_object_put(fields[i].value);
                r = -TG_ERR_NOMEM;
        }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(o);
        return 0;
}
