/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pending marker (tokens/lifecycle.h): the record that lets a later run
 * tell which keyslot an interrupted rotate/reseal left over. It decides
 * which keyslot gets destroyed, so the parser must be strict, and writing
 * then parsing must give back exactly what was written.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <syslog.h>

#include "error.h"
#include "lifecycle.h"
#include "log.h"
#include "recovery.h"

#define GOOD "{\"type\":\"tpmguard-pending\",\"keyslots\":[\"3\"],\"version\":1,\"operation\":\"rotate\"," \
             "\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}"

static void test_marker_round_trip(void **state) {
        tg_pending_marker in = { .operation = "reseal", .token = 4, .old_keyslot = 2, .new_keyslot = 31, .bound_keyslot = -1 };
        tg_pending_marker out;
        char *json = NULL;

        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_string_equal(out.operation, "reseal");
        assert_int_equal(out.token, 4);
        assert_int_equal(out.old_keyslot, 2);
        assert_int_equal(out.new_keyslot, 31);
        assert_int_equal(out.bound_keyslot, -1);

        in.bound_keyslot = 31;
        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_non_null(strstr(json, "\"keyslots\":[\"31\"]"));
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_int_equal(out.bound_keyslot, 31);
}

static void test_marker_parse_good(void **state) {
        tg_pending_marker m;

        assert_int_equal(tg_pending_marker_from_string(GOOD, &m), 0);
        assert_string_equal(m.operation, "rotate");
        assert_int_equal(m.token, 0);
        assert_int_equal(m.old_keyslot, 1);
        assert_int_equal(m.new_keyslot, 3);
        assert_int_equal(m.bound_keyslot, 3);
        /* Unknown keys are ignored, like in the token format. */
        assert_int_equal(tg_pending_marker_from_string(
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"reseal\","
                "\"token\":2,\"old_keyslot\":0,\"new_keyslot\":5,\"future\":true}", &m), 0);
        assert_int_equal(m.bound_keyslot, -1);
}

static void test_marker_parse_rejects(void **state) {
        static const char *const bad[] = {
                "",
                "[]",
                GOOD "x",
                GOOD " {}",
                "{\"type\":\"tpmguard\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":2,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"enroll\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":\"0\",\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":32,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":-1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":32}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":1}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1.5,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[\"3\",\"4\"],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[\"x\"],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[\"40\"],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":{},\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                /* The passphrase operations: committed only for them, and a boolean; pbkdf complete. */
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3,\"committed\":true}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":1,\"new_keyslot\":3,\"committed\":1}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"recovery-key\",\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":1,\"new_keyslot\":3,\"pbkdf\":{\"type\":\"argon2id\",\"iterations\":4}}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":1,\"new_keyslot\":3,\"pbkdf\":{\"iterations\":4,\"memory\":1,\"parallel\":1}}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":1,\"new_keyslot\":3,\"pbkdf\":\"argon2id\"}",
                /* migrate: the old token is required (it is what the marker removes), committed is not its. */
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"migrate\",\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"migrate\",\"token\":0,\"old_keyslot\":3,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"migrate\",\"token\":0,\"new_keyslot\":3,\"committed\":true}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"migrat\",\"token\":0,\"new_keyslot\":3}",
        };
        tg_pending_marker m = { .token = 77 };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = tg_pending_marker_from_string(bad[i], &m);
                if (r != -TG_ERR_TOKEN)
                        fail_msg("accepted or wrong error %d for case %zu: %s", r, i, bad[i]);
                /* ret is written only on success. */
                assert_int_equal(m.token, 77);
        }
        assert_int_equal(tg_pending_marker_from_string(NULL, &m), -TG_ERR_TOKEN);
}

static void test_marker_passphrase_ops(void **state) {
        tg_pending_marker in = { .operation = "recovery-key", .token = 2, .old_keyslot = -1, .new_keyslot = 4,
                                 .bound_keyslot = 4, .committed = true,
                                 .pbkdf = { .type = "argon2id", .iterations = 5, .memory_kb = 65536, .parallel = 2 } };
        tg_pending_marker out;
        char *json = NULL;

        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_null(strstr(json, "old_keyslot"));
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_true(tg_pending_marker_is_passphrase_op(&out));
        assert_int_equal(out.old_keyslot, -1);
        assert_int_equal(out.token, 2);
        assert_true(out.committed);
        assert_string_equal(out.pbkdf.type, "argon2id");
        assert_int_equal(out.pbkdf.iterations, 5);
        assert_int_equal(out.pbkdf.memory_kb, 65536);
        assert_int_equal(out.pbkdf.parallel, 2);

        in = (tg_pending_marker) { .operation = "passwd", .token = -1, .old_keyslot = 0, .new_keyslot = 2, .bound_keyslot = -1 };
        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_null(strstr(json, "\"token\""));
        assert_non_null(strstr(json, "\"committed\":false"));
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_int_equal(out.token, -1);
        assert_false(out.committed);
        assert_string_equal(out.pbkdf.type, "");

        /* rotate and reseal markers are not passphrase operations, and keep their format. */
        assert_int_equal(tg_pending_marker_from_string(GOOD, &out), 0);
        assert_false(tg_pending_marker_is_passphrase_op(&out));
        assert_false(out.committed);
}

/* migrate: an enrollment naming the token it replaces; the old keyslot only when it goes. */
static void test_marker_migrate(void **state) {
        tg_pending_marker in = { .operation = "migrate", .token = 1, .old_keyslot = 2, .new_keyslot = 3, .bound_keyslot = 3 };
        tg_pending_marker out;
        char *json = NULL;

        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_string_equal(out.operation, "migrate");
        assert_int_equal(out.token, 1);
        assert_int_equal(out.old_keyslot, 2);
        assert_int_equal(out.new_keyslot, 3);
        assert_int_equal(out.bound_keyslot, 3);
        assert_false(tg_pending_marker_is_passphrase_op(&out));

        in.old_keyslot = -1;
        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_null(strstr(json, "old_keyslot"));
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_int_equal(out.token, 1);
        assert_int_equal(out.old_keyslot, -1);

        assert_true(tg_migratable_token_type("systemd-tpm2"));
        assert_true(tg_migratable_token_type("clevis"));
        assert_false(tg_migratable_token_type("tpmguard"));
        assert_false(tg_migratable_token_type("systemd-fido2"));
        assert_false(tg_migratable_token_type(NULL));
}

/* systemd-cryptenroll's recovery-key form: 64 ModHex letters, 8 groups, 256 bits. */
static void test_recovery_key_format(void **state) {
        uint8_t bytes[TG_RECOVERY_KEY_BYTES];
        tg_secret *a = NULL, *b = NULL;

        static const uint8_t pattern[8] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef };

        for (size_t i = 0; i < sizeof bytes; i++)
                bytes[i] = pattern[i % 8];
        assert_int_equal(tg_recovery_key_format(bytes, sizeof bytes, &a), 0);
        assert_int_equal(a->size, 71);
        assert_memory_equal(a->data, "cbdefghi-jklnrtuv-cbdefghi-jklnrtuv-cbdefghi-jklnrtuv-cbdefghi-jklnrtuv", 71);
        assert_true(tg_recovery_key_is_wellformed(a->data, a->size));
        tg_secret_free(a);
        assert_int_equal(tg_recovery_key_format(bytes, sizeof bytes - 1, &a), -TG_ERR_INVALID);

        assert_int_equal(tg_recovery_key_new(&a), 0);
        assert_int_equal(tg_recovery_key_new(&b), 0);
        assert_true(tg_recovery_key_is_wellformed(a->data, a->size));
        assert_true(tg_recovery_key_is_wellformed(b->data, b->size));
        assert_false(a->size == b->size && memcmp(a->data, b->data, a->size) == 0);
        a->data[8] = 'c';
        assert_false(tg_recovery_key_is_wellformed(a->data, a->size));
        a->data[8] = '-';
        a->data[0] = 'a';
        assert_false(tg_recovery_key_is_wellformed(a->data, a->size));
        tg_secret_free(a);
        tg_secret_free(b);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_marker_round_trip),
                cmocka_unit_test(test_marker_parse_good),
                cmocka_unit_test(test_marker_parse_rejects),
                cmocka_unit_test(test_marker_passphrase_ops),
                cmocka_unit_test(test_marker_migrate),
                cmocka_unit_test(test_recovery_key_format),
        };
        tg_log_set_max_level(LOG_CRIT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
