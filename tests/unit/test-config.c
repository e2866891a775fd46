/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <tss2/tss2_tpm2_types.h>

#include "config.h"
#include "error.h"
#include "log.h"
#include "macro.h"

static void test_defaults(void **state) {
        _cleanup_config_ tg_config *c = NULL;

        assert_int_equal(tg_config_parse("", "test", &c), 0);
        assert_string_equal(c->tcti, "device:/dev/tpmrm0");
        assert_null(c->null_name_path);
        assert_int_equal(c->kernel_null_name, TG_NULL_NAME_REQUIRED);
        assert_int_equal(c->pcr_bank, TPM2_ALG_SHA256);
        assert_int_equal(c->pcr_mask, 1u << 7);
}

static void test_all_keys(void **state) {
        _cleanup_config_ tg_config *c = NULL;
        const char *text =
                "# comment\n"
                "\n"
                "tcti = swtpm:path=/tmp/x  # trailing comment\n"
                "state_dir=/tmp/state\n"
                "  null_name_path = /tmp/null_name\n"
                "kernel_null_name = if-available\n"
                "ek_ca = /tmp/ca.pem\n"
                "cache_dir = /tmp/cache\n"
                "pcr_bank = sha384\n"
                "pcrs = 0,7,23\n";

        assert_int_equal(tg_config_parse(text, "test", &c), 0);
        assert_string_equal(c->tcti, "swtpm:path=/tmp/x");
        assert_string_equal(c->state_dir, "/tmp/state");
        assert_string_equal(c->null_name_path, "/tmp/null_name");
        assert_string_equal(c->ek_ca, "/tmp/ca.pem");
        assert_string_equal(c->cache_dir, "/tmp/cache");
        assert_int_equal(c->kernel_null_name, TG_NULL_NAME_IF_AVAILABLE);
        assert_int_equal(c->pcr_bank, TPM2_ALG_SHA384);
        assert_int_equal(c->pcr_mask, (1u << 0) | (1u << 7) | (1u << 23));
}

/* config get prints what the parser decided, for every key, round trip. */
static void test_get(void **state) {
        static const char *keys[] = { "tcti", "state_dir", "null_name_path", "ek_ca", "cache_dir",
                                      "kernel_null_name", "pcr_bank", "pcrs", "allow_no_pin", "pin_min_length",
                                      "allow_unextended_pcrs" };
        _cleanup_config_ tg_config *c = NULL, *again = NULL;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        char *v = NULL;

        assert_int_equal(tg_config_parse("pcrs = 11,7\nkernel_null_name = if-available\npcr_bank = sha1\n", "test", &c), 0);
        assert_int_equal(tg_config_get(c, "pcrs", &v), 0);
        assert_string_equal(v, "7,11");
        free(v);
        assert_int_equal(tg_config_get(c, "null_name_path", &v), 0);
        assert_string_equal(v, "");
        free(v);
        assert_int_equal(tg_config_get(c, "no_such_key", &v), -TG_ERR_INVALID);

        /* Every key written back as "key = value" parses to the same values. */
        text = calloc(1, 4096);
        assert_non_null(text);
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
                assert_int_equal(tg_config_get(c, keys[i], &v), 0);
                if (*v)
                        len += (size_t) snprintf(text + len, 4096 - len, "%s = %s\n", keys[i], v);
                free(v);
        }
        assert_int_equal(tg_config_parse(text, "again", &again), 0);
        assert_string_equal(again->tcti, c->tcti);
        assert_int_equal(again->kernel_null_name, c->kernel_null_name);
        assert_int_equal(again->pcr_bank, c->pcr_bank);
        assert_int_equal(again->pcr_mask, c->pcr_mask);
}

static void test_rejects(void **state) {
        static const char *bad[] = {
                "unknown_key = 1\n",
                "kernel_null_name = sometimes\n",
                "pcrs = 24\n",
                "pcrs = 7,,8\n",
                "pcrs = -1\n",
                "pcr_bank = md5\n",
                "tcti\n",
                "tcti =\n",
                "= value\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                tg_config *c = NULL;
                assert_int_equal(tg_config_parse(bad[i], "test", &c), -TG_ERR_CONFIG);
                assert_null(c);
        }
}

static void test_pcr_list(void **state) {
        uint32_t mask;
        char buf[128];

        assert_int_equal(tg_pcr_list_parse("7", &mask), 0);
        assert_int_equal(mask, 1u << 7);
        assert_int_equal(tg_pcr_list_parse("0+4+7", &mask), 0);
        tg_pcr_list_format(mask, buf, sizeof buf);
        assert_string_equal(buf, "0,4,7");
        assert_int_equal(tg_pcr_list_parse("7,", &mask), -TG_ERR_INVALID);
        assert_int_equal(tg_pcr_list_parse("a", &mask), -TG_ERR_INVALID);
        assert_int_equal(tg_pcr_list_parse("99999999999999999999", &mask), -TG_ERR_INVALID);
}

int main(void) {
        tg_log_set_journal(false); /* test alerts never reach the host's journal */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_all_keys),
                cmocka_unit_test(test_get),
                cmocka_unit_test(test_rejects),
                cmocka_unit_test(test_pcr_list),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
