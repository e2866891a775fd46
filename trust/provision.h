/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "config.h"
#include "pinned.h"
#include "secret.h"

typedef struct tg_provision_options {
        const char *ek_cert_file;       /* NULL: read the EK certificate from TPM NV */
        const char *ek_ca;              /* manufacturer CA store; NULL: config->ek_ca */
        const char *ek_intermediates;   /* optional untrusted intermediates (PEM) */
        const char *output_dir;         /* NULL: config->state_dir */
        const tg_secret *endorsement_auth;
} tg_provision_options;

/*
 * Design §2 step 1: creates the EK signing key, proves that it lives in the
 * TPM of a manufacturer-certified EK (chain, EK re-creation, software
 * MakeCredential / TPM ActivateCredential), and pins its public area and
 * name atomically into the output directory. ret_pinned receives what was
 * written.
 */
int tg_provision(const tg_config *config, const tg_provision_options *options, tg_pinned_key *ret_pinned);
