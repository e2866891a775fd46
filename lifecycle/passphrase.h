/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include "config.h"
#include "secret.h"

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
