/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "seal.h"
#include "verify.h"

/*
 * What an update grace was prepared for (docs/design.md §9.2, "What finish binds to";
 * review10 H1). A grace opens with the PIN on PCR values nobody predicted, and 'update
 * finish' (run unattended by tpmguard-update-finish.service) then seals the token to this
 * boot's values for good. Without a record, an evil maid's chain (Secure Boot off, her own
 * PK, KEK or db, a swapped boot loader) that booted during the grace would be blessed.
 *
 * So 'update prepare' records, under state_dir/update-prepared/<LUKS UUID>.json (root's, on
 * the encrypted root in a normal install; read as hostile all the same):
 *  - the token's PCR values now, read over the verified session (never the bus unaudited);
 *  - the PCRs the update declares as changing (--changing);
 *  - the Secure Boot configuration PCR 7 measured this boot (the digests of the SecureBoot,
 *    PK, KEK, db and dbx EV_EFI_VARIABLE_DRIVER_CONFIG events, and SecureBoot's value), from
 *    the firmware's event log once it replays to the verified PCR read (lifecycle/pcr-log.h).
 * 'update finish' over the grace takes the same record of the boot it runs in and compares:
 * a PCR outside the declared change, Secure Boot turned off, PK, KEK or db changed, dbx
 * changed without PCR 7 declared, or a PCR 7 change that no verified log explains is
 * refused before anything is rebound.
 */

enum {
        TG_SB_SECURE_BOOT,
        TG_SB_PK,
        TG_SB_KEK,
        TG_SB_DB,
        TG_SB_DBX,
        TG_SB_N,
};

typedef struct tg_update_record {
        uint16_t bank;                     /* the token's */
        uint32_t pcr_mask;                 /* the token's PCRs, whose values are in values */
        tg_pcr_values values;
        uint32_t changing;                 /* PCRs declared as changing at prepare */
        bool have_sb;                      /* a verified event log gave the Secure Boot events */
        bool sb_present[TG_SB_N];
        uint8_t sb_digest[TG_SB_N][64];    /* in bank, values.value_size bytes */
        int secure_boot;                   /* SecureBoot's value: 1 on, 0 off, -1 unknown */
} tg_update_record;

/*
 * This boot's record: the token's PCR values over v's audited session, and the Secure Boot
 * events when the event log (event_log, NULL: the kernel's) replays to them; a log that is
 * missing or does not replay leaves have_sb false (said at debug level: the caller decides).
 */
int tg_update_record_take(tg_verified_tpm *v, const char *event_log, uint16_t bank, uint32_t pcr_mask,
                          uint32_t changing, tg_update_record *ret);

/* state_dir/update-prepared/<uuid>.json, written atomically (0600), or removed. */
int tg_update_record_write(const char *state_dir, const char *uuid, const tg_update_record *r);
void tg_update_record_remove(const char *state_dir, const char *uuid);
/* Reads and checks it strictly; -TG_ERR_NOT_FOUND (nothing logged) when there is none. */
int tg_update_record_read(const char *state_dir, const char *uuid, tg_update_record *ret);

/*
 * Whether now is within what prepared allowed. 0 when it is; else -TG_ERR_PCR_MISMATCH and
 * *ret_diff (malloc'ed) names every difference, for the person at the keyboard.
 */
int tg_update_record_compare(const tg_update_record *prepared, const tg_update_record *now, char **ret_diff);
