/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <openssl/evp.h>

#include "binding.h"
#include "error.h"
#include "log.h"
#include "luks.h"
#include "token.h"
#include "verify.h"

/* ---- header helpers (shared by enrolment, the lifecycle and status) ---- */

int tg_luks_tokens_max(void) {
        int n = crypt_token_max(CRYPT_LUKS2);
        return n > 0 ? n : 32;
}

int tg_luks_keyslots_max(void) {
        int n = crypt_keyslot_max(CRYPT_LUKS2);
        return n > 0 ? n : 32;
}

bool tg_luks_token_has_type(struct crypt_device *cd, int id, const char *type) {
        const char *t = NULL;
        crypt_token_info info = crypt_token_status(cd, id, &t);

        return info != CRYPT_TOKEN_INACTIVE && info != CRYPT_TOKEN_INVALID && t && strcmp(t, type) == 0;
}

bool tg_luks_keyslot_active(struct crypt_device *cd, int keyslot) {
        crypt_keyslot_info s;

        if (keyslot < 0)
                return false;
        s = crypt_keyslot_status(cd, keyslot);
        return s == CRYPT_SLOT_ACTIVE || s == CRYPT_SLOT_ACTIVE_LAST;
}

/* Does token id list keyslot in its "keyslots"? */
bool tg_luks_token_references(struct crypt_device *cd, int id, int keyslot) {
        _cleanup_json_ json_object *o = NULL;
        json_object *arr;
        const char *json = NULL;

        if (crypt_token_json_get(cd, id, &json) < 0 || !json)
                return false;
        o = json_tokener_parse(json);
        if (!o || !json_object_object_get_ex(o, "keyslots", &arr) || !json_object_is_type(arr, json_type_array))
                return false;
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
                const char *s = json_object_get_string(json_object_array_get_idx(arr, i));
                char *end;
                long n;

                if (!s)
                        continue;
                n = strtol(s, &end, 10);
                if (*s && !*end && n == keyslot)
                        return true;
        }
        return false;
}

/* Does any token other than except_token list keyslot? */
bool tg_luks_keyslot_referenced(struct crypt_device *cd, int keyslot, int except_token) {
        for (int id = 0; id < tg_luks_tokens_max(); id++)
                if (id != except_token && tg_luks_token_references(cd, id, keyslot))
                        return true;
        return false;
}

int tg_luks_token_load(struct crypt_device *cd, int id, tg_token *ret) {
        const char *json = NULL;
        int r;

        r = crypt_token_json_get(cd, id, &json);
        if (r < 0 || !json)
                return log_error_rc(-TG_ERR_NOT_FOUND, "Cannot read token %d: %s", id, strerror(r < 0 ? -r : EINVAL));
        return tg_token_from_string(json, ret);
}

int tg_luks_token_remove(struct crypt_device *cd, int id) {
        int r = crypt_token_json_set(cd, id, NULL);

        return r < 0 ? log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot remove token %d: %s", id, strerror(-r)) : 0;
}

int tg_luks_keyslot_destroy(struct crypt_device *cd, int keyslot) {
        int r;

        if (crypt_keyslot_status(cd, keyslot) == CRYPT_SLOT_ACTIVE_LAST)
                return log_error_rc(-TG_ERR_INVALID, "Keyslot %d is the last keyslot; it is never destroyed.", keyslot);
        r = crypt_keyslot_destroy(cd, keyslot);
        return r < 0 ? log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot destroy keyslot %d: %s", keyslot, strerror(-r)) : 0;
}

int tg_luks_open(const char *device, struct crypt_device **ret) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        int r;

        r = crypt_init(&cd, device);
        if (r < 0)
                return log_error_rc(-TG_ERR_NOT_FOUND, "Cannot open %s: %s", device, strerror(-r));
        r = crypt_load(cd, CRYPT_LUKS2, NULL);
        if (r < 0)
                return log_error_rc(-TG_ERR_INVALID, "%s is not a LUKS2 volume (%s).", device, strerror(-r));
        *ret = TAKE_PTR(cd);
        return 0;
}

int tg_keyslot_secret_new(tg_secret **ret) {
        _cleanup_secret_ tg_secret *raw = NULL, *encoded = NULL;
        int r;

        r = tg_secret_new_random(TG_KEYSLOT_SECRET_BYTES, &raw);
        if (r < 0)
                return r;
        r = tg_secret_new(4 * ((TG_KEYSLOT_SECRET_BYTES + 2) / 3) + 1, &encoded);
        if (r < 0)
                return r;
        encoded->size = (size_t) EVP_EncodeBlock(encoded->data, raw->data, (int) raw->size);
        *ret = TAKE_PTR(encoded);
        return 0;
}

/* A high-entropy secret needs no slow KDF; keep unlock fast and initrd memory small (as systemd does). */
static int use_minimal_pbkdf(struct crypt_device *cd) {
        static const struct crypt_pbkdf_type minimal = {
                .type = CRYPT_KDF_PBKDF2,
                .hash = "sha512",
                .iterations = 1000,
                .flags = CRYPT_PBKDF_NO_BENCHMARK,
        };
        int r = crypt_set_pbkdf_type(cd, &minimal);
        return r < 0 ? log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot set the keyslot PBKDF: %s", strerror(-r)) : 0;
}

int tg_enroll(const tg_config *config, const char *device, const tg_secret *unlock_passphrase,
              const tg_enroll_options *options, int *ret_keyslot, int *ret_token) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_secret_ tg_secret *secret = NULL, *check = NULL;
        _cleanup_free_ char *json = NULL;
        tg_verify_report report;
        tg_token token;
        int keyslot = -1, token_id, r;

        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;

        /* First the TPM: nothing is written to the header of a volume we cannot seal for. */
        r = tg_verify(config, NULL, &report, &v);
        if (r < 0)
                return r;

        /* Refuse unextended PCRs before the header is touched (tg_seal checks again). */
        if (!options->seal.allow_unextended && !options->seal.explicit_values) {
                tg_pcr_values values;

                r = tg_vtpm_pcr_read(v, options->seal.pcr_bank, options->seal.pcr_mask, &values);
                if (r < 0)
                        return r;
                r = tg_pcr_values_check_extended(&values, options->seal.pcr_mask);
                if (r < 0)
                        return log_error_rc(r, "Enrollment refused: %s is unchanged.", device);
        }
        r = tg_keyslot_secret_new(&secret);
        if (r < 0)
                return r;
        r = use_minimal_pbkdf(cd);
        if (r < 0)
                return r;
        keyslot = crypt_keyslot_add_by_passphrase(cd, options->keyslot,
                                                  (const char *) unlock_passphrase->data, unlock_passphrase->size,
                                                  (const char *) secret->data, secret->size);
        if (keyslot == -EPERM)
                return log_error_rc(-TG_ERR_BAD_PIN, "No keyslot of %s opens with the given passphrase.", device);
        if (keyslot < 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot add a keyslot to %s: %s", device, strerror(-keyslot));
        log_info("Added keyslot %d.", keyslot);

        r = tg_seal(v, &options->seal, secret, &token);
        if (r < 0)
                goto undo;
        token.keyslot = keyslot;
        token.ek_signing_key_name = report.ek_signing_key_name;

        /* Prove it: the TPM gives the secret back, and the secret opens the new keyslot. */
        r = tg_unseal(v, &token, options->seal.pin, &check);
        if (r < 0) {
                log_error("The test unseal failed; nothing is kept.");
                goto undo;
        }
        if (check->size != secret->size || !memeq_const(check->data, secret->data, secret->size)) {
                r = log_alert_rc(-TG_ERR_INTERPOSER, "The test unseal returned a different secret; nothing is kept.");
                goto undo;
        }
        r = crypt_activate_by_passphrase(cd, NULL, keyslot, (const char *) check->data, check->size, 0);
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "The new keyslot does not open: %s", strerror(-r));
                goto undo;
        }

        /* Bind the volume before the token exists (issue 14 §4): a binding
         * without a token is harmless, a token whose volume is not bound is
         * refused by the plugin. */
        r = tg_volume_binding_record(config->state_dir, cd, keyslot, check);
        if (r < 0)
                goto undo;
        r = tg_token_to_string(&token, &json);
        if (r < 0)
                goto undo;
        token_id = crypt_token_json_set(cd, CRYPT_ANY_TOKEN, json);
        if (token_id < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot write the token: %s", strerror(-token_id));
                goto undo;
        }
        explicit_bzero(&token, sizeof token);
        if (ret_keyslot)
                *ret_keyslot = keyslot;
        if (ret_token)
                *ret_token = token_id;
        return 0;

undo:
        explicit_bzero(&token, sizeof token);
        if (crypt_keyslot_destroy(cd, keyslot) < 0)
                log_error("Could not remove keyslot %d again; remove it with 'cryptsetup luksKillSlot %s %d'.",
                          keyslot, device, keyslot);
        else
                log_info("Removed keyslot %d again.", keyslot);
        return r;
}

int tg_luks_use_minimal_pbkdf(struct crypt_device *cd) {
        return use_minimal_pbkdf(cd);
}

bool tg_luks_keyslot_has_minimal_pbkdf(struct crypt_device *cd, int keyslot) {
        struct crypt_pbkdf_type p = {};

        return crypt_keyslot_get_pbkdf(cd, keyslot, &p) >= 0 &&
               p.type && strcmp(p.type, CRYPT_KDF_PBKDF2) == 0 &&
               p.hash && strcmp(p.hash, "sha512") == 0 &&
               p.iterations == 1000;
}
