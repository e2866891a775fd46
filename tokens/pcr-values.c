/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * PCR values for a policy (design §2 step 3): given on the command line, read
 * over the verified session, and the PolicyPCR digest over them.
 */
#include <assert.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <tss2/tss2_rc.h>

#include "error.h"
#include "log.h"
#include "pcr-values.h"
#include "tpm.h"
#include "util.h"

static uint16_t bank_digest_size(uint16_t bank) {
        switch (bank) {
        case TPM2_ALG_SHA1: return 20;
        case TPM2_ALG_SHA256: return 32;
        case TPM2_ALG_SHA384: return 48;
        case TPM2_ALG_SHA512: return 64;
        default: return 0;
        }
}

void tg_pcr_selection(uint16_t bank, uint32_t mask, TPML_PCR_SELECTION *ret) {
        *ret = (TPML_PCR_SELECTION) {
                .count = 1,
                .pcrSelections[0] = {
                        .hash = bank,
                        .sizeofSelect = 3,
                        .pcrSelect = { mask & 0xff, (mask >> 8) & 0xff, (mask >> 16) & 0xff },
                },
        };
}

int tg_pcr_value_parse(const char *s, tg_pcr_values *values) {
        _cleanup_free_ uint8_t *bytes = NULL;
        const char *eq = strchr(s, '='), *colon;
        _cleanup_free_ char *index = NULL, *bank = NULL;
        uint32_t mask;
        uint16_t alg;
        size_t n;

        if (!eq || !(colon = strchr(eq, ':')))
                return log_error_rc(-TG_ERR_INVALID, "--pcr \"%s\": expected INDEX=BANK:HEX, e.g. 7=sha256:<64 hex digits>.", s);
        index = strndup(s, (size_t) (eq - s));
        bank = strndup(eq + 1, (size_t) (colon - eq - 1));
        if (!index || !bank)
                return -TG_ERR_NOMEM;
        if (tg_pcr_list_parse(index, &mask) < 0 || __builtin_popcount(mask) != 1)
                return log_error_rc(-TG_ERR_INVALID, "--pcr \"%s\": \"%s\" is not a PCR index 0..23.", s, index);
        if (tg_pcr_bank_from_string(bank, &alg) < 0)
                return log_error_rc(-TG_ERR_INVALID, "--pcr \"%s\": unknown bank \"%s\".", s, bank);
        if (alg != values->bank)
                return log_error_rc(-TG_ERR_INVALID, "--pcr \"%s\": bank %s differs from the policy's bank %s.",
                                    s, bank, tg_pcr_bank_to_string(values->bank));
        if (tg_hex_decode(colon + 1, strlen(colon + 1), &bytes, &n) < 0 || n != bank_digest_size(alg))
                return log_error_rc(-TG_ERR_INVALID, "--pcr \"%s\": the value must be %u bytes of hex for %s.",
                                    s, bank_digest_size(alg), bank);
        memcpy(values->value[__builtin_ctz(mask)], bytes, n);
        values->value_size = (uint16_t) n;
        values->given_mask |= mask;
        values->mask |= mask;
        return 0;
}

/*
 * A PCR still at its reset value (all zeros, or all ones for the
 * locality-reset PCRs 17-22) measures nothing: a secret sealed to it is
 * bound to no boot state, and after a TPM reset it is "good" again without
 * any replay (docs/design.md §9.1).
 */
int tg_pcr_values_check_extended(const tg_pcr_values *values, uint32_t mask) {
        for (unsigned i = 0; i < TG_PCR_COUNT; i++) {
                bool zeros = true, ones = true;

                if (!(mask & (UINT32_C(1) << i)))
                        continue;
                for (unsigned k = 0; k < values->value_size; k++) {
                        zeros = zeros && values->value[i][k] == 0x00;
                        ones = ones && values->value[i][k] == 0xff;
                }
                if (zeros || ones)
                        return log_error_rc(-TG_ERR_INVALID,
                                            "PCR %u (%s) was never extended (all %s): sealing to it binds the secret to "
                                            "no boot state. Choose PCRs your firmware measures (--pcrs), or, if this is "
                                            "intended, --allow-unextended-pcrs (allow_unextended_pcrs = yes in "
                                            "tpmguard.conf).", i, tg_pcr_bank_to_string(values->bank),
                                            zeros ? "zeros" : "ones");
        }
        return 0;
}

int tg_vtpm_pcr_read(tg_verified_tpm *v, uint16_t bank, uint32_t mask, tg_pcr_values *ret) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        tg_pcr_values values = { .bank = bank, .mask = mask, .value_size = bank_digest_size(bank) };
        uint32_t left = mask;

        if (values.value_size == 0)
                return log_error_rc(-TG_ERR_INVALID, "Unsupported PCR bank 0x%04x.", bank);

        while (left) {
                _cleanup_free_ TPML_PCR_SELECTION *out_sel = NULL;
                _cleanup_free_ TPML_DIGEST *digests = NULL;
                TPML_PCR_SELECTION sel;
                uint32_t got = 0, counter;
                unsigned k = 0;
                TSS2_RC rc;

                tg_pcr_selection(bank, left, &sel);
                /* An audit session: the response HMAC proves these values came from the TPM. */
                rc = Esys_PCR_Read(esys, tg_vtpm_audit_session(v), ESYS_TR_NONE, ESYS_TR_NONE,
                                   &sel, &counter, &out_sel, &digests);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "PCR_Read");
                if (out_sel->count == 1 && out_sel->pcrSelections[0].hash == bank)
                        for (unsigned i = 0; i < 3 && i < out_sel->pcrSelections[0].sizeofSelect; i++)
                                got |= (uint32_t) out_sel->pcrSelections[0].pcrSelect[i] << (8 * i);
                got &= left;
                if (got == 0)
                        return log_error_rc(-TG_ERR_TPM,
                                            "The TPM has no active %s PCR bank with these PCRs. Choose an active "
                                            "bank with --pcr-bank (tpm2_getcap pcrs lists them).",
                                            tg_pcr_bank_to_string(bank));
                for (unsigned i = 0; i < TG_PCR_COUNT; i++) {
                        if (!(got & (UINT32_C(1) << i)))
                                continue;
                        if (k >= digests->count || digests->digests[k].size != values.value_size)
                                return log_error_rc(-TG_ERR_TPM, "PCR_Read returned a malformed digest list.");
                        memcpy(values.value[i], digests->digests[k].buffer, values.value_size);
                        k++;
                }
                if (k != digests->count)
                        return log_error_rc(-TG_ERR_TPM, "PCR_Read returned more digests than selected.");
                left &= ~got;
        }
        *ret = values;
        return 0;
}

int tg_pcr_values_digest(const tg_pcr_values *values, TPM2B_DIGEST *ret) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        unsigned int len = 0;

        if (!md)
                return -TG_ERR_NOMEM;
        if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
                return -TG_ERR_IO;
        for (unsigned i = 0; i < TG_PCR_COUNT; i++)
                if (values->mask & (UINT32_C(1) << i))
                        if (EVP_DigestUpdate(md, values->value[i], values->value_size) != 1)
                                return -TG_ERR_IO;
        if (EVP_DigestFinal_ex(md, ret->buffer, &len) != 1)
                return -TG_ERR_IO;
        ret->size = (UINT16) len;
        return 0;
}
