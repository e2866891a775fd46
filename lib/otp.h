/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "secret.h"

/*
 * One-time codes as authenticator apps compute them: HOTP (RFC 4226: HMAC of
 * the 8-byte big-endian counter, dynamic truncation, modulo 10^digits) over
 * the TOTP counter (RFC 6238: floor(unix time / period)). Pure computation,
 * no TPM: lifecycle/totp.c unseals the key and calls these.
 */

typedef enum tg_totp_alg {
        TG_TOTP_SHA1,     /* what every authenticator app supports, and the otpauth default */
        TG_TOTP_SHA256,
        TG_TOTP_SHA512,
        _TG_TOTP_ALG_MAX,
} tg_totp_alg;

#define TG_TOTP_DIGITS_MIN 6u
#define TG_TOTP_DIGITS_MAX 8u
#define TG_TOTP_PERIOD_MIN 15u
#define TG_TOTP_PERIOD_MAX 300u

/* "SHA1", "SHA256", "SHA512" (the otpauth URI's spelling), NULL for anything else. */
const char *tg_totp_alg_to_string(tg_totp_alg alg);
/* The reverse, case-sensitive; -TG_ERR_INVALID for anything else. */
int tg_totp_alg_from_string(const char *s, tg_totp_alg *ret);

/* RFC 4226 HOTP of counter under key: *ret is the code, 0 .. 10^digits - 1 (print it zero-padded). */
int tg_hotp(const uint8_t *key, size_t key_size, tg_totp_alg alg, uint64_t counter, unsigned digits, uint32_t *ret);

/*
 * RFC 6238 TOTP at unix_time: the HOTP of floor(unix_time / period). *ret_window_start (optional)
 * is the first second of the period the code is for; it lasts period seconds.
 */
int tg_totp(const uint8_t *key, size_t key_size, tg_totp_alg alg, unsigned digits, unsigned period,
            uint64_t unix_time, uint32_t *ret, uint64_t *ret_window_start);

/*
 * RFC 4648 base32 (A-Z2-7) without padding, as otpauth URIs carry the key: a NUL-terminated
 * string in a tg_secret (its size excludes the NUL), since it is the key itself.
 */
int tg_base32_encode(const uint8_t *data, size_t size, tg_secret **ret);
