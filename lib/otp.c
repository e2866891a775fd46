/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * HOTP and TOTP (RFC 4226, RFC 6238) and the base32 of otpauth URIs.
 *
 * Threat model: the key is the secret that proves the machine genuine to the
 * person at the keyboard (lifecycle/totp.c); it stays in tg_secret memory or
 * on the stack only as long as the HMAC needs it, and every intermediate (the
 * HMAC output) is wiped. A code is not secret for long: it is shown on the
 * screen, and a shoulder-surfed code is good for one period.
 */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "otp.h"

static const char *const alg_names[_TG_TOTP_ALG_MAX] = {
        [TG_TOTP_SHA1] = "SHA1",
        [TG_TOTP_SHA256] = "SHA256",
        [TG_TOTP_SHA512] = "SHA512",
};

const char *tg_totp_alg_to_string(tg_totp_alg alg) {
        return (unsigned) alg < _TG_TOTP_ALG_MAX ? alg_names[alg] : NULL;
}

int tg_totp_alg_from_string(const char *s, tg_totp_alg *ret) {
        for (unsigned i = 0; i < _TG_TOTP_ALG_MAX; i++)
                if (s && strcmp(s, alg_names[i]) == 0) {
                        *ret = (tg_totp_alg) i;
                        return 0;
                }
        return -TG_ERR_INVALID;
}

static const EVP_MD *alg_md(tg_totp_alg alg) {
        switch (alg) {
        case TG_TOTP_SHA1: return EVP_sha1();
        case TG_TOTP_SHA256: return EVP_sha256();
        case TG_TOTP_SHA512: return EVP_sha512();
        default: return NULL;
        }
}

int tg_hotp(const uint8_t *key, size_t key_size, tg_totp_alg alg, uint64_t counter, unsigned digits, uint32_t *ret) {
        const EVP_MD *md = alg_md(alg);
        uint8_t msg[8], mac[EVP_MAX_MD_SIZE];
        unsigned mac_size = 0, offset;
        uint32_t binary, modulus = 1;

        if (!md)
                return log_error_rc(-TG_ERR_INVALID, "Unknown TOTP algorithm %d.", (int) alg);
        if (digits < TG_TOTP_DIGITS_MIN || digits > TG_TOTP_DIGITS_MAX)
                return log_error_rc(-TG_ERR_INVALID, "A TOTP code has %u..%u digits, not %u.", TG_TOTP_DIGITS_MIN,
                                    TG_TOTP_DIGITS_MAX, digits);
        if (key_size == 0 || key_size > INT32_MAX)
                return log_error_rc(-TG_ERR_INVALID, "The TOTP key is empty.");
        for (int i = 7; i >= 0; i--) {
                msg[i] = (uint8_t) (counter & 0xff);
                counter >>= 8;
        }
        if (!HMAC(md, key, (int) key_size, msg, sizeof msg, mac, &mac_size) || mac_size < 20) {
                explicit_bzero(mac, sizeof mac);
                return log_error_rc(-TG_ERR_IO, "HMAC failed while computing the TOTP code.");
        }
        /* RFC 4226 §5.3: dynamic truncation, the low nibble of the last byte picks 4 bytes. */
        offset = mac[mac_size - 1] & 0x0f;
        binary = ((uint32_t) (mac[offset] & 0x7f) << 24) | ((uint32_t) mac[offset + 1] << 16) |
                 ((uint32_t) mac[offset + 2] << 8) | (uint32_t) mac[offset + 3];
        explicit_bzero(mac, sizeof mac);
        for (unsigned i = 0; i < digits; i++)
                modulus *= 10;
        *ret = binary % modulus;
        return 0;
}

int tg_totp(const uint8_t *key, size_t key_size, tg_totp_alg alg, unsigned digits, unsigned period,
            uint64_t unix_time, uint32_t *ret, uint64_t *ret_window_start) {
        uint32_t code;
        int r;

        if (period < TG_TOTP_PERIOD_MIN || period > TG_TOTP_PERIOD_MAX)
                return log_error_rc(-TG_ERR_INVALID, "A TOTP period is %u..%u s, not %u.", TG_TOTP_PERIOD_MIN,
                                    TG_TOTP_PERIOD_MAX, period);
        r = tg_hotp(key, key_size, alg, unix_time / period, digits, &code);
        if (r < 0)
                return r;
        *ret = code;
        if (ret_window_start)
                *ret_window_start = unix_time - unix_time % period;
        return 0;
}

int tg_base32_encode(const uint8_t *data, size_t size, tg_secret **ret) {
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        _cleanup_secret_ tg_secret *out = NULL;
        size_t n = 0, chars = (size * 8 + 4) / 5;
        uint32_t buffer = 0;
        unsigned bits = 0;
        int r;

        r = tg_secret_new(chars + 1, &out);
        if (r < 0)
                return r;
        for (size_t i = 0; i < size; i++) {
                buffer = (buffer << 8) | data[i];
                bits += 8;
                while (bits >= 5) {
                        out->data[n++] = (uint8_t) alphabet[(buffer >> (bits - 5)) & 0x1f];
                        bits -= 5;
                }
        }
        if (bits > 0)
                out->data[n++] = (uint8_t) alphabet[(buffer << (5 - bits)) & 0x1f];
        explicit_bzero(&buffer, sizeof buffer);
        out->data[n] = '\0';
        out->size = n;
        *ret = TAKE_PTR(out);
        return 0;
}
