/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <tss2/tss2_esys.h>

#include "config.h"
#include "da.h"

/*
 * The per-boot verification cache (design §4): after a full verification,
 * cache_dir/null-key.json holds the certified NULL key's public area, name
 * and saved context, bound to this boot (boot_id) and to the pinned signer.
 * A later unlock in the same boot loads the context instead of re-creating
 * and re-certifying the key.
 *
 * The cache is local, root-only state in /run, but it is not trusted: every
 * field is checked (its name must be the kernel's null_name, its public area
 * must hash to that name, the boot and signer must match), the TPM itself
 * must accept the context (a NULL-hierarchy context dies with a TPM reset),
 * and the caller proves key agreement with an HMAC round trip before any
 * secret moves. A cache that fails any of that costs a full verification.
 */

/*
 * Best effort: failures are logged at debug level and return < 0. srk
 * (optional, ESYS_TR_NONE for none) is the persistent SRK's ESYS_TR; its
 * serialized metadata is cached too, so that a cached unlock needs no
 * separate ReadPublic for it. It is as untrusted as everything else here:
 * the caller re-reads it in an audited command and the Load that names it
 * is HMAC-authorized.
 */
int tg_vcache_store(const tg_config *config, ESYS_CONTEXT *esys, ESYS_TR null_key,
                    const TPM2B_NAME *null_name, const TPM2B_NAME *signer_name, ESYS_TR srk);

/*
 * Loads the cached NULL key into the TPM. kernel_null_name may be NULL (none
 * exported). ret_srk: the cached SRK's ESYS_TR (no TPM command), or
 * ESYS_TR_NONE when the cache holds none.
 */
int tg_vcache_load(const tg_config *config, ESYS_CONTEXT *esys, const TPM2B_NAME *kernel_null_name,
                   const TPM2B_NAME *signer_name, ESYS_TR *ret_null_key, TPM2B_NAME *ret_name, ESYS_TR *ret_srk);

/* Removes the cache (after a failed proof). */
void tg_vcache_drop(const tg_config *config);

/*
 * The TPM's dictionary-attack state as last read live in this boot
 * (cache_dir/da-state.json, bound to the boot ID; docs/design.md §2.4, the warm unlock's DA read): the plugin's
 * warm unlock checks pin_da_reserve against it instead of a GetCapability.
 * Every live read stores it (tokens/unlock.c), so it is exact for
 * tpmguard's own tries, conservative over time (the TPM only forgives
 * failures by waiting), and blind only to other TPM users' failures, which
 * could spend the reserve directly anyway. Best effort, like the rest.
 */
int tg_vcache_da_store(const tg_config *config, const tg_da_state *da);
/* lockout_auth_set is not cached: false in what this loads. */
int tg_vcache_da_load(const tg_config *config, tg_da_state *ret);
void tg_vcache_da_drop(const tg_config *config);
