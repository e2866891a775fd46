/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "secret.h"

/*
 * Recovery keys (tpmguard recovery-key): 32 random bytes (256 bits) from
 * the OpenSSL CSPRNG, written in the ModHex alphabet "cbdefghijklnrtuv"
 * (one letter per nibble, the letters that sit on the same keys on QWERTY,
 * AZERTY, QWERTZ and Dvorak alike, so a key typed on a foreign layout at a
 * boot prompt still comes out right) in eight groups of eight separated by
 * '-': 71 characters, the form systemd-cryptenroll uses for its recovery
 * keys. The keyslot passphrase is exactly these 71 characters.
 */
#define TG_RECOVERY_KEY_BYTES 32
#define TG_RECOVERY_KEY_LENGTH (TG_RECOVERY_KEY_BYTES * 2 + TG_RECOVERY_KEY_BYTES / 4 - 1)

/* Formats bytes (TG_RECOVERY_KEY_BYTES of them) as a recovery key. */
int tg_recovery_key_format(const uint8_t *bytes, size_t size, tg_secret **ret);
/* A fresh recovery key. */
int tg_recovery_key_new(tg_secret **ret);
/* Whether data has the form of a recovery key (length, alphabet, dashes). */
bool tg_recovery_key_is_wellformed(const uint8_t *data, size_t size);
