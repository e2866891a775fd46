/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <libcryptsetup.h>

#include "config.h"
#include "seal.h"
#include "secret.h"
#include "token.h"
#include "verify.h"

/*
 * Lifecycle of an enrolled volume: change-pin, rotate, reseal, remove and
 * cleanup. Every secret crosses the bus only inside the verified
 * session of a tg_verify()'d TPM, and every operation is crash-safe: killed
 * after any header write or TPM command it leaves a volume that opens with
 * the recovery passphrase and with the old or the new TPM credential, and a
 * rerun completes it (docs/lifecycle.md).
 */

typedef struct tg_lifecycle_result {
        int token;            /* the token id after the operation */
        int keyslot;          /* its keyslot after the operation */
        int old_keyslot;      /* the keyslot it had before (== keyslot when unchanged) */
} tg_lifecycle_result;

/*
 * Reads (without changing anything) the tpmguard token a command will act
 * on, so that the caller asks only for what is needed (a PIN or not, which
 * PCR bank). token: a token id, or CRYPT_ANY_TOKEN for the only tpmguard
 * token (none: -TG_ERR_NOT_FOUND; two or more: -TG_ERR_INVALID listing them).
 */
int tg_lifecycle_token_peek(const char *device, int token, tg_token *ret);

/* Asks the token's current PIN (NULL in *ret when it has none). */
typedef int (*tg_lifecycle_ask_pin)(const tg_token *t, void *userdata, tg_secret **ret);
/*
 * The cheap checks of a token operation, before the caller asks for a new
 * secret: the volume opens, is LUKS2 and writable, interrupted operations
 * are resolved, the token exists and has its keyslot, the TPM verifies, and
 * the PCRs satisfy the token's policy (-TG_ERR_PCR_MISMATCH naming reseal);
 * carry_over (the operation's name, or NULL) also refuses a token whose
 * policy is weaker than tpmguard.conf (tg_lifecycle_check_carry_over).
 * With ask_pin the current PIN is then asked and proven by an unseal that
 * opens the token's keyslot, and returned in ret_pin (NULL: the token has
 * none); without it the dictionary-attack lockout is checked instead.
 */
int tg_lifecycle_check(const tg_config *config, const char *device, int token, const char *carry_over,
                       tg_lifecycle_ask_pin ask_pin, void *userdata, tg_secret **ret_pin);

/*
 * The frame every token operation (change-pin, rotate, reseal) and the
 * TPM-authorized passphrase operations share: the volume opened, its
 * interrupted operations resolved, the token selected, the TPM verified.
 */
typedef struct tg_lifecycle {
        const char *device;
        const char *state_dir;  /* where the marker key is */
        struct crypt_device *cd;
        tg_verified_tpm *v;
        tg_verify_report report;
        int token_id;
        tg_token token;
        int proven_keyslot;     /* the token's keyslot once this run's unseal opened it, else -1 */
} tg_lifecycle;

/* Frees what tg_lifecycle_begin() opened and wipes the token. */
void tg_lifecycle_done(tg_lifecycle *lc);
/*
 * Opens the volume, resolves interrupted operations, selects the token and
 * verifies the TPM. unseal_next: the caller unseals the token right after
 * (its Unseal reads the dictionary-attack state for free).
 */
int tg_lifecycle_begin(tg_lifecycle *lc, const tg_config *config, const char *device, int token, bool unseal_next);
/* Selects the tpmguard token: the requested id, or the only one (allow_invalid: a malformed one too, for remove). */
int tg_lifecycle_select_token(struct crypt_device *cd, const char *device, int requested, bool allow_invalid,
                              int *ret_id, tg_token *ret, bool *ret_valid);
/* The current secret, unsealed over the verified session and proven against its keyslot. */
int tg_lifecycle_unseal_current(tg_lifecycle *lc, const tg_secret *pin, tg_secret **ret);
/* Seals secret with params for keyslot, and proves it by unsealing it again (when test). */
int tg_lifecycle_seal_and_test(tg_lifecycle *lc, const tg_seal_params *params, const tg_secret *secret, int keyslot,
                               bool test, tg_token *ret);
/* Same keyslot: the new token replaces the old one in one header write. */
int tg_lifecycle_replace_token(tg_lifecycle *lc, const tg_token *t);
/* Refuses to carry a token's policy weaker than tpmguard.conf over (unless --accept-token-policy). */
int tg_lifecycle_check_carry_over(const tg_lifecycle *lc, const tg_config *config, const char *operation);
/* The seal parameters of token t, carried over with pin; the PIN's Argon2id from config. */
tg_seal_params tg_lifecycle_seal_params_like(const tg_token *t, const tg_secret *pin, const tg_config *config);
