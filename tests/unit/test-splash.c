/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tokens/splash.c: what the plugin keeps of one call for plymouth (notice level and above, joined,
 * bounded, never half a character), and where it writes it: only into a private directory of
 * ours that tpmguard-splash.path made, one line per call, in names that sort in the order
 * written. Threat: a planted directory (another owner, group-writable, a symlink) must not
 * receive what the plugin writes as root.
 */
#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "splash.h"

static void test_add_levels_and_join(void **state) {
        tg_splash s = {};

        (void) state;
        tg_splash_add(&s, LOG_DEBUG, "debug is not for the screen");
        tg_splash_add(&s, LOG_INFO, "nor info");
        assert_int_equal(s.len, 0);
        tg_splash_add(&s, LOG_ERR, "Wrong PIN. 31 of 32 tries left.");
        tg_splash_add(&s, LOG_NOTICE, "");
        tg_splash_add(&s, LOG_ERR, "Try again (2 of 3 PIN tries left for this unlock).");
        assert_string_equal(s.text, "Wrong PIN. 31 of 32 tries left.\nTry again (2 of 3 PIN tries left for this unlock).");
        assert_int_equal(s.len, strlen(s.text));
        /* A reason never makes a line of its own or drives the terminal. */
        tg_splash_add(&s, LOG_ALERT, "forged\nline \033[2J");
        assert_non_null(strstr(s.text, "\nforged?line ?[2J"));
        assert_int_equal(s.len, strlen(s.text));
        tg_splash_add(NULL, LOG_ERR, "no crash");
}

static void test_add_bounded_utf8(void **state) {
        char big[TG_SPLASH_MAX + 64];
        tg_splash s = {};

        (void) state;
        /* "é" (2 bytes) across the cut: 2046 ASCII bytes leave one byte for it. */
        memset(big, 'a', sizeof big);
        memcpy(big + TG_SPLASH_MAX - 2, "\xc3\xa9", 2);
        big[sizeof big - 1] = '\0';
        tg_splash_add(&s, LOG_ALERT, big);
        assert_int_equal(s.len, TG_SPLASH_MAX - 2);
        assert_int_equal(strlen(s.text), TG_SPLASH_MAX - 2);
        assert_int_equal(s.text[s.len - 1], 'a');
        /* Full: later reasons are dropped, the first (the cause) stays. */
        tg_splash_add(&s, LOG_ERR, "later");
        assert_int_equal(s.len, TG_SPLASH_MAX - 2);
        assert_null(strstr(s.text, "later"));
}

static int count_entries(const char *dir, char *ret_name, size_t size) {
        struct dirent *de;
        DIR *d = opendir(dir);
        int n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                if (de->d_name[0] != '.') {
                        n++;
                        if (ret_name)
                                snprintf(ret_name, size, "%s", de->d_name);
                }
        closedir(d);
        return n;
}

static void test_write(void **state) {
        char cache[] = "/tmp/test-splash.XXXXXX", dir[128], path[512], name[256], text[512], target[128];
        tg_splash s = {};
        struct stat st;
        FILE *f;

        (void) state;
        assert_non_null(mkdtemp(cache));
        snprintf(dir, sizeof dir, "%s/" TG_SPLASH_DIR, cache);

        /* Nothing to say: nothing written, not even without the directory. */
        assert_int_equal(tg_splash_write(&s, cache, "/dev/vda2"), 0);
        tg_splash_add(&s, LOG_ERR, "Not asking for the PIN: PCR mismatch.");

        /* No directory (no path unit listening): nothing written, no error. */
        assert_int_equal(tg_splash_write(&s, cache, "/dev/vda2"), 0);
        assert_int_equal(count_entries(cache, NULL, 0), 0);

        /* A directory others may write to (planted, or not the unit's): not used. */
        assert_int_equal(mkdir(dir, 0700), 0);
        assert_int_equal(chmod(dir, 0770), 0);
        assert_int_equal(tg_splash_write(&s, cache, "/dev/vda2"), 0);
        assert_int_equal(count_entries(dir, NULL, 0), 0);
        assert_int_equal(rmdir(dir), 0);

        /* A symlink to a private directory elsewhere: not followed. */
        snprintf(target, sizeof target, "%s/elsewhere", cache);
        assert_int_equal(mkdir(target, 0700), 0);
        assert_int_equal(symlink(target, dir), 0);
        assert_int_equal(tg_splash_write(&s, cache, "/dev/vda2"), 0);
        assert_int_equal(count_entries(target, NULL, 0), 0);
        assert_int_equal(unlink(dir), 0);
        assert_int_equal(rmdir(target), 0);

        /* The path unit's directory: one line, the device first, private, a name of 20 digits-pid. */
        assert_int_equal(mkdir(dir, 0700), 0);
        assert_int_equal(tg_splash_write(&s, cache, "/dev/vda2\n\033[2J"), 0);
        assert_int_equal(count_entries(dir, name, sizeof name), 1);
        assert_int_equal(strspn(name, "0123456789"), 20);
        assert_int_equal(name[20], '-');
        assert_int_equal(atoi(name + 21), (int) getpid());
        snprintf(path, sizeof path, "%s/%s", dir, name);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0600);
        f = fopen(path, "r");
        assert_non_null(f);
        memset(text, 0, sizeof text);
        assert_true(fread(text, 1, sizeof text - 1, f) > 0);
        fclose(f);
        /* The device's newline and escape cannot start a line or drive the terminal. */
        assert_null(strchr(text, '\033'));
        assert_ptr_equal(strchr(text, '\n'), text + strlen(text) - 1);
        assert_string_equal(text, "/dev/vda2??[2J: Not asking for the PIN: PCR mismatch.\n");

        /* A second record sorts after the first. */
        assert_int_equal(tg_splash_write(&s, cache, NULL), 0);
        assert_int_equal(count_entries(dir, NULL, 0), 2);
        {
                struct dirent **list = NULL;
                int n = scandir(dir, &list, NULL, alphasort), i;

                assert_int_equal(n, 4);   /* ".", "..", two records */
                snprintf(path, sizeof path, "%s/%s", dir, list[3]->d_name);
                for (i = 0; i < n; i++)
                        free(list[i]);
                free(list);
                f = fopen(path, "r");
                assert_non_null(f);
                memset(text, 0, sizeof text);
                assert_true(fread(text, 1, sizeof text - 1, f) > 0);
                fclose(f);
                assert_string_equal(text, "Not asking for the PIN: PCR mismatch.\n");
                assert_int_equal(unlink(path), 0);
                snprintf(path, sizeof path, "%s/%s", dir, name);
                assert_int_equal(unlink(path), 0);
        }
        assert_int_equal(rmdir(dir), 0);
        assert_int_equal(rmdir(cache), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_add_levels_and_join),
                cmocka_unit_test(test_add_bounded_utf8),
                cmocka_unit_test(test_write),
        };

        tg_log_set_journal(false);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
