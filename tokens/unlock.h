/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libcryptsetup.h>

#include "secret.h"

/*
 * The whole unlock path behind the token plugin: configuration from /etc
 * (never from the token), token JSON validated, TPM verified, secret
 * unsealed over verified sessions, then checked against the volume binding
 * of cd (tokens/binding.h; skipped when cd is NULL, for tests that have no
 * volume). pin may be NULL. Returns the keyslot
 * passphrase, or one of: -TG_ERR_PIN_NEEDED, -TG_ERR_BAD_PIN,
 * -TG_ERR_LOCKOUT, -TG_ERR_PCR_MISMATCH, -TG_ERR_INTERPOSER,
 * -TG_ERR_NOT_PROVISIONED, -TG_ERR_NO_NULL_NAME, -TG_ERR_TPM_UNREACHABLE,
 * -TG_ERR_TOKEN, -TG_ERR_TPM, -TG_ERR_VOLUME_BINDING, ...
 */
int tg_unlock_token_json(struct crypt_device *cd, const char *token_json, const tg_secret *pin,
                         tg_secret **ret_passphrase);
