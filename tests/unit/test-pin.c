/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "error.h"
#include "pin.h"
#include "prompt.h"
#include "util.h"
#include "log.h"

static void assert_derives(const char *pin, const char *salt, uint32_t iterations, const char *hex_first_32) {
        _cleanup_secret_ tg_secret *p = NULL, *auth = NULL;
        _cleanup_free_ char *got = NULL;

        assert_int_equal(tg_secret_new_copy(pin, strlen(pin), &p), 0);
        assert_int_equal(tg_pin_derive_auth(p, (const uint8_t *) salt, strlen(salt), iterations, &auth), 0);
        assert_int_equal(auth->size, 32);
        assert_int_equal(tg_hex_encode(auth->data, auth->size, &got), 0);
        assert_string_equal(got, hex_first_32);
}

/* RFC 7914 §11 (PBKDF2-HMAC-SHA256, dkLen 64): our 32-byte output is the first block, T_1. */
static void test_pbkdf2_rfc7914(void **state) {
        assert_derives("passwd", "salt", 1,
                       "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc");
        assert_derives("Password", "NaCl", 80000,
                       "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56");
}

/* The widely published PBKDF2-HMAC-SHA256 vectors (the RFC 6070 inputs with SHA-256). */
static void test_pbkdf2_published(void **state) {
        assert_derives("password", "salt", 1,
                       "120fb6cffcf8b32c43e7225256c4f837a86548c92ccc35480805987cb70be17b");
        assert_derives("password", "salt", 4096,
                       "c5e478d59288c841aa530db6845c4c8d962893a001ce4e11a4963873aa98134a");
        assert_derives("passwordPASSWORDpassword", "saltSALTsaltSALTsaltSALTsaltSALTsalt", 4096,
                       "348c89dbcbd32b2f32d814b8116e84cf2b17347ebc1800181c4e2a1fb8dd53e1");
}

static void test_derive_rejects(void **state) {
        _cleanup_secret_ tg_secret *p = NULL;
        tg_secret *auth = (tg_secret *) 0x1;
        uint8_t salt[32] = {};

        assert_int_equal(tg_secret_new_copy("1234", 4, &p), 0);
        assert_int_equal(tg_pin_derive_auth(p, salt, sizeof salt, 0, &auth), -TG_ERR_INVALID);
        assert_int_equal(tg_pin_derive_auth(p, salt, 0, 1000, &auth), -TG_ERR_INVALID);
        assert_int_equal(tg_pin_derive_auth(p, salt, sizeof salt, (uint32_t) INT32_MAX + 1, &auth), -TG_ERR_INVALID);
        assert_ptr_equal(auth, (tg_secret *) 0x1); /* ret untouched on failure */
}

/*
 * Format 2's derivation (tokens/pin.h), against values computed outside tpmguard: A is the
 * Argon2id vector of the reference implementation's test.c (argon2id, v=0x13, t=2, m=2^16 KiB,
 * p=1, "password", "somesalt": 09316115...3cf7, also RFC 9106's primitive), and auth and K are
 * HKDF-SHA256 of that A under the two labels, computed once with Python's hmac and hashlib:
 *   prk = HMAC-SHA256(32 zero bytes, A); T(i) = HMAC-SHA256(prk, T(i-1) || label || i).
 * A wrong Argon2 type or version, a swapped label or a salted HKDF changes every byte.
 */
static void test_derive_v2_kat(void **state) {
        _cleanup_secret_ tg_secret *p = NULL, *auth = NULL, *mask = NULL, *mask_long = NULL, *auth2 = NULL;
        _cleanup_free_ char *auth_hex = NULL, *mask_hex = NULL;
        const tg_argon2_params params = { .time_cost = 2, .memory_kib = 65536, .parallel = 1 };

        assert_int_equal(tg_secret_new_copy("password", 8, &p), 0);
        assert_int_equal(tg_pin_derive_v2(p, (const uint8_t *) "somesalt", 8, &params, 44, &auth, &mask), 0);
        assert_int_equal(auth->size, 32);
        assert_int_equal(mask->size, 44);
        assert_int_equal(tg_hex_encode(auth->data, auth->size, &auth_hex), 0);
        assert_int_equal(tg_hex_encode(mask->data, mask->size, &mask_hex), 0);
        assert_string_equal(auth_hex, "c058659ada86ce6b1fbab590fecf089cf1fd30ba4d2ba2cf3476b89137406400");
        assert_string_equal(mask_hex, "38ca0fa1dab8a449d049db82f16fd1b11c75ec67347cde203db887c616c0a813"
                                      "7e1df92936646b0d5db70a3f");
        /* The unseal derives K at the longest sealed size: a shorter K is its prefix. */
        assert_int_equal(tg_pin_derive_v2(p, (const uint8_t *) "somesalt", 8, &params, 128, &auth2, &mask_long), 0);
        assert_memory_equal(mask_long->data, mask->data, mask->size);
        assert_memory_equal(auth2->data, auth->data, auth->size);
}

static void test_derive_v2_rejects(void **state) {
        _cleanup_secret_ tg_secret *p = NULL;
        tg_secret *auth = (tg_secret *) 0x1, *mask = (tg_secret *) 0x2;
        uint8_t salt[32] = {};
        const tg_argon2_params ok = { .time_cost = 1, .memory_kib = TG_ARGON2_MEMORY_MIN, .parallel = 1 };
        tg_argon2_params bad;

        assert_int_equal(tg_secret_new_copy("1234", 4, &p), 0);
        bad = ok, bad.memory_kib = TG_ARGON2_MEMORY_MIN - 1;
        assert_int_equal(tg_pin_derive_v2(p, salt, sizeof salt, &bad, 44, &auth, &mask), -TG_ERR_INVALID);
        bad = ok, bad.memory_kib = TG_ARGON2_MEMORY_MAX + 1;
        assert_int_equal(tg_pin_derive_v2(p, salt, sizeof salt, &bad, 44, &auth, &mask), -TG_ERR_INVALID);
        bad = ok, bad.time_cost = 0;
        assert_int_equal(tg_pin_derive_v2(p, salt, sizeof salt, &bad, 44, &auth, &mask), -TG_ERR_INVALID);
        bad = ok, bad.parallel = TG_ARGON2_PARALLEL_MAX + 1;
        assert_int_equal(tg_pin_derive_v2(p, salt, sizeof salt, &bad, 44, &auth, &mask), -TG_ERR_INVALID);
        assert_int_equal(tg_pin_derive_v2(p, salt, 4, &ok, 44, &auth, &mask), -TG_ERR_INVALID);
        assert_int_equal(tg_pin_derive_v2(p, salt, sizeof salt, &ok, 0, &auth, &mask), -TG_ERR_INVALID);
        assert_ptr_equal(auth, (tg_secret *) 0x1); /* ret untouched on failure */
        assert_ptr_equal(mask, (tg_secret *) 0x2);
}

static void test_argon2_benchmark(void **state) {
        uint32_t t = 0;
        unsigned ms = 0;

        /* A 10 ms target at the floor: within the parser's bounds, and measured. */
        assert_int_equal(tg_argon2_benchmark(TG_ARGON2_MEMORY_MIN, 1, 10, &t, &ms), 0);
        assert_true(t >= TG_ARGON2_TIME_MIN && t <= TG_ARGON2_TIME_MAX);
        /* A target far above one pass gives more passes than a target of one pass. */
        {
                uint32_t t_long = 0;
                assert_int_equal(tg_argon2_benchmark(TG_ARGON2_MEMORY_MIN, 1, 400, &t_long, NULL), 0);
                assert_true(t_long > t || t_long == TG_ARGON2_TIME_MAX);
        }
}

static char tmpdir[] = "/tmp/test-pin.XXXXXX";

static int setup_tmpdir(void **state) {
        return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmpdir(void **state) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}

static int read_pin_from_file_contents(const void *contents, size_t size, tg_secret **ret) {
        char path[128];
        snprintf(path, sizeof path, "%s/pin", tmpdir);
        assert_int_equal(tg_write_file_atomic(path, contents, size, 0600), 0);
        return tg_pin_read(path, NULL, false, ret);
}

static void assert_file_gives(const char *contents, const char *pin) {
        _cleanup_secret_ tg_secret *s = NULL;
        assert_int_equal(read_pin_from_file_contents(contents, strlen(contents), &s), 0);
        assert_int_equal(s->size, strlen(pin));
        assert_memory_equal(s->data, pin, strlen(pin));
}

static void assert_file_fails(const void *contents, size_t size, int expected) {
        tg_secret *s = NULL;
        assert_int_equal(read_pin_from_file_contents(contents, size, &s), expected);
        assert_null(s);
}

static void test_read_file(void **state) {
        char long_pin[TG_PIN_MAX + 3];
        char path[128];
        tg_secret *s = NULL;

        assert_file_gives("1234\nsecond line\n", "1234");
        assert_file_gives("1234", "1234");              /* no newline at EOF */
        assert_file_gives("12 34\r\n", "12 34");       /* CRLF */
        assert_file_gives("p\xc3\xa4ss\n", "p\xc3\xa4ss");  /* UTF-8 bytes pass through */

        assert_file_fails("", 0, -TG_ERR_CANCELLED);
        assert_file_fails("\n", 1, -TG_ERR_CANCELLED);
        assert_file_fails("\r\n", 2, -TG_ERR_CANCELLED);
        assert_file_fails("12\0" "34\n", 6, -TG_ERR_INVALID);

        memset(long_pin, 'x', sizeof long_pin);
        long_pin[TG_PIN_MAX] = '\n';
        long_pin[TG_PIN_MAX + 1] = '\0';
        assert_file_gives(long_pin, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                    "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx");
        memset(long_pin, 'x', sizeof long_pin);
        long_pin[TG_PIN_MAX + 1] = '\n';               /* 257 bytes */
        assert_file_fails(long_pin, TG_PIN_MAX + 2, -TG_ERR_INVALID);
        long_pin[TG_PIN_MAX] = '\r';                    /* 256 bytes + CRLF is fine */
        long_pin[TG_PIN_MAX + 1] = '\n';
        long_pin[TG_PIN_MAX + 2] = '\0';
        {
                _cleanup_secret_ tg_secret *ok = NULL;
                assert_int_equal(read_pin_from_file_contents(long_pin, TG_PIN_MAX + 2, &ok), 0);
                assert_int_equal(ok->size, TG_PIN_MAX);
        }
        memset(long_pin, 'x', sizeof long_pin);         /* 259 bytes, no newline */
        assert_file_fails(long_pin, sizeof long_pin, -TG_ERR_INVALID);

        snprintf(path, sizeof path, "%s/missing", tmpdir);
        assert_int_equal(tg_pin_read(path, NULL, false, &s), -TG_ERR_NOT_FOUND);
        assert_null(s);
}

/* "-" reads the first line from a pipe on stdin and leaves the rest for whoever reads next. */
static void test_read_stdin_pipe(void **state) {
        _cleanup_secret_ tg_secret *s = NULL;
        int p[2], saved_stdin;
        char rest[32] = {};
        const char input[] = "pipe pin\nrest\n";

        assert_int_equal(pipe(p), 0);
        assert_int_equal(write(p[1], input, sizeof input - 1), (ssize_t) (sizeof input - 1));
        assert_int_equal(close(p[1]), 0);
        saved_stdin = dup(STDIN_FILENO);
        assert_true(saved_stdin >= 0);
        assert_int_equal(dup2(p[0], STDIN_FILENO), STDIN_FILENO);
        close(p[0]);

        assert_int_equal(tg_pin_read("-", "ignored", true, &s), 0);
        assert_int_equal(s->size, 8);
        assert_memory_equal(s->data, "pipe pin", 8);
        assert_int_equal(read(STDIN_FILENO, rest, sizeof rest - 1), 5);
        assert_string_equal(rest, "rest\n");

        /* EOF on stdin: cancelled. */
        tg_secret *none = NULL;
        assert_int_equal(tg_pin_read("-", NULL, false, &none), -TG_ERR_CANCELLED);
        assert_null(none);

        assert_int_equal(dup2(saved_stdin, STDIN_FILENO), STDIN_FILENO);
        close(saved_stdin);
}

/* Reads from the pty master until needle appears (or 10 s pass); appends everything to log. */
static bool wait_for_output(int master, const char *needle, char *log, size_t log_size) {
        for (int rounds = 0; rounds < 100; rounds++) {
                struct pollfd pfd = { .fd = master, .events = POLLIN };
                size_t len = strlen(log);
                ssize_t n;

                if (strstr(log, needle))
                        return true;
                if (poll(&pfd, 1, 100) <= 0)
                        continue;
                if (len + 1 >= log_size)
                        return false;
                n = read(master, log + len, log_size - len - 1);
                if (n <= 0)
                        return strstr(log, needle) != NULL;
                log[len + (size_t) n] = '\0';
        }
        return false;
}

/* The child's exit status: 0 = read the expected PIN, 100 + error code, 99 = wrong bytes. */
static int tty_child(bool confirm, const char *expected) {
        _cleanup_secret_ tg_secret *s = NULL;
        int r = tg_pin_read(NULL, "Enter PIN: ", confirm, &s);

        if (r < 0)
                return 100 - r;
        if (s->size != strlen(expected) || memcmp(s->data, expected, s->size) != 0)
                return 99;
        return 0;
}

/* No typed PIN was echoed: echo is off while it is typed. */
static void assert_not_echoed(const char *log) {
        assert_null(strstr(log, "1234"));
        assert_null(strstr(log, "5678"));
}

/*
 * Types answers[] (NULL-terminated) at the prompts, each after its prompt
 * appeared anew ("Enter PIN: ", and with confirm "Repeat the PIN: " for
 * every second answer); the child's exit status as tty_child gives it.
 */
static int run_tty_answers(bool confirm, const char *const *answers, const char *expected) {
        char log[4096] = "";
        int master = -1, status = 0;
        pid_t pid;

        pid = forkpty(&master, NULL, NULL, NULL);
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(tty_child(confirm, expected));

        for (size_t i = 0; answers[i]; i++) {
                const char *prompt = confirm && i % 2 == 1 ? "Repeat the PIN: " : "Enter PIN: ";

                assert_true(wait_for_output(master, prompt, log, sizeof log));
                assert_not_echoed(log);
                log[0] = '\0';  /* the next prompt must appear anew */
                assert_int_equal(write(master, answers[i], strlen(answers[i])), (ssize_t) strlen(answers[i]));
        }
        bool reaped = false;
        for (int i = 0; i < 100 && !reaped; i++) {
                if (waitpid(pid, &status, WNOHANG) == pid)
                        reaped = true;
                else
                        (void) wait_for_output(master, "\x01never", log, sizeof log);
        }
        /* The pty reports EIO as soon as the child closed it, possibly before
         * the child can be reaped: wait for it (bounded by the child's own
         * work, which is done) rather than reading a status never written. */
        if (!reaped) {
                alarm(20);
                reaped = waitpid(pid, &status, 0) == pid;
                alarm(0);
        }
        if (!reaped || !WIFEXITED(status)) {
                kill(pid, SIGKILL);
                (void) waitpid(pid, &status, 0);
                fail_msg("PIN prompt child did not finish");
        }
        assert_not_echoed(log);
        close(master);
        return WEXITSTATUS(status);
}

static void test_read_tty(void **state) {
        assert_int_equal(run_tty_answers(false, (const char *[]) { "1234\n", NULL }, "1234"), 0);
        assert_int_equal(run_tty_answers(true, (const char *[]) { "1234\n", "1234\n", NULL }, "1234"), 0);
        /* Two that differ are asked again (issue 34): the second pair counts. */
        assert_int_equal(run_tty_answers(true, (const char *[]) { "1234\n", "5678\n", "5678\n", "5678\n", NULL },
                                         "5678"), 0);
        /* Three mismatches end it; an empty answer cancels at once. */
        assert_int_equal(run_tty_answers(true, (const char *[]) { "1234\n", "5678\n", "1234\n", "5678\n", "1234\n",
                                                                  "5678\n", NULL }, "1234"), 100 + TG_ERR_INVALID);
        assert_int_equal(run_tty_answers(true, (const char *[]) { "1234\n", "5678\n", "\n", NULL }, ""),
                         100 + TG_ERR_CANCELLED);
        assert_int_equal(run_tty_answers(false, (const char *[]) { "\n", NULL }, ""), 100 + TG_ERR_CANCELLED);
}

int main(void) {
        tg_log_set_journal(false); /* test alerts never reach the host's journal */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_pbkdf2_rfc7914),
                cmocka_unit_test(test_pbkdf2_published),
                cmocka_unit_test(test_derive_rejects),
                cmocka_unit_test(test_derive_v2_kat),
                cmocka_unit_test(test_derive_v2_rejects),
                cmocka_unit_test(test_argon2_benchmark),
                cmocka_unit_test(test_read_file),
                cmocka_unit_test(test_read_stdin_pipe),
                cmocka_unit_test(test_read_tty),
        };
        return cmocka_run_group_tests(tests, setup_tmpdir, teardown_tmpdir);
}
