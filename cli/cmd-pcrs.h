/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "cmdline.h"
#include "config.h"

/* tpmguard pcrs [--predict]: the event log replayed against the verified PCRs; PCR 7 of the next boot. */
int cmd_pcrs(const cli *c, tg_config *config);
