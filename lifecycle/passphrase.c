/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The passphrase operations (passphrase.h): tpmguard recovery-key and
 * tpmguard passwd. A new typed secret goes into a new keyslot, is proven,
 * (shown,) committed, and only then is the keyslot it replaces destroyed;
 * some secret the owner knows opens the volume at every point.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "binding.h"
#include "error.h"
#include "fault.h"
#include "keyslot-change.h"
#include "label.h"
#include "lifecycle.h"
#include "log.h"
#include "luks.h"
#include "marker-resolve.h"
#include "passphrase.h"
#include "recovery.h"
#include "util.h"

/*
 * Opens the volume, resolves interrupted operations, and gets what
 * authorizes adding a keyslot: an existing passphrase (checked against the
 * keyslots; no TPM), or the tpmguard token's secret, unsealed over the
 * verified session after a full tg_verify(). Writes nothing but marker
 * resolution: an interposer that makes verification or the unseal fail
 * leaves the header as it was.
 */
static int passphrase_begin(tg_lifecycle *lc, const tg_config *config, const char *device, const tg_passphrase_auth *auth,
                            tg_secret **ret_authorization, int *ret_keyslot) {
        _cleanup_secret_ tg_secret *secret = NULL;
        int keyslot, r;

        if (!auth->passphrase) {
                r = tg_lifecycle_begin(lc, config, device, auth->token, true);
                if (r < 0)
                        return r;
                r = tg_lifecycle_unseal_current(lc, auth->pin, &secret);
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

        *lc = (tg_lifecycle) { .device = device, .state_dir = config->state_dir, .token_id = -1, .proven_keyslot = -1 };
        r = tg_luks_open_writable(device, &lc->cd);
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
static int typed_keyslot_add(tg_lifecycle *lc, const typed_keyslot_change *c, tg_passphrase_result *ret) {
        _cleanup_free_ char *marker_json = NULL, *label_json = NULL;
        tg_pbkdf_fingerprint pbkdf;
        tg_keyslot_change change;
        int marker_id, label_id = -1, new_keyslot, r;

        new_keyslot = tg_luks_keyslot_free(lc->cd, lc->device);
        if (new_keyslot < 0)
                return new_keyslot;
        if (c->label) {
                label_id = free_token_id(lc->cd, -1, lc->device);
                if (label_id < 0)
                        return label_id;
        }
        marker_id = free_token_id(lc->cd, label_id, lc->device);
        if (marker_id < 0)
                return marker_id;
        r = tg_luks_use_human_pbkdf(lc->cd, c->pbkdf_time_ms, &pbkdf);
        if (r < 0)
                return r;

        /* 1, 2. The marker, signed, before anything it describes exists; the new keyslot, and the marker bound to it. */
        r = tg_keyslot_change_begin(lc->state_dir, lc->cd, lc->device, &(tg_keyslot_change_params) {
                                            .operation = c->operation,
                                            .token = label_id,
                                            .old_keyslot = c->old_keyslot,
                                            .new_keyslot = new_keyslot,
                                            .marker_id = marker_id,
                                            .pbkdf = pbkdf,
                                            .authorization = c->authorization,
                                            .secret = c->new_secret,
                                    }, &change);
        if (r < 0)
                return r;

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
        change.marker.committed = true;
        r = tg_keyslot_change_sign(&change, &marker_json);
        if (r < 0)
                goto undo;
        r = crypt_token_json_set(lc->cd, change.marker_id, marker_json);
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot commit the new keyslot %d: %s", new_keyslot, strerror(-r));
                goto undo;
        }
        tg_fault_point("after-commit");

        /* 6. The replaced keyslot and the marker: the same code a later run uses after a crash. */
        r = tg_keyslot_change_commit(&change, -1);
        if (r < 0)
                return log_error_rc(r, "Keyslot %d is in place, but keyslot %d is left over; run 'tpmguard cleanup %s'.",
                                    new_keyslot, c->old_keyslot, lc->device);
        *ret = (tg_passphrase_result) { .new_keyslot = new_keyslot, .old_keyslot = c->old_keyslot,
                                        .label_token = label_id, .authorized_by = -1 };
        return 0;

undo:
        tg_keyslot_change_undo(&change);
        return r;
}

int tg_recovery_key_enroll(const tg_config *config, const char *device, const tg_passphrase_auth *auth, int replace,
                           int (*show)(const tg_secret *key, int keyslot, void *userdata), void *userdata,
                           tg_passphrase_result *ret) {
        _cleanup_(tg_lifecycle_done) tg_lifecycle lc = {};
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
        _cleanup_(tg_lifecycle_done) tg_lifecycle lc = {};
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
