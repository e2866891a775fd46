/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libcryptsetup.h>
#include <stdbool.h>
#include <stdint.h>

#include "secret.h"

/*
 * Volume binding: stops decoy volumes (docs/design.md §9.1).
 *
 * The attack: a LUKS2 volume of the attacker's, with the victim's UUID and
 * a tpmguard token of its own (sealed with commands injected on the bus, no
 * PIN), unlocks in the initrd without a PIN and boots the attacker's root in
 * the good PCR state, where a fake PIN prompt collects the PIN while the
 * real token still unseals in that boot.
 *
 * The defence: enrolment records, per volume UUID, a fingerprint of the
 * volume key, HMAC-SHA256(volume key, "tpmguard volume binding v1\0" ‖ UUID),
 * in state_dir/volumes.json (root-only, copied into the initrd next to the
 * pinned key). Before the plugin hands a keyslot passphrase to
 * libcryptsetup it derives the volume key from that keyslot and compares:
 * a volume whose key is not the enrolled one, or whose UUID is not enrolled
 * at all, is refused before anything boots from it. The fingerprint is a
 * MAC under a 256-bit key: reading it (the initrd is not encrypted) tells
 * nothing of the key, and nobody without the real volume key can make a
 * decoy match. The file is as trustworthy as the initrd that carries it:
 * the decoy attack assumes the good PCR state, i.e. the genuine initrd.
 *
 * The fingerprint binds the key, not how the data segment uses it: a copy of
 * the victim's whole header whose segment says cipher_null (or linear, or
 * hw-opal) would match and map the attacker's plaintext. So the check first
 * requires every data segment to be dm-crypt with a real cipher.
 *
 * A machine with no volumes.json at all (enrolled before bindings existed)
 * is not protected; the unlock goes on with a warning and doctor reports it
 * until 'tpmguard bind DEVICE' records the binding.
 */
#define TG_BINDINGS_FILE_NAME "volumes.json"
#define TG_BINDING_SIZE 32

/* The fingerprint of the volume key that passphrase opens (keyslot, or CRYPT_ANY_SLOT). */
int tg_volume_fingerprint(struct crypt_device *cd, int keyslot, const tg_secret *passphrase,
                          uint8_t ret[TG_BINDING_SIZE]);
/* Records (or replaces) this volume's binding in state_dir/volumes.json, atomically. */
int tg_volume_binding_record(const char *state_dir, struct crypt_device *cd, int keyslot, const tg_secret *passphrase);
/*
 * Checks the volume against its recorded binding: 0 when it matches (or when
 * the machine records no bindings at all, with a warning),
 * -TG_ERR_VOLUME_BINDING when the volume is not the enrolled one.
 */
int tg_volume_binding_check(const char *state_dir, struct crypt_device *cd, int keyslot, const tg_secret *passphrase);
/* Does state_dir/volumes.json exist and list this UUID? (doctor, status) */
int tg_volume_binding_present(const char *state_dir, const char *uuid, bool *ret_file_exists, bool *ret_listed);
