/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "cmdline.h"
#include "config.h"

/* The TPM commands (their table rows are in cli/tpmguard.c). */
int cmd_provision(const cli *c, tg_config *config);
int cmd_verify(const cli *c, tg_config *config);
int cmd_lockout(const cli *c, tg_config *config);
int cmd_lockout_reset(const cli *c, tg_config *config);
int cmd_sleep(const cli *c, tg_config *config);
