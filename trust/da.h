/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <tss2/tss2_esys.h>

/*
 * The TPM's dictionary-attack (DA) state: one struct and one reader for
 * everyone who needs it (the plugin's PIN tries and its per-boot cache,
 * seal's wrong-PIN message, the lifecycle commands, status, doctor and the
 * lockout hierarchy's setup and reset).
 */
typedef struct tg_da_state {
        bool lockout_auth_set;              /* TPMA_PERMANENT lockoutAuthSet */
        bool in_lockout;                    /* TPMA_PERMANENT inLockout */
        uint32_t failures;                  /* TPM_PT_LOCKOUT_COUNTER */
        uint32_t max_failures;              /* TPM_PT_MAX_AUTH_FAIL */
        uint32_t recovery_seconds;          /* TPM_PT_LOCKOUT_INTERVAL; 0: DA protection off */
        uint32_t lockout_recovery_seconds;  /* TPM_PT_LOCKOUT_RECOVERY */
} tg_da_state;

/*
 * Reads the DA state with one GetCapability (TPM2_PT_PERMANENT ..
 * TPM2_PT_LOCKOUT_RECOVERY). With a session (the salted session of a
 * verified TPM, as an audit session), the response is integrity-protected;
 * with ESYS_TR_NONE it is as unverified as any other capability read (the
 * plugin's PIN budget, doctor on an unverified TPM). A reply that lacks any
 * of the properties is refused, never read as zeros.
 */
int tg_da_read(ESYS_CONTEXT *esys, ESYS_TR audit_session, tg_da_state *ret);
