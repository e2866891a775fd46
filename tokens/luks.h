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

#define TG_TOKEN_TYPE "tpmguard"
#define TG_KEYSLOT_SECRET_BYTES 32

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
