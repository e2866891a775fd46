/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * KDFa/KDFe and TPM2_MakeCredential in software (makecred.c), with OpenSSL:
 * never the TPM's own MakeCredential, whose answer an interposer could
 * forge (see ek.h for the threat model). The seed and every key derived
 * from it are tg_secrets, wiped on every path.
 */
#include <stddef.h>
#include <stdint.h>
#include <tss2/tss2_tpm2_types.h>

#include "secret.h"

/* "sha256" etc. for OpenSSL, and the digest size; NULL / 0 for other algorithms. */
const char *tg_ek_hash_name(TPMI_ALG_HASH hash);
size_t tg_ek_hash_size(TPMI_ALG_HASH hash);

/*
 * KDFa (TPM 2.0 Part 1, 11.4.10.2): counter-mode HMAC KDF,
 *   K(i) = HMAC(key, [i]32 ‖ label ‖ 00 ‖ context_u ‖ context_v ‖ [bits]32).
 * KDFe (11.4.10.3): hash-based one-step KDF,
 *   K(i) = H([i]32 ‖ z ‖ label ‖ 00 ‖ party_u ‖ party_v).
 * bits must be a multiple of 8; out receives bits/8 bytes.
 */
int tg_kdfa(TPMI_ALG_HASH hash, const uint8_t *key, size_t key_size, const char *label,
            const uint8_t *context_u, size_t u_size, const uint8_t *context_v, size_t v_size,
            size_t bits, uint8_t *out);
int tg_kdfe(TPMI_ALG_HASH hash, const uint8_t *z, size_t z_size, const char *label,
            const uint8_t *party_u, size_t u_size, const uint8_t *party_v, size_t v_size,
            size_t bits, uint8_t *out);

/*
 * TPM2_MakeCredential in software (Part 1, 24 and Annex B.10.4 / C.6.4):
 * wraps credential to the EK public area ek, bound to object_name.
 */
int tg_make_credential(const TPMT_PUBLIC *ek, const TPM2B_NAME *object_name, const tg_secret *credential,
                       TPM2B_ID_OBJECT *ret_blob, TPM2B_ENCRYPTED_SECRET *ret_secret);
