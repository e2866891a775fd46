/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>

#include "boot-anchor.h"
#include "config.h"
#include "da.h"

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
 * Shared with audit (cli/audit.c), which decides its verdicts on it.
 */
typedef struct tg_tpm_status {
        bool provisioned;
        bool ek_tofu;                   /* the pin's "ek_trust" is trust-on-first-use (when provisioned) */
        bool kernel_null_name_present;
        tg_null_name_policy kernel_null_name_policy;
        int verification;               /* 0: verified, else its error */
        tg_anchor_kind anchor;
        bool da_known;                  /* false: TPM unreachable, or its DA reply refused */
        tg_da_state da;                 /* when da_known */
        bool da_weaker_than_configured; /* when da_known */
        bool lockout_auth_held;         /* when da_known */
} tg_tpm_status;
/* Fills ret; *ret_v (initially NULL) gets the verified TPM when verification passed. */
struct tg_verified_tpm;
void tg_status_tpm(const tg_config *config, tg_tpm_status *ret, struct tg_verified_tpm **ret_v);
/* tg_status_tpm()'s result as the "tpm" object of tg_status() (and audit's "machine"); NULL when out of memory. */
json_object *tg_tpm_status_to_json(const tg_tpm_status *s);
/* Human-readable rendering of tg_status()'s object. */
void tg_status_print(json_object *status, FILE *f);
