/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "error.h"
#include "log.h"

/* libcryptsetup 2.6 only continues with other tokens (and falls back to the
 * passphrase) after these four; anything else must be a deliberate choice. */
static int is_continue_errno(int e) {
        return e == -ENOENT || e == -EPERM || e == -EAGAIN || e == -ENOANO;
}

static void test_every_code_described(void **state) {
        for (int e = 1; e < _TG_ERR_MAX; e++) {
                assert_non_null(tg_err_id(-e));
                assert_non_null(tg_err_str(-e));
                assert_true(strlen(tg_err_str(-e)) > 0);
                assert_true(tg_err_exit_code(-e) > 0);
                if (e != TG_ERR_NOMEM)
                        assert_true(is_continue_errno(tg_err_to_cryptsetup_errno(-e)));
        }
        assert_int_equal(tg_err_exit_code(0), 0);
}

static void test_cryptsetup_contract(void **state) {
        assert_int_equal(tg_err_to_cryptsetup_errno(-TG_ERR_PIN_NEEDED), -ENOANO);
        assert_int_equal(tg_err_to_cryptsetup_errno(-TG_ERR_BAD_PIN), -EPERM);
        /* Only -ENOANO makes cryptsetup --tries and systemd-cryptsetup ask for the PIN again. */
        assert_int_equal(tg_err_to_cryptsetup_errno(-TG_ERR_PIN_RETRY), -ENOANO);
        assert_int_equal(tg_err_to_cryptsetup_errno(-TG_ERR_TPM_UNREACHABLE), -EAGAIN);
        assert_int_equal(tg_err_to_cryptsetup_errno(-TG_ERR_LOCKOUT), -EAGAIN);
        assert_int_equal(tg_err_to_cryptsetup_errno(-TG_ERR_INTERPOSER), -ENOENT);
        assert_int_equal(tg_err_to_cryptsetup_errno(-TG_ERR_PCR_MISMATCH), -ENOENT);
        assert_int_equal(tg_err_to_cryptsetup_errno(-TG_ERR_NOMEM), -ENOMEM);
}

static void test_verify_exit_codes_distinct(void **state) {
        /* tpmguard verify documents one exit code per outcome. */
        int codes[] = {
                tg_err_exit_code(-TG_ERR_INTERPOSER),
                tg_err_exit_code(-TG_ERR_NOT_PROVISIONED),
                tg_err_exit_code(-TG_ERR_NO_NULL_NAME),
                tg_err_exit_code(-TG_ERR_TPM_UNREACHABLE),
                tg_err_exit_code(-TG_ERR_TPM),
        };
        for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
                for (size_t j = i + 1; j < sizeof codes / sizeof codes[0]; j++)
                        assert_int_not_equal(codes[i], codes[j]);
}

static void test_out_of_range(void **state) {
        assert_string_equal(tg_err_id(-_TG_ERR_MAX - 5), "invalid");
        assert_int_equal(tg_err_from_errno(-ENOMEM), -TG_ERR_NOMEM);
        assert_int_equal(tg_err_from_errno(-ENOENT), -TG_ERR_NOT_FOUND);
}

int main(void) {
        tg_log_set_journal(false); /* test alerts never reach the host's journal */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_code_described),
                cmocka_unit_test(test_cryptsetup_contract),
                cmocka_unit_test(test_verify_exit_codes_distinct),
                cmocka_unit_test(test_out_of_range),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
