/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libcryptsetup.h>
#include <stdbool.h>

/*
 * The recovery-key label: a token of type TG_RECOVERY_TOKEN_TYPE, no secret,
 * {"type":"tpmguard-recovery","keyslots":["N"],"version":1}, that marks
 * keyslot N as a recovery key made by `tpmguard recovery-key` (LUKS2 keyslots
 * carry no label). It is only a label: attacker-editable like the whole
 * header, it decides nothing but what status prints, and a keyslot it names
 * is not "used" by a token (it may be replaced and destroyed).
 */
#define TG_RECOVERY_TOKEN_TYPE "tpmguard-recovery"
bool tg_luks_keyslot_is_recovery_key(struct crypt_device *cd, int keyslot);

/*
 * The kept-keyslot label: a token of type TG_KEPT_TOKEN_TYPE, no secret,
 * {"type":"tpmguard-kept","keyslots":["N"],"version":1,"was":"clevis"},
 * written by tpmguard migrate when it removes a systemd-tpm2 or clevis token
 * but keeps the keyslot the token named, because nothing proved that keyslot
 * the token's (lifecycle/migrate.c: migrate_prove). Without it the keyslot
 * would look like any passphrase's, and tpmguard audit would call the volume
 * safe while a secret that crossed the bus (recorded by a sniffer, or read by
 * an interposer that made the proof fail) still opens it. audit reports it
 * as exposed until the owner removes the keyslot. Like every label it is
 * attacker-editable and decides nothing; it is not a "user" of the keyslot.
 */
#define TG_KEPT_TOKEN_TYPE "tpmguard-kept"
bool tg_luks_keyslot_is_kept(struct crypt_device *cd, int keyslot);
/* Is token id a label (recovery key, kept keyslot): no secret, never a user of the keyslot it names? */
bool tg_luks_token_is_label(struct crypt_device *cd, int id);
/* Writes the kept-keyslot label for keyslot (was: the removed token's type), unless one names it already. */
int tg_luks_kept_label_write(struct crypt_device *cd, int keyslot, const char *was);
/* Does a token other than except_token, and other than a label (recovery key, kept keyslot), list keyslot? */
bool tg_luks_keyslot_used_by_token(struct crypt_device *cd, int keyslot, int except_token);
/* Removes labels (recovery key, kept keyslot) whose keyslots no longer exist; counts into *actions (optional). */
int tg_luks_remove_orphan_labels(struct crypt_device *cd, unsigned *actions);
