/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard enroll (enroll.h): verify the TPM, then a crash-safe keyslot
 * change whose middle seals the new secret and proves it.
 *
 * Threat model: the bus is hostile, so the TPM is verified before anything
 * is written, the secret crosses it only in the verified session, and the
 * seal is proven by unsealing it again and opening the new keyslot with
 * what came back; nothing is kept when any check fails.
 */
#include <assert.h>
#include <errno.h>
#include <string.h>

#include "binding.h"
#include "enroll.h"
#include "error.h"
#include "fault.h"
#include "interrupt.h"
#include "keyslot-change.h"
#include "keyslot-owner.h"
#include "log.h"
#include "luks.h"
#include "token.h"
#include "verify.h"

/*
 * The header changes of an enrollment, one keyslot change (keyslot-change.h):
 * pending marker, keyslot, marker bound to it, seal and test, token, marker removed. A
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
        tg_keyslot_change change;
        tg_verified_tpm *v = *vp;
        tg_token token;
        int keyslot, token_id, r;

        /* migrate: the old keyslot is to be proven first (migrate_prove): until then a crash destroys no old
         * keyslot. Its number alone, the header's word, never names it. */
        assert(!options->migrate || options->migrate_keyslot < 0 || options->migrate_prove);

        keyslot = options->keyslot >= 0 ? options->keyslot : tg_luks_keyslot_free(cd, device);
        if (keyslot < 0)
                return keyslot;
        r = tg_keyslot_secret_new(&secret);
        if (r < 0)
                return r;
        r = tg_luks_use_minimal_pbkdf(cd);
        if (r < 0)
                return r;
        r = tg_keyslot_change_begin(config->state_dir, cd, device, &(tg_keyslot_change_params) {
                                            .operation = options->migrate ? "migrate" : "enroll",
                                            .token = options->migrate ? options->migrate_token : -1,
                                            .old_keyslot = -1,
                                            .new_keyslot = keyslot,
                                            .marker_id = TG_KEYSLOT_CHANGE_MARKER_HIGHEST,
                                            .authorization = unlock_passphrase,
                                            .secret = secret,
                                            .interrupt_step = "after adding the keyslot",
                                            .eperm_is_wrong_passphrase = true,
                                            .name_device = true,
                                            .undone = "Nothing was kept: no keyslot, no token.",
                                    }, &change);
        if (r < 0)
                return r;

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
                        change.marker.old_keyslot = options->migrate_keyslot;
                        r = tg_keyslot_change_sign(&change, &marker_json);
                        if (r < 0)
                                goto undo;
                        r = crypt_token_json_set(cd, change.marker_id, marker_json);
                        if (r < 0) {
                                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot update the pending marker: %s",
                                                 strerror(-r));
                                goto undo;
                        }
                        tg_fault_point("after-marker-proof");
                }
        }

        /* Bind the volume before the token exists (docs/design.md §9.1): a binding
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
        r = tg_keyslot_change_commit(&change, -1);
        if (r < 0)
                log_warning("The enrollment is complete, but its pending marker (token %d) is left over%s; "
                            "'tpmguard cleanup %s' %s.", change.marker_id,
                            options->migrate ? " with the old token" : "", device,
                            options->migrate ? "removes them" : "removes it");
        if (ret_keyslot)
                *ret_keyslot = keyslot;
        if (ret_token)
                *ret_token = token_id;
        return 0;

undo:
        explicit_bzero(&token, sizeof token);
        tg_keyslot_change_undo(&change);
        return r;
}

/* Refuses unextended PCRs before the header is touched (tg_seal checks again). */
static int check_pcrs_extended(tg_verified_tpm *v, const tg_enroll_options *options, const char *device) {
        tg_pcr_values values;
        int r;

        if (options->seal.allow_unextended || options->seal.explicit_values)
                return 0;
        r = tg_vtpm_pcr_read(v, options->seal.pcr_bank, options->seal.pcr_mask, &values);
        if (r < 0)
                return r;
        r = tg_pcr_values_check_extended(&values, options->seal.pcr_mask);
        return r < 0 ? log_error_rc(r, "Enrollment refused: %s is unchanged.", device) : 0;
}

int tg_enroll_check(const tg_config *config, const char *device, const tg_enroll_options *options) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        int r;

        r = tg_luks_open_writable(device, &cd);
        if (r < 0)
                return r;
        if (options->keyslot >= 0) {
                if (options->keyslot >= tg_luks_keyslots_max() ||
                    crypt_keyslot_status(cd, options->keyslot) != CRYPT_SLOT_INACTIVE ||
                    tg_luks_keyslot_referenced(cd, options->keyslot, -1))
                        return log_error_rc(-TG_ERR_INVALID, "Keyslot %d of %s is in use: choose a free one with "
                                            "--key-slot N, or leave it out (the first free keyslot).",
                                            options->keyslot, device);
        } else {
                r = tg_luks_keyslot_free(cd, device);
                if (r < 0)
                        return r;
        }
        /* The TPM reachable and genuine, this boot's verification cache when warm: a check only, tg_enroll
         * verifies again before it seals anything. */
        r = tg_verify(config, &(tg_verify_options) { .endorsement_auth = options->endorsement_auth, .use_cache = true },
                      NULL, &v);
        if (r < 0)
                return r;
        return check_pcrs_extended(v, options, device);
}

int tg_enroll(const tg_config *config, const char *device, const tg_secret *unlock_passphrase,
              const tg_enroll_options *options, int *ret_keyslot, int *ret_token) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        tg_verify_report report;
        int r;

        r = tg_luks_open_writable(device, &cd);
        if (r < 0)
                return r;

        /* First the TPM: nothing is written to the header of a volume we cannot seal for. */
        r = tg_verify(config, &(tg_verify_options) { .endorsement_auth = options->endorsement_auth }, &report, &v);
        if (r < 0)
                return r;

        r = check_pcrs_extended(v, options, device);
        if (r < 0)
                return r;

        tg_interrupt_begin();
        r = enroll_steps(config, cd, &v, &report, device, unlock_passphrase, options, ret_keyslot, ret_token);
        if (tg_interrupt_end() != 0 && r >= 0)
                log_notice("Interrupted after the enrollment was complete: it is kept.");
        return r;
}
