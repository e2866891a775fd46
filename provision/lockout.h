/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <tss2/tss2_esys.h>

#include "config.h"
#include "da.h"
#include "secret.h"
#include "verify.h"

/*
 * The lockout hierarchy and the TPM's dictionary-attack (DA) parameters
 * (design §2, "Lockout").
 *
 * Some attacks no verification can see: an interposer forging the firmware's
 * PCR extends, or an attacker's own OS resetting a discrete TPM and
 * replaying good PCR values. Against those the PIN under the TPM's DA
 * lockout is what stands, and it stands only if
 *   - nobody but the owner can call TPM2_DictionaryAttackLockReset, i.e. the
 *     lockout hierarchy has a password (factory TPMs have none), and
 *   - the DA parameters allow few guesses.
 * So provisioning takes the lockout hierarchy when its password is empty: a
 * random 32-byte value, set with HierarchyChangeAuth in a session salted to
 * the verified NULL key with the new value encrypted (never in clear), kept
 * root-only in the state directory (on the encrypted root; never in an
 * initrd), and sets the DA parameters of tpmguard.conf with it.
 */

/* The file in the state directory: 64 hex digits and a newline, mode 0400. */
#define TG_LOCKOUT_FILE_NAME "lockout-auth"
#define TG_LOCKOUT_AUTH_SIZE 32

/*
 * True when the TPM's DA parameters allow more guessing than the configured
 * ones: more tries, faster forgiveness (recovery_seconds 0 turns DA protection
 * off), or a shorter wait after a wrong lockout password.
 */
bool tg_lockout_params_weaker(const tg_da_state *s, const tg_config *config);

/*
 * A lockout password as text, from the state file or --lockout-auth-file:
 * exactly 64 hex digits (with an optional trailing newline) are tpmguard's
 * own format and stand for the 32 bytes they encode; anything else is taken
 * byte for byte (a password someone else set, e.g. with tpm2_changeauth).
 */
int tg_lockout_auth_from_text(const tg_secret *text, tg_secret **ret);

/* The stored lockout password; -TG_ERR_NOT_FOUND when tpmguard holds none. */
int tg_lockout_auth_load(const char *state_dir, tg_secret **ret);

typedef enum tg_lockout_ownership {
        TG_LOCKOUT_TAKEN,    /* it had no password: tpmguard set one now */
        TG_LOCKOUT_HELD,     /* tpmguard holds its password (stored, or given and now stored) */
        TG_LOCKOUT_FOREIGN,  /* someone else set a password tpmguard does not know: nothing was changed */
} tg_lockout_ownership;

typedef struct tg_lockout_result {
        tg_lockout_ownership ownership;
        bool params_set;            /* the TPM has the configured DA parameters (set now, or already) */
        tg_da_state state;          /* as read after the changes */
} tg_lockout_result;

/*
 * Takes the lockout hierarchy when its password is empty, and sets the DA
 * parameters of config with its password (supplied: --lockout-auth-file;
 * else the one stored in state_dir). A password set by someone else that
 * tpmguard does not know is reported (TG_LOCKOUT_FOREIGN, a warning), not
 * an error. A wrong password is an error (and the TPM then refuses the
 * lockout hierarchy for its lockout_recovery time). Every authorization is an
 * HMAC in v's salted session; the new password travels encrypted.
 */
int tg_lockout_setup(tg_verified_tpm *v, const tg_config *config, const char *state_dir, const tg_secret *supplied,
                     tg_lockout_result *ret);

/* TPM2_DictionaryAttackLockReset with the supplied or the stored lockout password. */
int tg_lockout_reset(tg_verified_tpm *v, const char *state_dir, const tg_secret *supplied, tg_da_state *ret);
