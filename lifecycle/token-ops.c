/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The token operations (token-ops.h): change-pin, rotate, reseal, remove, update prepare and finish.
 * Threat and crash model: lifecycle/lifecycle.c.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "error.h"
#include "fault.h"
#include "interrupt.h"
#include "keyslot-change.h"
#include "keyslot-owner.h"
#include "lifecycle.h"
#include "log.h"
#include "luks.h"
#include "marker-resolve.h"
#include "token-ops.h"
#include "token.h"
#include "unlock.h"
#include "update-record.h"

/*
 * New keyslot, one keyslot change (keyslot-change.h): marker, keyslot
 * (authorized by authorization), marker bound, seal + test, token switched,
 * old keyslot destroyed, marker removed. expected_policy (or NULL): the policy
 * the new seal must have, checked before anything is switched.
 */
static int move_to_new_keyslot_steps(tg_lifecycle *lc, const char *operation, const tg_secret *authorization,
                                     const tg_seal_params *params, bool test, const TPM2B_DIGEST *expected_policy,
                                     tg_lifecycle_result *ret) {
        _cleanup_secret_ tg_secret *secret = NULL;
        _cleanup_free_ char *token_json = NULL;
        tg_keyslot_change change;
        tg_token t = {};
        int new_keyslot, r;

        new_keyslot = tg_luks_keyslot_free(lc->cd, lc->device);
        if (new_keyslot < 0)
                return log_error_rc(new_keyslot, "The new secret needs a free keyslot: remove a keyslot %s no "
                                    "longer needs ('cryptsetup luksDump %s' lists them). Nothing was changed.",
                                    lc->device, lc->device);
        r = tg_keyslot_secret_new(&secret);
        if (r < 0)
                return r;
        r = tg_luks_use_minimal_pbkdf(lc->cd);
        if (r < 0)
                return r;

        /* 1, 2. The marker, signed, before anything it describes exists; the new keyslot, and the marker bound to it. */
        r = tg_keyslot_change_begin(lc->state_dir, lc->cd, lc->device, &(tg_keyslot_change_params) {
                                            .operation = operation,
                                            .token = lc->token_id,
                                            .old_keyslot = lc->token.keyslot,
                                            .new_keyslot = new_keyslot,
                                            .marker_id = CRYPT_ANY_TOKEN,
                                            .authorization = authorization,
                                            .secret = secret,
                                            .interrupt_step = "after adding the new keyslot",
                                            .eperm_is_wrong_passphrase = true,
                                    }, &change);
        if (r < 0)
                return r;

        /* 3. Seal, test, and prove the keyslot. */
        r = tg_lifecycle_seal_and_test(lc, params, secret, new_keyslot, test, &t);
        if (r < 0)
                goto undo;
        /* The PCR values read for the new seal are not the ones the unseal just proved (an extend in
         * between, or a bus that lies about them): the token would follow them. */
        if (expected_policy && (t.policy_hash.size != expected_policy->size ||
                                memcmp(t.policy_hash.buffer, expected_policy->buffer, expected_policy->size) != 0)) {
                r = log_error_rc(-TG_ERR_PCR_MISMATCH, "The PCR values changed while the new seal was made. Try again.");
                goto undo;
        }
        r = tg_interrupt_check("after sealing");
        if (r < 0)
                goto undo;
        r = crypt_activate_by_passphrase(lc->cd, NULL, new_keyslot, (const char *) secret->data, secret->size, 0);
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "The new keyslot %d does not open: %s", new_keyslot, strerror(-r));
                goto undo;
        }
        tg_keyslot_own(lc->state_dir, lc->cd, new_keyslot);

        /* 4. The switch: one write. From here on the new secret is the one. */
        r = tg_token_to_string(&t, &token_json);
        explicit_bzero(&t, sizeof t);
        if (r < 0)
                goto undo;
        r = crypt_token_json_set(lc->cd, lc->token_id, token_json);
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot switch token %d to keyslot %d: %s",
                                 lc->token_id, new_keyslot, strerror(-r));
                goto undo;
        }
        tg_fault_point("after-token-switch");

        /* 5. Old keyslot and marker: the same code a later run uses after a crash. */
        r = tg_keyslot_change_commit(&change, lc->proven_keyslot);
        if (r < 0)
                return log_error_rc(r, "Token %d now uses keyslot %d, but the old keyslot %d is left over; "
                                    "run 'tpmguard cleanup %s'.", lc->token_id, new_keyslot, change.marker.old_keyslot,
                                    lc->device);
        /* Kept (shared with another token, or not provably ours; the resolve said why): the old secret,
         * and so every saved copy of the old token, still opens the volume through it. */
        if (tg_luks_keyslot_active(lc->cd, change.marker.old_keyslot))
                log_warning("Keyslot %d, which the old secret opens, was kept: copies of token %d as it was before "
                            "still open %s until that keyslot is gone ('cryptsetup luksKillSlot %s %d' once nothing "
                            "else needs it).", change.marker.old_keyslot, lc->token_id, lc->device, lc->device,
                            change.marker.old_keyslot);
        *ret = (tg_lifecycle_result) { .token = lc->token_id, .keyslot = new_keyslot,
                                       .old_keyslot = change.marker.old_keyslot };
        return 0;

undo:
        explicit_bzero(&t, sizeof t);
        tg_keyslot_change_undo(&change);
        return r;
}

/* SIGINT/SIGTERM/SIGHUP in between: undone at the next step (lib/interrupt.h). */
static int move_to_new_keyslot(tg_lifecycle *lc, const char *operation, const tg_secret *authorization,
                               const tg_seal_params *params, bool test, const TPM2B_DIGEST *expected_policy,
                               tg_lifecycle_result *ret) {
        int r;

        tg_interrupt_begin();
        r = move_to_new_keyslot_steps(lc, operation, authorization, params, test, expected_policy, ret);
        if (tg_interrupt_end() != 0 && r >= 0)
                log_notice("Interrupted after the change was complete: it is kept.");
        return r;
}

/* ---- the operations ---- */

/*
 * A token that held update seals ('update prepare') loses them: they hold the old secret, which the
 * old keyslot alone accepts. Said, so the update is prepared again before the reboot into it.
 */
static void alternates_dropped_notice(const tg_lifecycle *lc, const char *operation) {
        if (lc->token.n_alt > 0)
                log_notice("Token %d held an update seal of 'tpmguard update prepare'; it holds the old secret, so "
                           "%s dropped it. Before rebooting into the update, run 'tpmguard update prepare %s' again.",
                           lc->token_id, operation, lc->device);
}

/*
 * A new secret in a new keyslot, always (rotate's crash-safe keyslot change), never the same
 * secret under a new PIN. Threat: the header is plaintext, so whoever learnt the old PIN may
 * have copied the token; were the secret kept, writing that copy back would open the volume
 * with the old PIN after the owner changed it. The old keyslot, which every old copy opens, is
 * destroyed once the new one is proven. No case keeps the secret: a no-PIN token's old copy
 * opens with no PIN at all (worse after a PIN is added), and removing the PIN gains nothing by
 * keeping it; a keyslot another token shares is kept by the keyslot change, which says so.
 * The marker's operation is "rotate": the same transaction, readable by every version.
 */
int tg_change_pin(const tg_config *config, const char *device, int token,
                  const tg_secret *pin, const tg_secret *new_pin, tg_lifecycle_result *ret) {
        _cleanup_(tg_lifecycle_done) tg_lifecycle lc = {};
        _cleanup_secret_ tg_secret *secret = NULL;
        tg_seal_params params;
        tg_lifecycle_result res;
        TPM2B_DIGEST expected;
        bool check_policy;
        int r;

        r = tg_lifecycle_begin(&lc, config, device, token, true);
        if (r < 0)
                return r;
        r = tg_lifecycle_check_carry_over(&lc, config, "change-pin");
        if (r < 0)
                return r;
        r = tg_lifecycle_unseal_current(&lc, pin, &secret);
        if (r < 0)
                return r;

        /* The unseal proved the current PCR values satisfy the policy, so sealing to them keeps it:
         * with the PIN kept or changed (not added or removed), the new seal has the old policy. */
        params = tg_lifecycle_seal_params_like(&lc.token, new_pin, config);
        check_policy = lc.token.pin == (new_pin != NULL) && !tg_token_exposed_to_leaking_tpm(&lc.token);
        expected = lc.token.policy_hash;
        if (tg_token_exposed_to_leaking_tpm(&lc.token) && new_pin)
                /* Format 1 → 2 (docs/token-format.md): the old blob was sealed unmasked. */
                log_info("Token %d is format 1: moving it to a new secret in a new keyslot (format 2).", lc.token_id);
        r = move_to_new_keyslot(&lc, "rotate", secret, &params, true, check_policy ? &expected : NULL, &res);
        explicit_bzero(&expected, sizeof expected);
        if (r < 0)
                return r;
        alternates_dropped_notice(&lc, "change-pin");
        if (ret)
                *ret = res;
        return 0;
}

int tg_rotate(const tg_config *config, const char *device, int token, const tg_secret *pin, tg_lifecycle_result *ret) {
        _cleanup_(tg_lifecycle_done) tg_lifecycle lc = {};
        _cleanup_secret_ tg_secret *secret = NULL;
        tg_seal_params params;
        tg_lifecycle_result res;
        int r;

        r = tg_lifecycle_begin(&lc, config, device, token, true);
        if (r < 0)
                return r;
        r = tg_lifecycle_check_carry_over(&lc, config, "rotate");
        if (r < 0)
                return r;
        r = tg_lifecycle_unseal_current(&lc, pin, &secret);
        if (r < 0)
                return r;
        params = tg_lifecycle_seal_params_like(&lc.token, lc.token.pin ? pin : NULL, config);
        r = move_to_new_keyslot(&lc, "rotate", secret, &params, true, NULL, &res);
        if (r < 0)
                return r;
        if (ret)
                *ret = res;
        return 0;
}

int tg_reseal(const tg_config *config, const char *device, int token,
              const tg_reseal_params *p, tg_lifecycle_result *ret) {
        _cleanup_(tg_lifecycle_done) tg_lifecycle lc = {};
        _cleanup_secret_ tg_secret *secret = NULL;
        tg_seal_params params;
        tg_lifecycle_result res;
        bool test;
        int r;

        r = tg_lifecycle_begin(&lc, config, device, token, false);
        if (r < 0)
                return r;
        if (lc.token.pin && !p->pin && !p->unlock_passphrase)
                return log_error_rc(-TG_ERR_PIN_NEEDED, "Token %d needs a PIN.", lc.token_id);

        /* The new policy is the caller's (command line or tpmguard.conf), never
         * the old token's: its fields come from an attacker-writable header,
         * and following a "PCR mismatch" hint must not re-enrol the volume
         * under a policy an attacker wrote there (docs/design.md §9.1). */
        assert(p->pcr_bank != 0);
        params = (tg_seal_params) { .pcr_bank = p->pcr_bank, .pcr_mask = p->pcr_mask, .pin = p->new_pin,
                                    .allow_unextended = p->allow_unextended,
                                    .argon2 = { .memory_kib = config->pin_kdf_memory * 1024u },
                                    .argon2_target_ms = config->pin_kdf_time_ms };
        if (p->explicit_values) {
                if (p->explicit_values->bank != params.pcr_bank)
                        return log_error_rc(-TG_ERR_INVALID, "--pcr values are for the %s bank, the new policy uses %s.",
                                            tg_pcr_bank_to_string(p->explicit_values->bank),
                                            tg_pcr_bank_to_string(params.pcr_bank));
                if (p->explicit_values->given_mask & ~params.pcr_mask)
                        return log_error_rc(-TG_ERR_INVALID, "--pcr gives a value for a PCR the policy does not select.");
                params.explicit_values = p->explicit_values;
        }
        test = !p->explicit_values;
        if (!test)
                log_warning("Sealing to given PCR values: the new seal cannot be test-unsealed until they are "
                            "current. The recovery passphrase keeps working.");

        if (p->unlock_passphrase) {
                /* The old secret may be unsealable (PCRs changed): a new secret in a new keyslot. */
                r = crypt_activate_by_passphrase(lc.cd, NULL, CRYPT_ANY_SLOT, (const char *) p->unlock_passphrase->data,
                                                 p->unlock_passphrase->size, 0);
                if (r < 0)
                        return log_error_rc(-TG_ERR_BAD_PIN, "No keyslot of %s opens with the given passphrase: "
                                            "nothing was changed.", device);
                r = move_to_new_keyslot(&lc, "reseal", p->unlock_passphrase, &params, test, NULL, &res);
                if (r < 0)
                        return r;
        } else {
                r = tg_lifecycle_unseal_current(&lc, p->pin, &secret);
                if (r == -TG_ERR_PCR_MISMATCH)
                        return log_error_rc(r, "The current PCR values no longer unseal token %d. Authorize the "
                                            "reseal with the recovery passphrase: --unlock-key-file F.", lc.token_id);
                if (r < 0)
                        return r;
                /*
                 * A new secret in a new keyslot, as change-pin. Threat: a saved copy of the token
                 * sealed to the PCR values before (a rollback to the old boot chain) or to the old
                 * PIN; were the secret kept, writing it back would open the volume in that state.
                 * Format 1 tokens move for the same reason (the old, unmasked blob opens nothing).
                 */
                if (tg_token_exposed_to_leaking_tpm(&lc.token) && params.pin)
                        log_info("Token %d is format 1: moving it to a new secret in a new keyslot (format 2).",
                                 lc.token_id);
                r = move_to_new_keyslot(&lc, "reseal", secret, &params, test, NULL, &res);
                if (r < 0)
                        return r;
        }
        alternates_dropped_notice(&lc, "reseal");
        if (ret)
                *ret = res;
        return 0;
}

int tg_remove(const tg_config *config, const char *device, int token, tg_lifecycle_result *ret) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        tg_token t;
        bool valid;
        int id, r;

        r = tg_luks_open_writable(device, &cd);
        if (r < 0)
                return r;
        r = tg_pending_markers_resolve_all(config->state_dir, cd, device, NULL);
        if (r < 0)
                return r;
        r = tg_lifecycle_select_token(cd, device, token, true, &id, &t, &valid);
        if (r < 0)
                return r;
        if (!valid)
                log_warning("Token %d is malformed; removing the token only.", id);

        if (tg_luks_keyslot_active(cd, t.keyslot)) {
                if (tg_luks_keyslot_referenced(cd, t.keyslot, id))
                        log_notice("Keyslot %d is also used by another token; keeping it.", t.keyslot);
                /* The keyslot number is the header's word, which an attacker writes: a token edited to
                 * name the recovery passphrase's keyslot must not make 'remove' destroy it. Ours only
                 * when tpmguard recorded it as its own (keyslot-owner.h); not by its PBKDF, which
                 * systemd-cryptenroll's recovery keys share with tpmguard's keyslots. */
                else if (!tg_keyslot_owned(config->state_dir, cd, t.keyslot))
                        log_warning("Keeping keyslot %d: it is not a keyslot tpmguard recorded as its own, so it may "
                                    "be a passphrase's or a recovery key's (an edited token can name any keyslot). If "
                                    "it is not, remove it with 'cryptsetup luksKillSlot %s %d'.", t.keyslot, device,
                                    t.keyslot);
                else if (crypt_keyslot_status(cd, t.keyslot) == CRYPT_SLOT_ACTIVE_LAST)
                        return log_error_rc(-TG_ERR_INVALID, "Keyslot %d of token %d is the last keyslot of %s: removing "
                                            "it would leave no way to open the volume. Add a recovery passphrase "
                                            "first ('cryptsetup luksAddKey %s'). Nothing was changed.",
                                            t.keyslot, id, device, device);
                else {
                        /* Keyslot first: libcryptsetup unassigns it from the token in the same write. */
                        r = tg_luks_keyslot_destroy(cd, t.keyslot);
                        if (r < 0)
                                return r;
                        tg_fault_point("after-keyslot-destroy");
                }
        }
        r = tg_luks_token_remove(cd, id);
        if (r < 0)
                return r;
        tg_fault_point("after-token-remove");
        if (ret)
                *ret = (tg_lifecycle_result) { .token = id, .keyslot = -1, .old_keyslot = t.keyslot };
        explicit_bzero(&t, sizeof t);
        return 0;
}

int tg_update_prepare(const tg_config *config, const char *device, int token, const tg_update_params *p,
                      tg_update_result *ret) {
        _cleanup_(tg_lifecycle_done) tg_lifecycle lc = {};
        _cleanup_secret_ tg_secret *secret = NULL;
        tg_seal_params params;
        tg_token_alt alt = {};
        tg_token t = {}, next;
        tg_tpm_counters counters = {};
        _cleanup_(tg_update_record_done) tg_update_record record = {};
        uint32_t changing = 0;
        bool test = true;
        int r;

        r = tg_lifecycle_begin(&lc, config, device, token, true);
        if (r < 0)
                return r;
        if (!lc.token.pin || lc.token.version < 2 || lc.token.pcr_mask == 0)
                return log_error_rc(-TG_ERR_INVALID, "Token %d %s: an update seal needs a format 2 PIN token sealed "
                                    "to PCRs. Nothing was changed.", lc.token_id,
                                    !lc.token.pin ? "has no PIN" : lc.token.pcr_mask == 0 ? "is sealed to no PCR" :
                                    "is format 1 ('tpmguard change-pin' upgrades it)");
        r = tg_lifecycle_check_carry_over(&lc, config, "update prepare");
        if (r < 0)
                return r;
        /*
         * The PIN proven by the main seal, over the verified session. It also proves the token's
         * pin_kdf parameters, which the update seal reuses: parameters edited in the header would
         * not give the authValue the main seal was made with.
         */
        r = tg_lifecycle_unseal_current(&lc, p->pin, &secret);
        if (r == -TG_ERR_PCR_MISMATCH)
                return log_error_rc(r, "The PCR values changed already: %s",
                                    lc.token.n_alt > 0 ? "run 'tpmguard update finish' to bind the token to them." :
                                    "'tpmguard reseal' (with the recovery passphrase) binds the token to them.");
        if (r < 0)
                return r;

        params = tg_lifecycle_seal_params_like(&lc.token, p->pin, config);
        params.pin_of = &lc.token;
        if (p->predicted) {
                if (p->predicted->bank != lc.token.pcr_bank)
                        return log_error_rc(-TG_ERR_INVALID, "--pcr values are for the %s bank, token %d uses %s. "
                                            "Nothing was changed.", tg_pcr_bank_to_string(p->predicted->bank),
                                            lc.token_id, tg_pcr_bank_to_string(lc.token.pcr_bank));
                if (p->predicted->given_mask & ~lc.token.pcr_mask)
                        return log_error_rc(-TG_ERR_INVALID, "--pcr gives a value for a PCR token %d is not sealed "
                                            "to. Nothing was changed.", lc.token_id);
                /* A predicted value still at a reset value (all zeros or ones) predicts no boot chain. */
                if (!config->allow_unextended_pcrs) {
                        r = tg_pcr_values_check_extended(p->predicted, p->predicted->given_mask);
                        if (r < 0)
                                return r;
                }
                params.explicit_values = p->predicted;
                /* The predicted values are not current: the seal cannot be test-unsealed now. */
                test = false;
        } else {
                if (p->boots < 1 || p->boots > TG_GRACE_BOOTS_MAX)
                        return log_error_rc(-TG_ERR_INVALID, "--boots %u: 1..%u.", p->boots, TG_GRACE_BOOTS_MAX);
                /* Read over the audited session: a resetCount lowered on the bus would stretch the grace. */
                r = tg_vtpm_counters(lc.v, &counters);
                if (r < 0)
                        return r;
                if (counters.reset_count > UINT32_MAX - p->boots)
                        return log_error_rc(-TG_ERR_TPM, "The TPM's resetCount %" PRIu32 " leaves no room for a "
                                            "grace. Nothing was changed.", counters.reset_count);
                params.grace = true;
                params.reset_count_max = counters.reset_count + p->boots;
                changing = p->changing ? p->changing : lc.token.pcr_mask;
                if (changing & ~lc.token.pcr_mask)
                        return log_error_rc(-TG_ERR_INVALID, "--changing names a PCR token %d is not sealed to. "
                                            "Nothing was changed.", lc.token_id);
                /* What finish may bind to, recorded before the grace exists (update-record.h). */
                r = tg_update_record_take(lc.v, p->event_log, lc.token.pcr_bank, lc.token.pcr_mask, changing,
                                          &record);
                if (r < 0)
                        return log_error_rc(r, "Nothing was changed.");
                r = tg_update_record_write(config->state_dir, crypt_get_uuid(lc.cd), &record);
                if (r < 0)
                        return log_error_rc(r, "Nothing was changed.");
                /* The grace keeps the PCRs the update does not change: a kernel update's grace still
                 * binds PCR 7, so an evil maid's Secure Boot change does not open it (review10 H1). */
                params.pcr_mask = lc.token.pcr_mask & ~changing;
                /* The grace opens only at restartCount 0, which the test unseal below needs now. */
                if (counters.restart_count != 0)
                        test = false;
        }
        r = tg_lifecycle_seal_and_test(&lc, &params, secret, lc.token.keyslot, test, &t);
        if (r < 0)
                return log_error_rc(r, "Nothing was changed.");

        alt = (tg_token_alt) {
                .kind = p->predicted ? TG_ALT_PREDICTED : TG_ALT_GRACE,
                .private_blob = t.private_blob,
                .public_blob = t.public_blob,
                .policy_hash = t.policy_hash,
                .reset_count_max = t.reset_count_max,
                .pcr_mask = p->predicted ? 0 : t.pcr_mask,
                .pcr_digest = t.pcr_digest,
        };
        explicit_bzero(&t, sizeof t);
        next = lc.token;
        r = tg_token_alt_put(&next, &alt);
        /* The new token is read back by tg_token_to_json(), which recomputes the seal's policy from
         * its fields: a Create whose template an interposer widened is refused here. */
        if (r >= 0)
                r = tg_lifecycle_replace_token(&lc, &next);
        explicit_bzero(&next, sizeof next);
        if (r < 0)
                return log_error_rc(r, "Nothing was changed.");
        if (ret)
                *ret = (tg_update_result) { .token = lc.token_id, .kind = alt.kind,
                                            .reset_count = counters.reset_count, .changing = changing,
                                            .secure_boot_recorded = record.have_sb,
                                            .reset_count_max = alt.reset_count_max };
        return 0;
}

/*
 * Over the grace: this boot against what 'update prepare' recorded (update-record.h), before
 * anything is unsealed or rebound. Threat: an evil maid's chain booted during the grace (Secure
 * Boot off, her own PK, KEK or db, a rolled-back dbx, DMA protection off, a boot loader verified
 * by another shim's certificate); finish, run unattended by tpmguard-update-finish.service,
 * would otherwise seal the token to it for good.
 */
static int grace_change_check(tg_lifecycle *lc, const tg_config *config, const tg_update_finish_options *o) {
        _cleanup_free_ char *diff = NULL;
        _cleanup_(tg_update_record_done) tg_update_record prepared = {}, now = {};
        int r;

        r = tg_update_record_read(config->state_dir, crypt_get_uuid(lc->cd), &prepared);
        if (r == -TG_ERR_NOT_FOUND) {
                diff = strdup("there is no record of what 'update prepare' allowed to change (it is written "
                              "under state_dir/update-prepared/ when the grace is made)");
                if (!diff)
                        return -TG_ERR_NOMEM;
        } else if (r < 0)
                return r;
        else {
                r = tg_update_record_take(lc->v, o ? o->event_log : NULL, lc->token.pcr_bank, lc->token.pcr_mask, 0,
                                          &now);
                if (r < 0)
                        return r;
                r = tg_update_record_compare(&prepared, &now, &diff);
                if (r < 0 && r != -TG_ERR_PCR_MISMATCH)
                        return r;
        }
        if (!diff)
                return 0;
        if (o && o->accept_change) {
                log_warning("Token %d: this boot is not what 'update prepare' prepared for: %s. Accepted "
                            "(--accept-change): binding the token to it.", lc->token_id, diff);
                return 0;
        }
        return log_error_rc(-TG_ERR_PCR_MISMATCH,
                            "Not binding token %d to this boot: it opened with the update grace, but this boot is "
                            "not what 'update prepare' prepared for: %s. If you did not update firmware or the boot "
                            "chain in this way, suspect tampering: run 'tpmguard pcrs' to see which events changed, "
                            "and do not type your PIN at boot until you know. Nothing was changed. If you made the "
                            "change yourself, 'tpmguard update finish --accept-change %s' at a terminal binds the "
                            "token to it.", lc->token_id, diff, lc->device);
}

int tg_update_finish(const tg_config *config, const char *device, int token, const tg_secret *pin,
                     const tg_update_finish_options *o, bool *ret_nothing, tg_lifecycle_result *ret) {
        _cleanup_(tg_lifecycle_done) tg_lifecycle lc = {};
        _cleanup_secret_ tg_secret *secret = NULL;
        tg_seal_params params;
        tg_lifecycle_result res;
        tg_alt_kind kind = 0;
        bool usable = false;
        tg_token seal;
        int r;

        r = tg_lifecycle_begin(&lc, config, device, token, true);
        if (r < 0)
                return r;
        /* Which seal opens now: from PCR values and the resetCount read over the audited session. */
        r = tg_unlock_choose_seal(lc.v, &lc.token, &seal, &kind, &usable, NULL);
        if (r < 0)
                return r;
        if (kind == 0 && usable && lc.token.n_alt == 0) {
                explicit_bzero(&seal, sizeof seal);
                log_info("Token %d has no update seal and its PCR policy holds: nothing to finish.", lc.token_id);
                if (ret_nothing)
                        *ret_nothing = true;
                return 0;
        }
        if (!usable) {
                explicit_bzero(&seal, sizeof seal);
                return log_error_rc(-TG_ERR_PCR_MISMATCH, "No seal of token %d opens with this boot's PCR values%s. "
                                    "Unlock with the recovery passphrase and run 'tpmguard reseal %s'. Nothing was "
                                    "changed.", lc.token_id,
                                    tg_token_alt_find(&lc.token, TG_ALT_GRACE) ? " (the update grace has expired)" : "",
                                    device);
        }
        r = tg_lifecycle_check_carry_over(&lc, config, "update finish");
        if (r < 0)
                return r;
        if (kind == TG_ALT_GRACE) {
                r = grace_change_check(&lc, config, o);
                if (r < 0) {
                        explicit_bzero(&seal, sizeof seal);
                        return r;
                }
        }
        if (lc.token.pin && !pin)
                return log_error_rc(-TG_ERR_PIN_NEEDED, "Token %d needs its PIN.", lc.token_id);
        r = tg_unseal(lc.v, &seal, pin, &secret);
        explicit_bzero(&seal, sizeof seal);
        if (r < 0)
                return log_error_rc(r, "Cannot unseal token %d: nothing was changed.", lc.token_id);
        r = crypt_activate_by_passphrase(lc.cd, NULL, lc.token.keyslot, (const char *) secret->data, secret->size, 0);
        if (r < 0)
                return log_error_rc(-TG_ERR_TOKEN, "The secret of token %d does not open its keyslot %d (%s): "
                                    "nothing was changed.", lc.token_id, lc.token.keyslot, strerror(-r));
        lc.proven_keyslot = lc.token.keyslot;
        tg_keyslot_own(lc.state_dir, lc.cd, lc.token.keyslot);
        if (kind != 0)
                log_info("Token %d opened with its %s seal; binding it to this boot's PCR values.", lc.token_id,
                         kind == TG_ALT_GRACE ? "update grace" : "predicted update");

        /*
         * Rotate: a new secret sealed to the PCR values read now over the verified session (never
         * values from the header or the bus unauthenticated), without update seals. The old
         * blobs, main and alternates, in every copy of the header, hold a secret no keyslot
         * accepts once the old keyslot is destroyed.
         */
        params = tg_lifecycle_seal_params_like(&lc.token, lc.token.pin ? pin : NULL, config);
        r = move_to_new_keyslot(&lc, "rotate", secret, &params, true, NULL, &res);
        if (r < 0)
                return r;
        tg_update_record_remove(config->state_dir, crypt_get_uuid(lc.cd));
        if (ret_nothing)
                *ret_nothing = false;
        if (ret)
                *ret = res;
        return 0;
}
