/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put);
DEFINE_TRIVIAL_CLEANUP_FUNC(json_tokener *, json_tokener_free);
#define _cleanup_json_ _cleanup_(json_object_putp)

/*
 * Strict typed getters for JSON that came from somewhere hostile (a LUKS2
 * header, a state file). One implementation serves the token, the pending
 * marker, the pinned key and the per-boot cache, so that a field of the wrong
 * type, out of range or of the wrong length is refused everywhere alike.
 *
 * They log nothing: on failure they return -TG_ERR_INVALID (-TG_ERR_NOMEM
 * for memory) and write into problem[problem_size] a phrase that says what
 * is wrong with the field ("missing", "must be an integer, not a string",
 * "12 is out of range 0..31"), for the caller's message, which names the file
 * and the field. A field that is absent and not required is not an error:
 * *ret is then NULL (tg_json_get), or *ret_present false.
 */
#define TG_JSON_PROBLEM_MAX 96

int tg_json_get(json_object *o, const char *key, json_type type, bool required, json_object **ret,
                char *problem, size_t problem_size);
/* An integer in [min, max]. */
int tg_json_get_int(json_object *o, const char *key, int64_t min, int64_t max, bool required, int64_t *ret,
                    bool *ret_present, char *problem, size_t problem_size);
/* A string of hex digits encoding between min_size and max_size bytes; *ret is malloc'ed. */
int tg_json_get_hex(json_object *o, const char *key, size_t min_size, size_t max_size, bool required, uint8_t **ret,
                    size_t *ret_size, char *problem, size_t problem_size);

/*
 * Parses text[0..size) as exactly one JSON object, in json-c's strict mode:
 * no NUL byte, nothing after the object but whitespace. A parser that stops
 * at the first complete value would let an attacker who can append to a
 * state file or a header field hide data after it. *ret only on success;
 * on failure -TG_ERR_INVALID and a phrase in problem, like the getters.
 */
int tg_json_parse_object(const char *text, size_t size, json_object **ret, char *problem, size_t problem_size);

/* Reads path (at most max_size bytes) and parses it with tg_json_parse_object();
 * -TG_ERR_NOT_FOUND when it does not exist (nothing logged). */
int tg_json_read_object(const char *path, size_t max_size, json_object **ret, char *problem, size_t problem_size);

/*
 * A root-only state file {"version": VERSION, "volumes": {...}} (the volume
 * bindings, the keyslot record): read only if root owns it and no one else
 * can write it or its directory (tg_check_trusted: whoever could write it
 * would decide which volume is ours or which keyslot tpmguard destroys),
 * then parsed strictly. *ret = NULL and 0 when it does not exist; an error
 * naming WHAT and the path otherwise.
 */
int tg_json_read_volumes_file(const char *path, const char *what, size_t max_size, int64_t version, json_object **ret);

/*
 * Every string value in o, at any depth, through tg_str_sanitize_line(): for a
 * report model (status, audit) that quotes the LUKS2 header, before it is
 * printed as text or as JSON (json-c escapes only bytes below 0x20). Returns 0
 * or -TG_ERR_NOMEM.
 */
int tg_json_sanitize_strings(json_object *o);

/*
 * tpmguard's one JSON layout for people: pretty, spaced, "/" not escaped.
 * What --json prints and the pinned key file holds.
 */
#define TG_JSON_PRETTY (JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)
/* o in that layout (owned by o, as json_object_to_json_string_ext()'s). */
const char *tg_json_pretty(json_object *o);
/* o in that layout and a newline, to f (the --json output). */
void tg_json_print(FILE *f, json_object *o);
