/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "secret.h"

/*
 * The PIN never reaches the TPM as typed. Format 1: its authValue is
 * PBKDF2-HMAC-SHA256(PIN, per-token salt, iterations, 32 bytes), so that a
 * recorded PolicyAuthValue session (HMAC keyed with the authValue) cannot be
 * attacked offline any faster than the KDF allows, and the TPM's
 * dictionary-attack counter limits online guessing.
 */
#define TG_PIN_KDF_DEFAULT_ITERATIONS 100000
#define TG_PIN_AUTH_SIZE 32
#define TG_PIN_MAX 256

/* Format 1 (read only): authValue = PBKDF2-HMAC-SHA256(pin, salt, iterations, 32 bytes), in a tg_secret. */
int tg_pin_derive_auth(const tg_secret *pin, const uint8_t *salt, size_t salt_size, uint32_t iterations, tg_secret **ret);

/*
 * Format 2 (docs/token-format.md, "The PIN in format 2"): one memory-hard
 * Argon2id of the PIN, and from it two keys that tell nothing of each other:
 *
 *   A       = Argon2id(PIN, salt, t, m, p, 32 bytes)          (libargon2, RFC 9106)
 *   auth    = HKDF-SHA256(IKM = A, salt = none, info = TG_PIN_AUTH_LABEL, 32 bytes)
 *   K       = HKDF-SHA256(IKM = A, salt = none, info = TG_PIN_MASK_LABEL, len(S))
 *   sealed  = S XOR K   (S: the keyslot passphrase; the TPM never holds S)
 *
 * The TPM holds auth and S XOR K; the keyslot opens only with S. Whoever
 * reads the TPM's secrets (a firmware flaw, a fault attack, a decapped chip)
 * still needs K, that is one Argon2id per PIN guess.
 */
#define TG_PIN_AUTH_LABEL "tpmguard v2 authValue"
#define TG_PIN_MASK_LABEL "tpmguard v2 keyslot mask"
#define TG_ARGON2_OUT_SIZE 32u
/* The bounds the token parser enforces (tokens/token.c), in KiB, passes, lanes. */
#define TG_ARGON2_MEMORY_MIN (32u * 1024u)
#define TG_ARGON2_MEMORY_MAX (1024u * 1024u)
#define TG_ARGON2_TIME_MIN 1u
#define TG_ARGON2_TIME_MAX 64u
#define TG_ARGON2_PARALLEL_MIN 1u
#define TG_ARGON2_PARALLEL_MAX 4u
/* What enroll uses without tpmguard.conf: 64 MiB, benchmarked to 1 s, one lane. */
#define TG_ARGON2_MEMORY_DEFAULT (64u * 1024u)
#define TG_ARGON2_TARGET_MS_DEFAULT 1000u

typedef struct tg_argon2_params {
        uint32_t time_cost;    /* passes */
        uint32_t memory_kib;   /* KiB */
        uint32_t parallel;     /* lanes */
} tg_argon2_params;

/* -TG_ERR_INVALID, naming the parameter, unless every one is within the parser's bounds. */
int tg_argon2_params_check(const tg_argon2_params *p);

/* auth and K (mask_size bytes) from one Argon2id of the PIN; each in a tg_secret. ret_* written only on success. */
int tg_pin_derive_v2(const tg_secret *pin, const uint8_t *salt, size_t salt_size, const tg_argon2_params *params,
                     size_t mask_size, tg_secret **ret_auth, tg_secret **ret_mask);

/*
 * A PIN's tag for tokens/pin-cache.c: Argon2id(pin, salt) at the parser's floor (one pass, 32 MiB,
 * one lane), 32 bytes: a guess at the PIN from a tag costs one such pass (about a 25th of a guess
 * at a token's defaults, 64 MiB benchmarked to 1 s).
 */
int tg_pin_tag(const tg_secret *pin, const uint8_t *salt, size_t salt_size, tg_secret **ret);

/*
 * The time cost for memory_kib and parallel that takes about target_ms here
 * (as cryptsetup benchmarks its PBKDFs): at least TG_ARGON2_TIME_MIN, at most
 * TG_ARGON2_TIME_MAX. ret_ms: the measured time of one Argon2id at that cost.
 */
int tg_argon2_benchmark(uint32_t memory_kib, uint32_t parallel, unsigned target_ms, uint32_t *ret_time_cost,
                        unsigned *ret_ms);
