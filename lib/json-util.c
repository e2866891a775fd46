/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "json-util.h"
#include "log.h"
#include "sanitize.h"
#include "util.h"

_printf_(3, 4) static int problem_set(char *problem, size_t problem_size, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(problem, problem_size, fmt, ap);
        va_end(ap);
        return -TG_ERR_INVALID;
}

static const char *type_phrase(json_type type) {
        switch (type) {
        case json_type_int:     return "an integer";
        case json_type_string:  return "a string";
        case json_type_array:   return "an array";
        case json_type_object:  return "an object";
        case json_type_boolean: return "a boolean";
        case json_type_double:  return "a number";
        default:                return "null";
        }
}

int tg_json_get(json_object *o, const char *key, json_type type, bool required, json_object **ret,
                char *problem, size_t problem_size) {
        json_object *v = NULL;

        if (!o || !json_object_object_get_ex(o, key, &v)) {
                if (required) {
                        snprintf(problem, problem_size, "missing");
                        return -TG_ERR_INVALID;
                }
                *ret = NULL;
                return 0;
        }
        /* json-c calls an explicit null "no object": it is never of the wanted type. */
        if (!v || !json_object_is_type(v, type)) {
                snprintf(problem, problem_size, "must be %s, not %s", type_phrase(type),
                         type_phrase(v ? json_object_get_type(v) : json_type_null));
                return -TG_ERR_INVALID;
        }
        *ret = v;
        return 0;
}

int tg_json_get_int(json_object *o, const char *key, int64_t min, int64_t max, bool required, int64_t *ret,
                    bool *ret_present, char *problem, size_t problem_size) {
        json_object *v;
        int64_t n;
        int r;

        r = tg_json_get(o, key, json_type_int, required, &v, problem, problem_size);
        if (r < 0)
                return r;
        if (!v) {
                if (ret_present)
                        *ret_present = false;
                return 0;
        }
        /* json-c saturates at INT64_MIN/INT64_MAX: a value out of int64 is out of any range we accept. */
        n = json_object_get_int64(v);
        if (n < min || n > max) {
                snprintf(problem, problem_size, "%" PRId64 " is out of range %" PRId64 "..%" PRId64, n, min, max);
                return -TG_ERR_INVALID;
        }
        *ret = n;
        if (ret_present)
                *ret_present = true;
        return 0;
}

int tg_json_get_hex(json_object *o, const char *key, size_t min_size, size_t max_size, bool required, uint8_t **ret,
                    size_t *ret_size, char *problem, size_t problem_size) {
        _cleanup_free_ uint8_t *bytes = NULL;
        json_object *v;
        const char *s;
        size_t len, n = 0;
        int r;

        r = tg_json_get(o, key, json_type_string, required, &v, problem, problem_size);
        if (r < 0)
                return r;
        if (!v) {
                *ret = NULL;
                *ret_size = 0;
                return 0;
        }
        s = json_object_get_string(v);
        len = (size_t) json_object_get_string_len(v);
        /* Length checked before decoding: the decoder never sees an oversized field. */
        if (len % 2 != 0 || len / 2 < min_size || len / 2 > max_size) {
                if (min_size == max_size)
                        snprintf(problem, problem_size, "%zu hex digits, expected %zu (%zu bytes)", len, 2 * min_size,
                                 min_size);
                else
                        snprintf(problem, problem_size, "%zu hex digits, expected %zu to %zu", len, 2 * min_size,
                                 2 * max_size);
                return -TG_ERR_INVALID;
        }
        if (strlen(s) != len) {
                snprintf(problem, problem_size, "contains a NUL byte");
                return -TG_ERR_INVALID;
        }
        r = tg_hex_decode(s, len, &bytes, &n);
        if (r == -TG_ERR_NOMEM)
                return r;
        if (r < 0 || n != len / 2) {
                snprintf(problem, problem_size, "not a hex string");
                return -TG_ERR_INVALID;
        }
        *ret = TAKE_PTR(bytes);
        *ret_size = n;
        return 0;
}

int tg_json_parse_object(const char *text, size_t size, json_object **ret, char *problem, size_t problem_size) {
        _cleanup_(json_tokener_freep) json_tokener *tok = NULL;
        _cleanup_json_ json_object *o = NULL;
        enum json_tokener_error jerr;
        size_t end;

        if (size > INT32_MAX || memchr(text, '\0', size))
                return problem_set(problem, problem_size, "contains a NUL byte or is too large");
        tok = json_tokener_new();
        if (!tok)
                return -TG_ERR_NOMEM;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
        o = json_tokener_parse_ex(tok, text, (int) size);
        jerr = json_tokener_get_error(tok);
        if (!o || jerr != json_tokener_success)
                return problem_set(problem, problem_size, "is not valid JSON (%s)",
                                   json_tokener_error_desc(jerr == json_tokener_success ? json_tokener_error_parse_eof : jerr));
        for (end = json_tokener_get_parse_end(tok); end < size && strchr(" \t\r\n", text[end]); end++)
                ;
        if (end != size)
                return problem_set(problem, problem_size, "has trailing data at offset %zu", end);
        if (!json_object_is_type(o, json_type_object))
                return problem_set(problem, problem_size, "is not a JSON object");
        *ret = TAKE_PTR(o);
        return 0;
}

int tg_json_read_object(const char *path, size_t max_size, json_object **ret, char *problem, size_t problem_size) {
        _cleanup_free_ uint8_t *data = NULL;
        size_t size;
        int r;

        r = tg_read_file(path, max_size, &data, &size);
        if (r == -TG_ERR_NOT_FOUND)
                return r;
        if (r < 0)
                return problem_set(problem, problem_size, "cannot be read (%s)", tg_err_str(r));
        return tg_json_parse_object((const char *) data, size, ret, problem, problem_size);
}

int tg_json_read_volumes_file(const char *path, const char *what, size_t max_size, int64_t version, json_object **ret) {
        _cleanup_json_ json_object *root = NULL;
        _cleanup_free_ uint8_t *data = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        json_object *volumes;
        size_t size = 0;
        int64_t v;
        int r;

        r = tg_read_trusted_file(path, what, max_size, &data, &size);
        if (r == -TG_ERR_NOT_FOUND) {
                *ret = NULL;
                return 0;
        }
        if (r == -TG_ERR_IO)
                return log_error_rc(r, "Cannot read the %s %s.", what, path);
        if (r < 0)
                return r;
        r = tg_json_parse_object((const char *) data, size, &root, problem, sizeof problem);
        if (r == 0)
                r = tg_json_get_int(root, "version", version, version, true, &v, NULL, problem, sizeof problem);
        if (r == 0)
                r = tg_json_get(root, "volumes", json_type_object, true, &volumes, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(r, "The %s %s: %s.", what, path, problem);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(root);
        return 0;
}

int tg_json_sanitize_strings(json_object *o) {
        int r;

        switch (json_object_get_type(o)) {
        case json_type_object: {
                json_object_object_foreach(o, key, v) {
                        (void) key;
                        r = tg_json_sanitize_strings(v);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        case json_type_array:
                for (size_t i = 0; i < json_object_array_length(o); i++) {
                        r = tg_json_sanitize_strings(json_object_array_get_idx(o, i));
                        if (r < 0)
                                return r;
                }
                return 0;
        case json_type_string: {
                /* The rule lives in tg_str_sanitize_line() alone: a value it leaves as is stays. */
                _cleanup_free_ char *copy = strdup(json_object_get_string(o));

                if (!copy)
                        return -TG_ERR_NOMEM;
                if (strcmp(tg_str_sanitize_line(copy), json_object_get_string(o)) == 0)
                        return 0;
                return json_object_set_string(o, copy) ? 0 : -TG_ERR_NOMEM;
        }
        default:
                return 0;
        }
}

const char *tg_json_pretty(json_object *o) {
        return json_object_to_json_string_ext(o, TG_JSON_PRETTY);
}

void tg_json_print(FILE *f, json_object *o) {
        fprintf(f, "%s\n", tg_json_pretty(o));
}
