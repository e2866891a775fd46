/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The documentation cannot drift from the code:
 *   - tpmguard(8)'s EXIT STATUS table (code, error ids) must be exactly
 *     tg_err_exit_code() and tg_err_id() for every error class;
 *   - the shipped tpmguard.conf must parse, must be the defaults as shipped
 *     (everything commented out), and with every setting uncommented must
 *     still parse, name every setting, and show the real defaults.
 *
 *   test-docs MANPAGE CONF
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "error.h"
#include "util.h"

static const char *man_path, *conf_path;

static char *read_text(const char *path) {
        uint8_t *data = NULL;
        size_t size = 0;
        char *text;

        assert_int_equal(tg_read_file(path, 1024 * 1024, &data, &size), 0);
        text = strndup((const char *) data, size);
        free(data);
        assert_non_null(text);
        return text;
}

typedef struct exit_row {
        int code;
        char ids[128];
} exit_row;

/* Rows "N|id, id|..." of the first table after .SH "EXIT STATUS". */
static size_t parse_exit_table(char *text, exit_row *rows, size_t max) {
        char *p = strstr(text, ".SH \"EXIT STATUS\"");
        char *end, *line, *save = NULL;
        size_t n = 0;

        assert_non_null(p);
        p = strstr(p, "\n.TS\n");
        assert_non_null(p);
        end = strstr(p, "\n.TE\n");
        assert_non_null(end);
        *end = '\0';
        for (line = strtok_r(p, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
                char *bar, *bar2;
                if (!isdigit((unsigned char) line[0]))
                        continue;
                bar = strchr(line, '|');
                assert_non_null(bar);
                bar2 = strchr(bar + 1, '|');
                assert_non_null(bar2);
                assert_true(n < max);
                rows[n].code = atoi(line);
                snprintf(rows[n].ids, sizeof rows[n].ids, "%.*s", (int) (bar2 - bar - 1), bar + 1);
                n++;
        }
        return n;
}

/* Is id one of the comma-separated ids in list? */
static bool ids_contain(const char *list, const char *id) {
        size_t len = strlen(id);

        for (const char *p = list; *p;) {
                while (*p == ' ' || *p == ',')
                        p++;
                size_t n = strcspn(p, ", ");
                if (n == len && strncmp(p, id, len) == 0)
                        return true;
                p += n;
        }
        return false;
}

static void test_man_exit_codes(void **state) {
        char *text = read_text(man_path);
        exit_row rows[64];
        size_t n = parse_exit_table(text, rows, ELEMENTSOF(rows));
        int max_code = 0;

        assert_true(n > 0);
        /* Every error class is in the row of its exit code, under its id. */
        for (int e = 0; e < _TG_ERR_MAX; e++) {
                int code = tg_err_exit_code(-e), found = 0;
                if (code > max_code)
                        max_code = code;
                for (size_t i = 0; i < n; i++)
                        if (rows[i].code == code) {
                                found++;
                                if (!ids_contain(rows[i].ids, tg_err_id(-e)))
                                        fail_msg("tpmguard(8): exit code %d lists \"%s\", not \"%s\"", code,
                                                 rows[i].ids, tg_err_id(-e));
                        }
                if (found != 1)
                        fail_msg("tpmguard(8): exit code %d (%s) appears %d times", code, tg_err_id(-e), found);
        }
        /* And the table documents nothing else: every id it names is that code's. */
        for (size_t i = 0; i < n; i++) {
                char copy[128], *save = NULL;
                snprintf(copy, sizeof copy, "%s", rows[i].ids);
                for (char *id = strtok_r(copy, ", ", &save); id; id = strtok_r(NULL, ", ", &save)) {
                        int e;
                        for (e = 0; e < _TG_ERR_MAX; e++)
                                if (strcmp(tg_err_id(-e), id) == 0)
                                        break;
                        if (e == _TG_ERR_MAX)
                                fail_msg("tpmguard(8): exit code %d names unknown error \"%s\"", rows[i].code, id);
                        if (tg_err_exit_code(-e) != rows[i].code)
                                fail_msg("tpmguard(8): \"%s\" is documented as %d but exits %d", id,
                                         rows[i].code, tg_err_exit_code(-e));
                }
                if (rows[i].code > max_code)
                        fail_msg("tpmguard(8): exit code %d is never used", rows[i].code);
        }
        free(text);
}

static void test_conf_as_shipped(void **state) {
        _cleanup_config_ tg_config *shipped = NULL, *defaults = NULL;
        char *text = read_text(conf_path);

        assert_int_equal(tg_config_parse(text, conf_path, &shipped), 0);
        assert_int_equal(tg_config_parse("", "defaults", &defaults), 0);
        assert_string_equal(shipped->tcti, defaults->tcti);
        assert_string_equal(shipped->state_dir, defaults->state_dir);
        assert_string_equal(shipped->cache_dir, defaults->cache_dir);
        assert_string_equal(shipped->ek_ca, defaults->ek_ca);
        assert_null(shipped->null_name_path);
        assert_int_equal(shipped->kernel_null_name, defaults->kernel_null_name);
        assert_int_equal(shipped->resource_manager, defaults->resource_manager);
        assert_int_equal(shipped->pcr_bank, defaults->pcr_bank);
        assert_int_equal(shipped->pcr_mask, defaults->pcr_mask);
        assert_int_equal(shipped->da_max_tries, defaults->da_max_tries);
        assert_int_equal(shipped->da_recovery_time, defaults->da_recovery_time);
        assert_int_equal(shipped->da_lockout_recovery, defaults->da_lockout_recovery);
        assert_int_equal(shipped->pin_tries, defaults->pin_tries);
        assert_int_equal(shipped->pin_da_reserve, defaults->pin_da_reserve);
        assert_int_equal(shipped->allow_no_pin, defaults->allow_no_pin);
        assert_int_equal(shipped->pin_min_length, defaults->pin_min_length);
        assert_int_equal(shipped->allow_unextended_pcrs, defaults->allow_unextended_pcrs);
        assert_int_equal(shipped->pin_kdf_memory, defaults->pin_kdf_memory);
        assert_int_equal(shipped->pin_kdf_time_ms, defaults->pin_kdf_time_ms);
        free(text);
}

static void test_conf_uncommented(void **state) {
        static const char *const settings[] = {
                "tcti", "resource_manager", "kernel_null_name", "null_name_path", "ek_ca", "state_dir", "cache_dir", "pcr_bank", "pcrs",
                "da_max_tries", "da_recovery_time", "da_lockout_recovery",
                "pin_tries", "pin_da_reserve",
                "allow_no_pin", "pin_min_length", "allow_unextended_pcrs",
                "pin_kdf_memory", "pin_kdf_time_ms",
        };
        _cleanup_config_ tg_config *all = NULL, *defaults = NULL;
        char *text = read_text(conf_path), *out = calloc(1, strlen(text) + 1), *save = NULL;
        bool seen[ELEMENTSOF(settings)] = {};
        size_t len = 0;

        assert_non_null(out);
        /* "#key = value" lines are the settings; "# words" lines are prose. */
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                size_t k;
                if (l[0] != '#' || !islower((unsigned char) l[1]))
                        continue;
                for (k = 0; k < ELEMENTSOF(settings); k++) {
                        size_t n = strlen(settings[k]);
                        if (strncmp(l + 1, settings[k], n) == 0 && strncmp(l + 1 + n, " = ", 3) == 0)
                                break;
                }
                if (k == ELEMENTSOF(settings))
                        fail_msg("tpmguard.conf: \"%s\" is not a known setting", l);
                assert_false(seen[k]);
                seen[k] = true;
                len += (size_t) sprintf(out + len, "%s\n", l + 1);
        }
        for (size_t k = 0; k < ELEMENTSOF(settings); k++)
                if (!seen[k])
                        fail_msg("tpmguard.conf does not document \"%s\"", settings[k]);

        assert_int_equal(tg_config_parse(out, "uncommented", &all), 0);
        assert_int_equal(tg_config_parse("", "defaults", &defaults), 0);
        /* The values shown are the defaults, except null_name_path, which has none. */
        assert_string_equal(all->ek_ca, defaults->ek_ca);
        assert_string_equal(all->tcti, defaults->tcti);
        assert_string_equal(all->state_dir, defaults->state_dir);
        assert_string_equal(all->cache_dir, defaults->cache_dir);
        assert_int_equal(all->kernel_null_name, defaults->kernel_null_name);
        assert_int_equal(all->resource_manager, defaults->resource_manager);
        assert_int_equal(all->pcr_bank, defaults->pcr_bank);
        assert_int_equal(all->pcr_mask, defaults->pcr_mask);
        assert_int_equal(all->da_max_tries, defaults->da_max_tries);
        assert_int_equal(all->da_recovery_time, defaults->da_recovery_time);
        assert_int_equal(all->da_lockout_recovery, defaults->da_lockout_recovery);
        assert_int_equal(all->pin_tries, defaults->pin_tries);
        assert_int_equal(all->pin_da_reserve, defaults->pin_da_reserve);
        assert_int_equal(all->allow_no_pin, defaults->allow_no_pin);
        assert_int_equal(all->pin_min_length, defaults->pin_min_length);
        assert_int_equal(all->allow_unextended_pcrs, defaults->allow_unextended_pcrs);
        assert_int_equal(all->pin_kdf_memory, defaults->pin_kdf_memory);
        assert_int_equal(all->pin_kdf_time_ms, defaults->pin_kdf_time_ms);
        free(out);
        free(text);
}

int main(int argc, char *argv[]) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_man_exit_codes),
                cmocka_unit_test(test_conf_as_shipped),
                cmocka_unit_test(test_conf_uncommented),
        };

        if (argc != 3) {
                fprintf(stderr, "usage: %s MANPAGE CONF\n", argv[0]);
                return 2;
        }
        man_path = argv[1];
        conf_path = argv[2];
        return cmocka_run_group_tests(tests, NULL, NULL);
}
