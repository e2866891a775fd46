/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <time.h>
#include <tss2/tss2_rc.h>

#include "ek.h"
#include "error.h"
#include "log.h"
#include "provision.h"
#include "tpm.h"
#include "util.h"

int tg_provision(const tg_config *config, const tg_provision_options *options, tg_pinned_key *ret_pinned) {
        static const TPM2B_SENSITIVE_CREATE empty_sensitive = {};
        static const TPM2B_DATA no_outside_info = {};
        static const TPML_PCR_SELECTION no_pcrs = {};
        _cleanup_tpm_ tg_tpm *tpm = NULL;
        _cleanup_handle_ tg_handle signer = TG_HANDLE_NULL;
        _cleanup_free_ TPM2B_PUBLIC *signer_public = NULL;
        _cleanup_free_ char *cert_hex = NULL, *anchor_hex = NULL;
        tg_ek_result ek = {};
        tg_ek_options ek_options = {
                .cert_file = options->ek_cert_file,
                .ca_store = options->ek_ca ?: config->ek_ca,
                .intermediates_file = options->ek_intermediates,
        };
        const char *dir = options->output_dir ?: config->state_dir;
        tg_pinned_key pinned = {};
        TPM2B_PUBLIC tmpl;
        time_t now = time(NULL);
        struct tm tm;
        TSS2_RC rc;
        int r;

        if (!ek_options.ca_store || ek_options.ca_store[strspn(ek_options.ca_store, " \t")] == '\0')
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "No manufacturer CA store: give --ek-ca FILE|DIR or set ek_ca in %s (its default "
                                    "is the TPM manufacturers' CAs tpmguard ships). Without it the EK certificate "
                                    "cannot be trusted.", config->path);

        r = tg_tpm_open(config->tcti, &tpm);
        if (r < 0)
                return r;
        r = tg_tpm_set_hierarchy_auth(tpm->esys, ESYS_TR_RH_ENDORSEMENT, options->endorsement_auth, "endorsement");
        if (r < 0)
                return r;

        tg_progress("Provisioning: creating the EK signing key...");
        tg_template_ek_signing_key(&tmpl);
        signer.esys = tpm->esys;
        rc = Esys_CreatePrimary(tpm->esys, ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                &empty_sensitive, &tmpl, &no_outside_info, &no_pcrs,
                                &signer.tr, &signer_public, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS) {
                TSS2_RC base = tg_tpm_rc_base(rc);
                if (base == TPM2_RC_BAD_AUTH || base == TPM2_RC_AUTH_FAIL)
                        return log_error_rc(-TG_ERR_AUTH_NEEDED,
                                            "The endorsement hierarchy has a password. Give it with --endorsement-auth-file.");
                return tg_tpm_rc(rc, "CreatePrimary (EK signing key)");
        }
        r = tg_pinned_public_check(&signer_public->publicArea);
        if (r < 0)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM returned a key that is not of the EK signing key template: an "
                                    "interposer may be substituting keys. Nothing was pinned; provision on a "
                                    "machine whose TPM bus you trust.");
        pinned.public = *signer_public;
        r = tg_public_name(&signer_public->publicArea, &pinned.name);
        if (r < 0)
                return r;

        tg_progress("Provisioning: proving the EK signing key against the EK certificate "
                    "(EK re-creation and credential activation; several seconds on some TPMs)...");
        r = tg_ek_attest_key(tpm, &ek_options, signer.tr, &pinned.name, &ek);
        if (r < 0)
                return r;

        pinned.ek_nv_index = ek.nv_index;
        snprintf(pinned.ek_template, sizeof pinned.ek_template, "%s", ek.template_name ?: "");
        snprintf(pinned.ek_cert_issuer, sizeof pinned.ek_cert_issuer, "%s", ek.cert_issuer ?: "");
        snprintf(pinned.ek_anchor_vendor, sizeof pinned.ek_anchor_vendor, "%s", ek.anchor.vendor ?: "");
        r = tg_hex_encode(ek.cert_sha256, sizeof ek.cert_sha256, &cert_hex);
        if (r >= 0)
                r = tg_hex_encode(ek.anchor.sha256, sizeof ek.anchor.sha256, &anchor_hex);
        tg_ek_result_done(&ek);
        if (r < 0)
                return r;
        snprintf(pinned.ek_anchor_sha256, sizeof pinned.ek_anchor_sha256, "%s", anchor_hex);
        snprintf(pinned.ek_cert_sha256, sizeof pinned.ek_cert_sha256, "%s", cert_hex);
        gmtime_r(&now, &tm);
        strftime(pinned.provisioned_at, sizeof pinned.provisioned_at, "%Y-%m-%dT%H:%M:%SZ", &tm);

        tg_progress_done();
        r = tg_pinned_key_save(dir, &pinned);
        if (r < 0)
                return r;
        if (ret_pinned)
                *ret_pinned = pinned;
        return 0;
}
