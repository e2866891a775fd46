/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>

#include "cmdline.h"
#include "config.h"
#include "pcr-predict.h"
#include "update-check.h"

/*
 * The next boot as far as it can be known before the reboot: the verified event log replayed and
 * PCR 7 predicted (a pending efivarfs change, the update files cli names), the other PCRs and the
 * resetCount read over the verified session, a staged firmware capsule (unpredictable). *ret_p:
 * PCR 7 now and predicted; *ret_capsule (optional): the capsule variable's name, NULL when none.
 */
int cli_next_boot(const cli *c, const tg_config *config, tg_next_boot *ret, tg_pcr7_prediction *ret_p,
                  json_object **ret_changes, char **ret_capsule);

/*
 * update prepare without --pcr or --boots (issue 30 item 4: "with known changes uses prediction and
 * needs no grace"): 1 and *ret (PCR 7 given, in the prediction's bank) when a change to PCR 7 is
 * known (pending in efivarfs, or the update files cli names) and no capsule is staged; 0 when a
 * grace it must be (said why). A log that does not replay, or update files named that cannot be
 * predicted from, fail: never a grace in place of a prediction the user asked for, nor past an
 * interposer.
 */
int cli_prepare_prediction(const cli *c, const tg_config *config, tg_pcr_values *ret);

/*
 * The boots of a grace when --boots is not given: 1, or 1 + TG_CAPSULE_RESETS when a firmware
 * capsule is staged (said), whose own resets count as boots.
 */
int cli_grace_boots_default(const cli *c, uint32_t *ret);

/*
 * update check's findings, printed by nobody: {"ok", "volumes": [{"device", "tokens": [{"token", "opens"
 * (main|predicted|grace, null: will not open), "command", "malformed"}]}], "changes", "capsule_pending",
 * "bank", "pcr7_current", "pcr7_predicted"} (the last five absent when no volume has a tpmguard token).
 * The devices are c->args[1..], or c->crypttab's (/etc/crypttab).
 */
int cli_update_check_run(const cli *c, const tg_config *config, json_object **ret);

/* tpmguard update check [DEV...]: will every token open with the PIN alone after the next boot? */
int cmd_update_check(const cli *c, tg_config *config);
