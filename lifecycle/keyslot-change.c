/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The one crash-safe keyslot change (keyslot-change.h).
 *
 * Threat model: the header is attacker-editable, so the marker is signed
 * (marker-auth.c) before it is written, and it is written before anything it
 * describes exists: a later run destroys only what an authentic marker of an
 * operation still open names. Crash model: libcryptsetup commits each header
 * change as one write; a kill after any of them (the fault points below)
 * leaves the marker, which the next lifecycle command or 'tpmguard cleanup'
 * resolves with the same code as commit and undo.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "fault.h"
#include "interrupt.h"
#include "keyslot-change.h"
#include "log.h"
#include "luks.h"
#include "marker-auth.h"
#include "marker-resolve.h"

int tg_keyslot_change_begin(const char *state_dir, struct crypt_device *cd, const char *device,
                            const tg_keyslot_change_params *p, tg_keyslot_change *ret) {
        _cleanup_free_ char *marker_json = NULL;
        tg_keyslot_change c = { .state_dir = state_dir, .cd = cd, .device = device, .marker_id = -1, .undone = p->undone };
        int marker_id, r;

        c.marker = (tg_pending_marker) { .token = p->token, .old_keyslot = p->old_keyslot, .new_keyslot = p->new_keyslot,
                                         .bound_keyslot = -1, .pbkdf = p->pbkdf };
        snprintf(c.marker.operation, sizeof c.marker.operation, "%s", p->operation);

        /* 1. The marker, signed, before anything it describes exists. */
        r = tg_keyslot_change_sign(&c, &marker_json);
        if (r < 0)
                return r;
        if (p->interrupt_step) {
                r = tg_interrupt_check("before any change");
                if (r < 0)
                        return r;
        }
        marker_id = p->marker_id;
        if (marker_id == TG_KEYSLOT_CHANGE_MARKER_HIGHEST) {
                /* The marker takes the highest free token id, so the token itself gets the lowest (as before markers). */
                marker_id = -ENOSPC;
                for (int id = tg_luks_tokens_max() - 1; id >= 0 && marker_id == -ENOSPC; id--)
                        if (crypt_token_status(cd, id, NULL) == CRYPT_TOKEN_INACTIVE)
                                marker_id = id;
        }
        if (marker_id >= 0 || marker_id == CRYPT_ANY_TOKEN)
                marker_id = crypt_token_json_set(cd, marker_id, marker_json);
        if (marker_id < 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot write the pending marker: %s. Nothing was changed.",
                                    strerror(-marker_id));
        c.marker_id = marker_id;
        tg_fault_point("after-marker-write");

        /* 2. The new keyslot, and the marker bound to it. */
        r = crypt_keyslot_add_by_passphrase(cd, p->new_keyslot, (const char *) p->authorization->data,
                                            p->authorization->size, (const char *) p->secret->data, p->secret->size);
        if (r == -EPERM && p->eperm_is_wrong_passphrase) {
                r = log_error_rc(-TG_ERR_BAD_PIN, "No keyslot of %s opens with the given passphrase.", device);
                goto undo;
        }
        if (r < 0 && p->name_device) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot add keyslot %d to %s: %s", p->new_keyslot, device,
                                 strerror(-r));
                goto undo;
        }
        if (r < 0) {
                r = log_error_rc(r == -EPERM ? -TG_ERR_BAD_PIN : -TG_ERR_CRYPTSETUP, "Cannot add keyslot %d: %s",
                                 p->new_keyslot, strerror(-r));
                goto undo;
        }
        tg_fault_point("after-keyslot-add");
        if (p->name_device)
                log_info("Added keyslot %d.", p->new_keyslot);
        r = crypt_token_assign_keyslot(cd, c.marker_id, p->new_keyslot);
        if (r < 0) {
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot bind the pending marker to keyslot %d: %s",
                                 p->new_keyslot, strerror(-r));
                goto undo;
        }
        c.marker.bound_keyslot = p->new_keyslot;
        tg_fault_point("after-marker-bind");
        if (p->interrupt_step) {
                r = tg_interrupt_check(p->interrupt_step);
                if (r < 0)
                        goto undo;
        }
        *ret = c;
        return 0;

undo:
        tg_keyslot_change_undo(&c);
        return r;
}

int tg_keyslot_change_sign(tg_keyslot_change *c, char **ret) {
        int r;

        r = tg_pending_marker_sign(c->state_dir, c->cd, &c->marker);
        if (r < 0)
                return r;
        return tg_pending_marker_to_string(&c->marker, ret);
}

int tg_keyslot_change_commit(tg_keyslot_change *c, int proven_keyslot) {
        return tg_pending_marker_resolve(c->state_dir, c->cd, c->device, c->marker_id, proven_keyslot);
}

void tg_keyslot_change_undo(tg_keyslot_change *c) {
        if (tg_pending_marker_resolve(c->state_dir, c->cd, c->device, c->marker_id, -1) < 0)
                log_error("Could not undo everything; run 'tpmguard cleanup %s'.", c->device);
        else
                log_info("%s", c->undone ?: "Nothing was changed.");
}
