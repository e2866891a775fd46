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
#include "keyslot-owner.h"
#include "log.h"
#include "luks.h"
#include "marker-auth.h"
#include "marker-resolve.h"
#include "pending-marker.h"
#include "token.h"
#include "verify.h"

static int free_keyslot(struct crypt_device *cd, const char *device) {
        int n = crypt_keyslot_max(CRYPT_LUKS2);

        for (int k = 0; k < n; k++)
                if (crypt_keyslot_status(cd, k) == CRYPT_SLOT_INACTIVE)
                        return k;
        return log_error_rc(-TG_ERR_CRYPTSETUP, "%s has no free keyslot.", device);
}

/*
 * The header changes of an enrollment: pending marker (lifecycle/pending-marker.h),
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
        r = tg_luks_use_minimal_pbkdf(cd);
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
