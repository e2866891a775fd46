/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "secret.h"
#include "pcr-values.h"
#include "token.h"
#include "tpm.h"
#include "verify.h"

/*
 * How many times an Unseal answered TPM_RC_PCR_CHANGED (a PCR extended by another process
 * between PolicyPCR and the Unseal) runs the policy again before giving up as a race
 * (-TG_ERR_TPM, never a PCR mismatch). A genuine race costs no dictionary-attack try (the
 * TPM checks the PCRs before the authValue). But an error response carries no HMAC: an
 * interposer can answer a wrong PIN's TPM_RC_AUTH_FAIL with TPM_RC_PCR_CHANGED and have each
 * retry spend a real try, so the retries are few (a race lasts one extend; the tries are not).
 */
#define TG_PCR_RACE_TRIES 3


typedef struct tg_seal_params {
        uint16_t pcr_bank;
        uint32_t pcr_mask;
        const tg_pcr_values *explicit_values; /* NULL: seal to the current values */
        bool allow_unextended;                /* seal to PCRs still at their reset value (all 0 or all 1) */
        const tg_secret *pin;                 /* NULL: no PIN (warned about by the caller) */
        /* A PIN seal writes format 2 with these Argon2id parameters. memory_kib 0: the default
         * (TG_ARGON2_MEMORY_DEFAULT); parallel 0: 1; time_cost 0: benchmarked here to argon2_target_ms
         * (0: TG_ARGON2_TARGET_MS_DEFAULT). */
        tg_argon2_params argon2;
        unsigned argon2_target_ms;
        const tg_secret *owner_auth;          /* owner hierarchy password, NULL: empty */
        /* An update seal (token.h, alternates): the PIN's salt and Argon2id parameters of this
         * format 2 token instead of fresh ones, so that the new blob holds the same masked secret
         * under the same authValue as the token's (one Argon2id per typed PIN opens either). */
        const tg_token *pin_of;
        /* A grace seal: PolicyCounterTimer resetCount <= reset_count_max and restartCount == 0,
         * the PCRs of pcr_mask (the ones the update does not change; 0: none) at their values
         * now in pin_of's bank, the PIN. */
        bool grace;
        uint32_t reset_count_max;
} tg_seal_params;

/*
 * Seals secret to the TPM under the SRK with PolicyPCR (+ PolicyAuthValue
 * with the PIN-derived authValue), entirely inside the verified session: the
 * secret and the authValue travel only in Create's parameter-encrypted
 * inSensitive, and every command naming an object carries the salted HMAC
 * session. Fills ret_token (blob, PCR policy, PIN KDF, parent name). With a
 * PIN the token is format 2: the TPM holds secret XOR K, K from the PIN's
 * Argon2id (tokens/pin.h), so what the TPM holds opens nothing without the PIN.
 */
int tg_seal(tg_verified_tpm *v, const tg_seal_params *params, const tg_secret *secret, tg_token *ret_token);

/*
 * tg_seal(), with CreateLoaded instead of Create: ret_object is the sealed
 * object, still loaded, for a test unseal with tg_unseal_loaded() (docs/design.md §2.4:
 * one Load and one ReadPublic fewer than tg_unseal() of the new token).
 */
int tg_seal_loaded(tg_verified_tpm *v, const tg_seal_params *params, const tg_secret *secret, tg_token *ret_token,
                   tg_handle *ret_object);

/*
 * Unseals a token's secret over verified sessions (a format 2 token's
 * unsealed data unmasked with K, here). pin may be NULL when the
 * token needs none; a token that needs one and gets NULL returns
 * -TG_ERR_PIN_NEEDED without talking to the TPM. Wrong PIN → -TG_ERR_BAD_PIN
 * (with the DA state logged), PCRs changed → -TG_ERR_PCR_MISMATCH, a policy
 * session whose salt the TPM did not share (bus tampering, found before the
 * PIN is tried) → -TG_ERR_INTERPOSER, PCRs extended by others during every
 * one of TG_PCR_RACE_TRIES attempts → -TG_ERR_TPM.
 */
int tg_unseal(tg_verified_tpm *v, const tg_token *token, const tg_secret *pin, tg_secret **ret_secret);

/*
 * Called right before the PIN-bearing Unseal (after the PIN's KDF and the object's and policy
 * session's work), once per unseal: a negative return stops the unseal there, having sent nothing
 * for the PIN, and is returned (the plugin's turn among volumes and its check of systemd's PIN
 * cache, tokens/pin-cache.c: the KDF's second of CPU stays outside the turn).
 */
typedef struct tg_unseal_gate {
        int (*before_unseal)(void *userdata);
        void *userdata;
} tg_unseal_gate;

/* tg_unseal() with a gate (NULL: none). */
int tg_unseal_gated(tg_verified_tpm *v, const tg_token *token, const tg_secret *pin, const tg_unseal_gate *gate,
                    tg_secret **ret_secret);

/*
 * tg_unseal() in two halves, for the token plugin's two calls (issue 33; docs/design.md §2.4, "Work
 * before the PIN"): tg_unseal_prepare() does everything that needs no PIN value (the sealed
 * object's Load, the salted policy session started and proven, the token's policy run in it,
 * PolicyAuthValue included) and says whether the token's PCR policy is satisfied now (from the
 * session's policy digest, read without a session so that the policy stays for the Unseal; a
 * mismatch is confirmed over the session's response HMAC before it is believed); it hands out the loaded
 * object and the policy session, secret-free, only on success. tg_unseal_prepared() then derives
 * the authValue from the PIN and sends the Unseal (PolicyRestart and the policy again on a PCR
 * race, spending no dictionary-attack try); object and policy are released there, on every path.
 */
int tg_unseal_prepare(tg_verified_tpm *v, const tg_token *token, bool *ret_satisfied, tg_handle *ret_object,
                      tg_handle *ret_policy);
int tg_unseal_prepared(tg_verified_tpm *v, const tg_token *token, const tg_secret *pin, const tg_unseal_gate *gate,
                       tg_handle *object, tg_handle *policy, tg_secret **ret_secret);

/* tg_unseal() of the object tg_seal_loaded() left loaded (released here, on every path). */
int tg_unseal_loaded(tg_verified_tpm *v, const tg_token *token, const tg_secret *pin, tg_handle *object,
                     tg_secret **ret_secret);

/* Whether the token's PCR policy holds for the current PCR values (read over
 * the audited session), without unsealing anything; for a grace view, whether
 * the TPM's resetCount is within its bound and its restartCount 0. */
int tg_token_policy_satisfied(tg_verified_tpm *v, const tg_token *token, bool *ret_satisfied);

/* The TPM's resetCount and restartCount, from a ReadClock over the verified audit session (its
 * response HMAC: an interposer cannot lower them to stretch a grace). Not obfuscated: ReadClock,
 * like PolicyCounterTimer, uses the real counters; only attestation structures obfuscate them. */
typedef struct tg_tpm_counters {
        uint32_t reset_count;
        uint32_t restart_count;
} tg_tpm_counters;
int tg_vtpm_counters(tg_verified_tpm *v, tg_tpm_counters *ret);

/* Why a grace refuses a boot that was a TPM Restart or Resume (restartCount > 0), and what to do. */
#define TG_GRACE_RESTART_MESSAGE                                                                        \
        "The update grace opens only in the boot itself, while the TPM has not been restarted since it " \
        "started (restartCount 0), and the TPM's restartCount is not 0 now: a resume from suspend or "  \
        "hibernation, or a Shutdown(STATE) sent before this power-on (which any program with TPM "      \
        "access can send, so that boots would not use up the grace). This is not a wrong PIN. Unlock "  \
        "with the recovery passphrase, or reboot (a full power-off, not hibernation) if 'tpmguard "     \
        "status' shows boots left; then run 'tpmguard update finish'. If the machine did not sleep or " \
        "hibernate, suspect that something sent that Shutdown."


