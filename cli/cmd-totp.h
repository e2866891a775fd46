/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "cmdline.h"
#include "config.h"

/* tpmguard totp enroll|show|reseal|remove (its table row is in cli/tpmguard.c; the core in lifecycle/totp.h). */
int cmd_totp(const cli *c, tg_config *config);
