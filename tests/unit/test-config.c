/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <tss2/tss2_tpm2_types.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "log.h"
#include "macro.h"

static void test_defaults(void **state) {
        _cleanup_config_ tg_config *c = NULL;

        assert_int_equal(tg_config_parse("", "test", &c), 0);
        assert_string_equal(c->tcti, "device:/dev/tpmrm0");
        assert_null(c->null_name_path);
        assert_int_equal(c->kernel_null_name, TG_NULL_NAME_PREFER);
        assert_int_equal(c->resource_manager, TG_RESOURCE_MANAGER_AUTO);
        /* auto, with the default tcti: the kernel's resource manager. */
        assert_true(tg_config_resource_manager(c));
        assert_int_equal(c->pcr_bank, TPM2_ALG_SHA256);
        assert_int_equal(c->pcr_mask, 1u << 7);
        assert_int_equal(c->da_max_tries, 32);
        assert_int_equal(c->da_recovery_time, 7200);
        assert_int_equal(c->da_lockout_recovery, 86400);
        assert_int_equal(c->pin_tries, 3);
        assert_int_equal(c->pin_da_reserve, TG_DEFAULT_PIN_DA_RESERVE);
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
                "resource_manager = yes\n"
                "ek_ca = /tmp/ca.pem\n"
                "cache_dir = /tmp/cache\n"
                "pcr_bank = sha384\n"
                "pcrs = 0,7,23\n"
                "da_max_tries = 1000\n"
                "da_recovery_time = 0\n"
                "da_lockout_recovery = 4294967295\n"
                "pin_tries = 5\n"
                "pin_da_reserve = 0\n";

        assert_int_equal(tg_config_parse(text, "test", &c), 0);
        assert_string_equal(c->tcti, "swtpm:path=/tmp/x");
        assert_string_equal(c->state_dir, "/tmp/state");
        assert_string_equal(c->null_name_path, "/tmp/null_name");
        assert_string_equal(c->ek_ca, "/tmp/ca.pem");
        assert_string_equal(c->cache_dir, "/tmp/cache");
        assert_int_equal(c->kernel_null_name, TG_NULL_NAME_IF_AVAILABLE);
        assert_int_equal(c->resource_manager, TG_RESOURCE_MANAGER_YES);
        /* yes overrides a tcti that is not a resource manager's. */
        assert_true(tg_config_resource_manager(c));
        assert_int_equal(c->pcr_bank, TPM2_ALG_SHA384);
        assert_int_equal(c->pcr_mask, (1u << 0) | (1u << 7) | (1u << 23));
        assert_int_equal(c->da_max_tries, 1000);
        assert_int_equal(c->da_recovery_time, 0);
        assert_int_equal(c->da_lockout_recovery, UINT32_MAX);
        assert_int_equal(c->pin_tries, 5);
        assert_int_equal(c->pin_da_reserve, 0);
}

/* config get prints what the parser decided, for every key, round trip. */
static void test_get(void **state) {
        static const char *keys[] = { "tcti", "state_dir", "null_name_path", "ek_ca", "cache_dir",
                                      "kernel_null_name", "resource_manager", "pcr_bank", "pcrs", "da_max_tries",
                                      "da_recovery_time", "da_lockout_recovery", "allow_no_pin", "pin_min_length",
                                      "allow_unextended_pcrs" };
        _cleanup_config_ tg_config *c = NULL, *again = NULL;
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        char *v = NULL;

        assert_int_equal(tg_config_parse("pcrs = 11,7\nkernel_null_name = if-available\npcr_bank = sha1\n"
                                         "resource_manager = no\n"
                                         "da_max_tries = 5\nda_recovery_time = 60\nda_lockout_recovery = 600\n",
                                         "test", &c), 0);
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
        assert_int_equal(again->resource_manager, TG_RESOURCE_MANAGER_NO);
        assert_int_equal(again->pcr_bank, c->pcr_bank);
        assert_int_equal(again->pcr_mask, c->pcr_mask);
        assert_int_equal(again->da_max_tries, 5);
        assert_int_equal(again->da_recovery_time, 60);
        assert_int_equal(again->da_lockout_recovery, 600);
}

/* resource_manager = auto decides from the tcti; yes and no override it. */
static void test_resource_manager(void **state) {
        static const struct {
                const char *tcti;
                bool rm;
        } rows[] = {
                { "device:/dev/tpmrm0", true },
                { "device:/dev/tpmrm12", true },
                { "tabrmd", true },
                { "tabrmd:bus_type=system", true },
                { "libtss2-tcti-tabrmd.so.0:bus_type=session", true },
                { "device:/dev/tpm0", false },
                { "device", false },
                { "device:/dev/tpmrm", false },
                { "device:/dev/tpmrm0x", false },
                { "device:/dev/tpmrm0/../tpm0", false },
                { "tabrmdx", false },
                { "swtpm:path=/run/swtpm.sock", false },
                { "mssim", false },
                { "", false },
        };
        char text[256];

        assert_false(tg_tcti_is_resource_manager(NULL));
        for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
                _cleanup_config_ tg_config *c = NULL;

                assert_int_equal(tg_tcti_is_resource_manager(rows[i].tcti), rows[i].rm);
                if (!*rows[i].tcti)
                        continue;
                for (unsigned m = 0; m < 3; m++) {
                        static const char *const value[] = { "auto", "yes", "no" };
                        tg_config *d = NULL;

                        snprintf(text, sizeof text, "tcti = %s\nresource_manager = %s\n", rows[i].tcti, value[m]);
                        assert_int_equal(tg_config_parse(text, "test", &d), 0);
                        assert_int_equal(tg_config_resource_manager(d), m == 0 ? rows[i].rm : m == 1);
                        tg_config_free(d);
                }
                snprintf(text, sizeof text, "tcti = %s\n", rows[i].tcti);
                assert_int_equal(tg_config_parse(text, "test", &c), 0);
                assert_int_equal(tg_config_resource_manager(c), rows[i].rm);
        }
}

static void test_rejects(void **state) {
        static const char *bad[] = {
                "unknown_key = 1\n",
                "kernel_null_name = sometimes\n",
                "pcrs = 24\n",
                "pcrs = 7,,8\n",
                "pcrs = -1\n",
                "pcr_bank = md5\n",
                "da_max_tries = -1\n",
                "da_max_tries = 4294967296\n",
                "da_recovery_time = 2h\n",
                "da_lockout_recovery = +5\n",
                "tcti\n",
                "tcti =\n",
                "= value\n",
                "pin_tries = 0\n",
                "pin_tries = 11\n",
                "pin_tries = 3x\n",
                "pin_tries = -1\n",
                "pin_da_reserve = 101\n",
                "resource_manager = maybe\n",
                "resource_manager = YES\n",
                "resource_manager = auto\nresource_manager = no\n",
                /* A second line must not silently undo the first. */
                "kernel_null_name = required\nkernel_null_name = if-available\n",
                "pcrs = 7\n# later\npcrs = 0\n",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                tg_config *c = NULL;
                assert_int_equal(tg_config_parse(bad[i], "test", &c), -TG_ERR_CONFIG);
                assert_null(c);
        }
}

static char dir[] = "/tmp/tpmguard-test-config.XXXXXX";

static void write_mode(const char *path, const char *text, mode_t mode) {
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(chmod(path, mode), 0);
}

/* Whoever can write the configuration decides policy: only root (or our own user) may. */
static void test_load_trust(void **state) {
        char path[256], sub[256];
        tg_config *c = NULL;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/tpmguard.conf", dir);

        /* Named explicitly and missing: an error, never the defaults. */
        assert_int_equal(tg_config_load(path, &c), -TG_ERR_CONFIG);
        assert_null(c);
        setenv("TPMGUARD_CONFIG", path, 1);
        assert_int_equal(tg_config_load(NULL, &c), -TG_ERR_CONFIG);
        unsetenv("TPMGUARD_CONFIG");

        write_mode(path, "kernel_null_name = if-available\n", 0644);
        assert_int_equal(tg_config_load(path, &c), 0);
        assert_int_equal(c->kernel_null_name, TG_NULL_NAME_IF_AVAILABLE);
        tg_config_free(c);
        c = NULL;

        /* Writable by the group or by everyone: refused. */
        assert_int_equal(chmod(path, 0664), 0);
        assert_int_equal(tg_config_load(path, &c), -TG_ERR_CONFIG);
        assert_int_equal(chmod(path, 0646), 0);
        assert_int_equal(tg_config_load(path, &c), -TG_ERR_CONFIG);
        assert_int_equal(chmod(path, 0644), 0);

        /* Owned by another user (only testable as root). */
        if (geteuid() == 0) {
                assert_int_equal(chown(path, 65534, 0), 0);
                assert_int_equal(tg_config_load(path, &c), -TG_ERR_CONFIG);
                assert_int_equal(chown(path, 0, 0), 0);
        }

        /* In a directory others can write (no sticky bit): refused. */
        snprintf(sub, sizeof sub, "%s/open", dir);
        assert_int_equal(mkdir(sub, 0777), 0);
        assert_int_equal(chmod(sub, 0777), 0);
        snprintf(path, sizeof path, "%s/open/tpmguard.conf", dir);
        write_mode(path, "pcrs = 7\n", 0644);
        assert_int_equal(tg_config_load(path, &c), -TG_ERR_CONFIG);
        assert_null(c);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(rmdir(sub), 0);
        snprintf(path, sizeof path, "%s/tpmguard.conf", dir);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(rmdir(dir), 0);
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
                cmocka_unit_test(test_resource_manager),
                cmocka_unit_test(test_rejects),
                cmocka_unit_test(test_pcr_list),
                cmocka_unit_test(test_load_trust),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
