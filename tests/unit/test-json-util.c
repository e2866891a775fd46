/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The strict JSON reader every state file and the token go through. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "json-util.h"
#include "sanitize.h"
#include "util.h"

static int parse(const char *text, size_t size, char *problem) {
        _cleanup_json_ json_object *o = NULL;
        int r = tg_json_parse_object(text, size, &o, problem, TG_JSON_PROBLEM_MAX);

        assert_true((r == 0) == (o != NULL));
        return r;
}

static void test_one_object(void **state) {
        char problem[TG_JSON_PROBLEM_MAX];
        const char ok[] = "{\"version\": 1}\n";

        (void) state;
        assert_int_equal(parse(ok, strlen(ok), problem), 0);
        assert_int_equal(parse("{}", 2, problem), 0);
}

/* Data hidden after the object (an appended second object, a NUL and more):
 * a reader that stops at the first complete value would never look at it. */
static void test_trailing_data_refused(void **state) {
        char problem[TG_JSON_PROBLEM_MAX];
        const char two[] = "{\"a\": 1}{\"a\": 2}";
        const char nul[] = "{\"a\": 1}\0{\"a\": 2}";

        (void) state;
        assert_int_equal(parse(two, strlen(two), problem), -TG_ERR_INVALID);
        /* json-c's strict mode stops at the second value itself; our own
         * end-of-input check catches what a laxer json-c would let through. */
        assert_true(strstr(problem, "unexpected character") || strstr(problem, "trailing data at offset 8"));
        assert_int_equal(parse("{\"a\": 1} x", 10, problem), -TG_ERR_INVALID);
        assert_int_equal(parse(nul, sizeof nul - 1, problem), -TG_ERR_INVALID);
        assert_non_null(strstr(problem, "NUL"));
}

static void test_not_an_object(void **state) {
        char problem[TG_JSON_PROBLEM_MAX];

        (void) state;
        assert_int_equal(parse("[1]", 3, problem), -TG_ERR_INVALID);
        assert_non_null(strstr(problem, "not a JSON object"));
        assert_int_equal(parse("{\"a\": ", 6, problem), -TG_ERR_INVALID);
        assert_non_null(strstr(problem, "not valid JSON"));
        assert_int_equal(parse("", 0, problem), -TG_ERR_INVALID);
}

static void test_read_object(void **state) {
        char path[] = "/tmp/tpmguard-json-util.XXXXXX", problem[TG_JSON_PROBLEM_MAX];
        json_object *o = NULL;
        int fd;

        (void) state;
        fd = mkstemp(path);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "{\"a\": 1} x", 10), 10);
        close(fd);
        assert_int_equal(tg_json_read_object(path, 4096, &o, problem, sizeof problem), -TG_ERR_INVALID);
        assert_null(o);
        assert_int_equal(unlink(path), 0);
        assert_int_equal(tg_json_read_object(path, 4096, &o, problem, sizeof problem), -TG_ERR_NOT_FOUND);
        assert_null(o);
}

/* Header text never steers a terminal: C0 controls but tab and newline, DEL, UTF-8 C1 controls. */
static void test_str_sanitize(void **state) {
        char a[] = "\x1b[2J\x1b[HTPM verified.\tok\n\x7f\xc2\x9b" "31m\xc3\xa9\x01";
        char none[] = "sha256";

        (void) state;
        assert_string_equal(tg_str_sanitize(a), "?[2J?[HTPM verified.\tok\n???31m\xc3\xa9?");
        assert_string_equal(tg_str_sanitize(none), "sha256");
        assert_null(tg_str_sanitize(NULL));
        {
                char line[] = "x\ntoken 9: not exposed\t\xc2\x9b";
                assert_string_equal(tg_str_sanitize_line(line), "x?token 9: not exposed\t??");
        }
        {
                _cleanup_(json_object_putp) json_object *o =
                        json_tokener_parse("{\"a\":[\"ok\",\"x\\ny\\u009b\"],\"b\":{\"c\":\"\\u001b[2J\"},\"n\":1}");
                assert_non_null(o);
                assert_int_equal(tg_json_sanitize_strings(o), 0);
                assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
                                    "{\"a\":[\"ok\",\"x?y??\"],\"b\":{\"c\":\"?[2J\"},\"n\":1}");
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_one_object),
                cmocka_unit_test(test_trailing_data_refused),
                cmocka_unit_test(test_not_an_object),
                cmocka_unit_test(test_read_object),
                cmocka_unit_test(test_str_sanitize),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
