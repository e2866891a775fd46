/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the header says each keyslot is (keyslot-report.h): status and audit print it. */
#include <assert.h>

#include "error.h"
#include "keyslot-report.h"
#include "label.h"
#include "luks.h"
#include "pending-marker.h"

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
