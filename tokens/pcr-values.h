/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>
#include <tss2/tss2_tpm2_types.h>

#include "verify.h"

#define TG_PCR_COUNT 24

/* PCR values for a policy: either read from the TPM or given by the user. */
typedef struct tg_pcr_values {
        uint16_t bank;                /* TPM2_ALG_* */
        uint32_t mask;                /* which PCRs */
        uint32_t given_mask;          /* which of them carry explicit values below */
        uint8_t value[TG_PCR_COUNT][64];
        uint16_t value_size;          /* digest size of bank */
} tg_pcr_values;

/* The TPML_PCR_SELECTION of mask in bank. */
void tg_pcr_selection(uint16_t bank, uint32_t mask, TPML_PCR_SELECTION *ret);

/* Reads the selected PCRs over the verified session (audit HMAC: integrity-protected). */
int tg_vtpm_pcr_read(tg_verified_tpm *v, uint16_t bank, uint32_t mask, tg_pcr_values *ret);

/* -TG_ERR_INVALID, naming the PCR, when a PCR of mask is still at its reset value (all 0x00 or all 0xff). */
int tg_pcr_values_check_extended(const tg_pcr_values *values, uint32_t mask);

/* PolicyPCR's pcrDigest: SHA-256 over the selected PCR values in index order. */
int tg_pcr_values_digest(const tg_pcr_values *values, TPM2B_DIGEST *ret);

/* Parses "7=sha256:HEX" into values (bank must match; length must be the bank's digest size). */
int tg_pcr_value_parse(const char *s, tg_pcr_values *values);
