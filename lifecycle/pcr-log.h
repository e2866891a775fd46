/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "eventlog.h"
#include "verify.h"

/*
 * The firmware event log made evidence: replayed per bank and compared with
 * the PCR values read over the verified session (tg_vtpm_pcr_read, the
 * audited read the seal uses). Threat model: the log is a file anyone with
 * root (or a firmware bug) can forge, and a plain PCR_Read can be forged on
 * the bus; an audited read in the session salted to the certified NULL key
 * cannot. Only a log whose firmware PCRs replay to those values says what the
 * firmware measured, and only such a log may feed a prediction.
 *
 * The firmware's log covers PCRs 0-7 (and what boot loaders logged through
 * the firmware before ExitBootServices); PCRs extended later by the OS (IMA
 * on 10, systemd-pcrextend on 11, systemd-cryptsetup on 15, ...) are not in
 * it, so only PCRs 0-7 must replay.
 */

#define TG_EVENTLOG_PATH "/sys/kernel/security/tpm0/binary_bios_measurements"
#define TG_FIRMWARE_PCR_MASK UINT32_C(0xff)

typedef struct tg_pcr_bank_replay {
        uint16_t alg;
        uint16_t size;
        bool replayed_ok;           /* OpenSSL hashes this bank: replayed[] is set */
        bool tpm_read;              /* the TPM has the bank active: tpm[] is set */
        uint32_t log_mask;          /* PCRs the log extended */
        uint32_t match_mask;        /* PCRs whose replay equals the TPM's value */
        uint8_t replayed[TG_EVENTLOG_PCRS][TG_EVENTLOG_MAX_DIGEST];
        uint8_t tpm[TG_EVENTLOG_PCRS][TG_EVENTLOG_MAX_DIGEST];
} tg_pcr_bank_replay;

typedef struct tg_pcr_replay {
        unsigned n_banks;
        tg_pcr_bank_replay banks[TG_EVENTLOG_MAX_BANKS];
        uint16_t policy_bank;       /* the bank tokens seal to (tpmguard.conf's pcr_bank) */
        uint32_t firmware_mismatch; /* PCRs 0-7 that do not replay in some bank read from the TPM */
        unsigned n_compared;        /* banks replayed and read from the TPM */
        bool verified;              /* PCRs 0-7 replay in every bank compared (at least one) */
} tg_pcr_replay;

/* Reads and parses the log at path (NULL: TG_EVENTLOG_PATH), naming the next step when there is none. */
int tg_pcr_log_read(const char *path, tg_eventlog **ret);

/*
 * Replays every bank of the log and reads the TPM's values over the verified
 * session. Fills ret whatever the comparison says (ret->verified); fails
 * when the TPM cannot be read (the policy bank must be; another bank the TPM
 * has not active is reported as such: the audited answer says so, an
 * interposer cannot fake it) or when no bank could be compared
 * (-TG_ERR_INVALID: a SHA-1-only log on a TPM without SHA-1 PCRs).
 */
int tg_pcr_replay_verify(tg_verified_tpm *v, const tg_eventlog *log, uint16_t policy_bank, tg_pcr_replay *ret);

/* The bank's entry, NULL when the log has none. */
const tg_pcr_bank_replay *tg_pcr_replay_bank(const tg_pcr_replay *r, uint16_t alg);
