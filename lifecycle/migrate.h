/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "config.h"
#include "enroll.h"
#include "secret.h"

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
