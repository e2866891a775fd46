/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* tpmguard doctor without a TPM: crypttab parsing, severity ranking, the report's JSON. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "crypttab.h"
#include "doctor.h"
#include "error.h"
#include "log.h"
#include "util.h"

static char *write_temp(const char *text) {
        char *path = strdup("/tmp/tpmguard-test-crypttab.XXXXXX");
        int fd;

        assert_non_null(path);
        fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t) strlen(text));
        close(fd);
        return path;
}

static void test_crypttab(void **state) {
        char *path = write_temp("# root volume\n"
                                "\n"
                                "root UUID=0d2c5b1e-1c0b-4a5e-9d1e-0f2f5b7a9c11 none luks,discard\n"
                                "  home\t/dev/nvme0n1p4\t/etc/keys/home.key\n"
                                "data LABEL=data\n"
                                "swap PARTUUID=aa-bb /dev/urandom swap\n"
                                "x PARTLABEL=secret\n"
                                "y ID=nvme-Samsung_1\n");
        char **devices = NULL;
        size_t n = 0;

        assert_int_equal(tg_crypttab_devices(path, &devices, &n), 0);
        assert_int_equal(n, 6);
        assert_string_equal(devices[0], "/dev/disk/by-uuid/0d2c5b1e-1c0b-4a5e-9d1e-0f2f5b7a9c11");
        assert_string_equal(devices[1], "/dev/nvme0n1p4");
        assert_string_equal(devices[2], "/dev/disk/by-label/data");
        assert_string_equal(devices[3], "/dev/disk/by-partuuid/aa-bb");
        assert_string_equal(devices[4], "/dev/disk/by-partlabel/secret");
        assert_string_equal(devices[5], "/dev/disk/by-id/nvme-Samsung_1");
        tg_strv_free(devices, n);
        unlink(path);
        free(path);
}

/* The name and options columns, for doctor's crypttab-options check. */
static void test_crypttab_entries(void **state) {
        char *path = write_temp("# comment\n"
                                "root UUID=0d2c5b1e-1c0b-4a5e-9d1e-0f2f5b7a9c11 none luks,tpm2-measure-pcr=yes\n"
                                "home /dev/sda2\n"
                                "swap /dev/sda3 /dev/urandom swap,cipher=aes-xts-plain64 trailing\n");
        char **names = NULL, **devices = NULL, **options = NULL;
        size_t n = 0;

        (void) state;
        assert_int_equal(tg_crypttab_entries(path, &names, &devices, &options, &n), 0);
        assert_int_equal(n, 3);
        assert_string_equal(names[0], "root");
        assert_string_equal(options[0], "luks,tpm2-measure-pcr=yes");
        assert_string_equal(names[1], "home");
        assert_string_equal(devices[1], "/dev/sda2");
        assert_string_equal(options[1], "");
        assert_string_equal(options[2], "swap,cipher=aes-xts-plain64");
        tg_strv_free(names, n);
        tg_strv_free(devices, n);
        tg_strv_free(options, n);
        unlink(path);
        free(path);
}

static void test_crypttab_missing_is_empty(void **state) {
        char **devices = (char **) 1;
        size_t n = 99;

        assert_int_equal(tg_crypttab_devices("/nonexistent/crypttab", &devices, &n), 0);
        assert_null(devices);
        assert_int_equal(n, 0);
}

static void test_crypttab_rejects(void **state) {
        static const char *bad[] = {
                "onlyname\n",
                "name relative/path\n",
                "name UUID=\n",
                "name UUID=../../etc/passwd\n",
                "name LABEL=a/b\n",
        };

        tg_log_set_max_level(LOG_CRIT);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                char *path = write_temp(bad[i]);
                char **devices = (char **) 1;
                size_t n = 99;
                if (tg_crypttab_devices(path, &devices, &n) != -TG_ERR_INVALID)
                        fail_msg("accepted crypttab line \"%s\"", bad[i]);
                /* ret_ parameters untouched on failure */
                assert_ptr_equal(devices, (char **) 1);
                assert_int_equal(n, 99);
                unlink(path);
                free(path);
        }
        tg_log_set_max_level(LOG_INFO);
}

static void test_severity(void **state) {
        /* A suspected interposer outranks everything; no error ranks below any error. */
        for (int e = 1; e < _TG_ERR_MAX; e++) {
                assert_true(tg_err_more_severe(-e, 0));
                assert_false(tg_err_more_severe(0, -e));
                assert_false(tg_err_more_severe(-e, -e));
                if (e != TG_ERR_INTERPOSER)
                        assert_true(tg_err_more_severe(-TG_ERR_INTERPOSER, -e));
        }
        assert_true(tg_err_more_severe(-TG_ERR_TPM_UNREACHABLE, -TG_ERR_NOT_PROVISIONED));
        assert_true(tg_err_more_severe(-TG_ERR_NOT_PROVISIONED, -TG_ERR_PCR_MISMATCH));
        assert_true(tg_err_more_severe(-TG_ERR_PCR_MISMATCH, -TG_ERR_NOT_FOUND));
        /* Total: of any two different classes exactly one is more severe. */
        for (int a = 1; a < _TG_ERR_MAX; a++)
                for (int b = 1; b < _TG_ERR_MAX; b++)
                        if (a != b)
                                assert_true(tg_err_more_severe(-a, -b) != tg_err_more_severe(-b, -a));
}

static tg_doctor_report *report_new(void) {
        tg_doctor_report *r = calloc(1, sizeof *r);

        assert_non_null(r);
        r->config_path = strdup("/etc/tpmguard/tpmguard.conf");
        r->checks = calloc(3, sizeof *r->checks);
        assert_non_null(r->checks);
        r->n_checks = 3;
        r->checks[0] = (tg_doctor_check) { .id = "tpm", .status = TG_DOCTOR_OK, .summary = strdup("fine") };
        r->checks[1] = (tg_doctor_check) {
                .id = "volume", .subject = strdup("/dev/sda2 token 0"), .status = TG_DOCTOR_PROBLEM,
                .error = -TG_ERR_PCR_MISMATCH, .summary = strdup("mismatch"), .next_step = strdup("reseal"),
        };
        r->checks[2] = (tg_doctor_check) {
                .id = "kernel", .status = TG_DOCTOR_WARNING, .summary = strdup("no null_name"),
                .detail = strdup("kernel said so"),
        };
        return r;
}

static void test_report_worst_and_json(void **state) {
        _cleanup_doctor_report_ tg_doctor_report *r = report_new();
        _cleanup_json_ json_object *j = NULL;
        json_object *checks, *c, *v;

        assert_int_equal(tg_doctor_report_worst(r), -TG_ERR_PCR_MISMATCH);
        assert_int_equal(tg_doctor_report_to_json(r, &j), 0);
        assert_true(json_object_object_get_ex(j, "verdict", &v));
        assert_string_equal(json_object_get_string(v), "problems");
        assert_true(json_object_object_get_ex(j, "exit_code", &v));
        assert_int_equal(json_object_get_int(v), 14);
        assert_true(json_object_object_get_ex(j, "most_severe", &v));
        assert_string_equal(json_object_get_string(v), "pcr-mismatch");
        assert_true(json_object_object_get_ex(j, "checks", &checks));
        assert_int_equal(json_object_array_length(checks), 3);
        c = json_object_array_get_idx(checks, 1);
        assert_true(json_object_object_get_ex(c, "status", &v));
        assert_string_equal(json_object_get_string(v), "problem");
        assert_true(json_object_object_get_ex(c, "error", &v));
        assert_string_equal(json_object_get_string(v), "pcr-mismatch");
        assert_true(json_object_object_get_ex(c, "next_step", &v));
        assert_string_equal(json_object_get_string(v), "reseal");
        /* A warning is no problem: its error is null. */
        c = json_object_array_get_idx(checks, 2);
        assert_true(json_object_object_get_ex(c, "error", &v));
        assert_null(v);

        /* A more severe problem takes over the exit code; warnings never count. */
        r->checks[0].status = TG_DOCTOR_PROBLEM;
        r->checks[0].error = -TG_ERR_INTERPOSER;
        assert_int_equal(tg_doctor_report_worst(r), -TG_ERR_INTERPOSER);
        r->checks[0].status = TG_DOCTOR_OK;
        r->checks[0].error = 0;
        r->checks[1].status = TG_DOCTOR_WARNING;
        assert_int_equal(tg_doctor_report_worst(r), 0);
}

static void test_report_print(void **state) {
        _cleanup_doctor_report_ tg_doctor_report *r = report_new();
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        assert_non_null(f);
        tg_doctor_report_print(r, f);
        fclose(f);
        assert_non_null(strstr(buf, "[FAIL] volume /dev/sda2 token 0: mismatch\n       next: reseal\n"));
        assert_non_null(strstr(buf, "[WARN] kernel: no null_name\n       why: kernel said so\n"));
        assert_non_null(strstr(buf, "1 problem, 1 warning. Most severe: PCR values do not match the sealed policy "
                                    "(exit code 14)."));
        free(buf);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_crypttab),
                cmocka_unit_test(test_crypttab_entries),
                cmocka_unit_test(test_crypttab_missing_is_empty),
                cmocka_unit_test(test_crypttab_rejects),
                cmocka_unit_test(test_severity),
                cmocka_unit_test(test_report_worst_and_json),
                cmocka_unit_test(test_report_print),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
