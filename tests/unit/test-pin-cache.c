/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tokens/pin-cache.c against the real kernel keyring, in a session keyring of this test's own
 * (nothing is read from or left in root's user keyring): a PIN the TPM refused leaves
 * systemd-cryptsetup's "luks2-pin" cache, its stale copies are recognised, a PIN typed again is
 * not, and a PIN that never was in the cache changes nothing. Threat: a typo costing one
 * dictionary-attack try per volume; a PIN typed for another volume being skipped.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pin-cache.h"
#include "secret.h"

static bool keyring_ok;

static long add_session_key(const char *description, const void *payload, size_t size) {
        return syscall(SYS_add_key, "user", description, payload, size, KEY_SPEC_SESSION_KEYRING);
}

static long find_key(const char *description) {
        return syscall(SYS_request_key, "user", description, NULL, 0);
}

/* The payload of a key, into buf; its size, or -1. */
static long read_key(const char *description, char *buf, size_t size) {
        long key = find_key(description);

        return key < 0 ? -1 : syscall(SYS_keyctl, KEYCTL_READ, key, buf, size, 0);
}

static tg_secret *pin_of(const char *text) {
        tg_secret *s = NULL;

        assert_int_equal(tg_secret_new_copy(text, strlen(text), &s), 0);
        return s;
}

/* The TPM refused pin for another volume: another systemd-cryptsetup process, sharing the keyring. */
static void refused_elsewhere(const tg_secret *pin) {
        pid_t child = fork();
        int status = 0;

        assert_true(child >= 0);
        if (child == 0) {
                tg_pin_cache_refused(pin);
                _exit(0);
        }
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The timeout column of /proc/keys for the key: "perm" when it has none. */
static void key_timeout(const char *description, char *out, size_t size) {
        char line[512], hex[16];
        FILE *f = fopen("/proc/keys", "re");
        long key = find_key(description);

        snprintf(out, size, "absent");
        assert_true(key >= 0);
        snprintf(hex, sizeof hex, "%08lx ", key);
        assert_non_null(f);
        while (fgets(line, sizeof line, f))
                if (strncmp(line, hex, strlen(hex)) == 0)
                        assert_int_equal(sscanf(line, "%*s %*s %*s %15s", out), 1);
        fclose(f);
}

/* A fresh, empty session keyring for each test: no key of one test reaches the next. */
static int setup(void **state) {
        (void) state;
        if (!keyring_ok)
                return 0;
        assert_true(syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL, 0, 0, 0) >= 0);
        return 0;
}

#define REQUIRE_KEYRING() \
        do { if (!keyring_ok) skip(); } while (0)

static void test_typo_leaves_cache(void **state) {
        _cleanup_secret_ tg_secret *typo = pin_of("9999"), *right = pin_of("1234");
        char timeout[16];

        (void) state;
        REQUIRE_KEYRING();
        /* The user typed 9999 at the first volume's prompt: systemd cached it, the TPM refused it. */
        assert_true(add_session_key(TG_PIN_CACHE_KEY, "9999", 5) >= 0);
        assert_false(tg_pin_cache_refused_before(typo));
        refused_elsewhere(typo);
        /* It was the only PIN: the cache is gone (unlinked: "no key", which systemd takes for an empty
         * cache, not "revoked", which it takes for an error), the refusal recorded, with a lifetime. */
        assert_true(find_key(TG_PIN_CACHE_KEY) < 0);
        assert_int_equal(errno, ENOKEY);
        assert_true(find_key(TG_PIN_REFUSED_KEY) >= 0);
        key_timeout(TG_PIN_REFUSED_KEY, timeout, sizeof timeout);
        assert_string_not_equal(timeout, "perm");
        /* A second volume's systemd-cryptsetup that read the list before: its copy is stale. */
        assert_true(tg_pin_cache_refused_before(typo));
        assert_false(tg_pin_cache_refused_before(right));
        /* The user types the right PIN: cached, tried. */
        assert_true(add_session_key(TG_PIN_CACHE_KEY, "1234", 5) >= 0);
        assert_false(tg_pin_cache_refused_before(right));
        assert_true(tg_pin_cache_refused_before(typo));
}

static void test_other_pins_stay(void **state) {
        _cleanup_secret_ tg_secret *typo = pin_of("9999");
        char buf[64], timeout[16];
        long n;

        (void) state;
        REQUIRE_KEYRING();
        assert_true(add_session_key(TG_PIN_CACHE_KEY, "1234\0" "9999\0" "5678", 14) >= 0);
        assert_int_equal(syscall(SYS_keyctl, KEYCTL_SET_TIMEOUT, find_key(TG_PIN_CACHE_KEY), 150, 0, 0), 0);
        tg_pin_cache_refused(typo);
        n = read_key(TG_PIN_CACHE_KEY, buf, sizeof buf);
        assert_int_equal(n, 10);
        assert_memory_equal(buf, "1234\0" "5678\0", 10);
        /* Rewritten, the cache keeps a lifetime (the kernel's update alone would make it permanent). */
        key_timeout(TG_PIN_CACHE_KEY, timeout, sizeof timeout);
        assert_string_not_equal(timeout, "perm");
}

static void test_typed_again_is_tried(void **state) {
        _cleanup_secret_ tg_secret *pin = pin_of("4321");

        (void) state;
        REQUIRE_KEYRING();
        /* Volume 1's PIN 4321 is volume 2's; typed at volume 1's prompt, refused there. */
        assert_true(add_session_key(TG_PIN_CACHE_KEY, "4321", 4) >= 0);
        refused_elsewhere(pin);
        assert_true(tg_pin_cache_refused_before(pin));
        /* Typed again at volume 2's prompt: systemd pushes it to its cache first, so it is tried. */
        assert_true(add_session_key(TG_PIN_CACHE_KEY, "1234\0" "4321\0", 10) >= 0);
        assert_false(tg_pin_cache_refused_before(pin));
        /* Refused again (it was wrong after all): out again, recorded again. */
        refused_elsewhere(pin);
        assert_true(tg_pin_cache_refused_before(pin));
}

static void test_not_from_cache_changes_nothing(void **state) {
        _cleanup_secret_ tg_secret *typo = pin_of("9999");
        char buf[64];

        (void) state;
        REQUIRE_KEYRING();
        /* No cache (cryptsetup on a terminal, $PIN): nothing recorded, the PIN is always tried. */
        tg_pin_cache_refused(typo);
        assert_true(find_key(TG_PIN_REFUSED_KEY) < 0);
        assert_false(tg_pin_cache_refused_before(typo));
        /* A cache without that PIN: untouched, nothing recorded. */
        assert_true(add_session_key(TG_PIN_CACHE_KEY, "1234", 4) >= 0);
        tg_pin_cache_refused(typo);
        assert_int_equal(read_key(TG_PIN_CACHE_KEY, buf, sizeof buf), 4);
        assert_true(find_key(TG_PIN_REFUSED_KEY) < 0);
}

static void test_record_bounded_and_hostile(void **state) {
        char text[16], buf[4096];
        tg_secret *pins[20] = {};
        long n;

        (void) state;
        REQUIRE_KEYRING();
        /* A malformed record (planted, truncated) recognises nothing and is replaced. */
        assert_true(add_session_key(TG_PIN_REFUSED_KEY, "junk!", 5) >= 0);
        for (size_t i = 0; i < 20; i++) {
                snprintf(text, sizeof text, "%zu", 100000 + i);
                pins[i] = pin_of(text);
                assert_false(tg_pin_cache_refused_before(pins[i]));
                assert_true(add_session_key(TG_PIN_CACHE_KEY, text, strlen(text)) >= 0);
                refused_elsewhere(pins[i]);
                assert_true(tg_pin_cache_refused_before(pins[i]));
        }
        /* At most 16 entries (process ID, tag) after the salt: the oldest went first. */
        n = read_key(TG_PIN_REFUSED_KEY, buf, sizeof buf);
        assert_int_equal(n, 16 + 16 * 36);
        assert_false(tg_pin_cache_refused_before(pins[0]));
        assert_false(tg_pin_cache_refused_before(pins[3]));
        assert_true(tg_pin_cache_refused_before(pins[4]));
        assert_true(tg_pin_cache_refused_before(pins[19]));
        /* Rewritten twenty times, the record keeps a lifetime. */
        key_timeout(TG_PIN_REFUSED_KEY, text, sizeof text);
        assert_string_not_equal(text, "perm");
        /* No PIN in the record, not even as a substring. */
        assert_null(memmem(buf, (size_t) n, "100019", 6));
        for (size_t i = 0; i < 20; i++)
                tg_secret_free(pins[i]);
}

static void test_same_process_refusal_not_held(void **state) {
        _cleanup_secret_ tg_secret *pin = pin_of("2468");

        (void) state;
        REQUIRE_KEYRING();
        /* Two tokens on one volume, with different PINs: libcryptsetup hands the PIN to each in one
         * process. Token 0 refuses it and takes it out of the cache; token 1 must still try it. */
        assert_true(add_session_key(TG_PIN_CACHE_KEY, "2468", 4) >= 0);
        tg_pin_cache_refused(pin);
        assert_true(find_key(TG_PIN_CACHE_KEY) < 0);
        assert_true(find_key(TG_PIN_REFUSED_KEY) >= 0);
        assert_false(tg_pin_cache_refused_before(pin));
}

static void test_lock_private_and_exclusive(void **state) {
        char dir[] = "/tmp/tg-pin-cache-XXXXXX", path[96], sub[64];
        int fd, other;

        (void) state;
        assert_non_null(mkdtemp(dir));
        snprintf(sub, sizeof sub, "%s/run", dir);
        fd = tg_pin_cache_lock(sub);
        assert_true(fd >= 0);
        snprintf(path, sizeof path, "%s/pin.lock", sub);
        other = open(path, O_RDWR | O_CLOEXEC);
        assert_true(other >= 0);
        assert_int_equal(flock(other, LOCK_EX | LOCK_NB), -1);
        assert_int_equal(errno, EWOULDBLOCK);
        close(fd);
        assert_int_equal(flock(other, LOCK_EX | LOCK_NB), 0);
        close(other);
        unlink(path);
        /* A directory others may write is not ours: no lock file is made there. */
        assert_int_equal(chmod(sub, 0777), 0);
        assert_int_equal(tg_pin_cache_lock(sub), -1);
        assert_int_equal(access(path, F_OK), -1);
        rmdir(sub);
        rmdir(dir);
}

static void test_applies_only_to_systemd_cryptsetup(void **state) {
        (void) state;
        assert_false(tg_pin_cache_applies());
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup(test_typo_leaves_cache, setup),
                cmocka_unit_test_setup(test_other_pins_stay, setup),
                cmocka_unit_test_setup(test_typed_again_is_tried, setup),
                cmocka_unit_test_setup(test_not_from_cache_changes_nothing, setup),
                cmocka_unit_test_setup(test_record_bounded_and_hostile, setup),
                cmocka_unit_test_setup(test_same_process_refusal_not_held, setup),
                cmocka_unit_test(test_lock_private_and_exclusive),
                cmocka_unit_test(test_applies_only_to_systemd_cryptsetup),
        };

        /* Kernel keyrings can be off (a seccomp filter, CONFIG_KEYS=n): then the keyring tests skip. */
        keyring_ok = syscall(SYS_keyctl, KEYCTL_JOIN_SESSION_KEYRING, NULL, 0, 0, 0) >= 0;
        if (!keyring_ok)
                fprintf(stderr, "# kernel keyring unavailable (%s): the keyring tests skip\n", strerror(errno));
        return cmocka_run_group_tests(tests, NULL, NULL);
}
