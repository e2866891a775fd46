/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "cmdline.h"
#include "config.h"
#include "seal.h"

/* tpmguard totp enroll|show|reseal|remove (its table row is in cli/tpmguard.c; the core in lifecycle/totp.h). */
int cmd_totp(const cli *c, tg_config *config);

/*
 * The TOTP follows the tokens through the PCR update path (lifecycle/totp.h): 'update prepare'
 * calls cmd_totp_update_prepare() once after its volumes (predicted NULL: a grace), 'update
 * finish' and 'reseal' cmd_totp_follow() (always: reseal even with nothing pending, as reseal
 * does for the token). Nothing enrolled: nothing said, 0. Each says what the next boot shows.
 */
int cmd_totp_update_prepare(const tg_config *config, const tg_pcr_values *predicted);
int cmd_totp_follow(const tg_config *config, const tg_pcr_values *explicit_values, bool always);
