/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libcryptsetup.h>
#include <stdbool.h>

/*
 * Which keyslots tpmguard made (lifecycle/keyslot-owner.c).
 *
 * The attack: a keyslot number in the header is the header's word, and an
 * evil maid writes the header. A tpmguard token edited to name another
 * keyslot made 'remove' and 'reseal --unlock-key-file' destroy that keyslot
 * whenever its PBKDF was PBKDF2-SHA512 at 1000 iterations, the PBKDF
 * tpmguard gives its own keyslots; but systemd-cryptenroll gives its
 * recovery keys exactly that PBKDF (cryptsetup_set_minimal_pbkdf), so an
 * owner's recovery key went as "the token's old keyslot".
 *
 * The defence: when tpmguard has proven a keyslot its own (the secret it
 * sealed, or unsealed, opened it), it records the keyslot's KDF salt, random
 * per keyslot and part of the keyslot (rewriting it breaks the keyslot), in
 * the root-only state_dir/keyslots.json, per volume UUID and keyslot number.
 * A keyslot is tpmguard's to destroy only when its salt is the one recorded
 * for that number.
 */
#define TG_KEYSLOTS_FILE_NAME "keyslots.json"

/* Records keyslot as tpmguard's (call only once a secret of ours opened it). Never fails the caller's
 * operation: a keyslot not recorded is only never destroyed automatically (a warning says so). */
void tg_keyslot_own(const char *state_dir, struct crypt_device *cd, int keyslot);
/* Is keyslot the one tpmguard recorded under its number for this volume (same KDF salt)? */
bool tg_keyslot_owned(const char *state_dir, struct crypt_device *cd, int keyslot);
