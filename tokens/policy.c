/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <openssl/evp.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>

#include "config.h"
#include "error.h"
#include "log.h"
#include "policy.h"
#include "tpm.h"

#define PCR_MASK_ALL 0x00ffffffu

void tg_pcr_selection_from_mask(uint16_t pcr_bank, uint32_t pcr_mask, TPML_PCR_SELECTION *ret) {
        *ret = (TPML_PCR_SELECTION) {
                .count = 1,
                .pcrSelections[0] = {
                        .hash = pcr_bank,
                        .sizeofSelect = 3,
                        .pcrSelect = {
                                (uint8_t) (pcr_mask & 0xff),
                                (uint8_t) ((pcr_mask >> 8) & 0xff),
                                (uint8_t) ((pcr_mask >> 16) & 0xff),
                        },
                },
        };
}

/* new = SHA-256(old ‖ bytes); old and new are both 32 bytes. */
static int policy_extend(TPM2B_DIGEST *digest, const uint8_t *bytes, size_t size) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        unsigned len = 0;

        if (!ctx)
                return -TG_ERR_NOMEM;
        if (EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) != 1 ||
            EVP_DigestUpdate(ctx, digest->buffer, digest->size) != 1 ||
            EVP_DigestUpdate(ctx, bytes, size) != 1 ||
            EVP_DigestFinal_ex(ctx, digest->buffer, &len) != 1 ||
            len != 32)
                return log_error_rc(-TG_ERR_INVALID, "SHA-256 failed while computing a policy digest.");
        return 0;
}

/* digest = H(digest || TPM_CC_PolicyAuthValue): the PIN's part of a policy. */
static int policy_extend_auth_value(TPM2B_DIGEST *digest) {
        uint8_t buf[sizeof(TPM2_CC)];
        size_t off = 0;
        TSS2_RC rc;

        rc = Tss2_MU_TPM2_CC_Marshal(TPM2_CC_PolicyAuthValue, buf, sizeof buf, &off);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_INVALID, "Cannot marshal TPM_CC_PolicyAuthValue: %s", Tss2_RC_Decode(rc));
        return policy_extend(digest, buf, off);
}

/* digest = H(digest ‖ TPM_CC_PolicyPCR ‖ TPML_PCR_SELECTION ‖ pcrDigest), after checking the arguments. */
static int policy_extend_pcr(TPM2B_DIGEST *digest, uint16_t pcr_bank, uint32_t pcr_mask,
                             const TPM2B_DIGEST *pcr_values_digest) {
        TPML_PCR_SELECTION selection;
        uint8_t buf[sizeof(TPM2_CC) + sizeof(TPML_PCR_SELECTION) + sizeof(TPMU_HA)];
        size_t off = 0;
        TSS2_RC rc;

        if (!tg_pcr_bank_to_string(pcr_bank))
                return log_error_rc(-TG_ERR_INVALID, "Unknown PCR bank 0x%04x for the policy (sha1, sha256, sha384, sha512).",
                                    pcr_bank);
        if (pcr_mask == 0 || (pcr_mask & ~PCR_MASK_ALL) != 0)
                return log_error_rc(-TG_ERR_INVALID, "PCR mask 0x%08x selects no PCR or one outside 0..23.", pcr_mask);
        if (!pcr_values_digest || pcr_values_digest->size != 32)
                return log_error_rc(-TG_ERR_INVALID, "The PCR values digest must be 32 bytes (SHA-256).");

        tg_pcr_selection_from_mask(pcr_bank, pcr_mask, &selection);
        rc = Tss2_MU_TPM2_CC_Marshal(TPM2_CC_PolicyPCR, buf, sizeof buf, &off);
        if (rc == TSS2_RC_SUCCESS)
                rc = Tss2_MU_TPML_PCR_SELECTION_Marshal(&selection, buf, sizeof buf, &off);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_INVALID, "Cannot marshal the PolicyPCR arguments: %s", Tss2_RC_Decode(rc));
        memcpy(buf + off, pcr_values_digest->buffer, 32);
        off += 32;
        return policy_extend(digest, buf, off);
}

int tg_policy_digest_compute(uint16_t pcr_bank, uint32_t pcr_mask, const TPM2B_DIGEST *pcr_values_digest,
                             bool pin, TPM2B_DIGEST *ret) {
        TPM2B_DIGEST digest = { .size = 32 };
        int r;

        r = policy_extend_pcr(&digest, pcr_bank, pcr_mask, pcr_values_digest);
        if (r < 0)
                return r;

        if (pin) {
                r = policy_extend_auth_value(&digest);
                if (r < 0)
                        return r;
        }

        *ret = digest;
        return 0;
}

void tg_policy_grace_operand(uint32_t reset_count_max, TPM2B_OPERAND *ret) {
        *ret = (TPM2B_OPERAND) {
                .size = 4,
                .buffer = {
                        (uint8_t) (reset_count_max >> 24), (uint8_t) (reset_count_max >> 16),
                        (uint8_t) (reset_count_max >> 8), (uint8_t) reset_count_max,
                },
        };
}

/* digest = H(digest ‖ TPM_CC_PolicyCounterTimer ‖ H(operandB ‖ offset ‖ operation)) (Part 3, PolicyCounterTimer). */
static int policy_extend_counter_timer(TPM2B_DIGEST *digest, const TPM2B_OPERAND *operand, uint16_t offset,
                                       TPM2_EO operation) {
        uint8_t buf[sizeof(TPM2_CC) + 32], args[32];
        size_t off = 0;
        TSS2_RC rc;

        /* args = SHA-256(operandB ‖ offset ‖ operation): a plain hash, not an extend of a digest. */
        memcpy(buf, operand->buffer, operand->size);
        off = operand->size;
        rc = Tss2_MU_UINT16_Marshal(offset, buf, sizeof buf, &off);
        if (rc == TSS2_RC_SUCCESS)
                rc = Tss2_MU_UINT16_Marshal(operation, buf, sizeof buf, &off);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_INVALID, "Cannot marshal the PolicyCounterTimer arguments: %s",
                                    Tss2_RC_Decode(rc));
        if (EVP_Digest(buf, off, args, NULL, EVP_sha256(), NULL) != 1)
                return log_error_rc(-TG_ERR_INVALID, "SHA-256 failed while computing a policy digest.");

        off = 0;
        rc = Tss2_MU_TPM2_CC_Marshal(TPM2_CC_PolicyCounterTimer, buf, sizeof buf, &off);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_INVALID, "Cannot marshal TPM_CC_PolicyCounterTimer: %s", Tss2_RC_Decode(rc));
        memcpy(buf + off, args, sizeof args);
        off += sizeof args;
        return policy_extend(digest, buf, off);
}

int tg_policy_digest_grace(uint32_t reset_count_max, uint16_t pcr_bank, uint32_t pcr_mask,
                           const TPM2B_DIGEST *pcr_values_digest, TPM2B_DIGEST *ret) {
        static const TPM2B_OPERAND restart_zero = { .size = 4 };
        TPM2B_DIGEST digest = { .size = 32 };
        TPM2B_OPERAND operand;
        int r;

        tg_policy_grace_operand(reset_count_max, &operand);
        r = policy_extend_counter_timer(&digest, &operand, TG_RESET_COUNT_OFFSET, TPM2_EO_UNSIGNED_LE);
        if (r < 0)
                return r;
        r = policy_extend_counter_timer(&digest, &restart_zero, TG_RESTART_COUNT_OFFSET, TPM2_EO_EQ);
        if (r < 0)
                return r;
        if (pcr_mask) {
                r = policy_extend_pcr(&digest, pcr_bank, pcr_mask, pcr_values_digest);
                if (r < 0)
                        return r;
        }
        r = policy_extend_auth_value(&digest);
        if (r < 0)
                return r;
        *ret = digest;
        return 0;
}
