/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <tss2/tss2_tpm2_types.h>

/*
 * The boot anchor (design §2.7): reset detection without the kernel's
 * null_name. The first full verification of a boot records the certified
 * NULL key's name and the attested resetCount and restartCount in
 * DIR/boot-anchor.json (DIR: cache_dir, a private directory in /run, so it
 * dies with the boot and survives the switch from the initrd to the real
 * root). Every later full verification of the same boot (boot ID) must
 * certify the same NULL key with the same counters: a TPM reset or restart
 * since then (a new NULL seed, or counters that moved) is refused like a
 * null_name mismatch. A reset before the anchor was recorded cannot be seen.
 */
typedef enum tg_anchor_kind {
        TG_ANCHOR_NONE,   /* nothing detects a reset during this boot */
        TG_ANCHOR_KERNEL, /* the kernel's null_name */
        TG_ANCHOR_BOOT,   /* this boot's anchor in cache_dir */
} tg_anchor_kind;

const char *tg_anchor_kind_to_string(tg_anchor_kind k);
/* One sentence: what that anchor does and does not detect. */
const char *tg_anchor_detects(tg_anchor_kind k);

typedef enum tg_anchor_state {
        TG_ANCHOR_MATCHED,          /* this boot's anchor was found and matches */
        TG_ANCHOR_RESUMING,         /* moved as the announced sleep moves it (accept_resume only): not yet
                                     * re-anchored, see tg_anchor_resume() */
        TG_ANCHOR_RECORDED,         /* none for this boot (none at all, or a stale one): recorded now */
        TG_ANCHOR_REPLACED_DAMAGED, /* a damaged or foreign anchor file was replaced, with a warning */
} tg_anchor_state;

/*
 * Checks this boot's anchor in dir against a NULL key that was just
 * certified (its name, and the resetCount and restartCount of the signed
 * attestation), or records it when this boot has none. Returns 0 with
 * *ret_state; -TG_ERR_INTERPOSER, logged as an alert, when the anchor of
 * this boot names another key or other counters (unless accept_resume and
 * an announced sleep explains the change: TG_ANCHOR_RESUMING); another negative error
 * (logged as a warning) when the anchor can be neither read nor written.
 */
int tg_anchor_check(const char *dir, const TPM2B_NAME *null_name, uint32_t reset_count, uint32_t restart_count,
                    bool accept_resume, tg_anchor_state *ret_state);

/*
 * Suspend and hibernate (design §2.8, "Sleep"), the kinds systemd-sleep(8)
 * passes its hooks. A suspend keeps the PCRs: the ones a sleep must keep
 * are TG_SLEEP_PCR_MASK of every active bank (0-9 and 11-15; 10 is IMA's,
 * which the running system extends at will, 16 and 23 may be reset by
 * software).
 */
typedef enum tg_sleep_kind {
        TG_SLEEP_SUSPEND,
        TG_SLEEP_HIBERNATE,
        TG_SLEEP_HYBRID,
        TG_SLEEP_SUSPEND_THEN_HIBERNATE,
        _TG_SLEEP_MAX,
} tg_sleep_kind;

#define TG_SLEEP_PCR_MASK UINT32_C(0xfbff)

const char *tg_sleep_kind_to_string(tg_sleep_kind k);
int tg_sleep_kind_from_string(const char *s, tg_sleep_kind *ret);

/*
 * Before sleep: this boot's anchor must name exactly the key and counters a
 * verification has just authenticated; records in it that the sleep starts,
 * with a SHA-256 digest of the TG_SLEEP_PCR_MASK PCRs of every bank read in an audited
 * session salted to that key.
 */
int tg_anchor_sleep_begin(const char *dir, const TPM2B_NAME *null_name, uint32_t reset_count, uint32_t restart_count,
                          tg_sleep_kind kind, const TPM2B_DIGEST *pcr_digest);

/*
 * After sleep, with the key and counters of a fresh certification and the
 * PCR digest read as before sleep: re-anchors (*ret_reanchored = true) when
 * they moved exactly as the announced sleep moves them and, after a
 * suspend or a hybrid-sleep (a Resume), the PCRs are the recorded ones; clears the announcement when
 * nothing moved (the sleep failed). -TG_ERR_INTERPOSER, logged as an alert
 * with the likely cause first, otherwise.
 */
int tg_anchor_resume(const char *dir, const TPM2B_NAME *null_name, uint32_t reset_count, uint32_t restart_count,
                     const TPM2B_DIGEST *pcr_digest, bool *ret_reanchored);

/*
 * For the warm cache path, which proves its key without a new attestation:
 * 0 when this boot's anchor in dir names null_name; -TG_ERR_NOT_FOUND when
 * this boot has no usable anchor; -TG_ERR_INVALID when it names another key
 * (the caller then does a full verification, which checks the anchor).
 */
int tg_anchor_names(const char *dir, const TPM2B_NAME *null_name);
