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
 *  - what PCR 7 measured this boot, from the firmware's event log once it replays to the
 *    verified PCR read (lifecycle/pcr-log.h): every PCR 7 event in order (type and digest in
 *    the token's bank), SecureBoot's value, and the signature entries of dbx (record version
 *    2; version 1 kept only the digests of the SecureBoot, PK, KEK, db and dbx events).
 * 'update finish' over the grace takes the same record of the boot it runs in and compares.
 * It is an allow-list: PCR 7's events must be the recorded ones, in order; the one exception
 * is a dbx event whose data hashes to its digest and holds every recorded entry (a dbx update
 * adds revocations), and only when PCR 7 was declared changing. Anything else (a PCR outside
 * the declared change, Secure Boot turned off, a changed PK, KEK or db, an added, removed or
 * changed EV_EFI_ACTION such as "DMA Protection Disabled", a new EV_EFI_VARIABLE_AUTHORITY
 * such as another vendor's shim certificate, a dbx that lost entries, or a PCR 7 change that
 * no verified log explains) is refused before anything is rebound.
 */

enum {
        TG_SB_SECURE_BOOT,
        TG_SB_PK,
        TG_SB_KEK,
        TG_SB_DB,
        TG_SB_DBX,
        TG_SB_N,
};

/* At most this many PCR 7 events are recorded (real logs have tens): a log with more explains nothing. */
#define TG_UPDATE_PCR7_EVENTS_MAX 1024u
#define TG_UPDATE_EVENT_WHAT_MAX 120

typedef struct tg_update_event {
        uint32_t type;
        uint8_t digest[64];                /* in the token's bank */
        bool dbx;                          /* the EV_EFI_VARIABLE_DRIVER_CONFIG event of dbx */
        char *what;                        /* for messages only, sanitized: "db", "DMA Protection Disabled" */
} tg_update_event;

typedef struct tg_update_record {
        uint16_t bank;                     /* the token's */
        uint32_t pcr_mask;                 /* the token's PCRs, whose values are in values */
        tg_pcr_values values;
        uint32_t changing;                 /* PCRs declared as changing at prepare */
        bool have_sb;                      /* a verified event log gave the Secure Boot events */
        bool sb_present[TG_SB_N];
        uint8_t sb_digest[TG_SB_N][64];    /* in bank, values.value_size bytes */
        int secure_boot;                   /* SecureBoot's value: 1 on, 0 off, -1 unknown */
        /* Version 2, with have_sb: PCR 7's events in log order (malloc'ed). false: a version 1 record. */
        bool have_events;
        tg_update_event *events;
        size_t n_events;
        /* The single dbx event's entries, when its data hashes to its digest: SHA-256 of each
         * entry's type GUID and data (not the owner GUID), sorted; malloc'ed. */
        bool have_dbx;
        uint8_t (*dbx_entries)[32];
        size_t n_dbx_entries;
} tg_update_record;

/* Frees what a record owns (take() and read() give records that own memory). */
void tg_update_record_done(tg_update_record *r);

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
