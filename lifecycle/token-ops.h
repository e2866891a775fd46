/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "lifecycle.h"
#include "seal.h"
#include "secret.h"

/*
 * Unseal with pin (over a verified session), then as rotate: a new random
 * secret in a new keyslot, sealed with new_pin (same PCR policy, checked
 * against the old policy digest) and test-unsealed, the token switched to it,
 * the old keyslot destroyed, so no copy of the old token opens anything. A
 * wrong pin changes nothing. new_pin NULL removes the PIN.
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
 * token's fields). Authorized by unsealing the current secret, or, with
 * unlock_passphrase, by a passphrase of the volume. Either way, as in
 * rotate: a new keyslot with a new secret, the token switched to it, the old
 * keyslot destroyed, so no copy of the old token opens the PCR state it was
 * sealed to. When the new policy cannot be tested now (explicit values that
 * differ from the current ones), the test unseal is skipped with a warning.
 */
int tg_reseal(const tg_config *config, const char *device, int token,
              const tg_reseal_params *params, tg_lifecycle_result *ret);

/* Removes a tpmguard token and its keyslot; never the last active keyslot. */
int tg_remove(const tg_config *config, const char *device, int token, tg_lifecycle_result *ret);

/* update prepare (docs/design.md "Updates"): what to add to the token. */
typedef struct tg_update_params {
        unsigned boots;                      /* a grace for this boot and the next boots (1..TG_GRACE_BOOTS_MAX) */
        const tg_pcr_values *predicted;      /* non-NULL: a predicted seal to these values instead of a grace */
        const tg_secret *pin;                /* the token's PIN */
        /* A grace: the PCRs the update may change (0: every PCR of the token); the record of
         * lifecycle/update-record.h is taken from event_log (NULL: the kernel's). */
        uint32_t changing;
        const char *event_log;
} tg_update_params;

typedef struct tg_update_result {
        int token;
        tg_alt_kind kind;                    /* what was added */
        uint32_t reset_count;                /* the TPM's resetCount now (grace) */
        uint32_t reset_count_max;            /* the grace's bound */
        uint32_t changing;                   /* grace: the PCRs it lets change */
        bool secure_boot_recorded;           /* grace: a verified event log gave the Secure Boot events */
} tg_update_result;

/*
 * Unseals the main seal with the PIN over a verified session (the PIN proven, and the masked
 * secret and authValue known), seals the same masked secret under the same authValue to the
 * update policy (a grace: resetCount <= now + boots, read in an audited ReadClock; or the
 * predicted PCR values), test-unseals a grace, and adds it to the token in one header write.
 * A grace is recorded first (lifecycle/update-record.h): what 'update finish' may bind to.
 * The keyslot does not change; the old token is valid until the new one is written.
 */
int tg_update_prepare(const tg_config *config, const char *device, int token, const tg_update_params *params,
                      tg_update_result *ret);

/*
 * Unseals through whichever seal works now (main, predicted or grace, chosen from audited reads),
 * then does what rotate does: a new secret in a new keyslot, sealed to this boot's PCR values
 * (read over the verified session) with the token's PIN and PCRs, the old keyslot destroyed once
 * the new one is proven; the new token has no update seals, and the old blobs hold a secret no
 * keyslot accepts (a firmware rollback opens nothing). *ret_nothing: the token had no update seal
 * and its PCR policy holds (nothing was changed, 0 returned).
 *
 * Over the grace, nothing is rebound before this boot is compared with the record 'update
 * prepare' took (review10 H1): a change outside it (a PCR not declared, Secure Boot off, PK,
 * KEK or db changed, a PCR 7 change no verified log explains) is refused with
 * -TG_ERR_PCR_MISMATCH naming it, unless accept_change (an interactive user who has seen it).
 */
typedef struct tg_update_finish_options {
        const char *event_log;               /* NULL: the kernel's */
        bool accept_change;
} tg_update_finish_options;
int tg_update_finish(const tg_config *config, const char *device, int token, const tg_secret *pin,
                     const tg_update_finish_options *o, bool *ret_nothing, tg_lifecycle_result *ret);
