/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <tss2/tss2_tcti.h>

#include "error.h"
#include "tpmguard-config.h"

/*
 * tpmguard's own TCTI layer: every byte between ESAPI and the transport that
 * tss2-tctildr opened (device, swtpm, ...) passes through it. Every byte from
 * the bus is hostile (docs/design.md §2.7): this layer
 *
 *  - checks the framing of every response before ESAPI and tss2-sys see it
 *    (its size field equals the number of bytes the transport delivered, its
 *    tag, a response code with no parameters, and that the parameter area
 *    the parameterSize field announces lies inside the response), because
 *    tss2-sys 3.2 takes parameterSize as given and both tss2-sys
 *    (Tss2_Sys_GetRpBuffer) and ESAPI (in-place parameter decryption) then
 *    use it as the length of the parameter area; a framing error is
 *    TSS2_TCTI_RC_MALFORMED_RESPONSE, which tg_tpm_rc() reports as a
 *    suspected interposer;
 *  - remembers where the last response went and how many bytes the transport
 *    wrote there, so that tg_tcti_wipe_last_response() wipes exactly that
 *    buffer, bounded by a length that no field of the response can change.
 *
 * The wrapper does not own inner: free the wrapper (tg_tcti_free) before
 * finalizing inner, and both after the ESAPI context that uses the wrapper.
 */
int tg_tcti_wrap(TSS2_TCTI_CONTEXT *inner, TSS2_TCTI_CONTEXT **ret);
void tg_tcti_free(TSS2_TCTI_CONTEXT *tcti);
/*
 * Whether an Unseal answered "retry" (TPM_RC_RETRY, YIELDED, TESTING) again after its one resend
 * since the last call (which clears it): that answer reached ESAPI as TPM_RC_NV_UNAVAILABLE, which it
 * does not resend, and the caller names the cause (trust/tcti.c: one PIN typed, at most two Unseals
 * sent from here). False for another TCTI.
 */
bool tg_tcti_unseal_resend_refused(TSS2_TCTI_CONTEXT *tcti);
/* Wipes the whole last response buffer of tcti (no-op for a TCTI that is not a tg_tcti_wrap one). */
void tg_tcti_wipe_last_response(TSS2_TCTI_CONTEXT *tcti);
/*
 * The framing check on its own: response is what the transport delivered
 * (size bytes) in answer to command code cc. Returns 0 or -TG_ERR_INTERPOSER.
 */
int tg_tpm_response_framing_check(uint32_t cc, const uint8_t *response, size_t size);
/*
 * A successful response carries a session area exactly when its command did
 * (TPM 2.0 Part 1 §18.7: the response tag follows the command's): a response
 * without one to a command with sessions has dropped the response HMACs that
 * would have shown it forged (an audited GetCapability answered "nothing here"),
 * which ESAPI would report only as a sequence error. command_tag: the tag of the
 * command sent. Returns 0 or -TG_ERR_INTERPOSER.
 */
int tg_tpm_response_tag_check(uint16_t command_tag, const uint8_t *response, size_t size);
/* How many handles a successful response to cc carries in its handle area (TPM 2.0 Part 3). */
unsigned tg_tpm_response_handle_count(uint32_t cc);

/*
 * Test-only (meson -Dfault_injection=true, lib/fault.h): counts every TPM
 * response received through tcti as a fault point "tpm-command". An empty
 * inline function in a production build.
 */
#if TPMGUARD_FAULT_INJECTION
void tg_fault_tcti_hook(TSS2_TCTI_CONTEXT *tcti);
#else
static inline void tg_fault_tcti_hook(TSS2_TCTI_CONTEXT *tcti) {
        (void) tcti;
}
#endif
