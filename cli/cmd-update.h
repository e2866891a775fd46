/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "cmdline.h"
#include "config.h"

/* tpmguard update prepare|finish DEV... (docs/design.md "Updates"; its table row is in cli/tpmguard.c). */
int cmd_update(const cli *c, tg_config *config);
