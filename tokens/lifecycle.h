/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>
#include <libcryptsetup.h>

#include "config.h"
#include "luks.h"
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
 * Operations that add a keyslot (enroll; rotate; reseal with the recovery
 * passphrase) first write a "pending" marker token, type
 * TG_PENDING_TOKEN_TYPE, naming the token, the old keyslot and the new
 * keyslot (for enroll: token and old keyslot -1, complete once a token
 * references the new keyslot); they bind it to the new keyslot right after adding that, and
 * remove it last. A marker found later is an interrupted operation: it is
 * rolled forward when the token already points at the new keyslot (the old
 * keyslot is destroyed), rolled back otherwise (the new keyslot is
 * destroyed). Every lifecycle command does this first; `tpmguard cleanup`
 * does only this.
 */
#define TG_PENDING_TOKEN_TYPE "tpmguard-pending"

/*
 * The passphrase operations (recovery-key, passwd) use the same marker with
 * a different commit point, since no tpmguard token switches: the marker is
 * rewritten with "committed": true once the new keyslot is proven (and, for
 * a recovery key, shown). Resolving then completes (destroys old_keyslot)
 * when committed, and undoes (destroys new_keyslot) otherwise. Their new
 * keyslot has a benchmarked argon2id PBKDF, not tpmguard's fixed one, so the
 * marker records its exact parameters ("pbkdf") as the fingerprint for the
 * window before the marker is bound to it.
 */
typedef struct tg_pending_marker {
        char operation[16];   /* "enroll", "rotate", "reseal", "recovery-key" or "passwd" */
        int token;            /* enroll, rotate, reseal: the tpmguard token being moved; recovery-key: the id of
                               * the label token it writes; passwd: -1 */
        int old_keyslot;      /* the keyslot before the operation; -1: none (enroll; recovery-key without --replace) */
        int new_keyslot;      /* the keyslot the operation adds */
        int bound_keyslot;    /* the marker's own "keyslots" entry, -1 if none yet */
        bool committed;       /* passphrase operations: past the commit point */
        tg_pbkdf_fingerprint pbkdf; /* passphrase operations: the new keyslot's PBKDF; type "" if none */
} tg_pending_marker;

/* Is this a passphrase operation's marker (committed flag decides, not a token)? */
bool tg_pending_marker_is_passphrase_op(const tg_pending_marker *m);

/* Strict parser and writer of the marker token (type, keyslots, operation, token, old/new keyslot). */
int tg_pending_marker_from_string(const char *json, tg_pending_marker *ret);
int tg_pending_marker_to_string(const tg_pending_marker *m, char **ret);
/* Completes or undoes what marker token marker_id records, then removes it (tokens/luks.c: enroll). */
struct crypt_device;
int tg_pending_marker_resolve(struct crypt_device *cd, const char *device, int marker_id);

/* What resolving a marker does, decided without writing anything (status shows it). */
typedef struct tg_marker_plan {
        bool roll_forward;      /* the token already points at the new keyslot */
        int leftover_keyslot;   /* the keyslot to destroy, -1 if none */
        const char *why_kept;   /* set when a keyslot looks left over but is not ours to destroy */
} tg_marker_plan;
/* proven_keyslot: a keyslot the caller proved to be the token's (its unsealed secret opened it), or -1. */
void tg_pending_marker_plan(struct crypt_device *cd, int marker_id, const tg_pending_marker *m, int proven_keyslot,
                            tg_marker_plan *ret);

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

/*
 * Authorization for the passphrase operations: unsealing the tpmguard
 * token (pin, over the verified session; the unsealed secret authorizes the
 * keyslot add and never leaves this process), or, with passphrase, an
 * existing passphrase or recovery key of the volume (no TPM involved).
 */
typedef struct tg_passphrase_auth {
        int token;                         /* CRYPT_ANY_TOKEN or an id */
        const tg_secret *pin;              /* the token's PIN, when it has one */
        const tg_secret *passphrase;       /* non-NULL: authorize with it instead of the token */
        uint32_t pbkdf_time_ms;            /* 0: cryptsetup's default (2000 ms) */
} tg_passphrase_auth;

typedef struct tg_passphrase_result {
        int new_keyslot;
        int old_keyslot;                   /* -1: none replaced */
        int label_token;                   /* recovery-key: the label token, else -1 */
        int authorized_by;                 /* the keyslot that authorized the change */
} tg_passphrase_result;

/*
 * tpmguard recovery-key: a fresh recovery key (recovery.h) in a new keyslot
 * with the typed-secret PBKDF, labelled with a TG_RECOVERY_TOKEN_TYPE token;
 * show() is called with it once, after it is proven to open the new keyslot
 * and before the change is committed; nothing else sees it. replace >= 0:
 * that keyslot (a typed passphrase or recovery key, never one a token uses)
 * is destroyed after the commit. Crash-safe with a pending marker.
 */
int tg_recovery_key_enroll(const tg_config *config, const char *device, const tg_passphrase_auth *auth, int replace,
                           int (*show)(const tg_secret *key, int keyslot, void *userdata), void *userdata,
                           tg_passphrase_result *ret);

/*
 * tpmguard passwd: new_passphrase goes into a new keyslot (typed-secret
 * PBKDF), proven, committed, then keyslot (the typed passphrase being
 * changed; -1: the one the authorizing passphrase opened, or the only typed
 * passphrase when authorized by the token) is destroyed. The new passphrase
 * never reaches the TPM.
 */
int tg_passphrase_change(const tg_config *config, const char *device, const tg_passphrase_auth *auth, int keyslot,
                         const tg_secret *new_passphrase, tg_passphrase_result *ret);

/* Removes a tpmguard token and its keyslot; never the last active keyslot. */
int tg_remove(const char *device, int token, tg_lifecycle_result *ret);

/*
 * Finishes or undoes interrupted operations (pending markers) and removes
 * tpmguard tokens whose keyslot no longer exists. ret_actions (optional):
 * how many things were repaired.
 */
int tg_cleanup(const char *device, unsigned *ret_actions);
