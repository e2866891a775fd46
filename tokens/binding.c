/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/stat.h>

#include "binding.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "util.h"

#define BINDINGS_VERSION 1
#define BINDINGS_MAX_SIZE (256 * 1024)
#define BINDING_LABEL "tpmguard volume binding v1"

static int bindings_path(const char *state_dir, char **ret) {
        return tg_asprintf(ret, "%s/%s", state_dir, TG_BINDINGS_FILE_NAME);
}

int tg_volume_fingerprint(struct crypt_device *cd, int keyslot, const tg_secret *passphrase,
                          uint8_t ret[TG_BINDING_SIZE]) {
        _cleanup_secret_ tg_secret *vk = NULL, *msg = NULL;
        const char *uuid;
        size_t vk_size, label_len = sizeof BINDING_LABEL, uuid_len, out_len = 0;
        int size, r;

        assert(cd);
        assert(passphrase);

        uuid = crypt_get_uuid(cd);
        size = crypt_get_volume_key_size(cd);
        if (!uuid || size <= 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "The volume has no UUID or no volume key size.");
        r = tg_secret_new((size_t) size, &vk);
        if (r < 0)
                return r;
        vk_size = vk->size;
        r = crypt_volume_key_get(cd, keyslot, (char *) vk->data, &vk_size, (const char *) passphrase->data,
                                 passphrase->size);
        if (r < 0)
                return log_error_rc(-TG_ERR_BAD_PIN, "The passphrase opens no keyslot of the volume (%s).", strerror(-r));
        vk->size = vk_size;

        /* The message: the label with its NUL, then the UUID, so no label/UUID pair collides with another. */
        uuid_len = strlen(uuid);
        r = tg_secret_new(label_len + uuid_len, &msg);
        if (r < 0)
                return r;
        memcpy(msg->data, BINDING_LABEL, label_len);
        memcpy(msg->data + label_len, uuid, uuid_len);
        if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, vk->data, vk->size, msg->data, msg->size, ret,
                       TG_BINDING_SIZE, &out_len) ||
            out_len != TG_BINDING_SIZE)
                return log_error_rc(-TG_ERR_INVALID, "HMAC-SHA256 failed in OpenSSL.");
        return 0;
}

/* Reads volumes.json: NULL (and 0) when it does not exist. Strict: a malformed or untrusted file is an error. */
static int bindings_load(const char *path, json_object **ret) {
        return tg_json_read_volumes_file(path, "volume bindings", BINDINGS_MAX_SIZE, BINDINGS_VERSION, ret);
}

int tg_volume_binding_record(const char *state_dir, struct crypt_device *cd, int keyslot, const tg_secret *passphrase) {
        _cleanup_free_ char *path = NULL, *hex = NULL;
        _cleanup_json_ json_object *root = NULL;
        uint8_t fp[TG_BINDING_SIZE];
        json_object *volumes = NULL;
        const char *text;
        int r;

        r = tg_volume_fingerprint(cd, keyslot, passphrase, fp);
        if (r < 0)
                return r;
        r = bindings_path(state_dir, &path);
        if (r < 0)
                return r;
        r = bindings_load(path, &root);
        if (r < 0)
                return log_error_rc(r, "Fix or remove %s, then enrol again.", path);
        if (!root) {
                root = json_object_new_object();
                volumes = json_object_new_object();
                if (!root || !volumes) {
                        json_object_put(volumes);
                        return -TG_ERR_NOMEM;
                }
                json_object_object_add(root, "version", json_object_new_int(BINDINGS_VERSION));
                json_object_object_add(root, "volumes", volumes);
        } else
                (void) json_object_object_get_ex(root, "volumes", &volumes);
        r = tg_hex_encode(fp, sizeof fp, &hex);
        if (r < 0)
                return r;
        json_object_object_add(volumes, crypt_get_uuid(cd), json_object_new_string(hex));
        (void) mkdir(state_dir, 0700);
        /* tpmguard's layout, with json-c's "\/" kept: the file stays byte for byte what it was. */
        text = json_object_to_json_string_ext(root, TG_JSON_PRETTY & ~JSON_C_TO_STRING_NOSLASHESCAPE);
        r = tg_write_file_atomic(path, text, strlen(text), 0600);
        if (r < 0)
                return log_error_rc(r, "Cannot write %s.", path);
        log_info("Bound volume %s to this machine in %s (rebuild the initrd so that it carries it).",
                 crypt_get_uuid(cd), path);
        return 0;
}

int tg_volume_binding_present(const char *state_dir, const char *uuid, bool *ret_file_exists, bool *ret_listed) {
        _cleanup_free_ char *path = NULL;
        _cleanup_json_ json_object *root = NULL;
        json_object *volumes, *v;
        int r;

        r = bindings_path(state_dir, &path);
        if (r < 0)
                return r;
        r = bindings_load(path, &root);
        if (r < 0)
                return r;
        *ret_file_exists = root != NULL;
        *ret_listed = root && json_object_object_get_ex(root, "volumes", &volumes) &&
                      json_object_object_get_ex(volumes, uuid, &v);
        return 0;
}

/*
 * The volume key must be what protects the data. A copy of the victim's
 * header (same UUID, keyslot, digest and token, so the fingerprint matches)
 * whose data segment says "cipher_null" maps the attacker's plaintext root
 * with the real key ignored; a segment of another type (linear, as during
 * an in-place encryption or decryption, or hw-opal on a drive of the
 * attacker's) does the same. Such a volume is never unlocked with the TPM:
 * only dm-crypt ("crypt", "hw-opal-crypt") segments with a real cipher. (A volume in the middle of
 * cryptsetup reencrypt --encrypt/--decrypt opens with its passphrase.)
 * hw-opal-crypt segments pass: their dm-crypt layer needs the key.
 */
static int segments_check(struct crypt_device *cd) {
        _cleanup_json_ json_object *root = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        json_object *segments = NULL;
        const char *json = NULL, *uuid = crypt_get_uuid(cd);
        int r;

        r = crypt_dump_json(cd, &json, 0);
        if (r < 0 || !json)
                return log_error_rc(-TG_ERR_VOLUME_BINDING, "Cannot read the LUKS2 metadata of the volume (%s).",
                                    strerror(-r));
        r = tg_json_parse_object(json, strlen(json), &root, problem, sizeof problem);
        if (r == 0)
                r = tg_json_get(root, "segments", json_type_object, true, &segments, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(-TG_ERR_VOLUME_BINDING, "The volume's LUKS2 metadata: \"segments\" %s.", problem);
        if (r < 0)
                return r;
        json_object_object_foreach(segments, id, seg) {
                json_object *type = NULL, *enc = NULL;

                if (json_object_is_type(seg, json_type_object)) {
                        (void) json_object_object_get_ex(seg, "type", &type);
                        (void) json_object_object_get_ex(seg, "encryption", &enc);
                }
                /* hw-opal-crypt (cryptsetup >= 2.7) is dm-crypt over a self-encrypting drive's range:
                 * the dm-crypt layer still needs the key. hw-opal alone trusts the drive, which in
                 * this attack is the attacker's. */
                if (!type || !json_object_is_type(type, json_type_string) ||
                    (strcmp(json_object_get_string(type), "crypt") != 0 &&
                     strcmp(json_object_get_string(type), "hw-opal-crypt") != 0))
                        return log_alert_rc(-TG_ERR_VOLUME_BINDING,
                                            "Volume %s: data segment %s is of type \"%s\", not encrypted by dm-crypt "
                                            "with the volume key: the TPM secret is not used for it (a decoy volume "
                                            "can copy a header and map plaintext this way). If a reencryption is in "
                                            "progress, unlock with the passphrase and let it finish.",
                                            uuid ? uuid : "(no UUID)", id, type ? json_object_get_string(type) : "(none)");
                if (!enc || !json_object_is_type(enc, json_type_string) ||
                    strcasestr(json_object_get_string(enc), "null"))
                        return log_alert_rc(-TG_ERR_VOLUME_BINDING,
                                            "Volume %s: data segment %s uses the cipher \"%s\", which ignores the "
                                            "volume key: a decoy volume is suspected, and the TPM secret is not used "
                                            "for it.",
                                            uuid ? uuid : "(no UUID)", id, enc ? json_object_get_string(enc) : "(none)");
        }
        return 0;
}

int tg_volume_binding_check(const char *state_dir, struct crypt_device *cd, int keyslot, const tg_secret *passphrase) {
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ uint8_t *want = NULL;
        _cleanup_json_ json_object *root = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        uint8_t fp[TG_BINDING_SIZE];
        json_object *volumes;
        const char *uuid = crypt_get_uuid(cd);
        size_t want_size = 0;
        int r;

        r = segments_check(cd);
        if (r < 0)
                return r;
        r = bindings_path(state_dir, &path);
        if (r < 0)
                return r;
        /* A malformed file fails closed: it cannot say which volume is ours. */
        r = bindings_load(path, &root);
        if (r < 0)
                return log_error_rc(-TG_ERR_VOLUME_BINDING, "The volume bindings cannot be read; unlock with the "
                                    "recovery passphrase and run 'tpmguard bind DEVICE'.");
        if (!root) {
                log_warning("This machine records no volume bindings (%s): a decoy volume with this volume's UUID "
                            "would not be detected. Run 'tpmguard bind DEVICE' and rebuild the initrd.", path);
                return 0;
        }
        if (!uuid)
                return log_error_rc(-TG_ERR_VOLUME_BINDING, "The volume has no UUID; it is not one enrolled here.");
        (void) json_object_object_get_ex(root, "volumes", &volumes);
        r = tg_json_get_hex(volumes, uuid, TG_BINDING_SIZE, TG_BINDING_SIZE, false, &want, &want_size, problem,
                            sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(-TG_ERR_VOLUME_BINDING, "%s: volume %s: %s.", path, uuid, problem);
        if (r < 0)
                return r;
        if (!want)
                return log_alert_rc(-TG_ERR_VOLUME_BINDING,
                                    "Volume %s was never enrolled on this machine, yet carries a tpmguard token: a "
                                    "decoy volume is suspected, and the TPM secret is not used for it. If it is yours, "
                                    "unlock it with its passphrase and run 'tpmguard bind' on it.", uuid);
        r = tg_volume_fingerprint(cd, keyslot, passphrase, fp);
        if (r < 0)
                return log_error_rc(-TG_ERR_VOLUME_BINDING, "The unsealed secret does not open keyslot %d of volume %s: "
                                    "the token does not belong to this volume.", keyslot, uuid);
        if (CRYPTO_memcmp(fp, want, TG_BINDING_SIZE) != 0) {
                explicit_bzero(fp, sizeof fp);
                return log_alert_rc(-TG_ERR_VOLUME_BINDING,
                                    "Volume %s is not the volume enrolled on this machine under that UUID (its key "
                                    "differs): a decoy volume is suspected. Nothing is unlocked with the TPM; check the "
                                    "disk before typing any passphrase.", uuid);
        }
        explicit_bzero(fp, sizeof fp);
        return 0;
}
