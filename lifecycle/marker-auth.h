/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <libcryptsetup.h>

#include "pending-marker.h"
#include "secret.h"

/*
 * Authentication (lifecycle/marker-auth.c): the header is attacker-writable, so
 * tpmguard signs every marker it writes ("mac": HMAC-SHA256 under the
 * root-only random key state_dir/marker.key, created on the first marker
 * write, over the volume UUID and the marker's fields except "keyslots").
 * Resolving a marker whose MAC is missing (an older tpmguard's, or a planted
 * one) or wrong (edited, or written on another machine) destroys no
 * keyslot: the marker is removed with a warning naming its keyslots.
 */
#define TG_MARKER_KEY_FILE_NAME "marker.key"
#define TG_MARKER_KEY_SIZE 32

/*
 * Freshness: a MAC proves that tpmguard wrote a marker for this volume, not
 * that its operation is still open. A marker saved from the header (during
 * an operation, or left by a crash) and planted again after its keyslot
 * numbers were reused would direct the destruction of whatever holds them
 * now (the recovery passphrase, after a second passwd). So each operation's
 * marker carries a random "nonce", inside the MAC, that is registered as a
 * file state_dir/pending-markers/NONCE before the marker is first written
 * and unregistered before the marker is removed: only a marker of an
 * operation still open on this machine is authentic.
 */
#define TG_MARKER_NONCE_DIR_NAME "pending-markers"
#define TG_MARKER_NONCE_SIZE 16

/*
 * The marker key, state_dir/marker.key: 32 random bytes, root-owned, mode
 * 0600, in a directory only root writes (tg_check_trusted); anything else is
 * refused (-TG_ERR_CONFIG, with the fix). -TG_ERR_NOT_FOUND when it does not
 * exist and !create; with create it is made (temporary file, then link(), so
 * never half-written and never replaced).
 */
int tg_marker_key_load(const char *state_dir, bool create, tg_secret **ret);
/* The MAC of m (its "mac" and "keyslots" aside) for the volume with this UUID, as lowercase hex. */
int tg_pending_marker_mac(const tg_secret *key, const char *uuid, const tg_pending_marker *m,
                          char ret[TG_MARKER_MAC_HEX_SIZE]);
/* Does m carry the right MAC for this key and UUID (constant-time compare)? A missing "mac" never does. */
bool tg_pending_marker_mac_matches(const tg_secret *key, const char *uuid, const tg_pending_marker *m);
/*
 * Sets m->mac for the volume cd, creating the key on first use. Call before every marker write. The
 * first call for an operation (m->nonce empty) also draws its nonce and registers it in state_dir.
 */
int tg_pending_marker_sign(const char *state_dir, struct crypt_device *cd, tg_pending_marker *m);
/*
 * Sets m->authenticated: true only when the MAC verifies under the key in
 * state_dir and the marker's nonce is registered there (its operation is
 * still open). No key, no "mac", a wrong MAC, no or an unregistered nonce:
 * false (returns 0). An error only when the key exists but cannot be trusted
 * or read, or the registry cannot be read (nothing is decided then).
 */
int tg_pending_marker_authenticate(const char *state_dir, struct crypt_device *cd, tg_pending_marker *m);
/* Unregisters m's nonce (its operation is over): call before the marker is removed. 0 if it had none. */
int tg_pending_marker_retire(const char *state_dir, const tg_pending_marker *m);
