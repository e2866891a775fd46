/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <libcryptsetup.h>

#include "luks.h"
#include "pending-marker.h"
#include "secret.h"

/*
 * One crash-safe keyslot change (lifecycle/keyslot-change.c): the
 * transaction under enroll (and migrate's enrolment), rotate, reseal with a
 * passphrase, recovery-key and passwd.
 *
 *   begin   the pending marker signed and written, the new keyslot added
 *           (authorized by a secret that opens an existing one), the marker
 *           bound to it;
 *   ...     the caller's middle (seal and test, label, show, the token
 *           written or switched, the marker rewritten "committed");
 *   commit  the marker resolved: what the header now says is complete
 *           stays, the keyslot it replaces goes (only when provably ours),
 *           the marker is removed;
 *   undo    the marker resolved before the switch: the new keyslot goes,
 *           the marker is removed.
 *
 * Commit and undo are the code a later run uses after a crash
 * (marker-resolve.c): the header decides (token switched, marker committed),
 * so a kill at any point leaves a state the next command finishes or undoes.
 * A failure inside begin undoes what begin wrote.
 */

/* tg_keyslot_change_params.marker_id: the highest free token id, so that a token written later gets the lowest. */
#define TG_KEYSLOT_CHANGE_MARKER_HIGHEST (-2)

typedef struct tg_keyslot_change_params {
        const char *operation;          /* the marker's "operation" */
        int token;                      /* the marker's "token"; -1: none */
        int old_keyslot;                /* the marker's "old_keyslot"; -1: none */
        int new_keyslot;                /* tg_luks_keyslot_free()'s, or the caller's explicit choice */
        int marker_id;                  /* a token id, CRYPT_ANY_TOKEN (the lowest free) or TG_KEYSLOT_CHANGE_MARKER_HIGHEST */
        tg_pbkdf_fingerprint pbkdf;     /* a typed secret's keyslot: its PBKDF as set on cd; type "": none */
        const tg_secret *authorization; /* opens an existing keyslot */
        const tg_secret *secret;        /* what the new keyslot opens with */
        /* Signal checks (lib/interrupt.h) before the first write and after the keyslot add, the latter
         * named by this step; NULL: none (the caller installs no handlers). */
        const char *interrupt_step;
        /* The wording each caller has always used, kept word for word: */
        bool eperm_is_wrong_passphrase; /* -EPERM on the add: "No keyslot of DEVICE opens with the given passphrase." */
        bool name_device;               /* "Cannot add keyslot N to DEVICE: ...", and "Added keyslot N." (enroll) */
        const char *undone;             /* logged after a complete undo; NULL: "Nothing was changed." */
} tg_keyslot_change_params;

typedef struct tg_keyslot_change {
        const char *state_dir;
        struct crypt_device *cd;
        const char *device;
        tg_pending_marker marker;       /* as last written; the caller may change it and rewrite it */
        int marker_id;
        const char *undone;
} tg_keyslot_change;

/* Writes the signed marker, adds the keyslot, binds the marker to it. ret: written only on success. */
int tg_keyslot_change_begin(const char *state_dir, struct crypt_device *cd, const char *device,
                            const tg_keyslot_change_params *params, tg_keyslot_change *ret);
/* Signs c->marker again (after the caller changed it) and serializes it, for the caller's one rewrite of it. */
int tg_keyslot_change_sign(tg_keyslot_change *c, char **ret);
/* Resolves the marker as the header now says: proven_keyslot as for tg_pending_marker_resolve(). */
int tg_keyslot_change_commit(tg_keyslot_change *c, int proven_keyslot);
/* Undoes the change (the same resolution, before the switch) and says how that went. */
void tg_keyslot_change_undo(tg_keyslot_change *c);
