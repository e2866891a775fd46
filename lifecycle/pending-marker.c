/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pending marker (pending-marker.h): its strict parser and writer. It
 * comes from the attacker-editable header and decides which keyslot gets
 * destroyed, so every field is checked and writing then parsing gives back
 * exactly what was written.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "json-util.h"
#include "log.h"
#include "luks.h"
#include "pending-marker.h"
#include "token.h"


static int json_int_field(json_object *o, const char *key, int min, int max, int *ret) {
        char problem[TG_JSON_PROBLEM_MAX];
        int64_t n;
        int r;

        r = tg_json_get_int(o, key, min, max, true, &n, NULL, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: \"%s\" %s.", key, problem);
        if (r < 0)
                return r;
        *ret = (int) n;
        return 0;
}

bool tg_pending_marker_is_passphrase_op(const tg_pending_marker *m) {
        return strcmp(m->operation, "recovery-key") == 0 || strcmp(m->operation, "passwd") == 0;
}

static int json_optional_int_field(json_object *o, const char *key, int min, int max, int absent, int *ret) {
        char problem[TG_JSON_PROBLEM_MAX];
        bool present;
        int64_t n;
        int r;

        r = tg_json_get_int(o, key, min, max, false, &n, &present, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: \"%s\" %s.", key, problem);
        if (r < 0)
                return r;
        *ret = present ? (int) n : absent;
        return 0;
}

/* The new keyslot's PBKDF, as the passphrase operations record it. */
static int marker_pbkdf_from_json(json_object *o, tg_pbkdf_fingerprint *ret) {
        json_object *p, *v;
        int it, mem, par, r;

        *ret = (tg_pbkdf_fingerprint) {};
        if (!json_object_object_get_ex(o, "pbkdf", &p))
                return 0;
        if (!json_object_is_type(p, json_type_object) || !json_object_object_get_ex(p, "type", &v) ||
            !json_object_is_type(v, json_type_string) || json_object_get_string_len(v) == 0 ||
            (size_t) json_object_get_string_len(v) >= sizeof ret->type)
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: \"pbkdf\" must be an object with a \"type\".");
        r = json_int_field(p, "iterations", 1, INT32_MAX, &it);
        if (r >= 0)
                r = json_int_field(p, "memory", 0, INT32_MAX, &mem);
        if (r >= 0)
                r = json_int_field(p, "parallel", 0, 64, &par);
        if (r < 0)
                return r;
        snprintf(ret->type, sizeof ret->type, "%s", json_object_get_string(v));
        ret->iterations = (uint32_t) it;
        ret->memory_kb = (uint32_t) mem;
        ret->parallel = (uint32_t) par;
        return 0;
}

/* An optional lowercase-hex field of a pending marker, exactly SIZE - 1 digits, into OUT (NUL-terminated);
 * OUT is left as it is when the field is absent. */
static int marker_hex_field(json_object *o, const char *key, char *out, size_t size) {
        json_object *v;
        const char *hex_text;
        bool hex;

        if (!json_object_object_get_ex(o, key, &v))
                return 0;
        hex_text = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
        hex = hex_text && strlen(hex_text) == size - 1;
        for (size_t i = 0; hex && hex_text[i]; i++)
                hex = (hex_text[i] >= '0' && hex_text[i] <= '9') || (hex_text[i] >= 'a' && hex_text[i] <= 'f');
        if (!hex)
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: \"%s\" must be %zu lowercase hex digits.", key,
                                    size - 1);
        memcpy(out, hex_text, size);
        return 0;
}

int tg_pending_marker_from_string(const char *json, tg_pending_marker *ret) {
        _cleanup_json_ json_object *o = NULL;
        json_tokener *tok;
        json_object *v, *arr;
        tg_pending_marker m = { .bound_keyslot = -1 };
        const char *s;
        bool passphrase_op;
        int version, r;

        if (!json || strlen(json) > TG_TOKEN_JSON_MAX)
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: missing or too long.");
        tok = json_tokener_new();
        if (!tok)
                return -TG_ERR_NOMEM;
        o = json_tokener_parse_ex(tok, json, (int) strlen(json));
        r = json_tokener_get_error(tok) == json_tokener_success && (size_t) json_tokener_get_parse_end(tok) == strlen(json);
        json_tokener_free(tok);
        if (!o || !r || !json_object_is_type(o, json_type_object))
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: not a JSON object.");

        if (!json_object_object_get_ex(o, "type", &v) || !json_object_is_type(v, json_type_string) ||
            strcmp(json_object_get_string(v), TG_PENDING_TOKEN_TYPE) != 0)
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: \"type\" is not \"%s\".", TG_PENDING_TOKEN_TYPE);
        r = json_int_field(o, "version", TG_PENDING_VERSION, TG_PENDING_VERSION, &version);
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(o, "operation", &v) || !json_object_is_type(v, json_type_string))
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: \"operation\" missing.");
        s = json_object_get_string(v);
        if (strcmp(s, "rotate") != 0 && strcmp(s, "reseal") != 0 && strcmp(s, "recovery-key") != 0 &&
            strcmp(s, "passwd") != 0 && strcmp(s, "enroll") != 0 && strcmp(s, "migrate") != 0 &&
            strcmp(s, "replace") != 0)
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: unknown operation \"%.16s\".", s);
        snprintf(m.operation, sizeof m.operation, "%s", s);
        passphrase_op = tg_pending_marker_is_passphrase_op(&m);
        /* passwd touches no token; recovery-key may replace nothing; an enrollment has no
         * token and no old keyslot yet (both -1). */
        /* The writer leaves out a token or old keyslot that does not exist (-1). */
        if (strcmp(m.operation, "passwd") == 0 || strcmp(m.operation, "enroll") == 0)
                r = json_optional_int_field(o, "token", 0, TG_LUKS2_TOKENS_MAX - 1, -1, &m.token);
        else
                r = json_int_field(o, "token", 0, TG_LUKS2_TOKENS_MAX - 1, &m.token);
        if (r < 0)
                return r;
        if (strcmp(m.operation, "recovery-key") == 0 || strcmp(m.operation, "enroll") == 0 ||
            strcmp(m.operation, "migrate") == 0)
                r = json_optional_int_field(o, "old_keyslot", 0, TG_LUKS2_KEYSLOTS_MAX - 1, -1, &m.old_keyslot);
        else
                r = json_int_field(o, "old_keyslot", 0, TG_LUKS2_KEYSLOTS_MAX - 1, &m.old_keyslot);
        if (r < 0)
                return r;
        /* migrate: the old token always, its keyslot only when it goes. */
        if (!passphrase_op && strcmp(s, "migrate") != 0 &&
            ((strcmp(s, "enroll") == 0) != (m.token == -1) || (m.token == -1) != (m.old_keyslot == -1)))
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: \"token\" and \"old_keyslot\" are -1 exactly for \"enroll\".");
        r = json_int_field(o, "new_keyslot", 0, TG_LUKS2_KEYSLOTS_MAX - 1, &m.new_keyslot);
        if (r < 0)
                return r;
        if (m.old_keyslot == m.new_keyslot)
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: old and new keyslot are the same.");
        if (json_object_object_get_ex(o, "committed", &v)) {
                if (!passphrase_op || !json_object_is_type(v, json_type_boolean))
                        return log_error_rc(-TG_ERR_TOKEN, "Pending marker: \"committed\" must be a boolean of a "
                                            "passphrase operation.");
                m.committed = json_object_get_boolean(v);
        }
        r = marker_pbkdf_from_json(o, &m.pbkdf);
        if (r < 0)
                return r;
        r = marker_hex_field(o, "mac", m.mac, sizeof m.mac);
        if (r < 0)
                return r;
        r = marker_hex_field(o, "nonce", m.nonce, sizeof m.nonce);
        if (r < 0)
                return r;
        if (!json_object_object_get_ex(o, "keyslots", &arr) || !json_object_is_type(arr, json_type_array) ||
            json_object_array_length(arr) > 1)
                return log_error_rc(-TG_ERR_TOKEN, "Pending marker: \"keyslots\" must list at most one keyslot.");
        if (json_object_array_length(arr) == 1) {
                const char *k = json_object_get_string(json_object_array_get_idx(arr, 0));
                char *end;
                long n = k ? strtol(k, &end, 10) : -1;
                if (!k || !*k || *end || n < 0 || n >= TG_LUKS2_KEYSLOTS_MAX)
                        return log_error_rc(-TG_ERR_TOKEN, "Pending marker: bad keyslot in \"keyslots\".");
                m.bound_keyslot = (int) n;
        }
        *ret = m;
        return 0;
}

int tg_pending_marker_to_string(const tg_pending_marker *m, char **ret) {
        _cleanup_json_ json_object *o = json_object_new_object();
        json_object *arr = json_object_new_array();
        char slot[16];
        char *s;

        if (!o || !arr) {
                json_object_put(arr);
                return -TG_ERR_NOMEM;
        }
        if (m->bound_keyslot >= 0) {
                snprintf(slot, sizeof slot, "%d", m->bound_keyslot);
                json_object_array_add(arr, json_object_new_string(slot));
        }
        json_object_object_add(o, "type", json_object_new_string(TG_PENDING_TOKEN_TYPE));
        json_object_object_add(o, "keyslots", arr);
        json_object_object_add(o, "version", json_object_new_int(TG_PENDING_VERSION));
        json_object_object_add(o, "operation", json_object_new_string(m->operation));
        if (m->token >= 0)
                json_object_object_add(o, "token", json_object_new_int(m->token));
        if (m->old_keyslot >= 0)
                json_object_object_add(o, "old_keyslot", json_object_new_int(m->old_keyslot));
        json_object_object_add(o, "new_keyslot", json_object_new_int(m->new_keyslot));
        if (tg_pending_marker_is_passphrase_op(m))
                json_object_object_add(o, "committed", json_object_new_boolean(m->committed));
        if (m->pbkdf.type[0]) {
                json_object *p = json_object_new_object();
                if (!p)
                        return -TG_ERR_NOMEM;
                json_object_object_add(p, "type", json_object_new_string(m->pbkdf.type));
                json_object_object_add(p, "iterations", json_object_new_int64(m->pbkdf.iterations));
                json_object_object_add(p, "memory", json_object_new_int64(m->pbkdf.memory_kb));
                json_object_object_add(p, "parallel", json_object_new_int64(m->pbkdf.parallel));
                json_object_object_add(o, "pbkdf", p);
        }
        if (m->nonce[0])
                json_object_object_add(o, "nonce", json_object_new_string(m->nonce));
        if (m->mac[0])
                json_object_object_add(o, "mac", json_object_new_string(m->mac));
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        if (!s)
                return -TG_ERR_NOMEM;
        *ret = s;
        return 0;
}
