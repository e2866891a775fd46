/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The record of the keyslots tpmguard made (keyslot-owner.h): the attack it
 * stops and why the KDF salt identifies a keyslot are described there.
 *
 * state_dir/keyslots.json: {"version": 1, "volumes": {"UUID": {"N": "SALT"}}},
 * SALT the keyslot's "kdf"."salt" exactly as the LUKS2 metadata holds it
 * (base64 of random bytes; public, like the rest of the header). Read with
 * the trusted-file checks of tpmguard.conf: whoever can write it could make
 * tpmguard destroy a keyslot. It says nothing at unlock, so it is not copied
 * into an initrd.
 */
#include <assert.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"
#include "json-util.h"
#include "keyslot-owner.h"
#include "log.h"
#include "util.h"

#define KEYSLOTS_VERSION 1
#define KEYSLOTS_MAX_SIZE (256 * 1024)

/* The keyslot's KDF salt, as the LUKS2 metadata holds it; NULL if it has none (or no such keyslot). */
static char *keyslot_salt(struct crypt_device *cd, int keyslot) {
        _cleanup_json_ json_object *root = NULL;
        char problem[TG_JSON_PROBLEM_MAX], id[16];
        json_object *keyslots, *k, *kdf, *salt;
        const char *json = NULL;

        if (crypt_dump_json(cd, &json, 0) < 0 || !json ||
            tg_json_parse_object(json, strlen(json), &root, problem, sizeof problem) < 0)
                return NULL;
        (void) snprintf(id, sizeof id, "%d", keyslot);
        if (!json_object_object_get_ex(root, "keyslots", &keyslots) || !json_object_object_get_ex(keyslots, id, &k) ||
            !json_object_object_get_ex(k, "kdf", &kdf) || !json_object_object_get_ex(kdf, "salt", &salt) ||
            !json_object_is_type(salt, json_type_string) || json_object_get_string_len(salt) == 0)
                return NULL;
        return strdup(json_object_get_string(salt));
}

static int registry_path(const char *state_dir, char **ret) {
        return tg_asprintf(ret, "%s/%s", state_dir, TG_KEYSLOTS_FILE_NAME);
}

/* The registry: NULL (and 0) when it does not exist; an error when it is untrusted or malformed. */
static int registry_load(const char *path, json_object **ret) {
        return tg_json_read_volumes_file(path, "keyslot record", KEYSLOTS_MAX_SIZE, KEYSLOTS_VERSION, ret);
}

void tg_keyslot_own(const char *state_dir, struct crypt_device *cd, int keyslot) {
        _cleanup_free_ char *path = NULL, *salt = NULL;
        _cleanup_json_ json_object *root = NULL;
        json_object *volumes = NULL, *volume = NULL;
        const char *uuid = crypt_get_uuid(cd), *text;
        char id[16];
        int r;

        assert(state_dir);
        salt = keyslot_salt(cd, keyslot);
        if (!uuid || !salt || registry_path(state_dir, &path) < 0)
                goto fail;
        r = registry_load(path, &root);
        if (r < 0)
                goto fail;
        if (!root) {
                root = json_object_new_object();
                if (!root || json_object_object_add(root, "version", json_object_new_int(KEYSLOTS_VERSION)) < 0 ||
                    json_object_object_add(root, "volumes", json_object_new_object()) < 0)
                        goto fail;
        }
        (void) json_object_object_get_ex(root, "volumes", &volumes);
        if (!json_object_object_get_ex(volumes, uuid, &volume) || !json_object_is_type(volume, json_type_object)) {
                volume = json_object_new_object();
                if (!volume || json_object_object_add(volumes, uuid, volume) < 0) {
                        json_object_put(volume);
                        goto fail;
                }
        }
        (void) snprintf(id, sizeof id, "%d", keyslot);
        if (json_object_object_add(volume, id, json_object_new_string(salt)) < 0)
                goto fail;
        (void) mkdir(state_dir, 0700);
        /* tpmguard's layout, with json-c's "\/" kept: the file stays byte for byte what it was. */
        text = json_object_to_json_string_ext(root, TG_JSON_PRETTY & ~JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!text || tg_write_file_atomic(path, text, strlen(text), 0600) < 0)
                goto fail;
        return;
fail:
        log_warning("Cannot record keyslot %d as tpmguard's in %s/%s: tpmguard will never destroy it by itself "
                    "(remove it with 'cryptsetup luksKillSlot' when it is no longer needed).", keyslot, state_dir,
                    TG_KEYSLOTS_FILE_NAME);
}

bool tg_keyslot_owned(const char *state_dir, struct crypt_device *cd, int keyslot) {
        _cleanup_free_ char *path = NULL, *salt = NULL;
        _cleanup_json_ json_object *root = NULL;
        json_object *volumes, *volume, *recorded;
        const char *uuid = crypt_get_uuid(cd);
        char id[16];

        assert(state_dir);
        salt = keyslot_salt(cd, keyslot);
        if (!uuid || !salt || registry_path(state_dir, &path) < 0 || registry_load(path, &root) < 0 || !root)
                return false;
        (void) snprintf(id, sizeof id, "%d", keyslot);
        return json_object_object_get_ex(root, "volumes", &volumes) &&
               json_object_object_get_ex(volumes, uuid, &volume) && json_object_is_type(volume, json_type_object) &&
               json_object_object_get_ex(volume, id, &recorded) && json_object_is_type(recorded, json_type_string) &&
               strcmp(json_object_get_string(recorded), salt) == 0;
}
