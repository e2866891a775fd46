/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <openssl/evp.h>
#include <unistd.h>
#include <sys/stat.h>

#include "binding.h"
#include "error.h"
#include "fault.h"
#include "interrupt.h"
#include "json-util.h"
#include "keyslot-owner.h"
#include "log.h"
#include "luks.h"
#include "marker-auth.h"
#include "pending-marker.h"
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

int tg_luks_token_active_keyslot(struct crypt_device *cd, int id) {
        for (int k = 0; k < tg_luks_keyslots_max(); k++)
                if (tg_luks_keyslot_active(cd, k) && tg_luks_token_references(cd, id, k))
                        return k;
        return -1;
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
        struct stat st;
        int r;

        /* libcryptsetup says "Block device required" for a path that does not exist: name the real cause. */
        if (stat(device, &st) < 0)
                return log_error_rc(errno == ENOENT ? -TG_ERR_NOT_FOUND : -TG_ERR_IO, "Cannot open %s: %m", device);
        if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode))
                return log_error_rc(-TG_ERR_INVALID, "%s is neither a block device nor an image file.", device);
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

static int free_keyslot(struct crypt_device *cd, const char *device) {
        int n = crypt_keyslot_max(CRYPT_LUKS2);

        for (int k = 0; k < n; k++)
                if (crypt_keyslot_status(cd, k) == CRYPT_SLOT_INACTIVE)
                        return k;
        return log_error_rc(-TG_ERR_CRYPTSETUP, "%s has no free keyslot.", device);
}

/*
 * The header changes of an enrollment: pending marker (lifecycle/lifecycle.h),
 * keyslot, marker bound to it, seal and test, token, marker removed. A
 * signal (lib/interrupt.h) or an error before the token write undoes the
 * keyslot; a crash leaves the marker, which 'tpmguard status' reports and
 * 'tpmguard cleanup' (or any lifecycle command) resolves.
 */
static int enroll_steps(const tg_config *config, struct crypt_device *cd, tg_verified_tpm **vp, const tg_verify_report *report,
                        const char *device, const tg_secret *unlock_passphrase, const tg_enroll_options *options,
                        int *ret_keyslot, int *ret_token) {
        _cleanup_secret_ tg_secret *secret = NULL, *check = NULL;
        _cleanup_free_ char *json = NULL, *marker_json = NULL;
        _cleanup_handle_ tg_handle object = TG_HANDLE_NULL;
        tg_pending_marker m = { .operation = "enroll", .token = -1, .old_keyslot = -1, .bound_keyslot = -1 };
        tg_verified_tpm *v = *vp;
        tg_token token;
        int keyslot, marker_id, token_id, r, q;

        if (options->migrate) {
                snprintf(m.operation, sizeof m.operation, "migrate");
                m.token = options->migrate_token;
                /* To be proven first (migrate_prove): until then a crash destroys no old keyslot. Its number
                 * alone, the header's word, never names it. */
                assert(options->migrate_keyslot < 0 || options->migrate_prove);
                m.old_keyslot = -1;
        }

        keyslot = options->keyslot >= 0 ? options->keyslot : free_keyslot(cd, device);
        if (keyslot < 0)
                return keyslot;
        m.new_keyslot = keyslot;
        r = tg_keyslot_secret_new(&secret);
        if (r < 0)
                return r;
        r = use_minimal_pbkdf(cd);
        if (r < 0)
                return r;
        r = tg_pending_marker_sign(config->state_dir, cd, &m);
        if (r < 0)
                return r;
        r = tg_pending_marker_to_string(&m, &marker_json);
        if (r < 0)
                return r;
        r = tg_interrupt_check("before any change");
        if (r < 0)
                return r;

        /* The marker takes the highest free token id, so the token itself gets the lowest (as before markers). */
        marker_id = -ENOSPC;
        for (int id = tg_luks_tokens_max() - 1; id >= 0 && marker_id == -ENOSPC; id--)
                if (crypt_token_status(cd, id, NULL) == CRYPT_TOKEN_INACTIVE)
                        marker_id = id;
        if (marker_id >= 0)
                marker_id = crypt_token_json_set(cd, marker_id, marker_json);
        if (marker_id < 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot write the pending marker: %s. Nothing was changed.",
                                    strerror(-marker_id));
        tg_fault_point("after-marker-write");

        r = crypt_keyslot_add_by_passphrase(cd, keyslot,
                                            (const char *) unlock_passphrase->data, unlock_passphrase->size,
                                            (const char *) secret->data, secret->size);
        if (r == -EPERM) {
                r = log_error_rc(-TG_ERR_BAD_PIN, "No keyslot of %s opens with the given passphrase.", device);
                goto undo;
        }
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot add keyslot %d to %s: %s", keyslot, device, strerror(-r));
                goto undo;
        }
        tg_fault_point("after-keyslot-add");
        log_info("Added keyslot %d.", keyslot);
        r = crypt_token_assign_keyslot(cd, marker_id, keyslot);
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot bind the pending marker to keyslot %d: %s", keyslot, strerror(-r));
                goto undo;
        }
        tg_fault_point("after-marker-bind");
        r = tg_interrupt_check("after adding the keyslot");
        if (r < 0)
                goto undo;

        /* The sealed object stays loaded for the test unseal (CreateLoaded: no Load, no ReadPublic). */
        r = tg_seal_loaded(v, &options->seal, secret, &token, &object);
        if (r < 0)
                goto undo;
        token.keyslot = keyslot;
        token.ek_signing_key_name = report->ek_signing_key_name;

        /* Prove it: the TPM gives the secret back, and the secret opens the new keyslot. */
        r = tg_unseal_loaded(v, &token, options->seal.pin, &object, &check);
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
        tg_keyslot_own(config->state_dir, cd, keyslot);
        r = tg_interrupt_check("after sealing");
        if (r < 0)
                goto undo;

        if (options->migrate && options->migrate_keyslot >= 0 && options->migrate_prove) {
                /* The old token is used only now that tpmguard's own seal passed its checks on this TPM,
                 * and with tpmguard's connection closed (a TPM without a resource manager takes one). */
                tg_handle_release(&object);
                object = TG_HANDLE_NULL;
                tg_verified_tpm_free(TAKE_PTR(*vp));
                v = NULL;
                r = options->migrate_prove(cd, options->migrate_prove_userdata);
                if (r < 0)
                        goto undo;
                if (r > 0) {
                        /* Bound by its KDF salt, not only its number (migrate_marker_plan). */
                        tg_keyslot_own(config->state_dir, cd, options->migrate_keyslot);
                        /* One write: the marker (still bound to the new keyslot) now names the old one. */
                        m.old_keyslot = options->migrate_keyslot;
                        m.bound_keyslot = keyslot;
                        free(marker_json);
                        marker_json = NULL;
                        r = tg_pending_marker_sign(config->state_dir, cd, &m);
                        if (r >= 0)
                                r = tg_pending_marker_to_string(&m, &marker_json);
                        if (r < 0)
                                goto undo;
                        r = crypt_token_json_set(cd, marker_id, marker_json);
                        if (r < 0) {
                                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot update the pending marker: %s",
                                                 strerror(-r));
                                goto undo;
                        }
                        tg_fault_point("after-marker-proof");
                }
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
        tg_fault_point("after-token-write");
        explicit_bzero(&token, sizeof token);
        /* From here on the enrollment is complete; the marker only says so (migrate: and resolving it
         * removes the old token and keyslot, the same code a later run uses after a crash). */
        r = tg_pending_marker_resolve(config->state_dir, cd, device, marker_id, -1);
        if (r < 0)
                log_warning("The enrollment is complete, but its pending marker (token %d) is left over%s; "
                            "'tpmguard cleanup %s' %s.", marker_id,
                            options->migrate ? " with the old token" : "", device,
                            options->migrate ? "removes them" : "removes it");
        if (ret_keyslot)
                *ret_keyslot = keyslot;
        if (ret_token)
                *ret_token = token_id;
        return 0;

undo:
        explicit_bzero(&token, sizeof token);
        q = tg_pending_marker_resolve(config->state_dir, cd, device, marker_id, -1);
        if (q < 0)
                log_error("Could not undo everything; run 'tpmguard cleanup %s'.", device);
        else
                log_info("Nothing was kept: no keyslot, no token.");
        return r;
}

int tg_enroll(const tg_config *config, const char *device, const tg_secret *unlock_passphrase,
              const tg_enroll_options *options, int *ret_keyslot, int *ret_token) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        tg_verify_report report;
        int r;

        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;

        /* First the TPM: nothing is written to the header of a volume we cannot seal for. */
        r = tg_verify(config, &(tg_verify_options) { .endorsement_auth = options->endorsement_auth }, &report, &v);
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

        tg_interrupt_begin();
        r = enroll_steps(config, cd, &v, &report, device, unlock_passphrase, options, ret_keyslot, ret_token);
        if (tg_interrupt_end() != 0 && r >= 0)
                log_notice("Interrupted after the enrollment was complete: it is kept.");
        return r;
}

bool tg_migratable_token_type(const char *type) {
        return type && (strcmp(type, "systemd-tpm2") == 0 || strcmp(type, "clevis") == 0);
}

int tg_luks_use_minimal_pbkdf(struct crypt_device *cd) {
        return use_minimal_pbkdf(cd);
}

bool tg_luks_keyslot_has_peer_pbkdf(struct crypt_device *cd, int keyslot) {
        struct crypt_pbkdf_type p = {};

        return crypt_keyslot_get_pbkdf(cd, keyslot, &p) >= 0 && p.type && strcmp(p.type, CRYPT_KDF_PBKDF2) == 0 &&
               p.iterations == 1000;
}

bool tg_luks_keyslot_has_minimal_pbkdf(struct crypt_device *cd, int keyslot) {
        struct crypt_pbkdf_type p = {};

        return crypt_keyslot_get_pbkdf(cd, keyslot, &p) >= 0 &&
               p.type && strcmp(p.type, CRYPT_KDF_PBKDF2) == 0 &&
               p.hash && strcmp(p.hash, "sha512") == 0 &&
               p.iterations == 1000;
}

/* ---- keyslots for typed secrets, and the recovery-key label ---- */

int tg_luks_use_human_pbkdf(struct crypt_device *cd, uint32_t time_ms, tg_pbkdf_fingerprint *ret) {
        const struct crypt_pbkdf_type *def = crypt_get_pbkdf_default(CRYPT_LUKS2);
        const struct crypt_pbkdf_type *now;
        struct crypt_pbkdf_type p;
        long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE), cpus = sysconf(_SC_NPROCESSORS_ONLN);
        tg_pbkdf_fingerprint f = {};
        int vk_size, r;

        if (!def || !def->type)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "libcryptsetup has no default PBKDF for LUKS2.");
        p = *def;
        p.flags = 0;
        if (time_ms > 0)
                p.time_ms = time_ms;
        /* The initrd opens this keyslot on this machine: never ask for more than half its memory. */
        if (pages > 0 && page_size > 0 && p.max_memory_kb > (uint64_t) pages * (uint64_t) page_size / 1024 / 2)
                p.max_memory_kb = (uint32_t) ((uint64_t) pages * (uint64_t) page_size / 1024 / 2);
        if (cpus > 0 && p.parallel_threads > (uint32_t) cpus)
                p.parallel_threads = (uint32_t) cpus;
        vk_size = crypt_get_volume_key_size(cd);
        r = crypt_benchmark_pbkdf(cd, &p, "tpmguard", 8, "tpmguard-benchmark-salt-32-bytes", 32,
                                  vk_size > 0 ? (size_t) vk_size : 64, NULL, NULL);
        if (r < 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot benchmark the %s PBKDF: %s", p.type, strerror(-r));
        p.flags = CRYPT_PBKDF_NO_BENCHMARK;
        r = crypt_set_pbkdf_type(cd, &p);
        if (r < 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot set the keyslot PBKDF: %s", strerror(-r));
        now = crypt_get_pbkdf_type(cd);
        if (!now || !now->type || strlen(now->type) >= sizeof f.type)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot read back the keyslot PBKDF.");
        snprintf(f.type, sizeof f.type, "%s", now->type);
        f.iterations = now->iterations;
        f.memory_kb = now->max_memory_kb;
        f.parallel = now->parallel_threads;
        log_debug("Keyslot PBKDF for a typed secret: %s, %u iterations, %u KiB, %u threads.", f.type, f.iterations,
                  f.memory_kb, f.parallel);
        *ret = f;
        return 0;
}

bool tg_luks_keyslot_has_pbkdf(struct crypt_device *cd, int keyslot, const tg_pbkdf_fingerprint *f) {
        struct crypt_pbkdf_type p = {};

        if (!f->type[0] || crypt_keyslot_get_pbkdf(cd, keyslot, &p) < 0 || !p.type || strcmp(p.type, f->type) != 0)
                return false;
        if (strcmp(p.type, CRYPT_KDF_PBKDF2) == 0)
                return p.iterations == f->iterations;
        return p.iterations == f->iterations && p.max_memory_kb == f->memory_kb && p.parallel_threads == f->parallel;
}

/* Is keyslot active and named by a label token of this type? */
static bool keyslot_has_label(struct crypt_device *cd, int keyslot, const char *type) {
        if (!tg_luks_keyslot_active(cd, keyslot))
                return false;
        for (int id = 0; id < tg_luks_tokens_max(); id++)
                if (tg_luks_token_has_type(cd, id, type) && tg_luks_token_references(cd, id, keyslot))
                        return true;
        return false;
}

bool tg_luks_keyslot_is_recovery_key(struct crypt_device *cd, int keyslot) {
        return keyslot_has_label(cd, keyslot, TG_RECOVERY_TOKEN_TYPE);
}

bool tg_luks_token_is_label(struct crypt_device *cd, int id) {
        return tg_luks_token_has_type(cd, id, TG_RECOVERY_TOKEN_TYPE) || tg_luks_token_has_type(cd, id, TG_KEPT_TOKEN_TYPE);
}

bool tg_luks_keyslot_is_kept(struct crypt_device *cd, int keyslot) {
        return keyslot_has_label(cd, keyslot, TG_KEPT_TOKEN_TYPE);
}

int tg_luks_kept_label_write(struct crypt_device *cd, int keyslot, const char *was) {
        _cleanup_json_ json_object *o = NULL;
        json_object *slots;
        char num[16];
        int r;

        assert(cd);
        assert(was);
        if (tg_luks_keyslot_is_kept(cd, keyslot))
                return 0;
        o = json_object_new_object();
        slots = json_object_new_array();
        if (!o || !slots) {
                json_object_put(slots);
                return -TG_ERR_NOMEM;
        }
        snprintf(num, sizeof num, "%d", keyslot);
        json_object_array_add(slots, json_object_new_string(num));
        json_object_object_add(o, "type", json_object_new_string(TG_KEPT_TOKEN_TYPE));
        json_object_object_add(o, "keyslots", slots);
        json_object_object_add(o, "version", json_object_new_int(1));
        json_object_object_add(o, "was", json_object_new_string(was));
        /* The highest free token id, as a pending marker's: the tokens that unlock keep the lowest. */
        r = -ENOSPC;
        for (int id = tg_luks_tokens_max() - 1; id >= 0 && r == -ENOSPC; id--)
                if (crypt_token_status(cd, id, NULL) == CRYPT_TOKEN_INACTIVE)
                        r = id;
        if (r >= 0)
                r = crypt_token_json_set(cd, r, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        if (r < 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot write the label of kept keyslot %d: %s", keyslot,
                                    strerror(-r));
        tg_fault_point("after-kept-label-write");
        return 0;
}

bool tg_luks_keyslot_used_by_token(struct crypt_device *cd, int keyslot, int except_token) {
        for (int id = 0; id < tg_luks_tokens_max(); id++)
                if (id != except_token && !tg_luks_token_is_label(cd, id) && tg_luks_token_references(cd, id, keyslot))
                        return true;
        return false;
}

int tg_luks_remove_orphan_labels(struct crypt_device *cd, unsigned *actions) {
        for (int id = 0; id < tg_luks_tokens_max(); id++) {
                int r;

                if (!tg_luks_token_is_label(cd, id) || tg_luks_token_active_keyslot(cd, id) >= 0)
                        continue;
                log_notice("Removing token %d: a %s label whose keyslot is gone.", id,
                           tg_luks_token_has_type(cd, id, TG_KEPT_TOKEN_TYPE) ? "kept-keyslot" : "recovery-key");
                r = tg_luks_token_remove(cd, id);
                if (r < 0)
                        return r;
                tg_fault_point("after-label-remove");
                if (actions)
                        (*actions)++;
        }
        return 0;
}

int tg_luks_keyslots_describe(struct crypt_device *cd, bool with_pending, json_object *keyslots) {
        assert(cd);
        assert(keyslots);

        for (int k = 0; k < tg_luks_keyslots_max(); k++) {
                json_object *e, *users;

                if (!tg_luks_keyslot_active(cd, k))
                        continue;
                e = json_object_new_object();
                users = json_object_new_array();
                if (!e || !users) {
                        json_object_put(e);
                        json_object_put(users);
                        return -TG_ERR_NOMEM;
                }
                for (int id = 0; id < tg_luks_tokens_max(); id++)
                        if (tg_luks_token_references(cd, id, k) && !tg_luks_token_is_label(cd, id) &&
                            (with_pending || !tg_luks_token_has_type(cd, id, TG_PENDING_TOKEN_TYPE)))
                                json_object_array_add(users, json_object_new_int(id));
                json_object_object_add(e, "keyslot", json_object_new_int(k));
                json_object_object_add(e, "tokens", users);
                json_object_object_add(e, "kind", json_object_new_string(
                        json_object_array_length(users) > 0 ? "token" :
                        tg_luks_keyslot_is_recovery_key(cd, k) ? "recovery-key" :
                        tg_luks_keyslot_is_kept(cd, k) ? "kept-unproven" : "passphrase"));
                json_object_array_add(keyslots, e);
        }
        return 0;
}
