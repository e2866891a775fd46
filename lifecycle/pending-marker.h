/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <libcryptsetup.h>

#include "luks.h"

/*
 * The pending marker (lifecycle/pending-marker.c; resolving it:
 * lifecycle/marker-resolve.c): the record of an
 * operation that changes keyslots, in the header itself.
 *
 * Operations that add a keyslot (enroll; rotate; reseal with the recovery
 * passphrase) first write a "pending" marker token, type
 * TG_PENDING_TOKEN_TYPE, naming the token, the old keyslot and the new
 * keyslot (for enroll: token and old keyslot -1, complete once a token
 * references the new keyslot); they bind it to the new keyslot right after adding that, and
 * remove it last. A marker found later is an interrupted operation: it is
 * rolled forward when the token already points at the new keyslot (the old
 * keyslot is destroyed), rolled back otherwise (the new keyslot is
 * destroyed). Every lifecycle command does this first; `tpmguard cleanup`
 * does only this.
 */
#define TG_PENDING_TOKEN_TYPE "tpmguard-pending"
#define TG_PENDING_VERSION 1

/* The sizes of the marker's "mac" and "nonce" fields (lifecycle/marker-auth.h says what they are). */
#define TG_MARKER_MAC_HEX_SIZE 65   /* 64 hex digits and the NUL */
#define TG_MARKER_NONCE_HEX_SIZE 33 /* 32 hex digits and the NUL */

/*
 * The passphrase operations (recovery-key, passwd) use the same marker with
 * a different commit point, since no tpmguard token switches: the marker is
 * rewritten with "committed": true once the new keyslot is proven (and, for
 * a recovery key, shown). Resolving then completes (destroys old_keyslot)
 * when committed, and undoes (destroys new_keyslot) otherwise. Their new
 * keyslot has a benchmarked argon2id PBKDF, not tpmguard's fixed one, so the
 * marker records its exact parameters ("pbkdf") as the fingerprint for the
 * window before the marker is bound to it.
 */
/*
 * migrate (tpmguard migrate: a systemd-tpm2 or clevis token replaced by a
 * tpmguard one) is an enrollment whose marker also names the old token
 * ("token") and the keyslot only it used ("old_keyslot"; absent when that
 * keyslot stays, and absent until this run proved it the old token's: the
 * marker is rewritten, signed again, to name it). It completes once a
 * tpmguard token references the new keyslot: then the old token is removed,
 * and the old keyslot destroyed
 * unless another token uses it or it is the last; until then it is undone
 * like an enrollment and the old token is untouched.
 */
typedef struct tg_pending_marker {
        char operation[16];   /* "enroll", "replace", "migrate", "rotate", "reseal", "recovery-key" or "passwd" */
        int token;            /* enroll: -1; migrate: the old (systemd-tpm2 or clevis) token; rotate, reseal: the
                               * tpmguard token being moved; replace (enroll --wipe-slot): the tpmguard token
                               * whose id the new token takes, like rotate's; recovery-key: the id of the label token it writes;
                               * passwd: -1 */
        int old_keyslot;      /* the keyslot before the operation; -1: none (enroll; recovery-key without --replace;
                               * migrate keeping the old keyslot) */
        int new_keyslot;      /* the keyslot the operation adds */
        int bound_keyslot;    /* the marker's own "keyslots" entry, -1 if none yet */
        bool committed;       /* passphrase operations: past the commit point */
        tg_pbkdf_fingerprint pbkdf; /* passphrase operations: the new keyslot's PBKDF; type "" if none */
        char mac[TG_MARKER_MAC_HEX_SIZE]; /* "mac", lowercase hex; "" if absent */
        char nonce[TG_MARKER_NONCE_HEX_SIZE]; /* "nonce", lowercase hex; "" if absent (never authentic) */
        bool authenticated;   /* set by tg_pending_marker_authenticate(), never by the parser */
        bool mac_verified;    /* ditto: the MAC verifies (authenticated also needs the nonce registered) */
} tg_pending_marker;

/* Is this a passphrase operation's marker (committed flag decides, not a token)? */
bool tg_pending_marker_is_passphrase_op(const tg_pending_marker *m);

/* Strict parser and writer of the marker token (type, keyslots, operation, token, old/new keyslot). */
int tg_pending_marker_from_string(const char *json, tg_pending_marker *ret);
int tg_pending_marker_to_string(const tg_pending_marker *m, char **ret);
