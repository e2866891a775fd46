/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard cleanup (cleanup.h): what interrupted operations and removals
 * left behind. The header is attacker-editable: a pending marker directs
 * nothing unless authentic (pending-marker.c), and a token or label is
 * removed only when its keyslot is gone.
 */

#include "cleanup.h"
#include "error.h"
#include "label.h"
#include "log.h"
#include "luks.h"
#include "marker-resolve.h"
#include "token.h"

int tg_cleanup(const tg_config *config, const char *device, unsigned *ret_actions) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        unsigned actions = 0;
        int r;

        r = tg_luks_open_writable(device, &cd);
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
