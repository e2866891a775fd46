/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "config.h"
#include "doctor.h"

/*
 * doctor's "update" check (issue 30 item 5), set as tg_doctor_options.update_check by the command:
 * a change pending for the next boot (a db, dbx or KEK value written since this boot, a firmware
 * capsule fwupd staged) and, per token, whether the next boot opens it with the PIN alone:
 * update check's computation (cli/cmd-update-check.h), appended to the report as checks. A token
 * that will not is a problem (pcr-mismatch) naming the command to run before the reboot; nothing
 * pending is one OK check; a next boot that cannot be computed (no event log, one that does not
 * replay) is a skipped check saying why. -TG_ERR_NOMEM only.
 */
int tg_doctor_update_check(const tg_config *config, const tg_doctor_options *o, tg_doctor_report *report);
