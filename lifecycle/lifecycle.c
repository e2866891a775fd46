/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Lifecycle commands: change-pin, rotate, reseal, remove, cleanup (status
 * reporting is the CLI's: cli/status.c).
 *
 * Threat model: as for enrollment. The bus is hostile, so every secret (the
 * old keyslot secret coming out of Unseal, the new one going into Create,
 * the PIN-derived authValues) crosses it only in the salted, parameter-
 * encrypted sessions of a tg_verified_tpm; nothing here talks to the TPM
 * about a secret any other way. The LUKS2 header is attacker-editable, so
 * nothing read from it (tokens, pending markers) can weaken verification,
 * and a pending marker directs the destruction of a keyslot only when it
 * carries this machine's MAC (lifecycle/marker-auth.c): a planted or edited
 * marker is removed and nothing else is touched. Even an authentic marker
 * never makes us destroy a keyslot that a token still references, nor the
 * last one.
 *
 * Crash model: the process may die after any header write and after any
 * TPM command (power loss, kill). libcryptsetup commits a header change as
 * one write of the JSON area with a new sequence number (two copies, the
 * newer valid one wins on load), so each crypt_* call below is atomic.
 * Ordering does the rest:
 *   - same keyslot (change-pin, reseal by unsealing): the new token replaces
 *     the old one in a single crypt_token_json_set() on the same token id;
 *     before it the old credential works, after it the new one does;
 *   - new keyslot (rotate, reseal by passphrase): marker token written,
 *     keyslot added, marker bound to it, seal and test, token switched to
 *     the new keyslot in one write, old keyslot destroyed, marker removed.
 *     Until the switch the old token and keyslot are untouched; from the
 *     switch on the new ones work. The marker tells a later run which of the
 *     two keyslots is left over (lifecycle.h).
 *   - remove: keyslot destroyed first (libcryptsetup unassigns it from the
 *     token in the same write), then the token; a leftover token with no
 *     keyslot is harmless, shown by status and removed by a rerun.
 * Every operation starts by resolving markers, so rerunning any command
 * after a crash completes or undoes the interrupted one first.
 */
#include <assert.h>
#include <errno.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "error.h"
#include "fault.h"
#include "interrupt.h"
#include "json-util.h"
#include "keyslot-owner.h"
#include "lifecycle.h"
#include "log.h"
#include "luks.h"
#include "marker-auth.h"
#include "nullname.h"
#include "pending-marker.h"
#include "pinned.h"
#include "policy.h"
#include "recovery.h"
#include "token.h"
#include "tpm.h"
#include "util.h"
#include "verify.h"

/*
 * Selects the tpmguard token: the requested id, or the only one. With
 * allow_invalid a malformed token is selected too (*ret_valid false), for
 * remove.
 */
static int select_token(struct crypt_device *cd, const char *device, int requested, bool allow_invalid,
                        int *ret_id, tg_token *ret, bool *ret_valid) {
        char list[512] = "";
        int ids[64], n = 0, r;
        tg_token t;

        if (requested != CRYPT_ANY_TOKEN) {
                if (requested < 0 || requested >= tg_luks_tokens_max() || !tg_luks_token_has_type(cd, requested, TG_TOKEN_TYPE))
                        return log_error_rc(-TG_ERR_NOT_FOUND, "Token %d of %s is not a tpmguard token.", requested, device);
                ids[n++] = requested;
        } else
                for (int id = 0; id < tg_luks_tokens_max() && n < (int) ELEMENTSOF(ids); id++)
                        if (tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE))
                                ids[n++] = id;

        if (n == 0)
                return log_error_rc(-TG_ERR_NOT_FOUND, "%s has no tpmguard token. Enroll one with 'tpmguard enroll %s'.",
                                    device, device);
        if (n > 1) {
                for (int i = 0; i < n; i++) {
                        size_t len = strlen(list);
                        const char *json = NULL;
                        _cleanup_json_ json_object *o = NULL;
                        json_object *arr;
                        const char *slot = "none";

                        if (crypt_token_json_get(cd, ids[i], &json) >= 0 && json && (o = json_tokener_parse(json)) &&
                            json_object_object_get_ex(o, "keyslots", &arr) && json_object_array_length(arr) > 0)
                                slot = json_object_get_string(json_object_array_get_idx(arr, 0));
                        snprintf(list + len, sizeof list - len, "%stoken %d (keyslot %s)", i ? ", " : "", ids[i],
                                 slot ?: "?");
                }
                return log_error_rc(-TG_ERR_INVALID, "%s has %d tpmguard tokens: %s. Choose one with --token N.",
                                    device, n, list);
        }

        r = tg_luks_token_load(cd, ids[0], &t);
        if (r < 0 && !allow_invalid)
                return log_error_rc(r, "Token %d of %s is malformed; remove it with 'tpmguard remove --token %d %s'.",
                                    ids[0], device, ids[0], device);
        if (r < 0)
                t = (tg_token) { .keyslot = -1 };
        *ret_id = ids[0];
        *ret = t;
        if (ret_valid)
                *ret_valid = r >= 0;
        explicit_bzero(&t, sizeof t);
        return 0;
}


/* ---- shared steps ---- */

typedef struct lifecycle {
        const char *device;
        const char *state_dir;  /* where the marker key is */
        struct crypt_device *cd;
        tg_verified_tpm *v;
        tg_verify_report report;
        int token_id;
        tg_token token;
        int proven_keyslot;     /* the token's keyslot once this run's unseal opened it, else -1 */
} lifecycle;

static void lifecycle_done(lifecycle *lc) {
        tg_verified_tpm_free(lc->v);
        crypt_free(lc->cd);
        explicit_bzero(&lc->token, sizeof lc->token);
}

/* Opens the volume, resolves interrupted operations, selects the token and verifies the TPM. */
/*
 * unseal_next: the caller unseals the token right after (change-pin, rotate, a PIN-authorized
 * passphrase change). Its Unseal then reads the DA state for free: in lockout the TPM refuses it
 * with TPM_RC_LOCKOUT before checking anything (so no try is spent and nothing was changed), and
 * tg_unseal() reports -TG_ERR_LOCKOUT; the GetCapability here is skipped (issue 18).
 */
static int lifecycle_begin(lifecycle *lc, const tg_config *config, const char *device, int token, bool unseal_next) {
        tg_da_state da;
        int r;

        *lc = (lifecycle) { .device = device, .state_dir = config->state_dir, .proven_keyslot = -1 };
        r = tg_luks_open(device, &lc->cd);
        if (r < 0)
                return r;
        r = tg_pending_markers_resolve_all(lc->state_dir, lc->cd, device, NULL);
        if (r < 0)
                return r;
        r = select_token(lc->cd, device, token, false, &lc->token_id, &lc->token, NULL);
        if (r < 0)
                return r;
        if (!tg_luks_keyslot_active(lc->cd, lc->token.keyslot))
                return log_error_rc(-TG_ERR_TOKEN, "Token %d of %s has no keyslot (left over from an interrupted "
                                    "removal?). Run 'tpmguard cleanup %s'.", lc->token_id, device, device);

        r = tg_verify(config, NULL, &lc->report, &lc->v);
        if (r < 0)
                return r;
        if (unseal_next)
                return 0;
        r = tg_tpm_da_state(tg_vtpm_esys(lc->v), &da);
        if (r < 0)
                return r;
        /* Only a PIN-protected (DA) object is refused in lockout; a no-PIN seal is noDA. */
        if (da.in_lockout && lc->token.pin)
                return log_error_rc(-TG_ERR_LOCKOUT, "The TPM is in dictionary-attack lockout: nothing was changed. "
                                    "One failure is forgiven every %u s (full lockout recovery %u s).",
                                    da.recovery_seconds, da.lockout_recovery_seconds);
        return 0;
}

/* The current secret, unsealed over the verified session and proven against its keyslot. */
static int unseal_current(lifecycle *lc, const tg_secret *pin, tg_secret **ret) {
        _cleanup_secret_ tg_secret *secret = NULL;
        int r;

        if (lc->token.pin && !pin)
                return log_error_rc(-TG_ERR_PIN_NEEDED, "Token %d needs its current PIN.", lc->token_id);
        r = tg_unseal(lc->v, &lc->token, lc->token.pin ? pin : NULL, &secret);
        if (r < 0)
                return log_error_rc(r, "Cannot unseal token %d: nothing was changed.", lc->token_id);
        r = crypt_activate_by_passphrase(lc->cd, NULL, lc->token.keyslot, (const char *) secret->data, secret->size, 0);
        if (r < 0)
                return log_error_rc(-TG_ERR_TOKEN, "The secret of token %d does not open its keyslot %d (%s): "
                                    "nothing was changed.", lc->token_id, lc->token.keyslot, strerror(-r));
        lc->proven_keyslot = lc->token.keyslot;
        /* Proven ours (also for a keyslot enrolled before tpmguard recorded its keyslots). */
        tg_keyslot_own(lc->state_dir, lc->cd, lc->token.keyslot);
        *ret = TAKE_PTR(secret);
        return 0;
}

/* Seals secret with params for keyslot, and proves it by unsealing it again (when test). */
static int seal_and_test(lifecycle *lc, const tg_seal_params *params, const tg_secret *secret, int keyslot,
                         bool test, tg_token *ret) {
        _cleanup_secret_ tg_secret *check = NULL;
        _cleanup_handle_ tg_handle object = TG_HANDLE_NULL;
        tg_token t;
        int r;

        /* With a test: the sealed object stays loaded for it (CreateLoaded, no Load). */
        r = tg_seal_loaded(lc->v, params, secret, &t, test ? &object : NULL);
        if (r < 0)
                return r;
        t.keyslot = keyslot;
        t.ek_signing_key_name = lc->report.ek_signing_key_name;
        if (test) {
                r = tg_unseal_loaded(lc->v, &t, params->pin, &object, &check);
                if (r < 0) {
                        explicit_bzero(&t, sizeof t);
                        return log_error_rc(r, "The test unseal of the new seal failed.");
                }
                if (check->size != secret->size || !memeq_const(check->data, secret->data, secret->size)) {
                        explicit_bzero(&t, sizeof t);
                        return log_alert_rc(-TG_ERR_INTERPOSER, "The test unseal returned a different secret.");
                }
        }
        *ret = t;
        explicit_bzero(&t, sizeof t);
        return 0;
}

/* Same keyslot: the new token replaces the old one in one header write. */
static int replace_token(lifecycle *lc, const tg_token *t) {
        _cleanup_free_ char *json = NULL;
        int r;

        r = tg_token_to_string(t, &json);
        if (r < 0)
                return r;
        /* One write, old or new credential: a signal waits until it is done. */
        tg_interrupt_begin();
        r = tg_interrupt_check("before replacing the token");
        if (r >= 0) {
                r = crypt_token_json_set(lc->cd, lc->token_id, json);
                if (r < 0)
                        r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot replace token %d: %s. Nothing was changed.",
                                         lc->token_id, strerror(-r));
        }
        if (tg_interrupt_end() != 0 && r >= 0)
                log_notice("Interrupted after the change was complete: it is kept.");
        if (r < 0)
                return r;
        tg_fault_point("after-token-replace");
        return 0;
}

static int free_keyslot(struct crypt_device *cd, const char *device) {
        for (int k = 0; k < tg_luks_keyslots_max(); k++)
                if (crypt_keyslot_status(cd, k) == CRYPT_SLOT_INACTIVE && !tg_luks_keyslot_referenced(cd, k, -1))
                        return k;
        return log_error_rc(-TG_ERR_CRYPTSETUP, "%s has no free keyslot.", device);
}

/*
 * New keyslot: marker, keyslot (authorized by authorization), marker bound,
 * seal + test, token switched, old keyslot destroyed, marker removed.
 */
static int move_to_new_keyslot_steps(lifecycle *lc, const char *operation, const tg_secret *authorization,
                                     const tg_seal_params *params, bool test, tg_lifecycle_result *ret) {
        _cleanup_secret_ tg_secret *secret = NULL;
        _cleanup_free_ char *marker_json = NULL, *token_json = NULL;
        tg_pending_marker m = { .token = lc->token_id, .old_keyslot = lc->token.keyslot, .bound_keyslot = -1 };
        tg_token t = {};
        int marker_id, new_keyslot, r, q;

        new_keyslot = free_keyslot(lc->cd, lc->device);
        if (new_keyslot < 0)
                return new_keyslot;
        m.new_keyslot = new_keyslot;
        snprintf(m.operation, sizeof m.operation, "%s", operation);
        r = tg_keyslot_secret_new(&secret);
        if (r < 0)
                return r;
        r = tg_luks_use_minimal_pbkdf(lc->cd);
        if (r < 0)
                return r;

        /* 1. The marker, signed, before anything it describes exists. */
        r = tg_pending_marker_sign(lc->state_dir, lc->cd, &m);
        if (r < 0)
                return r;
        r = tg_pending_marker_to_string(&m, &marker_json);
        if (r < 0)
                return r;
        r = tg_interrupt_check("before any change");
        if (r < 0)
                return r;
        marker_id = crypt_token_json_set(lc->cd, CRYPT_ANY_TOKEN, marker_json);
        if (marker_id < 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot write the pending marker: %s. Nothing was changed.",
                                    strerror(-marker_id));
        tg_fault_point("after-marker-write");

        /* 2. The new keyslot, and the marker bound to it. */
        r = crypt_keyslot_add_by_passphrase(lc->cd, new_keyslot, (const char *) authorization->data, authorization->size,
                                            (const char *) secret->data, secret->size);
        if (r == -EPERM) {
                r = log_error_rc(-TG_ERR_BAD_PIN, "No keyslot of %s opens with the given passphrase.", lc->device);
                goto undo;
        }
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot add keyslot %d: %s", new_keyslot, strerror(-r));
                goto undo;
        }
        tg_fault_point("after-keyslot-add");
        r = crypt_token_assign_keyslot(lc->cd, marker_id, new_keyslot);
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot bind the pending marker to keyslot %d: %s",
                                 new_keyslot, strerror(-r));
                goto undo;
        }
        tg_fault_point("after-marker-bind");
        r = tg_interrupt_check("after adding the new keyslot");
        if (r < 0)
                goto undo;

        /* 3. Seal, test, and prove the keyslot. */
        r = seal_and_test(lc, params, secret, new_keyslot, test, &t);
        if (r < 0)
                goto undo;
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
        r = tg_pending_marker_resolve(lc->state_dir, lc->cd, lc->device, marker_id, lc->proven_keyslot);
        if (r < 0)
                return log_error_rc(r, "Token %d now uses keyslot %d, but the old keyslot %d is left over; "
                                    "run 'tpmguard cleanup %s'.", lc->token_id, new_keyslot, m.old_keyslot, lc->device);
        *ret = (tg_lifecycle_result) { .token = lc->token_id, .keyslot = new_keyslot, .old_keyslot = m.old_keyslot };
        return 0;

undo:
        explicit_bzero(&t, sizeof t);
        q = tg_pending_marker_resolve(lc->state_dir, lc->cd, lc->device, marker_id, -1);
        if (q < 0)
                log_error("Could not undo everything; run 'tpmguard cleanup %s'.", lc->device);
        else
                log_info("Nothing was changed.");
        return r;
}

/* SIGINT/SIGTERM/SIGHUP in between: undone at the next step (lib/interrupt.h). */
static int move_to_new_keyslot(lifecycle *lc, const char *operation, const tg_secret *authorization,
                               const tg_seal_params *params, bool test, tg_lifecycle_result *ret) {
        int r;

        tg_interrupt_begin();
        r = move_to_new_keyslot_steps(lc, operation, authorization, params, test, ret);
        if (tg_interrupt_end() != 0 && r >= 0)
                log_notice("Interrupted after the change was complete: it is kept.");
        return r;
}

/*
 * change-pin and rotate carry the token's PCR policy over to the new seal.
 * The token is read from an attacker-writable header, so a policy weaker
 * than tpmguard.conf is not carried over silently (issue 14 §2).
 */
static int check_carry_over(const lifecycle *lc, const tg_config *config, const char *operation) {
        char why[256];

        if (!tg_token_policy_weaker(&lc->token, config, why, sizeof why))
                return 0;
        if (config->accept_token_policy) {
                log_warning("Token %d: %s; carrying its policy over as asked (--accept-token-policy).", lc->token_id, why);
                return 0;
        }
        return log_error_rc(-TG_ERR_TOKEN,
                            "Token %d is weaker than the configuration: %s. The header may have been edited. %s refuses "
                            "to carry this policy over: run 'tpmguard reseal --unlock-key-file F' to seal again under "
                            "the configured policy, or add --accept-token-policy if the token is as you made it.",
                            lc->token_id, why, operation);
}

static tg_seal_params seal_params_like(const tg_token *t, const tg_secret *pin) {
        return (tg_seal_params) {
                .pcr_bank = t->pcr_bank,
                .pcr_mask = t->pcr_mask,
                .pin = pin,
                .pin_kdf_iterations = t->pin ? t->pin_kdf_iterations : 0,
                /* The token's own PCR policy, carried over: not a new choice of PCRs. */
                .allow_unextended = true,
        };
}

/* ---- the operations ---- */

int tg_lifecycle_token_peek(const char *device, int token, tg_token *ret) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        int id, r;

        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        return select_token(cd, device, token, false, &id, ret, NULL);
}

int tg_change_pin(const tg_config *config, const char *device, int token,
                  const tg_secret *pin, const tg_secret *new_pin, tg_lifecycle_result *ret) {
        _cleanup_(lifecycle_done) lifecycle lc = {};
        _cleanup_secret_ tg_secret *secret = NULL;
        tg_seal_params params;
        tg_token t;
        TPM2B_DIGEST expected;
        int r;

        r = lifecycle_begin(&lc, config, device, token, true);
        if (r < 0)
                return r;
        r = check_carry_over(&lc, config, "change-pin");
        if (r < 0)
                return r;
        r = unseal_current(&lc, pin, &secret);
        if (r < 0)
                return r;

        /* The unseal proved the current PCR values satisfy the policy, so sealing to them keeps it. */
        params = seal_params_like(&lc.token, new_pin);
        r = seal_and_test(&lc, &params, secret, lc.token.keyslot, true, &t);
        if (r < 0)
                return log_error_rc(r, "Nothing was changed.");
        if (lc.token.pin == (new_pin != NULL)) {
                expected = lc.token.policy_hash;
                if (t.policy_hash.size != expected.size || memcmp(t.policy_hash.buffer, expected.buffer, expected.size) != 0) {
                        explicit_bzero(&t, sizeof t);
                        return log_error_rc(-TG_ERR_PCR_MISMATCH, "The PCR values changed while the PIN was being "
                                            "changed; nothing was changed. Try again.");
                }
        }
        r = replace_token(&lc, &t);
        explicit_bzero(&t, sizeof t);
        if (r < 0)
                return r;
        if (ret)
                *ret = (tg_lifecycle_result) { .token = lc.token_id, .keyslot = lc.token.keyslot, .old_keyslot = lc.token.keyslot };
        return 0;
}

int tg_rotate(const tg_config *config, const char *device, int token, const tg_secret *pin, tg_lifecycle_result *ret) {
        _cleanup_(lifecycle_done) lifecycle lc = {};
        _cleanup_secret_ tg_secret *secret = NULL;
        tg_seal_params params;
        tg_lifecycle_result res;
        int r;

        r = lifecycle_begin(&lc, config, device, token, true);
        if (r < 0)
                return r;
        r = check_carry_over(&lc, config, "rotate");
        if (r < 0)
                return r;
        r = unseal_current(&lc, pin, &secret);
        if (r < 0)
                return r;
        params = seal_params_like(&lc.token, lc.token.pin ? pin : NULL);
        r = move_to_new_keyslot(&lc, "rotate", secret, &params, true, &res);
        if (r < 0)
                return r;
        if (ret)
                *ret = res;
        return 0;
}

int tg_reseal(const tg_config *config, const char *device, int token,
              const tg_reseal_params *p, tg_lifecycle_result *ret) {
        _cleanup_(lifecycle_done) lifecycle lc = {};
        _cleanup_secret_ tg_secret *secret = NULL;
        tg_seal_params params;
        tg_lifecycle_result res;
        tg_token t;
        bool test;
        int r;

        r = lifecycle_begin(&lc, config, device, token, false);
        if (r < 0)
                return r;
        if (lc.token.pin && !p->pin && !p->unlock_passphrase)
                return log_error_rc(-TG_ERR_PIN_NEEDED, "Token %d needs a PIN.", lc.token_id);

        /* The new policy is the caller's (command line or tpmguard.conf), never
         * the old token's: its fields come from an attacker-writable header,
         * and following a "PCR mismatch" hint must not re-enrol the volume
         * under a policy an attacker wrote there (issue 14 §2). */
        assert(p->pcr_bank != 0);
        params = (tg_seal_params) { .pcr_bank = p->pcr_bank, .pcr_mask = p->pcr_mask, .pin = p->new_pin,
                                    .allow_unextended = p->allow_unextended };
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
                r = move_to_new_keyslot(&lc, "reseal", p->unlock_passphrase, &params, test, &res);
                if (r < 0)
                        return r;
        } else {
                r = unseal_current(&lc, p->pin, &secret);
                if (r == -TG_ERR_PCR_MISMATCH)
                        return log_error_rc(r, "The current PCR values no longer unseal token %d. Authorize the "
                                            "reseal with the recovery passphrase: --unlock-key-file F.", lc.token_id);
                if (r < 0)
                        return r;
                r = seal_and_test(&lc, &params, secret, lc.token.keyslot, test, &t);
                if (r < 0)
                        return log_error_rc(r, "Nothing was changed.");
                r = replace_token(&lc, &t);
                explicit_bzero(&t, sizeof t);
                if (r < 0)
                        return r;
                res = (tg_lifecycle_result) { .token = lc.token_id, .keyslot = lc.token.keyslot, .old_keyslot = lc.token.keyslot };
        }
        if (ret)
                *ret = res;
        return 0;
}

/* ---- the passphrase operations: recovery-key, passwd ---- */

/*
 * Opens the volume, resolves interrupted operations, and gets what
 * authorizes adding a keyslot: an existing passphrase (checked against the
 * keyslots; no TPM), or the tpmguard token's secret, unsealed over the
 * verified session after a full tg_verify(). Writes nothing but marker
 * resolution: an interposer that makes verification or the unseal fail
 * leaves the header as it was.
 */
static int passphrase_begin(lifecycle *lc, const tg_config *config, const char *device, const tg_passphrase_auth *auth,
                            tg_secret **ret_authorization, int *ret_keyslot) {
        _cleanup_secret_ tg_secret *secret = NULL;
        int keyslot, r;

        if (!auth->passphrase) {
                r = lifecycle_begin(lc, config, device, auth->token, true);
                if (r < 0)
                        return r;
                r = unseal_current(lc, auth->pin, &secret);
                if (r < 0)
                        return r;
                /* A new passphrase goes only into the volume enrolled here, never into a decoy with its
                 * UUID and a token of its own (tokens/binding.h). */
                r = tg_volume_binding_check(config->state_dir, lc->cd, lc->token.keyslot, secret);
                if (r < 0)
                        return log_error_rc(r, "Nothing was changed.");
                *ret_keyslot = lc->token.keyslot;
                *ret_authorization = TAKE_PTR(secret);
                return 0;
        }

        *lc = (lifecycle) { .device = device, .state_dir = config->state_dir, .token_id = -1, .proven_keyslot = -1 };
        r = tg_luks_open(device, &lc->cd);
        if (r < 0)
                return r;
        r = tg_pending_markers_resolve_all(lc->state_dir, lc->cd, device, NULL);
        if (r < 0)
                return r;
        keyslot = crypt_activate_by_passphrase(lc->cd, NULL, CRYPT_ANY_SLOT, (const char *) auth->passphrase->data,
                                               auth->passphrase->size, 0);
        if (keyslot < 0)
                return log_error_rc(-TG_ERR_BAD_PIN, "No keyslot of %s opens with the given passphrase: nothing was "
                                    "changed.", device);
        r = tg_secret_new_copy(auth->passphrase->data, auth->passphrase->size, &secret);
        if (r < 0)
                return r;
        *ret_keyslot = keyslot;
        *ret_authorization = TAKE_PTR(secret);
        return 0;
}

/* The keyslots a person types: active, used by no token (a recovery-key label is no use). */
static bool keyslot_is_typed(struct crypt_device *cd, int keyslot) {
        return tg_luks_keyslot_active(cd, keyslot) && !tg_luks_keyslot_used_by_token(cd, keyslot, -1);
}

static int free_token_id(struct crypt_device *cd, int except, const char *device) {
        for (int id = 0; id < tg_luks_tokens_max(); id++)
                if (id != except && crypt_token_status(cd, id, NULL) == CRYPT_TOKEN_INACTIVE)
                        return id;
        return log_error_rc(-TG_ERR_CRYPTSETUP, "%s has no free token slot.", device);
}

typedef struct typed_keyslot_change {
        const char *operation;              /* "recovery-key" or "passwd" */
        const tg_secret *authorization;     /* opens an existing keyslot */
        const tg_secret *new_secret;        /* what the new keyslot opens with */
        int old_keyslot;                    /* destroyed after the commit; -1: none */
        bool label;                         /* write a recovery-key label for the new keyslot */
        uint32_t pbkdf_time_ms;
        int (*show)(const tg_secret *key, int keyslot, void *userdata);
        void *userdata;
} typed_keyslot_change;

/*
 * Marker, keyslot, marker bound, keyslot proven, label, shown, commit (the
 * marker rewritten "committed"), old keyslot destroyed, marker removed. Until
 * the commit a later run undoes it (the new keyslot goes); from the commit on
 * it completes it (the old keyslot goes). Either way some typed secret the
 * owner knows opens the volume at every point: the old one until the
 * commit, the new one (proven, and for a recovery key already shown) from it.
 */
static int typed_keyslot_add(lifecycle *lc, const typed_keyslot_change *c, tg_passphrase_result *ret) {
        _cleanup_free_ char *marker_json = NULL, *label_json = NULL;
        tg_pending_marker m = { .token = -1, .old_keyslot = c->old_keyslot, .bound_keyslot = -1 };
        int marker_id, label_id = -1, new_keyslot, r, q;

        new_keyslot = free_keyslot(lc->cd, lc->device);
        if (new_keyslot < 0)
                return new_keyslot;
        if (c->label) {
                label_id = free_token_id(lc->cd, -1, lc->device);
                if (label_id < 0)
                        return label_id;
                m.token = label_id;
        }
        marker_id = free_token_id(lc->cd, label_id, lc->device);
        if (marker_id < 0)
                return marker_id;
        m.new_keyslot = new_keyslot;
        snprintf(m.operation, sizeof m.operation, "%s", c->operation);
        r = tg_luks_use_human_pbkdf(lc->cd, c->pbkdf_time_ms, &m.pbkdf);
        if (r < 0)
                return r;

        /* 1. The marker, signed, before anything it describes exists. */
        r = tg_pending_marker_sign(lc->state_dir, lc->cd, &m);
        if (r < 0)
                return r;
        r = tg_pending_marker_to_string(&m, &marker_json);
        if (r < 0)
                return r;
        r = crypt_token_json_set(lc->cd, marker_id, marker_json);
        if (r < 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot write the pending marker: %s. Nothing was changed.",
                                    strerror(-r));
        tg_fault_point("after-marker-write");

        /* 2. The new keyslot, and the marker bound to it. */
        r = crypt_keyslot_add_by_passphrase(lc->cd, new_keyslot, (const char *) c->authorization->data,
                                            c->authorization->size, (const char *) c->new_secret->data,
                                            c->new_secret->size);
        if (r < 0) {
                r = log_error_rc(r == -EPERM ? -TG_ERR_BAD_PIN : -TG_ERR_CRYPTSETUP, "Cannot add keyslot %d: %s",
                                 new_keyslot, strerror(-r));
                goto undo;
        }
        tg_fault_point("after-keyslot-add");
        r = crypt_token_assign_keyslot(lc->cd, marker_id, new_keyslot);
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot bind the pending marker to keyslot %d: %s",
                                 new_keyslot, strerror(-r));
                goto undo;
        }
        m.bound_keyslot = new_keyslot;
        tg_fault_point("after-marker-bind");

        /* 3. Proven: the new secret opens exactly the new keyslot. */
        r = crypt_activate_by_passphrase(lc->cd, NULL, new_keyslot, (const char *) c->new_secret->data,
                                         c->new_secret->size, 0);
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "The new keyslot %d does not open: %s", new_keyslot, strerror(-r));
                goto undo;
        }

        /* 4. The label, then the owner sees the key: before the commit, so the commit never outruns it. */
        if (c->label) {
                r = tg_asprintf(&label_json, "{\"type\":\"%s\",\"keyslots\":[\"%d\"],\"version\":1}",
                                TG_RECOVERY_TOKEN_TYPE, new_keyslot);
                if (r < 0)
                        goto undo;
                r = crypt_token_json_set(lc->cd, label_id, label_json);
                if (r < 0) {
                        r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot write the recovery-key label: %s", strerror(-r));
                        goto undo;
                }
                tg_fault_point("after-label-write");
        }
        if (c->show) {
                r = c->show(c->new_secret, new_keyslot, c->userdata);
                if (r < 0)
                        goto undo;
        }

        /* 5. The commit: one write. From here on the new secret is the one. */
        m.committed = true;
        free(marker_json);
        marker_json = NULL;
        r = tg_pending_marker_sign(lc->state_dir, lc->cd, &m);
        if (r < 0)
                goto undo;
        r = tg_pending_marker_to_string(&m, &marker_json);
        if (r < 0)
                goto undo;
        r = crypt_token_json_set(lc->cd, marker_id, marker_json);
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot commit the new keyslot %d: %s", new_keyslot, strerror(-r));
                goto undo;
        }
        tg_fault_point("after-commit");

        /* 6. The replaced keyslot and the marker: the same code a later run uses after a crash. */
        r = tg_pending_marker_resolve(lc->state_dir, lc->cd, lc->device, marker_id, -1);
        if (r < 0)
                return log_error_rc(r, "Keyslot %d is in place, but keyslot %d is left over; run 'tpmguard cleanup %s'.",
                                    new_keyslot, c->old_keyslot, lc->device);
        *ret = (tg_passphrase_result) { .new_keyslot = new_keyslot, .old_keyslot = c->old_keyslot,
                                        .label_token = label_id, .authorized_by = -1 };
        return 0;

undo:
        q = tg_pending_marker_resolve(lc->state_dir, lc->cd, lc->device, marker_id, -1);
        if (q < 0)
                log_error("Could not undo everything; run 'tpmguard cleanup %s'.", lc->device);
        else
                log_info("Nothing was changed.");
        return r;
}

int tg_recovery_key_enroll(const tg_config *config, const char *device, const tg_passphrase_auth *auth, int replace,
                           int (*show)(const tg_secret *key, int keyslot, void *userdata), void *userdata,
                           tg_passphrase_result *ret) {
        _cleanup_(lifecycle_done) lifecycle lc = {};
        _cleanup_secret_ tg_secret *authorization = NULL, *key = NULL;
        tg_passphrase_result res;
        int authorized_by, r;

        r = passphrase_begin(&lc, config, device, auth, &authorization, &authorized_by);
        if (r < 0)
                return r;
        if (replace >= 0) {
                if (!tg_luks_keyslot_active(lc.cd, replace))
                        return log_error_rc(-TG_ERR_NOT_FOUND, "--replace %d: %s has no keyslot %d. Nothing was changed.",
                                            replace, device, replace);
                /* A token's keyslot holds a secret the token unseals, not one a person types. */
                if (!keyslot_is_typed(lc.cd, replace))
                        return log_error_rc(-TG_ERR_INVALID, "--replace %d: a token uses keyslot %d; it is never "
                                            "replaced by a recovery key ('tpmguard remove' removes a tpmguard token). "
                                            "Nothing was changed.", replace, replace);
        }
        r = tg_recovery_key_new(&key);
        if (r < 0)
                return r;
        r = typed_keyslot_add(&lc, &(typed_keyslot_change) {
                                      .operation = "recovery-key",
                                      .authorization = authorization,
                                      .new_secret = key,
                                      .old_keyslot = replace,
                                      .label = true,
                                      .pbkdf_time_ms = auth->pbkdf_time_ms,
                                      .show = show,
                                      .userdata = userdata,
                              }, &res);
        if (r < 0)
                return r;
        res.authorized_by = authorized_by;
        if (ret)
                *ret = res;
        return 0;
}

int tg_passphrase_change(const tg_config *config, const char *device, const tg_passphrase_auth *auth, int keyslot,
                         const tg_secret *new_passphrase, tg_passphrase_result *ret) {
        _cleanup_(lifecycle_done) lifecycle lc = {};
        _cleanup_secret_ tg_secret *authorization = NULL;
        tg_passphrase_result res;
        int authorized_by, r;

        r = passphrase_begin(&lc, config, device, auth, &authorization, &authorized_by);
        if (r < 0)
                return r;
        if (keyslot < 0 && auth->passphrase)
                keyslot = authorized_by;
        else if (keyslot < 0) {
                int n = 0;
                char list[128] = "";

                for (int k = 0; k < tg_luks_keyslots_max(); k++)
                        if (keyslot_is_typed(lc.cd, k) && !tg_luks_keyslot_is_recovery_key(lc.cd, k)) {
                                size_t len = strlen(list);
                                snprintf(list + len, sizeof list - len, "%s%d", n ? ", " : "", k);
                                keyslot = k;
                                n++;
                        }
                if (n == 0)
                        return log_error_rc(-TG_ERR_NOT_FOUND, "%s has no typed passphrase to change (only token "
                                            "keyslots and recovery keys). Nothing was changed.", device);
                if (n > 1)
                        return log_error_rc(-TG_ERR_INVALID, "%s has %d typed passphrases (keyslots %s): choose one with "
                                            "--key-slot N. Nothing was changed.", device, n, list);
        }
        if (!tg_luks_keyslot_active(lc.cd, keyslot))
                return log_error_rc(-TG_ERR_NOT_FOUND, "%s has no keyslot %d. Nothing was changed.", device, keyslot);
        if (!keyslot_is_typed(lc.cd, keyslot))
                return log_error_rc(-TG_ERR_INVALID, "A token uses keyslot %d: it holds no typed passphrase. "
                                    "Nothing was changed.", keyslot);
        if (tg_luks_keyslot_is_recovery_key(lc.cd, keyslot))
                return log_error_rc(-TG_ERR_INVALID, "Keyslot %d is a recovery key; replace it with 'tpmguard "
                                    "recovery-key --replace %d %s'. Nothing was changed.", keyslot, keyslot, device);
        r = typed_keyslot_add(&lc, &(typed_keyslot_change) {
                                      .operation = "passwd",
                                      .authorization = authorization,
                                      .new_secret = new_passphrase,
                                      .old_keyslot = keyslot,
                                      .pbkdf_time_ms = auth->pbkdf_time_ms,
                              }, &res);
        if (r < 0)
                return r;
        res.authorized_by = authorized_by;
        if (ret)
                *ret = res;
        return 0;
}

/* ---- migrate: a peer's TPM token replaced by a tpmguard one ---- */

int tg_migrate_token_wants_pin(const char *device, int token) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_json_ json_object *o = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        const char *json = NULL;
        json_object *v;
        int r;

        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        if (!tg_luks_token_has_type(cd, token, "systemd-tpm2") || crypt_token_json_get(cd, token, &json) < 0 || !json ||
            tg_json_parse_object(json, strlen(json), &o, problem, sizeof problem) < 0)
                return 0;
        return json_object_object_get_ex(o, "tpm2-pin", &v) && json_object_is_type(v, json_type_boolean) &&
               json_object_get_boolean(v);
}

typedef struct migrate_proof {
        const tg_config *config;
        const char *device;
        int token;              /* the old token */
        const char *type;       /* its type */
        int keyslot;            /* the keyslot it names */
        const tg_secret *pin;   /* its PIN, NULL if none given */
        bool unproven;          /* out: kept */
} migrate_proof;

/*
 * Is the keyslot the old token names its own, shown in this run? 1 only when
 * the token's own secret opens exactly that keyslot: a test activation (no
 * dm device) through systemd's token plugin, which libcryptsetup loads from
 * its token directory, on the TPM tpmguard is configured for. The keyslot
 * number alone is the header's word: an edited systemd-tpm2 token naming the
 * keyslot of a systemd-cryptenroll recovery key (the same PBKDF2 at 1000
 * iterations) must not make migrate destroy it, and that token's secret does
 * not open the recovery key's keyslot. clevis has no libcryptsetup plugin,
 * so nothing proves its keyslot here. On any doubt (no plugin, PIN missing
 * or wrong, PCRs changed): 0, and the keyslot is kept, with the command to
 * remove it.
 *
 * tg_enroll calls it once tpmguard's own seal passed its checks on this TPM
 * (tg_verify, the test unseal): an interposer tpmguard detects stops migrate
 * before the old token is used. The test activation unseals the old secret
 * as every boot does; the keyslot it opens is destroyed in this run.
 */
static int migrate_prove(struct crypt_device *cd, void *userdata) {
        migrate_proof *p = userdata;
        /* systemd's struct systemd_tpm2_plugin_params (src/shared/tpm2-util.h, v252..v254: these three
         * fields; later versions append fields): zero-padded, so that an appended one reads NULL. */
        struct {
                uint32_t search_pcr_mask;
                const char *device;
                const char *signature_path;
                const void *appended[13];
        } params = { .search_pcr_mask = UINT32_MAX };
        const char *why;
        int r;

        if (strcmp(p->type, "systemd-tpm2") != 0)
                why = "tpmguard cannot run the clevis pin to check which keyslot its secret opens";
        else {
                /* The TPM tpmguard verified, always named: left unnamed, the plugin would take
                 * $SYSTEMD_TPM2_DEVICE from the environment first (a test's swtpm is named too). */
                if (p->config->tcti)
                        params.device = p->config->tcti;
                r = crypt_activate_by_token_pin(cd, NULL, p->type, p->token,
                                                p->pin ? (const char *) p->pin->data : NULL, p->pin ? p->pin->size : 0,
                                                params.device ? &params : NULL, 0);
                if (!tg_config_resource_manager(p->config)) {
                        /* Whatever the plugin left loaded (it may fail half-way) stays in a TPM without
                         * a resource manager, in its few slots. */
                        _cleanup_tpm_ tg_tpm *t = NULL;

                        if (tg_tpm_open_config(p->config, &t) >= 0)
                                (void) tg_tpm_flush_left_over(t);
                        else
                                log_notice("Could not reopen the TPM to flush what systemd's plugin left loaded; "
                                           "a reboot frees its slots.");
                }
                if (r == p->keyslot)
                        return 1;
                log_debug("%s: test activation through token %d: %d.", p->device, p->token, r);
                why = r >= 0 ? "the token's secret opens another keyslot" :
                      r == -ENOANO ? "the token has a PIN and none was given (--old-pin-file F, or a terminal)" :
                      r == -ENOENT || r == -EAGAIN || r == -EINVAL ? "systemd's token plugin could not be used" :
                      "the token's secret did not open it (wrong PIN, changed PCRs, not its keyslot, or an "
                      "interposer on the TPM bus that made systemd's unseal fail)";
        }
        log_warning("Keeping keyslot %d: the %s token %d names it, but nothing shows it is the old token's (%s); "
                    "an edited token can name a passphrase's or a recovery key's keyslot. If no passphrase or "
                    "recovery key of yours opens it, remove it with 'cryptsetup luksKillSlot %s %d'.", p->keyslot,
                    p->type, p->token, why, p->device, p->keyslot);
        /* Labelled before the old token goes: without a label the keyslot looks like a passphrase's, and
         * tpmguard audit would call the volume safe while the secret that crossed the bus opens it. */
        r = tg_luks_kept_label_write(cd, p->keyslot, p->type);
        if (r < 0)
                return r;
        p->unproven = true;
        return 0;
}

int tg_migrate(const tg_config *config, const char *device, int old_token, const tg_secret *unlock_passphrase,
               const tg_secret *old_pin, const tg_enroll_options *options, bool keep_old, tg_migrate_result *ret) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        tg_enroll_options o = *options;
        tg_migrate_result res = { .old_token = old_token, .old_keyslot = -1 };
        const char *type = NULL;
        crypt_token_info info;
        migrate_proof proof = {};
        int opened, n_keyslots = 0, keyslot, token, r;

        assert(unlock_passphrase);
        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        r = tg_pending_markers_resolve_all(config->state_dir, cd, device, NULL);
        if (r < 0)
                return r;
        if (old_token < 0 || old_token >= tg_luks_tokens_max())
                return log_error_rc(-TG_ERR_INVALID, "migrate needs the token to replace: --token N "
                                    "('tpmguard audit %s' lists them).", device);
        info = crypt_token_status(cd, old_token, &type);
        if (info == CRYPT_TOKEN_INACTIVE || info == CRYPT_TOKEN_INVALID || !type)
                return log_error_rc(-TG_ERR_NOT_FOUND, "%s has no token %d. Nothing was changed.", device, old_token);
        if (!tg_migratable_token_type(type))
                return log_error_rc(-TG_ERR_INVALID, "Token %d of %s is a %s token: migrate replaces systemd-tpm2 and "
                                    "clevis tokens%s. Nothing was changed.", old_token, device, type,
                                    strcmp(type, TG_TOKEN_TYPE) == 0 ? " (this one is tpmguard's already)" : "");
        snprintf(res.old_type, sizeof res.old_type, "%s", type);
        for (int k = 0; k < tg_luks_keyslots_max(); k++)
                if (tg_luks_token_references(cd, old_token, k) && tg_luks_keyslot_active(cd, k)) {
                        res.old_keyslot = k;
                        n_keyslots++;
                }
        if (n_keyslots != 1)
                return log_error_rc(-TG_ERR_TOKEN, "Token %d of %s uses %d keyslots; migrate replaces a token with "
                                    "exactly one. Nothing was changed.", old_token, device, n_keyslots);

        /* Authorized by the passphrase alone: the old token authorizes nothing (unlocking through it is
         * what an interposer reads, tpmguard audit); it only proves, in tg_enroll once tpmguard's own
         * seal has passed its checks, which keyslot is its own (migrate_prove). */
        opened = crypt_activate_by_passphrase(cd, NULL, CRYPT_ANY_SLOT, (const char *) unlock_passphrase->data,
                                              unlock_passphrase->size, 0);
        if (opened < 0)
                return log_error_rc(-TG_ERR_BAD_PIN, "No keyslot of %s opens with the given passphrase: nothing was "
                                    "changed.", device);

        o.migrate = !keep_old;
        o.migrate_token = old_token;
        o.migrate_keyslot = res.old_keyslot;
        o.keyslot = CRYPT_ANY_SLOT;
        if (opened == res.old_keyslot) {
                /* A secret someone knows opens it: it is theirs as much as the token's. */
                log_notice("The given passphrase opens keyslot %d, the old token's: it is kept.", res.old_keyslot);
                o.migrate_keyslot = -1;
        } else if (tg_luks_keyslot_used_by_token(cd, res.old_keyslot, old_token)) {
                log_notice("Keyslot %d is also used by another token: it is kept.", res.old_keyslot);
                o.migrate_keyslot = -1;
        } else if (!keep_old) {
                proof = (migrate_proof) { .config = config, .device = device, .token = old_token,
                                          .type = res.old_type, .keyslot = res.old_keyslot, .pin = old_pin };
                o.migrate_prove = migrate_prove;
                o.migrate_prove_userdata = &proof;
        }
        crypt_free(TAKE_PTR(cd));

        r = tg_enroll(config, device, unlock_passphrase, &o, &keyslot, &token);
        if (r < 0)
                return r;
        res.old_keyslot_unproven = proof.unproven;
        res.token = token;
        res.keyslot = keyslot;
        /* What the header says now: the resolution inside tg_enroll may have stopped short (then cleanup). */
        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        info = crypt_token_status(cd, old_token, &type);
        res.old_token_removed = info == CRYPT_TOKEN_INACTIVE || !type || strcmp(type, res.old_type) != 0;
        res.old_keyslot_destroyed = !tg_luks_keyslot_active(cd, res.old_keyslot);
        if (!keep_old && !res.old_token_removed)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "The tpmguard token %d is in place, but the old token %d is "
                                    "left over: run 'tpmguard cleanup %s'.", token, old_token, device);
        if (ret)
                *ret = res;
        return 0;
}

int tg_remove(const tg_config *config, const char *device, int token, tg_lifecycle_result *ret) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        tg_token t;
        bool valid;
        int id, r;

        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        r = tg_pending_markers_resolve_all(config->state_dir, cd, device, NULL);
        if (r < 0)
                return r;
        r = select_token(cd, device, token, true, &id, &t, &valid);
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

int tg_cleanup(const tg_config *config, const char *device, unsigned *ret_actions) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        unsigned actions = 0;
        int r;

        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        r = tg_pending_markers_resolve_all(config->state_dir, cd, device, &actions);
        if (r < 0)
                return r;
        for (int id = 0; id < tg_luks_tokens_max(); id++) {
                tg_token t;
                if (!tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE) || tg_luks_token_load(cd, id, &t) < 0)
                        continue;
                if (!tg_luks_keyslot_active(cd, t.keyslot)) {
                        log_notice("Removing token %d: it has no keyslot.", id);
                        r = tg_luks_token_remove(cd, id);
                        if (r < 0)
                                return r;
                        actions++;
                }
                explicit_bzero(&t, sizeof t);
        }
        r = tg_luks_remove_orphan_labels(cd, &actions);
        if (r < 0)
                return r;
        if (ret_actions)
                *ret_actions = actions;
        return 0;
}

