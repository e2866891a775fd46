/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "secret.h"

/*
 * The PIN never reaches the TPM as typed. Its authValue is
 * PBKDF2-HMAC-SHA256(PIN, per-token salt, iterations, 32 bytes), so that a
 * recorded PolicyAuthValue session (HMAC keyed with the authValue) cannot be
 * attacked offline any faster than the KDF allows, and the TPM's
 * dictionary-attack counter limits online guessing.
 */
#define TG_PIN_KDF_DEFAULT_ITERATIONS 100000
#define TG_PIN_AUTH_SIZE 32
#define TG_PIN_MAX 256

/* authValue = PBKDF2-HMAC-SHA256(pin, salt, iterations, 32 bytes), in a tg_secret. */
int tg_pin_derive_auth(const tg_secret *pin, const uint8_t *salt, size_t salt_size, uint32_t iterations, tg_secret **ret);
