/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <tss2/tss2_tpm2_types.h>

/*
 * The authorization policy of a sealed object, computed in software (a
 * SHA-256 policy session, TPM 2.0 Part 3 §23.7 and §23.18):
 *
 *   d0 = 32 zero bytes
 *   d1 = SHA-256(d0 ‖ TPM_CC_PolicyPCR ‖ TPML_PCR_SELECTION ‖ pcrDigest)
 *   d2 = SHA-256(d1 ‖ TPM_CC_PolicyAuthValue)          (only when pin)
 *
 * pcr_values_digest is pcrDigest: SHA-256 over the concatenated values of the
 * selected PCRs in ascending order (always SHA-256, whatever pcr_bank is,
 * because the policy session's hash is SHA-256). The TPML_PCR_SELECTION holds
 * one bank with a 3-byte select covering PCRs 0..23.
 */
int tg_policy_digest_compute(uint16_t pcr_bank, uint32_t pcr_mask, const TPM2B_DIGEST *pcr_values_digest,
                             bool pin, TPM2B_DIGEST *ret);

/* The TPML_PCR_SELECTION for one bank and a mask of PCRs 0..23 (no validation of the bank). */
void tg_pcr_selection_from_mask(uint16_t pcr_bank, uint32_t pcr_mask, TPML_PCR_SELECTION *ret);
