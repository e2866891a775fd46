/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The frame of the lifecycle commands (lifecycle.h), and their threat and
 * crash model: change-pin, rotate, reseal, remove, cleanup (token-ops.c,
 * cleanup.c; status reporting is the CLI's: cli/status.c).
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
 *   - same keyslot (update prepare, which adds an update seal of the same
 *     secret): the new token replaces the old one in a single
 *     crypt_token_json_set() on the same token id; before it the old
 *     credential works, after it the new one does;
 *   - new keyslot (change-pin, rotate, reseal; update finish): marker token written,
 *     keyslot added, marker bound to it, seal and test, token switched to
 *     the new keyslot in one write, old keyslot destroyed, marker removed.
 *     Until the switch the old token and keyslot are untouched; from the
 *     switch on the new ones work. The marker tells a later run which of the
 *     two keyslots is left over (pending-marker.h). Enroll and the
 *     passphrase operations use the same keyslot change (keyslot-change.h).
 *   - remove: keyslot destroyed first (libcryptsetup unassigns it from the
 *     token in the same write), then the token; a leftover token with no
 *     keyslot is harmless, shown by status and removed by a rerun.
 * Every operation starts by resolving markers, so rerunning any command
 * after a crash completes or undoes the interrupted one first.
 */
#include <errno.h>
#include <string.h>

#include "da.h"
#include "error.h"
#include "fault.h"
#include "interrupt.h"
#include "json-util.h"
#include "keyslot-owner.h"
#include "lifecycle.h"
#include "log.h"
#include "luks.h"
#include "marker-resolve.h"
#include "token.h"
#include "tpm.h"
#include "verify.h"

/*
 * Selects the tpmguard token: the requested id, or the only one. With
 * allow_invalid a malformed token is selected too (*ret_valid false), for
 * remove.
 */
int tg_lifecycle_select_token(struct crypt_device *cd, const char *device, int requested, bool allow_invalid,
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

void tg_lifecycle_done(tg_lifecycle *lc) {
        tg_verified_tpm_free(lc->v);
        crypt_free(lc->cd);
        explicit_bzero(&lc->token, sizeof lc->token);
}

/* Opens the volume, resolves interrupted operations, selects the token and verifies the TPM. */
/*
 * unseal_next: the caller unseals the token right after (change-pin, rotate, a PIN-authorized
 * passphrase change). Its Unseal then reads the DA state for free: in lockout the TPM refuses it
 * with TPM_RC_LOCKOUT before checking anything (so no try is spent and nothing was changed), and
 * tg_unseal() reports -TG_ERR_LOCKOUT; the GetCapability here is skipped (docs/design.md §2.4).
 */
int tg_lifecycle_begin(tg_lifecycle *lc, const tg_config *config, const char *device, int token, bool unseal_next) {
        tg_da_state da;
        int r;

        *lc = (tg_lifecycle) { .device = device, .state_dir = config->state_dir, .proven_keyslot = -1 };
        r = tg_luks_open_writable(device, &lc->cd);
        if (r < 0)
                return r;
        r = tg_pending_markers_resolve_all(lc->state_dir, lc->cd, device, NULL);
        if (r < 0)
                return r;
        r = tg_lifecycle_select_token(lc->cd, device, token, false, &lc->token_id, &lc->token, NULL);
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
        r = tg_da_read(tg_vtpm_esys(lc->v), ESYS_TR_NONE, &da);
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
int tg_lifecycle_unseal_current(tg_lifecycle *lc, const tg_secret *pin, tg_secret **ret) {
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
int tg_lifecycle_seal_and_test(tg_lifecycle *lc, const tg_seal_params *params, const tg_secret *secret, int keyslot,
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
int tg_lifecycle_replace_token(tg_lifecycle *lc, const tg_token *t) {
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

/*
 * change-pin and rotate carry the token's PCR policy over to the new seal.
 * The token is read from an attacker-writable header, so a policy weaker
 * than tpmguard.conf is not carried over silently (docs/design.md §9.1).
 */
int tg_lifecycle_check_carry_over(const tg_lifecycle *lc, const tg_config *config, const char *operation) {
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

tg_seal_params tg_lifecycle_seal_params_like(const tg_token *t, const tg_secret *pin, const tg_config *config) {
        return (tg_seal_params) {
                .pcr_bank = t->pcr_bank,
                .pcr_mask = t->pcr_mask,
                .pin = pin,
                /* The PIN's Argon2id: tpmguard.conf's, benchmarked here (never the header's: a new
                 * seal upgrades a format 1 token and never keeps parameters an edit lowered). */
                .argon2 = { .memory_kib = config->pin_kdf_memory * 1024u },
                .argon2_target_ms = config->pin_kdf_time_ms,
                /* The token's own PCR policy, carried over: not a new choice of PCRs. */
                .allow_unextended = true,
        };
}

/* ---- the token a command acts on ---- */

int tg_lifecycle_check(const tg_config *config, const char *device, int token, const char *carry_over,
                       tg_lifecycle_ask_pin ask_pin, void *userdata, tg_secret **ret_pin) {
        _cleanup_secret_ tg_secret *pin = NULL, *secret = NULL;
        tg_lifecycle lc;
        bool satisfied = true;
        int r;

        r = tg_lifecycle_begin(&lc, config, device, token, ask_pin != NULL);
        if (r < 0)
                goto done;
        if (carry_over) {
                r = tg_lifecycle_check_carry_over(&lc, config, carry_over);
                if (r < 0)
                        goto done;
        }
        /* A PCR mismatch is known before any PIN is typed: no PIN could unseal the token. */
        if (lc.token.pcr_mask != 0) {
                r = tg_token_policy_satisfied(lc.v, &lc.token, &satisfied);
                if (r < 0)
                        goto done;
                if (!satisfied) {
                        r = log_error_rc(-TG_ERR_PCR_MISMATCH, "The PCR values no longer match the policy of token %d "
                                         "of %s, so no PIN can unseal it (nothing was asked, nothing was changed). "
                                         "Reseal it first: 'tpmguard reseal %s', authorized by the recovery "
                                         "passphrase.", lc.token_id, device, device);
                        goto done;
                }
        }
        if (ask_pin) {
                r = ask_pin(&lc.token, userdata, &pin);
                if (r < 0)
                        goto done;
                /* Proven now, so that a mistyped PIN is named before anything new is asked. */
                r = tg_lifecycle_unseal_current(&lc, pin, &secret);
                if (r < 0)
                        goto done;
                *ret_pin = TAKE_PTR(pin);
        }
        r = 0;
done:
        tg_lifecycle_done(&lc);
        return r;
}

int tg_lifecycle_token_peek(const char *device, int token, tg_token *ret) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        int id, r;

        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        return tg_lifecycle_select_token(cd, device, token, false, &id, ret, NULL);
}
