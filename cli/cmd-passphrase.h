/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "cmdline.h"
#include "config.h"

/* The passphrase commands (their table rows are in cli/tpmguard.c). */
int cmd_recovery_key(const cli *c, tg_config *config);
int cmd_passwd(const cli *c, tg_config *config);
