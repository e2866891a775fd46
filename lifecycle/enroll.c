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
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "enroll.h"
#include "error.h"
#include "fault.h"
#include "interrupt.h"
#include "keyslot-change.h"
#include "keyslot-owner.h"
#include "label.h"
#include "log.h"
#include "luks.h"
#include "marker-resolve.h"
#include "token.h"
#include "token-ops.h"
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
                                            .operation = options->migrate ? "migrate" :
                                                         options->wipe.replace ? "replace" : "enroll",
                                            .token = options->migrate ? options->migrate_token :
                                                     options->wipe.replace ? options->wipe.replace_token : -1,
                                            .old_keyslot = options->wipe.replace ? options->wipe.replace_keyslot : -1,
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
        /* replace: the old token's id, in one write (before it the old token works, after it the new one). */
        token_id = crypt_token_json_set(cd, options->wipe.replace ? options->wipe.replace_token : CRYPT_ANY_TOKEN, json);
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

int tg_enroll_plan_wipe(const char *device, const char *wipe_slot, tg_enroll_options *options) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        uint32_t tokens = 0;
        int first = -1, slot = -1, others = 0, r;

        options->wipe = (__typeof__(options->wipe)) { .replace_token = -1, .replace_keyslot = -1, .destroy_keyslot = -1 };
        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        for (int id = 0; id < tg_luks_tokens_max() && id < 32; id++)
                if (tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE)) {
                        tokens |= 1u << id;
                        if (first < 0)
                                first = id;
                }

        if (wipe_slot && strcmp(wipe_slot, "tpmguard") != 0) {
                char *end;
                long n;

                errno = 0;
                n = strtol(wipe_slot, &end, 10);
                if (!*wipe_slot || *end || errno || n < 0 || n >= tg_luks_keyslots_max())
                        return log_error_rc(-TG_ERR_INVALID, "--wipe-slot: \"%s\" is neither \"tpmguard\" nor a keyslot "
                                            "number 0..%d.", wipe_slot, tg_luks_keyslots_max() - 1);
                slot = (int) n;
                if (!tg_luks_keyslot_active(cd, slot))
                        return log_error_rc(-TG_ERR_INVALID, "--wipe-slot %d: keyslot %d of %s is not in use. Nothing "
                                            "was changed.", slot, slot, device);
                /* A tpmguard token's keyslot: that token is the one replaced. */
                for (int id = 0; id < 32; id++)
                        if ((tokens & (1u << id)) && tg_luks_token_references(cd, id, slot)) {
                                options->wipe.replace = true;
                                options->wipe.replace_token = id;
                                options->wipe.replace_keyslot = slot;
                                return 0;
                        }
                if (tokens)
                        return log_error_rc(-TG_ERR_INVALID, "%s already has a tpmguard token (token %d), and keyslot %d "
                                            "is not its: a second token would ask for a PIN of its own at every boot. "
                                            "Replace it with 'tpmguard enroll --wipe-slot tpmguard %s'. Nothing was "
                                            "changed.", device, first, slot, device);
                /* The recovery passphrase is what survives a cleared TPM, a firmware update that changes
                 * every PCR, a new mainboard: never wipe the only one. Another token's keyslot (a
                 * systemd-tpm2 or FIDO2 one) or a kept old token's is no such way in. */
                for (int k = 0; k < tg_luks_keyslots_max(); k++)
                        if (k != slot && tg_luks_keyslot_active(cd, k) && !tg_luks_keyslot_used_by_token(cd, k, -1) &&
                            !tg_luks_keyslot_is_kept(cd, k))
                                others++;
                if (others == 0)
                        return log_error_rc(-TG_ERR_INVALID, "--wipe-slot %d: keyslot %d is the only passphrase of %s "
                                            "(every other keyslot belongs to a token). Without it a device would be "
                                            "the only key, and a cleared TPM, a firmware update or a new mainboard "
                                            "would lose the data. Add a recovery key first ('tpmguard recovery-key "
                                            "%s'). Nothing was changed.", slot, slot, device, device);
                options->wipe.destroy = true;
                options->wipe.destroy_keyslot = slot;
                return 0;
        }
        if (!tokens)
                return 0;
        if (!wipe_slot)
                return log_error_rc(-TG_ERR_INVALID, "%s already has a tpmguard token (token %d): a second one would ask "
                                    "for a PIN of its own at every boot, and every command would need --token N. To "
                                    "replace it, run 'tpmguard enroll --wipe-slot tpmguard %s' (the old token goes "
                                    "only once the new one is proven); to change its PIN or PCRs, 'tpmguard "
                                    "change-pin' or 'tpmguard reseal'. Nothing was changed.", device, first, device);
        /* --wipe-slot tpmguard: the first token is replaced in place, the others removed after. */
        options->wipe.replace_keyslot = tg_luks_token_active_keyslot(cd, first);
        if (options->wipe.replace_keyslot >= 0) {
                options->wipe.replace = true;
                options->wipe.replace_token = first;
                tokens &= ~(1u << first);
        }
        options->wipe.remove_tokens = tokens;
        return 0;
}

/* --wipe-slot, after the new token is written and its marker resolved: what tg_enroll_plan_wipe planned. */
static int enroll_wipe_rest(const tg_config *config, struct crypt_device *cd, const char *device,
                            const tg_enroll_options *options, int new_token) {
        int r;

        for (int id = 0; id < 32; id++)
                if ((options->wipe.remove_tokens & (1u << id)) && id != new_token) {
                        r = tg_remove(config, device, id, NULL);
                        if (r < 0)
                                return log_error_rc(r, "The new token %d works, but the old token %d could not be "
                                                    "removed: 'tpmguard remove --token %d %s'.", new_token, id, id,
                                                    device);
                        log_info("Removed the old tpmguard token %d.", id);
                }
        if (options->wipe.destroy) {
                /* Checked again on the header as it is now: never the new token's keyslot, never the last. */
                if (tg_luks_keyslot_referenced(cd, options->wipe.destroy_keyslot, -1))
                        return log_error_rc(-TG_ERR_INVALID, "Keyslot %d is now used by a token: kept.",
                                            options->wipe.destroy_keyslot);
                r = tg_luks_keyslot_destroy(cd, options->wipe.destroy_keyslot);
                if (r < 0)
                        return log_error_rc(r, "The new token %d works, but keyslot %d could not be destroyed: "
                                            "'cryptsetup luksKillSlot %s %d'.", new_token, options->wipe.destroy_keyslot,
                                            device, options->wipe.destroy_keyslot);
                log_info("Destroyed keyslot %d.", options->wipe.destroy_keyslot);
        }
        return 0;
}

int tg_enroll(const tg_config *config, const char *device, const tg_secret *unlock_passphrase,
              const tg_enroll_options *options, int *ret_keyslot, int *ret_token) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        tg_verify_report report;
        int keyslot = -1, token = -1, r;

        r = tg_luks_open_writable(device, &cd);
        if (r < 0)
                return r;
        /* An interrupted operation first (an enroll --wipe-slot killed after its token write leaves the
         * replaced keyslot to its marker), as every lifecycle operation does. */
        r = tg_pending_markers_resolve_all(config->state_dir, cd, device, NULL);
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
        r = enroll_steps(config, cd, &v, &report, device, unlock_passphrase, options, &keyslot, &token);
        if (tg_interrupt_end() != 0 && r >= 0)
                log_notice("Interrupted after the enrollment was complete: it is kept.");
        if (r < 0)
                return r;
        /* The TPM connection closed first: tg_remove() opens the volume and resolves markers itself. */
        tg_verified_tpm_free(TAKE_PTR(v));
        r = enroll_wipe_rest(config, cd, device, options, token);
        if (r < 0)
                return r;
        if (ret_keyslot)
                *ret_keyslot = keyslot;
        if (ret_token)
                *ret_token = token;
        return 0;
}
