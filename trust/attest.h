/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include <tss2/tss2_tpm2_types.h>

/*
 * Software verification of a TPM2_Certify result (design §2 step 2): the EK
 * signing key certifies the NULL primary, and nothing but this file decides
 * whether the TPM's answer is genuine.
 */

/* The TPM's clock and firmware fields from a verified TPMS_ATTEST. */
typedef struct tg_attest_info {
        uint64_t clock;          /* TPMS_CLOCK_INFO: milliseconds the TPM has been powered */
        uint32_t reset_count;
        uint32_t restart_count;
        bool safe;
        uint64_t firmware_version;
} tg_attest_info;

/*
 * Verifies a TPM2_Certify result entirely in software.
 *
 * attest must hold a TPMS_ATTEST that tss2-mu consumes exactly; sig must be
 * ECDSA with SHA-256 over attest->attestationData, made by signer_public,
 * which must be an ECC P-256 restricted signing key with the EK signing key
 * template (tg_template_ek_signing_key) and its unique filled in. The
 * attestation must carry magic TPM2_GENERATED_VALUE, type
 * TPM2_ST_ATTEST_CERTIFY, extraData equal to nonce, qualifiedSigner equal to
 * expected_signer_qn (see tg_ek_signing_key_qualified_name), a certified
 * name equal to expected_certified_name and a certified qualifiedName equal
 * to expected_certified_qn (for the NULL key: tg_null_key_qualified_name).
 *
 * Returns 0 and fills *ret_info (if not NULL) on success.
 * Returns -TG_ERR_INTERPOSER, logged as an alert naming the check that
 * failed, when the attestation is malformed, its signature is not valid, or
 * any field differs. Returns -TG_ERR_INVALID when signer_public is not an
 * EK signing key or an argument is unusable (a local provisioning or
 * programming error, not evidence of an attack); -TG_ERR_NOMEM on allocation
 * failure. *ret_info is written only on success.
 */
int tg_certify_verify(const TPM2B_ATTEST *attest, const TPMT_SIGNATURE *sig,
                      const TPMT_PUBLIC *signer_public, const TPM2B_NAME *expected_signer_qn,
                      const uint8_t *nonce, size_t nonce_size,
                      const TPM2B_NAME *expected_certified_name, const TPM2B_NAME *expected_certified_qn,
                      tg_attest_info *ret_info);

/*
 * The public area a NULL-hierarchy CreatePrimary returned (design §2.2): it
 * must be byte for byte the kernel's NULL key template (tg_template_srk_ecc:
 * fixedTPM, fixedParent, sensitiveDataOrigin, userWithAuth, noDA,
 * restricted, decrypt; AES-128-CFB; NULL scheme and KDF; P-256; no
 * authPolicy) with only the ECC point filled in, 32 bytes per coordinate.
 * Returns -TG_ERR_INTERPOSER, logged as an alert, otherwise.
 */
int tg_null_key_public_check(const TPMT_PUBLIC *public);

/*
 * The qualifiedName a TPM reports for a primary in the NULL hierarchy with
 * this name: 0x000b ‖ SHA-256(TPM2_RH_NULL ‖ name) (Part 1, 16: a
 * hierarchy's qualified name is its handle).
 */
int tg_null_key_qualified_name(const TPM2B_NAME *null_key_name, TPM2B_NAME *ret);

/*
 * The qualifiedSigner a TPM reports for the EK signing key, a primary in the
 * endorsement hierarchy: 0x000b ‖ SHA-256(TPM2_RH_ENDORSEMENT ‖ name).
 */
int tg_ek_signing_key_qualified_name(const TPM2B_NAME *ek_signing_key_name, TPM2B_NAME *ret);

/*
 * The attestation info as a JSON object with snake_case keys: clock,
 * reset_count, restart_count, safe, firmware_version (the latter also as the
 * string firmware_version_hex, "0x" and 16 lowercase hex digits).
 */
int tg_attest_info_to_json(const tg_attest_info *info, json_object **ret);
