/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libcryptsetup.h>
#include <stdbool.h>
#include <stdint.h>

#include "macro.h"
#include "secret.h"
#include "token.h"

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
/* The first keyslot that is inactive and named by no token (the one rule for a new keyslot). */
int tg_luks_keyslot_free(struct crypt_device *cd, const char *device);

/* Token types tpmguard migrate replaces: TPM-bound tokens of its peers. */
bool tg_migratable_token_type(const char *type);

/* Opens a LUKS2 header; distinct errors for "no such device" and "not LUKS2". */
int tg_luks_open(const char *device, struct crypt_device **ret);
/* Refuses a device this process cannot write (read-only loop, blockdev --setro), naming the cause. */
int tg_luks_check_writable(const char *device);
/* tg_luks_open() of a volume whose header the caller will change: refused when not writable. */
int tg_luks_open_writable(const char *device, struct crypt_device **ret);
/* Whether passphrase opens a keyslot (-TG_ERR_BAD_PIN when none); the keyslot it opened. */
int tg_luks_passphrase_check(struct crypt_device *cd, const char *device, const tg_secret *passphrase);

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
 * it announces (pending-marker.h).
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


/* A fresh keyslot passphrase: 32 random bytes, base64 (44 characters, no NUL). */
int tg_keyslot_secret_new(tg_secret **ret);
