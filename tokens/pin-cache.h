/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "secret.h"

/*
 * One wrong PIN costs one dictionary-attack try, however many volumes systemd-cryptsetup opens
 * with it (issue 32 §2). See tokens/pin-cache.c for the threat model.
 */

/* The kernel keyring names: systemd-cryptsetup's PIN cache (ask-password's "luks2-pin") and ours. */
#define TG_PIN_CACHE_KEY "luks2-pin"
#define TG_PIN_REFUSED_KEY "tpmguard:refused-pin"
/* As long as systemd keeps its cache (ask-password's keyring timeout, 150 s). */
#define TG_PIN_REFUSED_TIMEOUT_SEC 150U

/* Whether this process is the caller whose cache this manages: systemd-cryptsetup. */
bool tg_pin_cache_applies(void);

/*
 * The volumes' turn for a PIN-bearing unseal (a lock file in cache_dir), waited for at most 15 s:
 * returns the locked fd, or -1 when no lock could be had (then the unseal runs without its turn).
 */
int tg_pin_cache_lock(const char *cache_dir);

/*
 * Whether pin is a stale copy of a PIN the TPM refused a moment ago for another volume: recorded
 * by another process's tg_pin_cache_refused() and no longer in systemd's cache (a PIN typed again
 * is pushed to the cache again before the plugin sees it, so it is tried).
 */
bool tg_pin_cache_refused_before(const tg_secret *pin);

/*
 * The TPM refused pin. Where it came from systemd's cache: takes it out of the cache, so that no
 * volume that reads the cache later tries it, and records its tag for the copies read before. A
 * PIN that is not in the cache (typed to cryptsetup, $PIN) changes nothing.
 */
void tg_pin_cache_refused(const tg_secret *pin);
