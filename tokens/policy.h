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

/*
 * The policy of an update grace seal (docs/design.md "Updates"): the
 * TPM's resetCount (TPMS_TIME_INFO.clockInfo.resetCount, which every TPM Reset,
 * i.e. every boot, increments and only TPM2_Clear zeroes) at most
 * reset_count_max, its restartCount 0 (no TPM Restart or Resume since that
 * Reset: a Shutdown(STATE) before a power cycle, which anyone can send, would
 * otherwise make boots that do not count), the PCRs the update does not change
 * (pcr_mask, possibly none) at their values at prepare, and the PIN:
 *
 *   ct(d, operandB, offset, op) = SHA-256(d ‖ TPM_CC_PolicyCounterTimer ‖
 *                                         SHA-256(operandB ‖ offset ‖ op))   (Part 3 §23.10)
 *   d1 = ct(d0, reset_count_max as 4 bytes big-endian (as TPMS_TIME_INFO is
 *           marshalled), TG_RESET_COUNT_OFFSET, TPM_EO_UNSIGNED_LE)
 *   d2 = ct(d1, 00000000, TG_RESTART_COUNT_OFFSET, TPM_EO_EQ)
 *   d3 = SHA-256(d2 ‖ TPM_CC_PolicyPCR ‖ selection ‖ pcrDigest), as in tg_policy_digest_compute
 *        (only when pcr_mask is not 0: else d3 = d2)
 *   d4 = SHA-256(d3 ‖ TPM_CC_PolicyAuthValue)
 */
#define TG_RESET_COUNT_OFFSET 16u   /* time (UINT64), clock (UINT64), then resetCount (UINT32) */
#define TG_RESTART_COUNT_OFFSET 20u /* then restartCount (UINT32) */
int tg_policy_digest_grace(uint32_t reset_count_max, uint16_t pcr_bank, uint32_t pcr_mask,
                           const TPM2B_DIGEST *pcr_values_digest, TPM2B_DIGEST *ret);
/* The operandB of the grace seal's PolicyCounterTimer. */
void tg_policy_grace_operand(uint32_t reset_count_max, TPM2B_OPERAND *ret);

/* The TPML_PCR_SELECTION for one bank and a mask of PCRs 0..23 (no validation of the bank). */
void tg_pcr_selection_from_mask(uint16_t pcr_bank, uint32_t pcr_mask, TPML_PCR_SELECTION *ret);
