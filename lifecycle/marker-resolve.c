/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Resolving a pending marker (marker-resolve.h): the plan that decides what
 * it destroys, and the resolution itself.
 *
 * Threat model: the LUKS2 header is attacker-editable, so a marker directs
 * the destruction of a keyslot only when it carries this machine's MAC and
 * its operation is still open (lifecycle/marker-auth.c): a planted or edited
 * marker is removed and nothing else is touched. Even an authentic marker
 * never makes us destroy a keyslot that a token still references, nor the
 * last one.
 */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "fault.h"
#include "keyslot-owner.h"
#include "label.h"
#include "log.h"
#include "luks.h"
#include "marker-auth.h"
#include "marker-resolve.h"
#include "pending-marker.h"
#include "token.h"

/* The passphrase operations: the committed flag is the switch; a token's keyslot is never ours to destroy. */
static void passphrase_marker_plan(struct crypt_device *cd, int marker_id, const tg_pending_marker *m, tg_marker_plan *p) {
        int k;

        p->roll_forward = m->committed;
        k = p->roll_forward ? m->old_keyslot : m->new_keyslot;
        if (!tg_luks_keyslot_active(cd, k))
                return;
        /* Roll forward: the typed secret the owner chose to replace (the new one is proven and was shown).
         * Undo: the new keyslot, if the marker is bound to it or it has exactly the PBKDF recorded. */
        if (tg_luks_keyslot_used_by_token(cd, k, marker_id))
                p->why_kept = "a token uses it";
        else if (p->roll_forward || m->bound_keyslot == k || tg_luks_keyslot_has_pbkdf(cd, k, &m->pbkdf))
                p->leftover_keyslot = k;
        else
                p->why_kept = "its PBKDF is not the one tpmguard chose for it, so it was added by someone else";
}

static bool tpmguard_token_references(struct crypt_device *cd, int keyslot) {
        for (int id = 0; id < tg_luks_tokens_max(); id++)
                if (tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE) && tg_luks_token_references(cd, id, keyslot))
                        return true;
        return false;
}

/*
 * migrate: complete once a tpmguard token references the new keyslot. Then
 * the old token goes (only a migratable type: an edited marker never makes
 * us remove a tpmguard token or a FIDO2 one), and the old keyslot unless
 * another token still uses it. Undone like an enrollment otherwise.
 */
static void migrate_marker_plan(const char *state_dir, struct crypt_device *cd, int marker_id, const tg_pending_marker *m,
                                tg_marker_plan *p) {
        const char *type = NULL;
        crypt_token_info info;

        p->roll_forward = tpmguard_token_references(cd, m->new_keyslot);
        if (!p->roll_forward) {
                if (tg_luks_keyslot_active(cd, m->new_keyslot) && !tg_luks_keyslot_referenced(cd, m->new_keyslot, marker_id)) {
                        if (m->bound_keyslot == m->new_keyslot || tg_luks_keyslot_has_minimal_pbkdf(cd, m->new_keyslot))
                                p->leftover_keyslot = m->new_keyslot;
                        else
                                p->why_kept = "it has a PBKDF tpmguard never uses, so it was added by someone else";
                }
                return;
        }
        info = crypt_token_status(cd, m->token, &type);
        if (info != CRYPT_TOKEN_INACTIVE && info != CRYPT_TOKEN_INVALID && tg_migratable_token_type(type))
                p->leftover_token = m->token;
        if (m->old_keyslot < 0 || !tg_luks_keyslot_active(cd, m->old_keyslot))
                return;
        for (int id = 0; id < tg_luks_tokens_max(); id++)
                if (id != marker_id && id != p->leftover_token && tg_luks_token_references(cd, id, m->old_keyslot) &&
                    !tg_luks_token_is_label(cd, id)) {
                        p->why_kept = "another token uses it";
                        return;
                }
        /* Its number comes from the header (the old token), which an attacker writes: the marker names
         * it only once this run's test activation through the old token's own plugin opened exactly it
         * (tg_migrate), and the MAC covers that. The PBKDF systemd-cryptenroll and clevis give their
         * secrets is a second check, never a proof: their recovery keys have it too. */
        if (!tg_luks_keyslot_has_peer_pbkdf(cd, m->old_keyslot)) {
                p->why_kept = "nothing shows it is the old token's (its PBKDF is not the PBKDF2 at 1000 iterations "
                              "that systemd-cryptenroll and clevis give the secrets they add): if no passphrase "
                              "opens it, remove it with 'cryptsetup luksKillSlot'";
                return;
        }
        /* The number alone is the header's word even after the proof: a crash, then an offline edit that
         * gives another keyslot (a systemd recovery key) that number, must not get it destroyed by the
         * next cleanup. The proof recorded the proven keyslot's KDF salt (tg_keyslot_own). */
        if (!tg_keyslot_owned(state_dir, cd, m->old_keyslot)) {
                p->why_kept = "it is not the keyslot this machine's migrate proved the old token's (its KDF salt "
                              "differs from the one recorded, or none was): if no passphrase opens it, remove it "
                              "with 'cryptsetup luksKillSlot'";
                return;
        }
        p->leftover_keyslot = m->old_keyslot;
}

void tg_pending_marker_plan(const char *state_dir, struct crypt_device *cd, int marker_id, const tg_pending_marker *m,
                            int proven_keyslot, tg_marker_plan *ret) {
        tg_marker_plan p = { .leftover_keyslot = -1, .leftover_token = -1 };
        tg_token t;

        /* A marker tpmguard cannot authenticate was planted, edited, copied from another volume or machine, or
         * written by a tpmguard before markers were signed: it directs nothing. A planted "committed" passwd
         * marker naming the recovery passphrase's keyslot as old must not make us destroy it. */
        if (!m->authenticated) {
                p.unauthenticated = true;
                *ret = p;
                return;
        }
        if (tg_pending_marker_is_passphrase_op(m)) {
                passphrase_marker_plan(cd, marker_id, m, &p);
                goto last;
        }
        if (strcmp(m->operation, "migrate") == 0) {
                migrate_marker_plan(state_dir, cd, marker_id, m, &p);
                goto last;
        }
        if (m->token < 0)
                /* enroll: complete once a token (not the marker) references the new keyslot. */
                p.roll_forward = tg_luks_keyslot_referenced(cd, m->new_keyslot, marker_id);
        else
                p.roll_forward = tg_luks_token_has_type(cd, m->token, TG_TOKEN_TYPE) &&
                                 tg_luks_token_load(cd, m->token, &t) >= 0 && t.keyslot == m->new_keyslot;
        if (p.roll_forward && m->old_keyslot < 0) {
                /* enroll: nothing is left over */
        } else if (p.roll_forward) {
                /* The old keyslot held the secret the token no longer seals. Its number comes from the header
                 * (the old token, the marker), which an attacker writes: an edited token that names the
                 * recovery passphrase's keyslot must never make us destroy it, least of all after the owner
                 * has just proven that passphrase (reseal --unlock-key-file). Ours only if this run's unseal
                 * opened it, or it is the keyslot tpmguard recorded as its own (keyslot-owner.h). Not by its
                 * PBKDF: systemd-cryptenroll gives its recovery keys the very PBKDF tpmguard gives its
                 * keyslots, and an edited token named one. */
                if (tg_luks_keyslot_active(cd, m->old_keyslot) && !tg_luks_keyslot_referenced(cd, m->old_keyslot, marker_id)) {
                        if (m->old_keyslot == proven_keyslot || tg_keyslot_owned(state_dir, cd, m->old_keyslot))
                                p.leftover_keyslot = m->old_keyslot;
                        else
                                p.why_kept = "nothing shows it is tpmguard's (no unseal opened it, and it is not a "
                                             "keyslot tpmguard recorded as its own): if no passphrase or recovery "
                                             "key opens it, remove it with 'cryptsetup luksKillSlot'";
                }
        } else if (tg_luks_keyslot_active(cd, m->new_keyslot) && !tg_luks_keyslot_referenced(cd, m->new_keyslot, marker_id)) {
                /* Ours only if the marker was bound to it, or it has the PBKDF tpmguard gives its keyslots. */
                if (m->bound_keyslot == m->new_keyslot || tg_luks_keyslot_has_minimal_pbkdf(cd, m->new_keyslot))
                        p.leftover_keyslot = m->new_keyslot;
                else
                        p.why_kept = "it has a PBKDF tpmguard never uses, so it was added by someone else";
        }
last:
        if (p.leftover_keyslot >= 0 && crypt_keyslot_status(cd, p.leftover_keyslot) == CRYPT_SLOT_ACTIVE_LAST) {
                p.leftover_keyslot = -1;
                p.why_kept = "it is the last keyslot";
        }
        *ret = p;
}

/*
 * Ends a marker's operation: unregistered first, so the marker never verifies again, even if saved and
 * planted later (a crash between the two leaves a marker that is then only removed), then removed.
 */
static int marker_retire_and_remove(const char *state_dir, struct crypt_device *cd, const tg_pending_marker *m,
                                    int marker_id, unsigned *actions) {
        int r;

        r = tg_pending_marker_retire(state_dir, m);
        if (r < 0)
                return r;
        r = tg_luks_token_remove(cd, marker_id);
        if (r < 0)
                return r;
        tg_fault_point("after-marker-remove");
        if (actions)
                (*actions)++;
        return 0;
}

/*
 * Completes (token already switched) or undoes (not switched) the operation a
 * marker records, then removes the marker. Idempotent: the marker goes last,
 * so a crash in here leaves it for the next run.
 */
/* proven_keyslot: the keyslot this run proved to be the token's (its unsealed secret opened it), or -1. */
static int marker_resolve(const char *state_dir, struct crypt_device *cd, const char *device, int marker_id,
                          bool interrupted, int proven_keyslot, unsigned *actions) {
        tg_pending_marker m;
        tg_marker_plan p;
        const char *json = NULL;
        int r;

        r = crypt_token_json_get(cd, marker_id, &json);
        if (r < 0 || tg_pending_marker_from_string(json, &m) < 0) {
                log_warning("Token %d of %s is a malformed %s marker; removing it (it names nothing usable).",
                            marker_id, device, TG_PENDING_TOKEN_TYPE);
                r = tg_luks_token_remove(cd, marker_id);
                if (r >= 0 && actions)
                        (*actions)++;
                return r;
        }

        r = tg_pending_marker_authenticate(state_dir, cd, &m);
        if (r < 0)
                return log_error_rc(r, "Cannot check the pending marker (token %d) of %s: nothing was changed.",
                                    marker_id, device);
        tg_pending_marker_plan(state_dir, cd, marker_id, &m, proven_keyslot, &p);
        if (p.unauthenticated) {
                char slots[64] = "";

                if (m.old_keyslot >= 0)
                        snprintf(slots, sizeof slots, "%d (old) and ", m.old_keyslot);
                snprintf(slots + strlen(slots), sizeof slots - strlen(slots), "%d (new)", m.new_keyslot);
                log_warning("%s: the pending %s marker in token %d %s, so it may have been planted or edited in the "
                            "header (or it was written by a tpmguard older than signed markers, or on another "
                            "machine). Removing it without destroying any keyslot. It names keyslots %s: check "
                            "them with 'cryptsetup luksDump %s', and only if one is really left over remove it "
                            "with 'cryptsetup luksKillSlot %s N'.", device, m.operation, marker_id,
                            !m.mac[0] ? "has no MAC" :
                            m.mac_verified ? "is signed, but by an operation that is over (saved and planted again?)" :
                            "has a MAC that does not verify", slots, device, device);
                /* An edited marker ends its operation too: the original must not verify if planted again. */
                return marker_retire_and_remove(state_dir, cd, &m, marker_id, actions);
        }
        if (interrupted && tg_pending_marker_is_passphrase_op(&m))
                log_notice("%s: completing an interrupted %s (keyslot %d → %d): %s.", device, m.operation,
                           m.old_keyslot, m.new_keyslot,
                           p.roll_forward ? "the new keyslot was committed, the replaced one goes"
                                          : "the new keyslot was never committed, it goes");
        else if (interrupted && strcmp(m.operation, "migrate") == 0)
                log_notice("%s: resolving an interrupted migrate of token %d (new keyslot %d): %s.", device, m.token,
                           m.new_keyslot,
                           p.roll_forward ? "the tpmguard token was written, the old token and keyslot go"
                                          : "no tpmguard token was written, the new keyslot goes and the old token stays");
        else if (interrupted && m.token < 0)
                log_notice("%s: resolving an interrupted enroll (keyslot %d): %s.", device, m.new_keyslot,
                           p.roll_forward ? "its token was written, the enrollment is complete"
                                          : "no token was written, the new keyslot goes");
        else if (interrupted)
                log_notice("%s: completing an interrupted %s of token %d (keyslot %d → %d): %s.", device, m.operation,
                           m.token, m.old_keyslot, m.new_keyslot,
                           p.roll_forward ? "the token already uses the new keyslot, the old one goes"
                                          : "the token still uses the old keyslot, the new one goes");
        if (p.why_kept)
                log_warning("Keeping keyslot %d: %s.", p.roll_forward ? m.old_keyslot : m.new_keyslot, p.why_kept);
        if (p.leftover_token >= 0) {
                /* migrate: the old token first, then the keyslot it used (a crash between leaves the
                 * marker, which destroys the keyslot next time). */
                r = tg_luks_token_remove(cd, p.leftover_token);
                if (r < 0)
                        return r;
                tg_fault_point("after-old-token-remove");
                log_info("Removed the old token %d.", p.leftover_token);
                if (actions)
                        (*actions)++;
        }
        if (p.leftover_keyslot >= 0) {
                r = tg_luks_keyslot_destroy(cd, p.leftover_keyslot);
                if (r < 0)
                        return r;
                tg_fault_point(p.roll_forward ? "after-old-keyslot-destroy" : "after-new-keyslot-destroy");
                log_info("Destroyed keyslot %d.", p.leftover_keyslot);
                if (actions)
                        (*actions)++;
        }
        /* A destroyed recovery key leaves its label with no keyslot (libcryptsetup unassigns it). */
        r = tg_luks_remove_orphan_labels(cd, actions);
        if (r < 0)
                return r;
        return marker_retire_and_remove(state_dir, cd, &m, marker_id, actions);
}

int tg_pending_marker_resolve(const char *state_dir, struct crypt_device *cd, const char *device, int marker_id,
                              int proven_keyslot) {
        return marker_resolve(state_dir, cd, device, marker_id, false, proven_keyslot, NULL);
}

int tg_pending_markers_resolve_all(const char *state_dir, struct crypt_device *cd, const char *device, unsigned *actions) {
        for (int id = 0; id < tg_luks_tokens_max(); id++)
                if (tg_luks_token_has_type(cd, id, TG_PENDING_TOKEN_TYPE)) {
                        int r = marker_resolve(state_dir, cd, device, id, true, -1, actions);
                        if (r < 0)
                                return log_error_rc(r, "Could not resolve the interrupted operation in token %d; "
                                                    "run 'tpmguard status %s' for details.", id, device);
                }
        return 0;
}
