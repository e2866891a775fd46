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
        TG_ANCHOR_RECORDED,         /* none for this boot (none at all, or a stale one): recorded now */
        TG_ANCHOR_REPLACED_DAMAGED, /* a damaged or foreign anchor file was replaced, with a warning */
} tg_anchor_state;

/*
 * Checks this boot's anchor in dir against a NULL key that was just
 * certified (its name, and the resetCount and restartCount of the signed
 * attestation), or records it when this boot has none. Returns 0 with
 * *ret_state; -TG_ERR_INTERPOSER, logged as an alert, when the anchor of
 * this boot names another key or other counters; another negative error
 * (logged as a warning) when the anchor can be neither read nor written.
 */
int tg_anchor_check(const char *dir, const TPM2B_NAME *null_name, uint32_t reset_count, uint32_t restart_count,
                    tg_anchor_state *ret_state);

/*
 * For the warm cache path, which proves its key without a new attestation:
 * 0 when this boot's anchor in dir names null_name; -TG_ERR_NOT_FOUND when
 * this boot has no usable anchor; -TG_ERR_INVALID when it names another key
 * (the caller then does a full verification, which checks the anchor).
 */
int tg_anchor_names(const char *dir, const TPM2B_NAME *null_name);
