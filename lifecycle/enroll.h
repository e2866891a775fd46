/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <libcryptsetup.h>
#include <stdbool.h>

#include "config.h"
#include "seal.h"
#include "secret.h"

typedef struct tg_enroll_options {
        tg_seal_params seal;
        int keyslot;                    /* CRYPT_ANY_SLOT or a slot number */
        const tg_secret *endorsement_auth; /* for the verification; NULL: empty */
        /* tg_migrate only: the enrollment's marker is a "migrate" one naming the token it replaces and the
         * keyslot only that token used (-1: keep it); resolving it removes both (pending-marker.h). */
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
        /* enroll --wipe-slot, as tg_enroll_plan_wipe() planned it (all zero: nothing is replaced). */
        struct {
                bool replace;           /* the new token takes replace_token's id, in one header write, and the
                                         * marker ("replace") destroys replace_keyslot once it is committed */
                int replace_token;
                int replace_keyslot;
                uint32_t remove_tokens; /* further tpmguard tokens, removed (tg_remove) after the commit */
                bool destroy;           /* destroy_keyslot (not a tpmguard token's) destroyed after the commit */
                int destroy_keyslot;
        } wipe;
} tg_enroll_options;

/*
 * tpmguard enroll: verify the TPM, add a keyslot with a fresh random
 * secret, seal it, prove the seal by unsealing it over a verified session
 * and the keyslot by opening it, and only then write the token. Any failure
 * removes what this call added; existing keyslots are never touched.
 */
int tg_enroll(const tg_config *config, const char *device, const tg_secret *unlock_passphrase,
              const tg_enroll_options *options, int *ret_keyslot, int *ret_token);

/*
 * The cheap checks of an enrollment, made before any secret is asked: the
 * volume exists, is LUKS2 and writable, has a free keyslot (or the one
 * options->keyslot names), the TPM answers and verifies, and the PCRs to seal
 * to were extended. Changes nothing; tg_enroll() checks all of it again.
 */
int tg_enroll_check(const tg_config *config, const char *device, const tg_enroll_options *options);

/*
 * enroll --wipe-slot, decided before any secret is asked. A volume that has
 * a tpmguard token gets no second one (every boot would ask one PIN per
 * token) unless wipe_slot is "tpmguard" (its tpmguard tokens are replaced)
 * or the number of a keyslot one of them uses. Another keyslot number is
 * destroyed after the enrollment, refused when it is the only way in besides
 * the TPM (a passphrase or recovery key is what survives a lost TPM).
 * wipe_slot NULL: no wipe. Fills options->wipe; changes nothing.
 */
int tg_enroll_plan_wipe(const char *device, const char *wipe_slot, tg_enroll_options *options);
