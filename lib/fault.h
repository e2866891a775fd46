/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "tpmguard-config.h"

/*
 * Test-only fault injection (meson -Dfault_injection=true; never in a
 * production build).
 *
 * A fault point is a place right after a state change that must be
 * crash-safe: every libcryptsetup header write in the lifecycle code
 * (tg_fault_point("after-...")), and every TPM command (counted by a hook on
 * the TCTI's receive function, so every command of tg_verify, tg_seal and
 * tg_unseal counts, not only those the lifecycle code issues itself).
 *
 * In a fault-injection build the environment variable
 * TPMGUARD_FAULT_INJECT_AT=N makes the process _exit(99) at the Nth point it
 * reaches (after the write or the TPM response, before anything else
 * happens), printing "fault-injection: exit at point N (NAME)" to stderr;
 * TPMGUARD_FAULT_TRACE=1 prints every point it passes;
 * TPMGUARD_FAULT_SIGNAL_AT=N raises SIGINT at the Nth point (like ^C then). In a production build
 * tg_fault_point() and tg_fault_tcti_hook() (trust/tcti.h) are empty
 * inline functions, no hook exists, and neither variable is ever read.
 */
#define TG_FAULT_EXIT_CODE 99

#if TPMGUARD_FAULT_INJECTION
void tg_fault_point(const char *name);
#else
static inline void tg_fault_point(const char *name) {
        (void) name;
}
#endif
