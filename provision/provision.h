/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "config.h"
#include "lockout.h"
#include "pinned.h"
#include "secret.h"

typedef struct tg_provision_options {
        const char *ek_cert_file;       /* NULL: read the EK certificate from TPM NV */
        const char *ek_ca;              /* manufacturer CA store; NULL: config->ek_ca */
        const char *ek_intermediates;   /* optional untrusted intermediates (PEM) */
        const char *output_dir;         /* NULL: config->state_dir */
        const tg_secret *endorsement_auth;
        const tg_secret *lockout_auth;  /* --lockout-auth-file: a lockout password someone else set */
        /*
         * --trust-on-first-use: when the TPM has no EK certificate in NV (and none is
         * given), pin the EK signing key unproven (tg_pinned_key.tofu). With a certificate
         * in NV the key is proven as usual.
         */
        bool trust_on_first_use;
        const tg_secret *owner_auth;    /* --owner-auth-file: to persist the EK signing key */
} tg_provision_options;

/*
 * Design §2 step 1: creates the EK signing key, proves that it lives in the
 * TPM of a manufacturer-certified EK (chain, EK re-creation, software
 * MakeCredential / TPM ActivateCredential), and pins its public area and
 * name atomically into the output directory. ret_pinned receives what was
 * written.
 *
 * Then, on a verification with the key just pinned, the EK signing key is
 * persisted at TG_EK_SIGNING_HANDLE (owner authorization; skipped with a
 * warning when that fails or the handle holds another key) and the handle is
 * recorded in the pinned file, so that verifications read it instead of
 * re-creating it; and the lockout hierarchy
 * (lockout.h): taken when its password is empty, stored in the output
 * directory, and the DA parameters of config set; ret_lockout says what was
 * done. A failure there returns an error with the key pinned (ret_pinned
 * written): 'tpmguard lockout setup' finishes it.
 *
 * No hierarchy password crosses the bus in clear: the EK is created in a
 * session salted to the NULL key (checked against the kernel's null_name
 * when there is one), the EK signing key and the EK's PolicySecret in a
 * session salted to the certified EK, the lockout commands in the verified
 * TPM's session.
 */
int tg_provision(const tg_config *config, const tg_provision_options *options, tg_pinned_key *ret_pinned,
                 tg_lockout_result *ret_lockout);
