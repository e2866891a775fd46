/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * SIGINT, SIGTERM and SIGHUP during a change to a LUKS2 header (enroll,
 * seal, change-pin, rotate, reseal): instead of dying between two writes
 * (a keyslot added and no token for it), the process notes the signal and
 * the operation checks at each step, undoes what it added, and returns
 * -TG_ERR_CANCELLED. A signal after the last write leaves the completed
 * change in place. SIGKILL and power loss are covered by the pending marker
 * (lifecycle/pending-marker.h), which 'tpmguard status' reports and 'tpmguard
 * cleanup' resolves.
 *
 * tg_interrupt_begin() installs the handlers (nested calls are counted);
 * tg_interrupt_end() restores the previous ones and returns the signal that
 * arrived in between, 0 if none.
 */
void tg_interrupt_begin(void);
int tg_interrupt_end(void);
/* The signal noted since tg_interrupt_begin(), 0 if none. */
int tg_interrupt_pending(void);
/* 0, or -TG_ERR_CANCELLED logged with what is being undone (step names the place). */
int tg_interrupt_check(const char *step);
