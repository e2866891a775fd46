/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <json-c/json.h>

#include "config.h"
#include "macro.h"
#include "secret.h"
#include "token.h"
#include "verify.h"

/*
 * tpmguard doctor: the whole state of this machine, one check at a time,
 * each with what was found, why it matters and the next step.
 *
 * Checks, in order (each later one is skipped when an earlier one it needs
 * failed, and says so):
 *   config          which configuration file, which policy
 *   kernel          null_name exported (kernel >= 6.10, CONFIG_TCG_TPM2_HMAC)
 *   tpm             the TPM answers on the configured TCTI
 *   da-lockout      dictionary-attack counter and lockout
 *   lockout         the lockout hierarchy has a password, held by tpmguard
 *   da-parameters   the TPM's DA parameters allow no more guessing than
 *                   tpmguard.conf's da_* settings
 *   provisioning    the pinned EK signing key loads
 *   ek-certificate  the EK certificate in NV is the one proven at provisioning
 *                   and still chains to ek_ca (when ek_ca is configured)
 *   verification    tg_verify(): the full trust chain, with its verdict
 *   volume          per LUKS2 volume (given, or from /etc/crypttab) and
 *                   tpmguard token: token valid, keyslot present, PCR policy
 *                   satisfiable with the current PCR values
 *   crypttab-options  crypttab options of tpmguard volumes that turn its unlock off or
 *                   that the installed initrd flavour ignores (doctor-crypttab.h)
 *   initrd          the plugin, the CLI and the pinned key are in the initrd
 *
 * Doctor reads; it never writes to the TPM's persistent state, a LUKS header
 * or /etc. Nothing secret is involved: it never unseals.
 */

typedef enum tg_doctor_status {
        TG_DOCTOR_OK,
        TG_DOCTOR_SKIPPED,  /* not checked; summary says why */
        TG_DOCTOR_WARNING,  /* works, with a weakness worth knowing; not a failure */
        TG_DOCTOR_PROBLEM,  /* something is broken or unsafe; error says which class */
} tg_doctor_status;

typedef struct tg_doctor_check {
        const char *id;          /* "kernel", "tpm", ...: static */
        char *subject;           /* a device, file or token; NULL when the check is global */
        tg_doctor_status status;
        int error;               /* -TG_ERR_* for a problem, 0 otherwise */
        char *summary;           /* what was found, one sentence */
        char *detail;            /* what the core logged while checking, or NULL */
        char *next_step;         /* what to do; NULL when nothing is to be done */
} tg_doctor_check;

typedef struct tg_doctor_report {
        char *config_path;
        tg_doctor_check *checks;
        size_t n_checks;
} tg_doctor_report;

typedef struct tg_doctor_options {
        const char *null_name_path;          /* overrides the configuration when set */
        const tg_secret *endorsement_auth;   /* NULL: empty endorsement password */
        char *const *devices;                /* LUKS2 devices to check; none: those in crypttab */
        size_t n_devices;
        const char *crypttab;                /* NULL: /etc/crypttab */
        const char *initrd;                  /* NULL: /boot/initrd.img-$(uname -r); "": do not look */
} tg_doctor_options;

/* Runs every check. Fails only when out of memory: every finding is in the report. */
int tg_doctor_run(const tg_config *config, const tg_doctor_options *options, tg_doctor_report **ret);
void tg_doctor_report_free(tg_doctor_report *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(tg_doctor_report *, tg_doctor_report_free);
#define _cleanup_doctor_report_ _cleanup_(tg_doctor_report_freep)

/* The most severe problem's -TG_ERR_* (see tg_err_more_severe), or 0 when there is none. */
int tg_doctor_report_worst(const tg_doctor_report *r);
/* The report for machines: { "config", "verdict", "exit_code", "most_severe", "checks": [...] }. */
int tg_doctor_report_to_json(const tg_doctor_report *r, json_object **ret);
/* The report for people. */
void tg_doctor_report_print(const tg_doctor_report *r, FILE *f);

/* True when error class a is more severe than b (for the exit code of several problems). */
bool tg_err_more_severe(int a, int b);
const char *tg_doctor_status_to_string(tg_doctor_status s);


