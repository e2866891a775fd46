/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eventlog.h"
#include "pcr-log.h"

/*
 * PCR 7 of the next boot, predicted (issue 30 item 3): the verified log
 * replayed with the Secure Boot variables the next boot will measure and,
 * for a new signing authority of the boot chain, its EV_EFI_VARIABLE_AUTHORITY
 * entry replaced. Only a log that replays to the PCR values read over the
 * verified session is used: a forged log would predict whatever its author
 * wants a token to accept.
 *
 * What the next boot measures for a variable is what the variable holds then:
 * its current value (efivarfs: an update tool such as fwupd writes the
 * variable at once, PCR 7 changes at the next boot — a pending change), with
 * an update file applied on top, appended (EFI_VARIABLE_APPEND_WRITE, how db,
 * dbx and KEK updates are shipped) or replacing it.
 */

#define TG_EFIVARS_PATH "/sys/firmware/efi/efivars"

typedef struct tg_pcr7_update {
        const char *variable;      /* "PK", "KEK", "db" or "dbx" */
        const uint8_t *lists;      /* EFI_SIGNATURE_LISTs (an update file's, authentication header skipped) */
        size_t size;
        bool append;
        const char *source;        /* the file, for messages */
} tg_pcr7_update;

typedef struct tg_pcr7_predict_options {
        tg_pcr7_update updates[4];
        unsigned n_updates;
        const uint8_t *authority;  /* DER of the boot chain's new signing certificate, NULL: unchanged */
        size_t authority_size;
        const char *efivars_dir;   /* where the variables' current values are read; NULL: not read */
} tg_pcr7_predict_options;

typedef struct tg_pcr7_prediction {
        uint16_t bank;
        uint16_t size;
        uint8_t current[TG_EVENTLOG_MAX_DIGEST];   /* the TPM's PCR 7, read over the verified session */
        uint8_t predicted[TG_EVENTLOG_MAX_DIGEST];
} tg_pcr7_prediction;

/*
 * Predicts PCR 7 in replay's policy bank. ret_changes (optional) gets a JSON
 * array of what changes: [{"variable", "source", "write", "bytes"}, ...].
 * -TG_ERR_INTERPOSER for a log that does not replay; -TG_ERR_INVALID, naming
 * the cause, when the log lacks the event to change or the change cannot be
 * predicted (an authority not in db, several db authorities).
 */
int tg_pcr7_predict(const tg_eventlog *log, const tg_pcr_replay *replay, const tg_pcr7_predict_options *o,
                    tg_pcr7_prediction *ret, json_object **ret_changes);
