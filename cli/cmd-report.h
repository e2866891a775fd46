/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "cmdline.h"
#include "config.h"

/* The reports (their table rows are in cli/tpmguard.c). */
int cmd_doctor(const cli *c, tg_config *config);
int cmd_status(const cli *c, tg_config *config);
int cmd_audit(const cli *c, tg_config *config);
