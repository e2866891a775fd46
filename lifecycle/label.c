/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The label tokens (label.h): the recovery-key label and the kept-keyslot
 * label. No secret in them, attacker-editable like the whole header: they
 * decide nothing but what status and audit report.
 */
#include <assert.h>
#include <errno.h>
#include <stdio.h>

#include "error.h"
#include "fault.h"
#include "json-util.h"
#include "label.h"
#include "log.h"
#include "luks.h"

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
