/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libcryptsetup.h>
#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "macro.h"
#include "seal.h"
#include "secret.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(struct crypt_device *, crypt_free);
#define _cleanup_crypt_ _cleanup_(crypt_freep)

#define TG_KEYSLOT_SECRET_BYTES 32
#define TG_LUKS2_TOKENS_MAX 32    /* LUKS2 on-disk format limits */
#define TG_LUKS2_KEYSLOTS_MAX 32

/*
 * Header helpers. The LUKS2 header is attacker-editable: these read it
 * without trusting it (a token's "keyslots" entries are parsed strictly,
 * a token of another type is never ours) and refuse to destroy the last
 * keyslot whatever the header says.
 */
int tg_luks_tokens_max(void);
int tg_luks_keyslots_max(void);
/* Is token id active and of that type? */
bool tg_luks_token_has_type(struct crypt_device *cd, int id, const char *type);
bool tg_luks_keyslot_active(struct crypt_device *cd, int keyslot);
/* Does token id list keyslot in its "keyslots"? */
bool tg_luks_token_references(struct crypt_device *cd, int id, int keyslot);
/* Does any token other than except_token list keyslot? */
bool tg_luks_keyslot_referenced(struct crypt_device *cd, int keyslot, int except_token);
/* The first active keyslot token id lists, or -1 if none. */
int tg_luks_token_active_keyslot(struct crypt_device *cd, int id);
/* Parses token id strictly as a tpmguard token. */
int tg_luks_token_load(struct crypt_device *cd, int id, tg_token *ret);
int tg_luks_token_remove(struct crypt_device *cd, int id);
/* Destroys a keyslot; never the last active one. */
int tg_luks_keyslot_destroy(struct crypt_device *cd, int keyslot);

/* Token types tpmguard migrate replaces: TPM-bound tokens of its peers. */
bool tg_migratable_token_type(const char *type);

/* Opens a LUKS2 header; distinct errors for "no such device" and "not LUKS2". */
int tg_luks_open(const char *device, struct crypt_device **ret);

/* The PBKDF for keyslots holding a random TPM-sealed secret: PBKDF2-SHA512, 1000 iterations, no benchmark. */
int tg_luks_use_minimal_pbkdf(struct crypt_device *cd);
/* True when a keyslot has exactly that PBKDF: how tpmguard recognises a keyslot it created. */
bool tg_luks_keyslot_has_minimal_pbkdf(struct crypt_device *cd, int keyslot);
/*
 * True when a keyslot has PBKDF2 at exactly 1000 iterations (any hash): what
 * systemd-cryptenroll (sha512) and clevis luks bind (sha256) give the random
 * secrets of the tokens they add, never cryptsetup's benchmarked default for
 * a typed passphrase. Only a second check on migrate's old keyslot, never a
 * proof: systemd-cryptenroll's recovery keys have it too (tg_migrate proves
 * the keyslot through the old token's own plugin).
 */
bool tg_luks_keyslot_has_peer_pbkdf(struct crypt_device *cd, int keyslot);

/*
 * Keyslots for secrets a person types (tpmguard passwd, tpmguard
 * recovery-key): cryptsetup's default PBKDF for LUKS2 (argon2id, 2 s unless
 * time_ms says otherwise, at most 1 GiB), its memory bounded by half the RAM
 * and its threads by the CPUs online, so that the initrd of this machine can
 * open it. Benchmarked once here and then fixed (no second benchmark inside
 * libcryptsetup), so that the exact parameters are known before the keyslot
 * exists: the pending marker records them as the fingerprint of the keyslot
 * it announces (lifecycle.h).
 */
typedef struct tg_pbkdf_fingerprint {
        char type[16];            /* "" = none recorded */
        uint32_t iterations;
        uint32_t memory_kb;
        uint32_t parallel;
} tg_pbkdf_fingerprint;
int tg_luks_use_human_pbkdf(struct crypt_device *cd, uint32_t time_ms, tg_pbkdf_fingerprint *ret);
/* True when keyslot has exactly the PBKDF of the fingerprint (type non-empty). */
bool tg_luks_keyslot_has_pbkdf(struct crypt_device *cd, int keyslot, const tg_pbkdf_fingerprint *f);

/*
 * The recovery-key label: a token of type TG_RECOVERY_TOKEN_TYPE, no secret,
 * {"type":"tpmguard-recovery","keyslots":["N"],"version":1}, that marks
 * keyslot N as a recovery key made by `tpmguard recovery-key` (LUKS2 keyslots
 * carry no label). It is only a label: attacker-editable like the whole
 * header, it decides nothing but what status prints, and a keyslot it names
 * is not "used" by a token (it may be replaced and destroyed).
 */
#define TG_RECOVERY_TOKEN_TYPE "tpmguard-recovery"
bool tg_luks_keyslot_is_recovery_key(struct crypt_device *cd, int keyslot);

/*
 * The kept-keyslot label: a token of type TG_KEPT_TOKEN_TYPE, no secret,
 * {"type":"tpmguard-kept","keyslots":["N"],"version":1,"was":"clevis"},
 * written by tpmguard migrate when it removes a systemd-tpm2 or clevis token
 * but keeps the keyslot the token named, because nothing proved that keyslot
 * the token's (lifecycle/lifecycle.c: migrate_prove). Without it the keyslot
 * would look like any passphrase's, and tpmguard audit would call the volume
 * safe while a secret that crossed the bus (recorded by a sniffer, or read by
 * an interposer that made the proof fail) still opens it. audit reports it
 * as exposed until the owner removes the keyslot. Like every label it is
 * attacker-editable and decides nothing; it is not a "user" of the keyslot.
 */
#define TG_KEPT_TOKEN_TYPE "tpmguard-kept"
bool tg_luks_keyslot_is_kept(struct crypt_device *cd, int keyslot);
/* Is token id a label (recovery key, kept keyslot): no secret, never a user of the keyslot it names? */
bool tg_luks_token_is_label(struct crypt_device *cd, int id);
/* Writes the kept-keyslot label for keyslot (was: the removed token's type), unless one names it already. */
int tg_luks_kept_label_write(struct crypt_device *cd, int keyslot, const char *was);
/* Does a token other than except_token, and other than a label (recovery key, kept keyslot), list keyslot? */
bool tg_luks_keyslot_used_by_token(struct crypt_device *cd, int keyslot, int except_token);
/* Removes labels (recovery key, kept keyslot) whose keyslots no longer exist; counts into *actions (optional). */
int tg_luks_remove_orphan_labels(struct crypt_device *cd, unsigned *actions);

/*
 * Appends to KEYSLOTS (a JSON array) one object per active keyslot: its
 * number, the tokens that list it (labels never; pending markers only
 * WITH_PENDING) and what the header says it is ("token", "recovery-key",
 * "kept-unproven" or "passphrase"). What status and audit report: the header
 * is attacker-editable, so this decides nothing.
 */
int tg_luks_keyslots_describe(struct crypt_device *cd, bool with_pending, json_object *keyslots);

/* A fresh keyslot passphrase: 32 random bytes, base64 (44 characters, no NUL). */
int tg_keyslot_secret_new(tg_secret **ret);

typedef struct tg_enroll_options {
        tg_seal_params seal;
        int keyslot;                    /* CRYPT_ANY_SLOT or a slot number */
        const tg_secret *endorsement_auth; /* for the verification; NULL: empty */
        /* tg_migrate only: the enrollment's marker is a "migrate" one naming the token it replaces and the
         * keyslot only that token used (-1: keep it); resolving it removes both (lifecycle.h). */
        bool migrate;
        int migrate_token;
        int migrate_keyslot;
        /* tg_migrate only: proves migrate_keyslot the old token's. Called once the new keyslot is proven
         * and tpmguard's TPM connection is closed, before the token is written: >0 proven (the marker is
         * rewritten to name the keyslot, which then goes with the old token), 0 not proven (the marker
         * names none: it is kept, now and after a crash), <0 the enrollment is undone. Required whenever
         * migrate_keyslot >= 0: a keyslot number alone, the header's word, never gets a keyslot destroyed. */
        int (*migrate_prove)(struct crypt_device *cd, void *userdata);
        void *migrate_prove_userdata;
} tg_enroll_options;

/*
 * tpmguard enroll: verify the TPM, add a keyslot with a fresh random
 * secret, seal it, prove the seal by unsealing it over a verified session
 * and the keyslot by opening it, and only then write the token. Any failure
 * removes what this call added; existing keyslots are never touched.
 */
int tg_enroll(const tg_config *config, const char *device, const tg_secret *unlock_passphrase,
              const tg_enroll_options *options, int *ret_keyslot, int *ret_token);
