/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdio.h>

#include "config.h"

/*
 * The state of a volume and of the TPM as a JSON object (see
 * docs/lifecycle.md): tokens and keyslots, PCR policy and whether the current
 * PCR values satisfy it (policy digest recomputed, nothing unsealed), PIN,
 * pending operations and orphans with the command that cleans them up,
 * provisioning state, kernel null_name, verification verdict, DA state.
 */
int tg_status(const tg_config *config, const char *device, json_object **ret);
/* Human-readable rendering of tg_status()'s object. */
void tg_status_print(json_object *status, FILE *f);
