/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <json-c/json.h>

#include "config.h"
#include "doctor-report.h"
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
 *   secure-boot     per token that binds PCR 7: Secure Boot is on and out of
 *                   setup mode (efivars), else PCR 7 binds almost nothing
 *   update          a db/dbx/KEK change or a firmware capsule pending for the
 *                   next boot, and the tokens it leaves unopenable (doctor-update.h)
 *   crypttab-options  crypttab options of tpmguard volumes that turn its unlock off or
 *                   that the installed initrd flavour ignores (doctor-crypttab.h)
 *   initrd          the plugin, the CLI and the pinned key are in the initrd
 *
 * Doctor reads; it never writes to the TPM's persistent state, a LUKS header
 * or /etc. Nothing secret is involved: it never unseals.
 */

typedef struct tg_doctor_options {
        const char *null_name_path;          /* overrides the configuration when set */
        const tg_secret *endorsement_auth;   /* NULL: empty endorsement password */
        char *const *devices;                /* LUKS2 devices to check; none: those in crypttab */
        size_t n_devices;
        const char *crypttab;                /* NULL: /etc/crypttab */
        const char *initrd;                  /* NULL: /boot/initrd.img-$(uname -r); "": do not look */
        /* The "update" check, after the volumes: appends its checks to the report (-TG_ERR_NOMEM only).
         * Set by the command (cli/doctor-update.h: it lives beside update check); NULL: not run. */
        int (*update_check)(const tg_config *config, const struct tg_doctor_options *o, struct tg_doctor_report *report);
        const char *event_log;               /* for it: NULL, the kernel's */
        const char *efivars_dir;             /* for it: NULL, /sys/firmware/efi/efivars */
} tg_doctor_options;

/* Runs every check. Fails only when out of memory: every finding is in the report. */
int tg_doctor_run(const tg_config *config, const tg_doctor_options *options, tg_doctor_report **ret);


