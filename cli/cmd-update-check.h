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

/* tpmguard update check [DEV...]: will every token open with the PIN alone after the next boot? */
int cmd_update_check(const cli *c, tg_config *config);
