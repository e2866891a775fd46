/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <tss2/tss2_esys.h>

#include "config.h"

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
