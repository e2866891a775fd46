/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lib/otp.c against the RFCs' own test vectors: RFC 6238 Appendix B (TOTP,
 * 8 digits, 30 s, the three hashes with their seeds), RFC 4226 Appendix D
 * (HOTP, 6 digits), RFC 4648 §10 (base32, here without padding, as otpauth
 * URIs carry it).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "otp.h"

/* RFC 6238 Appendix B: the seed of each hash is "1234567890" repeated to the hash's length. */
static const char seed20[] = "12345678901234567890";
static const char seed32[] = "12345678901234567890123456789012";
static const char seed64[] = "1234567890123456789012345678901234567890123456789012345678901234";

static const struct {
        uint64_t time;
        uint32_t sha1, sha256, sha512;
} rfc6238[] = {
        { 59, 94287082, 46119246, 90693936 },
        { 1111111109, 7081804, 68084774, 25091201 },
        { 1111111111, 14050471, 67062674, 99943326 },
        { 1234567890, 89005924, 91819424, 93441116 },
        { 2000000000, 69279037, 90698825, 38618901 },
        { 20000000000, 65353130, 77737706, 47863826 },
};

static void test_rfc6238_appendix_b(void **state) {
        (void) state;
        for (size_t i = 0; i < sizeof rfc6238 / sizeof rfc6238[0]; i++) {
                uint32_t code = 0;
                uint64_t start = 0;

                assert_int_equal(tg_totp((const uint8_t *) seed20, 20, TG_TOTP_SHA1, 8, 30, rfc6238[i].time, &code,
                                         &start), 0);
                assert_int_equal(code, rfc6238[i].sha1);
                assert_true(start <= rfc6238[i].time && rfc6238[i].time < start + 30 && start % 30 == 0);
                assert_int_equal(tg_totp((const uint8_t *) seed32, 32, TG_TOTP_SHA256, 8, 30, rfc6238[i].time, &code,
                                         NULL), 0);
                assert_int_equal(code, rfc6238[i].sha256);
                assert_int_equal(tg_totp((const uint8_t *) seed64, 64, TG_TOTP_SHA512, 8, 30, rfc6238[i].time, &code,
                                         NULL), 0);
                assert_int_equal(code, rfc6238[i].sha512);
        }
}

/* RFC 4226 Appendix D: HOTP of counters 0..9, 6 digits (the default a TOTP enrolment uses). */
static void test_rfc4226_appendix_d(void **state) {
        static const uint32_t hotp[10] = { 755224, 287082, 359152, 969429, 338314,
                                           254676, 287922, 162583, 399871, 520489 };
        (void) state;
        for (uint64_t c = 0; c < 10; c++) {
                uint32_t code = 0;

                assert_int_equal(tg_hotp((const uint8_t *) seed20, 20, TG_TOTP_SHA1, c, 6, &code), 0);
                assert_int_equal(code, hotp[c]);
        }
        /* The TOTP of t is the HOTP of t / period: 6 digits at t = 59 are the last 6 of 94287082. */
        {
                uint32_t code = 0;
                assert_int_equal(tg_totp((const uint8_t *) seed20, 20, TG_TOTP_SHA1, 6, 30, 59, &code, NULL), 0);
                assert_int_equal(code, 287082);
        }
}

static void test_base32_rfc4648(void **state) {
        static const struct {
                const char *in, *out;
        } v[] = {
                { "f", "MY" }, { "fo", "MZXQ" }, { "foo", "MZXW6" }, { "foob", "MZXW6YQ" },
                { "fooba", "MZXW6YTB" }, { "foobar", "MZXW6YTBOI" },
                /* The RFC 6238 SHA-1 seed, as authenticator apps take it. */
                { "12345678901234567890", "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ" },
        };
        (void) state;
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
                _cleanup_secret_ tg_secret *b32 = NULL;

                assert_int_equal(tg_base32_encode((const uint8_t *) v[i].in, strlen(v[i].in), &b32), 0);
                assert_int_equal(b32->size, strlen(v[i].out));
                assert_string_equal((const char *) b32->data, v[i].out);
        }
}

static void test_rejects(void **state) {
        uint32_t code = 4242;
        tg_totp_alg alg = TG_TOTP_SHA256;

        (void) state;
        assert_int_equal(tg_hotp((const uint8_t *) seed20, 20, TG_TOTP_SHA1, 0, 5, &code), -TG_ERR_INVALID);
        assert_int_equal(tg_hotp((const uint8_t *) seed20, 20, TG_TOTP_SHA1, 0, 9, &code), -TG_ERR_INVALID);
        assert_int_equal(tg_hotp((const uint8_t *) seed20, 0, TG_TOTP_SHA1, 0, 6, &code), -TG_ERR_INVALID);
        assert_int_equal(tg_hotp((const uint8_t *) seed20, 20, _TG_TOTP_ALG_MAX, 0, 6, &code), -TG_ERR_INVALID);
        assert_int_equal(tg_totp((const uint8_t *) seed20, 20, TG_TOTP_SHA1, 6, 0, 59, &code, NULL), -TG_ERR_INVALID);
        assert_int_equal(tg_totp((const uint8_t *) seed20, 20, TG_TOTP_SHA1, 6, 301, 59, &code, NULL), -TG_ERR_INVALID);
        assert_int_equal(code, 4242); /* ret untouched on failure */
        assert_int_equal(tg_totp_alg_from_string("sha1", &alg), -TG_ERR_INVALID);
        assert_int_equal(alg, TG_TOTP_SHA256);
        assert_int_equal(tg_totp_alg_from_string("SHA1", &alg), 0);
        assert_int_equal(alg, TG_TOTP_SHA1);
        assert_string_equal(tg_totp_alg_to_string(TG_TOTP_SHA512), "SHA512");
        assert_null(tg_totp_alg_to_string(_TG_TOTP_ALG_MAX));
}

int main(void) {
        tg_log_set_journal(false);
        tg_log_set_max_level(LOG_CRIT);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_rfc6238_appendix_b),
                cmocka_unit_test(test_rfc4226_appendix_d),
                cmocka_unit_test(test_base32_rfc4648),
                cmocka_unit_test(test_rejects),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
