/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pinned key file's provenance field "ek_trust" (issue 15 §3): a TOFU pin
 * survives a format/parse round trip, a file without the field (written
 * before TOFU existed, always from a certificate) is a certified pin, and any
 * other value is refused rather than guessed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "pinned.h"

/* tests/fuzz/corpus/pinned/ek-signing-key.json, as a certified provision wrote it. */
static const char certified[] =
        "{\"version\": 1,"
        " \"name\": \"000be3b1a596e6dd0302ee3bd41c6d46591d3ab3f255c0a69d7b80c8b4e803c4bd58\","
        " \"public\": \"00580023000b00050472000000100018000b000300100020e7d1f2e7f221efba8608f9e814af2bf1ca5ad8"
        "bc2d05d41e5b7c7d87589e6e75002059c485fdcb5c5d62793c1d886891395cc50ce17c4fe02330a5d81a85a7a4414d\","
        " \"ek_nv_index\": 29360150, \"ek_template\": \"H-3 (ECC P-384)\","
        " \"provisioned_at\": \"2026-12-03T13:00:49Z\"}";

static void test_absent_means_certificate(void **state) {
        tg_pinned_key key;

        assert_int_equal(tg_pinned_key_parse(certified, strlen(certified), &key), 0);
        assert_false(key.tofu);
        assert_string_equal(tg_pinned_trust(&key), TG_PINNED_TRUST_CERT);
}

static void test_tofu_round_trip(void **state) {
        tg_pinned_key key, back;
        char *text = NULL;

        assert_int_equal(tg_pinned_key_parse(certified, strlen(certified), &key), 0);
        key.tofu = true;
        assert_int_equal(tg_pinned_key_format(&key, &text), 0);
        assert_non_null(strstr(text, "\"ek_trust\": \"trust-on-first-use\""));
        assert_int_equal(tg_pinned_key_parse(text, strlen(text), &back), 0);
        assert_true(back.tofu);
        free(text);

        key.tofu = false;
        assert_int_equal(tg_pinned_key_format(&key, &text), 0);
        assert_non_null(strstr(text, "\"ek_trust\": \"ek-certificate\""));
        assert_int_equal(tg_pinned_key_parse(text, strlen(text), &back), 0);
        assert_false(back.tofu);
        free(text);
}

static void test_unknown_value_refused(void **state) {
        static const char *const bad[] = { "\"tofu\"", "\"\"", "\"Trust-On-First-Use\"", "1", "true", "null" };
        tg_pinned_key key;
        char json[1024];

        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                snprintf(json, sizeof json, "%.*s, \"ek_trust\": %s}", (int) strlen(certified) - 1, certified, bad[i]);
                assert_int_equal(tg_pinned_key_parse(json, strlen(json), &key), -TG_ERR_INVALID);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_absent_means_certificate),
                cmocka_unit_test(test_tofu_round_trip),
                cmocka_unit_test(test_unknown_value_refused),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
