/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "config.h"

/*
 * Finishes or undoes interrupted operations (pending markers) and removes
 * tpmguard tokens whose keyslot no longer exists. ret_actions (optional):
 * how many things were repaired.
 */
int tg_cleanup(const tg_config *config, const char *device, unsigned *ret_actions);
