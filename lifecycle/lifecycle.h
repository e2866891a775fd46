/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>
#include <libcryptsetup.h>

#include "config.h"
#include "luks.h"
#include "seal.h"
#include "secret.h"

/*
 * Lifecycle of an enrolled volume: change-pin, rotate, reseal, remove and
 * cleanup. Every secret crosses the bus only inside the verified
 * session of a tg_verify()'d TPM, and every operation is crash-safe: killed
 * after any header write or TPM command it leaves a volume that opens with
 * the recovery passphrase and with the old or the new TPM credential, and a
 * rerun completes it (docs/lifecycle.md).
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
#define TG_MARKER_MAC_HEX_SIZE 65   /* 64 hex digits and the NUL */

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
        char operation[16];   /* "enroll", "migrate", "rotate", "reseal", "recovery-key" or "passwd" */
        int token;            /* enroll: -1; migrate: the old (systemd-tpm2 or clevis) token; rotate, reseal: the
                               * tpmguard token being moved; recovery-key: the id of the label token it writes;
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
/* Completes or undoes what marker token marker_id records, then removes it (lifecycle/luks.c: enroll). */
struct crypt_device;
int tg_pending_marker_resolve(const char *state_dir, struct crypt_device *cd, const char *device, int marker_id);

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

typedef struct tg_lifecycle_result {
        int token;            /* the token id after the operation */
        int keyslot;          /* its keyslot after the operation */
        int old_keyslot;      /* the keyslot it had before (== keyslot when unchanged) */
} tg_lifecycle_result;

/*
 * Reads (without changing anything) the tpmguard token a command will act
 * on, so that the caller asks only for what is needed (a PIN or not, which
 * PCR bank). token: a token id, or CRYPT_ANY_TOKEN for the only tpmguard
 * token (none: -TG_ERR_NOT_FOUND; two or more: -TG_ERR_INVALID listing them).
 */
int tg_lifecycle_token_peek(const char *device, int token, tg_token *ret);

/*
 * Unseal with pin (over a verified session), reseal the same secret with
 * new_pin (fresh salt; same PCR policy), test-unseal it, and replace the
 * token in one header write. A wrong pin changes nothing. new_pin NULL
 * removes the PIN.
 */
int tg_change_pin(const tg_config *config, const char *device, int token,
                  const tg_secret *pin, const tg_secret *new_pin, tg_lifecycle_result *ret);

/*
 * A new random secret in a new keyslot (added with the unsealed old secret),
 * sealed with the same PIN and PCR policy and test-unsealed; the token is
 * switched to it in one header write, then the old keyslot is destroyed.
 */
int tg_rotate(const tg_config *config, const char *device, int token,
              const tg_secret *pin, tg_lifecycle_result *ret);

typedef struct tg_reseal_params {
        uint16_t pcr_bank;                       /* the new policy's bank (required) */
        uint32_t pcr_mask;                       /* the new policy's PCRs */
        const tg_pcr_values *explicit_values;    /* NULL: the current values */
        const tg_secret *pin;                    /* the current PIN, to unseal (NULL with unlock_passphrase) */
        const tg_secret *new_pin;                /* the PIN of the new seal; NULL: no PIN */
        const tg_secret *unlock_passphrase;      /* non-NULL: authorize with it instead of unsealing */
        bool allow_unextended;                   /* see tg_seal_params */
} tg_reseal_params;

/*
 * Seal to new PCR values under the policy the caller gives (never the old
 * token's fields). Authorized by unsealing the current secret (then
 * the token is replaced in one write, the keyslot stays), or, with
 * unlock_passphrase, by a passphrase of the volume (then a new keyslot with
 * a new secret is added and the old token and keyslot are dropped, as in
 * rotate). When the new policy cannot be tested now (explicit values that
 * differ from the current ones), the test unseal is skipped with a warning.
 */
int tg_reseal(const tg_config *config, const char *device, int token,
              const tg_reseal_params *params, tg_lifecycle_result *ret);

/*
 * Authorization for the passphrase operations: unsealing the tpmguard
 * token (pin, over the verified session; the unsealed secret authorizes the
 * keyslot add and never leaves this process), or, with passphrase, an
 * existing passphrase or recovery key of the volume (no TPM involved).
 */
typedef struct tg_passphrase_auth {
        int token;                         /* CRYPT_ANY_TOKEN or an id */
        const tg_secret *pin;              /* the token's PIN, when it has one */
        const tg_secret *passphrase;       /* non-NULL: authorize with it instead of the token */
        uint32_t pbkdf_time_ms;            /* 0: cryptsetup's default (2000 ms) */
} tg_passphrase_auth;

typedef struct tg_passphrase_result {
        int new_keyslot;
        int old_keyslot;                   /* -1: none replaced */
        int label_token;                   /* recovery-key: the label token, else -1 */
        int authorized_by;                 /* the keyslot that authorized the change */
} tg_passphrase_result;

/*
 * tpmguard recovery-key: a fresh recovery key (recovery.h) in a new keyslot
 * with the typed-secret PBKDF, labelled with a TG_RECOVERY_TOKEN_TYPE token;
 * show() is called with it once, after it is proven to open the new keyslot
 * and before the change is committed; nothing else sees it. replace >= 0:
 * that keyslot (a typed passphrase or recovery key, never one a token uses)
 * is destroyed after the commit. Crash-safe with a pending marker.
 */
int tg_recovery_key_enroll(const tg_config *config, const char *device, const tg_passphrase_auth *auth, int replace,
                           int (*show)(const tg_secret *key, int keyslot, void *userdata), void *userdata,
                           tg_passphrase_result *ret);

/*
 * tpmguard passwd: new_passphrase goes into a new keyslot (typed-secret
 * PBKDF), proven, committed, then keyslot (the typed passphrase being
 * changed; -1: the one the authorizing passphrase opened, or the only typed
 * passphrase when authorized by the token) is destroyed. The new passphrase
 * never reaches the TPM.
 */
int tg_passphrase_change(const tg_config *config, const char *device, const tg_passphrase_auth *auth, int keyslot,
                         const tg_secret *new_passphrase, tg_passphrase_result *ret);

/* Token types tpmguard migrate replaces: TPM-bound tokens of its peers. */
bool tg_migratable_token_type(const char *type);

typedef struct tg_migrate_result {
        int token;              /* the new tpmguard token */
        int keyslot;            /* its keyslot */
        int old_token;          /* the replaced token */
        int old_keyslot;        /* its keyslot */
        bool old_token_removed; /* false with keep_old */
        bool old_keyslot_destroyed;
        bool old_keyslot_unproven; /* kept: its token's secret was not shown to open it */
        char old_type[32];
} tg_migrate_result;

/*
 * tpmguard migrate: replaces token old_token (systemd-tpm2 or clevis) by a
 * tpmguard token. Authorized only by unlock_passphrase (a recovery
 * passphrase or key file), never by the old token: unlocking through it is
 * the path an interposer reads. Enrols a tpmguard token into a new keyslot
 * with options->seal (the caller's policy), proves it by a test unseal, then
 * removes the old token and the keyslot only it used (never a keyslot the
 * passphrase opens or another token uses, never the last), and that keyslot
 * only when this run proved it the old token's: a systemd-tpm2 token's own
 * secret (through systemd's token plugin, old_pin if it has a PIN) opened
 * exactly it. Otherwise (clevis, no PIN, no plugin, wrong PIN) the keyslot
 * is kept and old_keyslot_unproven set. keep_old: the old token and keyslot
 * stay, and the old token is not used at all. Crash-safe through a
 * "migrate" pending marker, which names the old keyslot only when proven.
 */
int tg_migrate(const tg_config *config, const char *device, int old_token, const tg_secret *unlock_passphrase,
               const tg_secret *old_pin, const tg_enroll_options *options, bool keep_old, tg_migrate_result *ret);

/* 1 if token TOKEN of DEVICE is a systemd-tpm2 token with a PIN ("tpm2-pin": true), 0 if not, <0 on error. */
int tg_migrate_token_wants_pin(const char *device, int token);

/* Removes a tpmguard token and its keyslot; never the last active keyslot. */
int tg_remove(const tg_config *config, const char *device, int token, tg_lifecycle_result *ret);

/*
 * Finishes or undoes interrupted operations (pending markers) and removes
 * tpmguard tokens whose keyslot no longer exists. ret_actions (optional):
 * how many things were repaired.
 */
int tg_cleanup(const tg_config *config, const char *device, unsigned *ret_actions);
