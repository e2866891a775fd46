/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "cmdline.h"
#include "config.h"

/* The token commands (their table rows are in cli/tpmguard.c). */
int cmd_enroll(const cli *c, tg_config *config);
int cmd_migrate(const cli *c, tg_config *config);
int cmd_seal(const cli *c, tg_config *config);
int cmd_change_pin(const cli *c, tg_config *config);
int cmd_rotate(const cli *c, tg_config *config);
int cmd_reseal(const cli *c, tg_config *config);
int cmd_remove(const cli *c, tg_config *config);
int cmd_cleanup(const cli *c, tg_config *config);
int cmd_bind(const cli *c, tg_config *config);
