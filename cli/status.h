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
/*
 * The TPM part of that object: provisioning, kernel null_name and its policy,
 * the verification verdict and anchor, the DA state and lockout ownership.
 * *ret_v (initially NULL) gets the verified TPM when verification passed.
 * NULL when out of memory. Shared with audit (cli/audit.c).
 */
struct tg_verified_tpm;
json_object *tg_status_tpm(const tg_config *config, struct tg_verified_tpm **ret_v);
/* Human-readable rendering of tg_status()'s object. */
void tg_status_print(json_object *status, FILE *f);
