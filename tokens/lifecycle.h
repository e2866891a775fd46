/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>
#include <libcryptsetup.h>

#include "config.h"
#include "seal.h"
#include "secret.h"

/*
 * Lifecycle of an enrolled volume: change-pin, rotate, reseal, remove and
 * cleanup. Every secret crosses the bus only inside the verified
 * session of a tg_verify()'d TPM, and every operation is crash-safe: killed
 * after any header write or TPM command it leaves a volume that opens with
 * the recovery passphrase and with the old or the new TPM credential, and a
 * rerun completes it (docs/lifecycle.md).
 *
 * Operations that add a keyslot (rotate; reseal with the recovery
 * passphrase) first write a "pending" marker token, type
 * TG_PENDING_TOKEN_TYPE, naming the token, the old keyslot and the new
 * keyslot; they bind it to the new keyslot right after adding that, and
 * remove it last. A marker found later is an interrupted operation: it is
 * rolled forward when the token already points at the new keyslot (the old
 * keyslot is destroyed), rolled back otherwise (the new keyslot is
 * destroyed). Every lifecycle command does this first; `tpmguard cleanup`
 * does only this.
 */
#define TG_PENDING_TOKEN_TYPE "tpmguard-pending"

typedef struct tg_pending_marker {
        char operation[16];   /* "rotate" or "reseal" */
        int token;            /* the tpmguard token being moved */
        int old_keyslot;      /* its keyslot before the operation */
        int new_keyslot;      /* the keyslot the operation adds */
        int bound_keyslot;    /* the marker's own "keyslots" entry, -1 if none yet */
} tg_pending_marker;

/* Strict parser and writer of the marker token (type, keyslots, operation, token, old/new keyslot). */
int tg_pending_marker_from_string(const char *json, tg_pending_marker *ret);
int tg_pending_marker_to_string(const tg_pending_marker *m, char **ret);

/* What resolving a marker does, decided without writing anything (status shows it). */
typedef struct tg_marker_plan {
        bool roll_forward;      /* the token already points at the new keyslot */
        int leftover_keyslot;   /* the keyslot to destroy, -1 if none */
        const char *why_kept;   /* set when a keyslot looks left over but is not ours to destroy */
} tg_marker_plan;
void tg_pending_marker_plan(struct crypt_device *cd, int marker_id, const tg_pending_marker *m, tg_marker_plan *ret);

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

/*
 * Unseal with pin (over a verified session), reseal the same secret with
 * new_pin (fresh salt; same PCR policy), test-unseal it, and replace the
 * token in one header write. A wrong pin changes nothing. new_pin NULL
 * removes the PIN.
 */
int tg_change_pin(const tg_config *config, const char *device, int token,
                  const tg_secret *pin, const tg_secret *new_pin, tg_lifecycle_result *ret);

/*
 * A new random secret in a new keyslot (added with the unsealed old secret),
 * sealed with the same PIN and PCR policy and test-unsealed; the token is
 * switched to it in one header write, then the old keyslot is destroyed.
 */
int tg_rotate(const tg_config *config, const char *device, int token,
              const tg_secret *pin, tg_lifecycle_result *ret);

typedef struct tg_reseal_params {
        uint16_t pcr_bank;                       /* the new policy's bank (required) */
        uint32_t pcr_mask;                       /* the new policy's PCRs */
        const tg_pcr_values *explicit_values;    /* NULL: the current values */
        const tg_secret *pin;                    /* the current PIN, to unseal (NULL with unlock_passphrase) */
        const tg_secret *new_pin;                /* the PIN of the new seal; NULL: no PIN */
        const tg_secret *unlock_passphrase;      /* non-NULL: authorize with it instead of unsealing */
        bool allow_unextended;                   /* see tg_seal_params */
} tg_reseal_params;

/*
 * Seal to new PCR values under the policy the caller gives (never the old
 * token's fields). Authorized by unsealing the current secret (then
 * the token is replaced in one write, the keyslot stays), or, with
 * unlock_passphrase, by a passphrase of the volume (then a new keyslot with
 * a new secret is added and the old token and keyslot are dropped, as in
 * rotate). When the new policy cannot be tested now (explicit values that
 * differ from the current ones), the test unseal is skipped with a warning.
 */
int tg_reseal(const tg_config *config, const char *device, int token,
              const tg_reseal_params *params, tg_lifecycle_result *ret);

/* Removes a tpmguard token and its keyslot; never the last active keyslot. */
int tg_remove(const char *device, int token, tg_lifecycle_result *ret);

/*
 * Finishes or undoes interrupted operations (pending markers) and removes
 * tpmguard tokens whose keyslot no longer exists. ret_actions (optional):
 * how many things were repaired.
 */
int tg_cleanup(const char *device, unsigned *ret_actions);
