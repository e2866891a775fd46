/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libcryptsetup.h>
#include <stdbool.h>

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
/* Parses token id strictly as a tpmguard token. */
int tg_luks_token_load(struct crypt_device *cd, int id, tg_token *ret);
int tg_luks_token_remove(struct crypt_device *cd, int id);
/* Destroys a keyslot; never the last active one. */
int tg_luks_keyslot_destroy(struct crypt_device *cd, int keyslot);

/* Opens a LUKS2 header; distinct errors for "no such device" and "not LUKS2". */
int tg_luks_open(const char *device, struct crypt_device **ret);

/* The PBKDF for keyslots holding a random TPM-sealed secret: PBKDF2-SHA512, 1000 iterations, no benchmark. */
int tg_luks_use_minimal_pbkdf(struct crypt_device *cd);
/* True when a keyslot has exactly that PBKDF: how tpmguard recognises a keyslot it created. */
bool tg_luks_keyslot_has_minimal_pbkdf(struct crypt_device *cd, int keyslot);

/* A fresh keyslot passphrase: 32 random bytes, base64 (44 characters, no NUL). */
int tg_keyslot_secret_new(tg_secret **ret);

typedef struct tg_enroll_options {
        tg_seal_params seal;
        int keyslot;                    /* CRYPT_ANY_SLOT or a slot number */
} tg_enroll_options;

/*
 * tpmguard enroll: verify the TPM, add a keyslot with a fresh random
 * secret, seal it, prove the seal by unsealing it over a verified session
 * and the keyslot by opening it, and only then write the token. Any failure
 * removes what this call added; existing keyslots are never touched.
 */
int tg_enroll(const tg_config *config, const char *device, const tg_secret *unlock_passphrase,
              const tg_enroll_options *options, int *ret_keyslot, int *ret_token);
