/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <libcryptsetup.h>

#include "pending-marker.h"

/*
 * Completes or undoes what marker token marker_id records, then removes it (the commit and the undo
 * of enroll, rotate, reseal and the passphrase operations). proven_keyslot: the keyslot this run
 * proved to be the token's (its unsealed secret opened it), or -1.
 */
int tg_pending_marker_resolve(const char *state_dir, struct crypt_device *cd, const char *device, int marker_id,
                              int proven_keyslot);
/* Resolves every pending marker of the volume, as an interrupted operation (every lifecycle command does
 * this first). actions (optional): counts what was repaired. */
int tg_pending_markers_resolve_all(const char *state_dir, struct crypt_device *cd, const char *device,
                                   unsigned *actions);

/* What resolving a marker does, decided without writing anything (status shows it). */
typedef struct tg_marker_plan {
        bool unauthenticated;   /* the MAC is missing or wrong: the marker is only removed, nothing destroyed */
        bool roll_forward;      /* the token already points at the new keyslot */
        int leftover_keyslot;   /* the keyslot to destroy, -1 if none */
        int leftover_token;     /* migrate: the old token to remove, -1 if none */
        const char *why_kept;   /* set when a keyslot looks left over but is not ours to destroy */
} tg_marker_plan;
/* proven_keyslot: a keyslot the caller proved to be the token's (its unsealed secret opened it), or -1.
 * Call tg_pending_marker_authenticate() first: an unauthenticated marker plans nothing. */
void tg_pending_marker_plan(const char *state_dir, struct crypt_device *cd, int marker_id, const tg_pending_marker *m,
                            int proven_keyslot, tg_marker_plan *ret);
