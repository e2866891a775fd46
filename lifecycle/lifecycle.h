/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
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

typedef struct tg_migrate_result {
        int token;              /* the new tpmguard token */
        int keyslot;            /* its keyslot */
        int old_token;          /* the replaced token */
        int old_keyslot;        /* its keyslot */
        bool old_token_removed; /* false with keep_old */
        bool old_keyslot_destroyed;
        bool old_keyslot_unproven; /* kept: its token's secret was not shown to open it */
        char old_type[32];
} tg_migrate_result;

/*
 * tpmguard migrate: replaces token old_token (systemd-tpm2 or clevis) by a
 * tpmguard token. Authorized only by unlock_passphrase (a recovery
 * passphrase or key file), never by the old token: unlocking through it is
 * the path an interposer reads. Enrols a tpmguard token into a new keyslot
 * with options->seal (the caller's policy), proves it by a test unseal, then
 * removes the old token and the keyslot only it used (never a keyslot the
 * passphrase opens or another token uses, never the last), and that keyslot
 * only when this run proved it the old token's: a systemd-tpm2 token's own
 * secret (through systemd's token plugin, old_pin if it has a PIN) opened
 * exactly it. Otherwise (clevis, no PIN, no plugin, wrong PIN) the keyslot
 * is kept and old_keyslot_unproven set. keep_old: the old token and keyslot
 * stay, and the old token is not used at all. Crash-safe through a
 * "migrate" pending marker, which names the old keyslot only when proven.
 */
int tg_migrate(const tg_config *config, const char *device, int old_token, const tg_secret *unlock_passphrase,
               const tg_secret *old_pin, const tg_enroll_options *options, bool keep_old, tg_migrate_result *ret);

/* 1 if token TOKEN of DEVICE is a systemd-tpm2 token with a PIN ("tpm2-pin": true), 0 if not, <0 on error. */
int tg_migrate_token_wants_pin(const char *device, int token);

/* Removes a tpmguard token and its keyslot; never the last active keyslot. */
int tg_remove(const tg_config *config, const char *device, int token, tg_lifecycle_result *ret);

/*
 * Finishes or undoes interrupted operations (pending markers) and removes
 * tpmguard tokens whose keyslot no longer exists. ret_actions (optional):
 * how many things were repaired.
 */
int tg_cleanup(const tg_config *config, const char *device, unsigned *ret_actions);
