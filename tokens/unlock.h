/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libcryptsetup.h>
#include <stdbool.h>
#include <stdint.h>

#include "seal.h"
#include "secret.h"
#include "token.h"
#include "verify.h"

/*
 * PIN attempts per token within one process (cryptsetup and
 * systemd-cryptsetup open one volume per process and call the plugin once per
 * PIN typed). The caller owns it; the plugin keeps one for its lifetime.
 * Keyed by the SHA-256 of the token JSON so that two volumes in one process
 * have budgets of their own.
 */
#define TG_PIN_ATTEMPTS_SLOTS 8
typedef struct tg_unlock_prepared tg_unlock_prepared;
typedef struct tg_pin_attempt_slot {
        uint8_t token_digest[32];
        unsigned wrong;
        bool stale_skipped;   /* a PIN was not sent once as another volume's refused copy (tokens/pin-cache.h) */
        bool used;
} tg_pin_attempt_slot;

typedef struct tg_pin_attempts {
        tg_pin_attempt_slot slot[TG_PIN_ATTEMPTS_SLOTS];
        /*
         * The PIN-less call's work for the PIN call (issue 33; docs/design.md §2.4, "Work before the
         * PIN"): the verified TPM's connection, the loaded sealed object and the policy session with
         * the token's policy run, for one token. Secret-free (handles and session state, no PIN, no
         * authValue, no secret). Taken by the next call with a PIN for the same token JSON, dropped
         * (flushed) by any other call and by tg_unlock_prepared_release(). NULL when none.
         */
        tg_unlock_prepared *prepared;
} tg_pin_attempts;

/* Flushes and frees attempts->prepared (the plugin calls it when it is unloaded or the process exits). */
void tg_unlock_prepared_release(tg_pin_attempts *attempts);

/*
 * The whole unlock path behind the token plugin: configuration from /etc
 * (never from the token), token JSON validated, TPM verified, secret
 * unsealed over verified sessions, then checked against the volume binding
 * of cd (tokens/binding.h; skipped when cd is NULL, for tests that have no
 * volume). pin may be NULL. attempts may be NULL (then every wrong PIN is
 * final).
 *
 * The PIN retry policy (tpmguard.conf pin_tries, pin_da_reserve): a wrong PIN
 * returns -TG_ERR_PIN_RETRY (libcryptsetup asks again) while fewer than
 * pin_tries wrong PINs were typed for this token in this process and more than
 * pin_da_reserve TPM dictionary-attack tries remain; otherwise -TG_ERR_BAD_PIN
 * (give up to the recovery passphrase). With pin_da_reserve or fewer DA tries
 * left, the PIN is not tried at all (-TG_ERR_LOCKOUT): the TPM's last tries are
 * never spent at a boot prompt.
 *
 * Called without a PIN for a token that needs one, it asks for it
 * (-TG_ERR_PIN_NEEDED) only when one can work: the TPM verified, not in
 * lockout nor down to the reserve (-TG_ERR_LOCKOUT), and the token's PCR
 * policy satisfied by the PCR values now (-TG_ERR_PCR_MISMATCH). Each refusal
 * says why and sends the caller on to the passphrase without a PIN prompt.
 * When it asks, it has also done all of the unseal that needs no PIN value
 * (tg_unseal_prepare()) and keeps it in attempts->prepared, so that the call
 * with the PIN sends only the Unseal (and the sealed object's flush).
 *
 * Returns the keyslot passphrase, or one of: -TG_ERR_PIN_NEEDED,
 * -TG_ERR_PIN_RETRY, -TG_ERR_BAD_PIN, -TG_ERR_LOCKOUT, -TG_ERR_PCR_MISMATCH,
 * -TG_ERR_INTERPOSER, -TG_ERR_NOT_PROVISIONED, -TG_ERR_NO_NULL_NAME,
 * -TG_ERR_TPM_UNREACHABLE, -TG_ERR_TOKEN, -TG_ERR_TPM, -TG_ERR_VOLUME_BINDING, ...
 */
int tg_unlock_token_json(struct crypt_device *cd, const char *token_json, const tg_secret *pin,
                         tg_pin_attempts *attempts, tg_secret **ret_passphrase);

/*
 * The seal of a token with update seals (token.h, alternates) that the TPM is asked to
 * unseal: the main seal when its PCR policy holds now, else the predicted seal when its
 * policy holds, else the grace (whose counter bounds the TPM checks in PolicyCounterTimer,
 * before the PIN). Chosen before the PIN-bearing Unseal from values read over the verified
 * audit session, so that one typed PIN is one Unseal, one dictionary-attack try at most: a
 * policy the TPM refuses fails before the authValue is checked, and no second seal is ever
 * tried with the same PIN (an interposer that forged a policy failure over a wrong PIN's
 * failure would otherwise have each typed PIN spend two tries). *ret_kind is 0 for the main
 * seal. ret_usable (optional): whether the chosen seal's policy holds now; ret_counters
 * (optional): for the grace, the TPM's resetCount (for the boots left) and restartCount read
 * for the choice. v
 * must have its HMAC session (not one-shot).
 */
int tg_unlock_choose_seal(tg_verified_tpm *v, const tg_token *token, tg_token *ret, tg_alt_kind *ret_kind,
                          bool *ret_usable, tg_tpm_counters *ret_counters);

/*
 * Where an unlock through an update seal leaves its secret-free marker, under cache_dir:
 * update-pending/<LUKS UUID> (tpmguard-update-finish.service, 'tpmguard update finish --from-marker').
 */
#define TG_UPDATE_PENDING_DIR "update-pending"

/* The number of DA tries an unlock may still spend: remaining minus reserve, 0 when none. */
unsigned tg_pin_da_spendable(bool in_lockout, uint32_t failures, uint32_t max_failures, unsigned reserve);
