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

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_marker_round_trip),
                cmocka_unit_test(test_marker_parse_good),
                cmocka_unit_test(test_marker_parse_rejects),
        };
        tg_log_set_max_level(LOG_CRIT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
