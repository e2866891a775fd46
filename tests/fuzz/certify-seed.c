/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Writes one fuzz-certify seed recorded from a real TPM (tests/fuzz/make-seeds
 * runs it against swtpm): the NULL primary certified by the EK signing key
 * with a random nonce, in the input layout of fuzz-certify.c. tpm2-tools 5.4
 * cannot pass qualifying data to TPM2_Certify, hence this small client.
 *
 *   certify-seed TCTI OUTPUT
 */
#include <openssl/rand.h>
#include <stdio.h>

#include "attest.h"
#include "error.h"
#include "log.h"
#include "tpm.h"

static int create_primary(tg_tpm *tpm, ESYS_TR hierarchy, const TPM2B_PUBLIC *tmpl, tg_handle *ret, TPM2B_PUBLIC *ret_public) {
        TPM2B_SENSITIVE_CREATE sensitive = {};
        TPM2B_DATA outside = {};
        TPML_PCR_SELECTION pcrs = {};
        TPM2B_PUBLIC *out = NULL;
        ESYS_TR tr = ESYS_TR_NONE;
        int r;

        r = tg_tpm_rc(Esys_CreatePrimary(tpm->esys, hierarchy, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                         &sensitive, tmpl, &outside, &pcrs, &tr, &out, NULL, NULL, NULL),
                      "CreatePrimary");
        if (r < 0)
                return r;
        *ret = (tg_handle) { .esys = tpm->esys, .tr = tr };
        *ret_public = *out;
        Esys_Free(out);
        return 0;
}

int main(int argc, char **argv) {
        _cleanup_tpm_ tg_tpm *tpm = NULL;
        _cleanup_handle_ tg_handle null_key = TG_HANDLE_NULL, signer = TG_HANDLE_NULL;
        TPM2B_PUBLIC srk_tmpl, signer_tmpl, null_public, signer_public;
        TPM2B_DATA nonce = { .size = 32 };
        TPMT_SIG_SCHEME scheme = { .scheme = TPM2_ALG_NULL };
        TPM2B_ATTEST *attest = NULL;
        TPMT_SIGNATURE *sig = NULL;
        TPM2B_NAME null_name;
        uint8_t buf[4 * sizeof(TPM2B_PUBLIC)];
        size_t off = 0;
        FILE *f;
        int r;

        if (argc != 3) {
                fprintf(stderr, "usage: %s TCTI OUTPUT\n", argv[0]);
                return 2;
        }
        tg_log_set_journal(false);
        if (tg_tpm_open(argv[1], &tpm) < 0)
                return 1;
        tg_template_srk_ecc(&srk_tmpl);
        tg_template_ek_signing_key(&signer_tmpl);
        if (create_primary(tpm, ESYS_TR_RH_NULL, &srk_tmpl, &null_key, &null_public) < 0 ||
            create_primary(tpm, ESYS_TR_RH_ENDORSEMENT, &signer_tmpl, &signer, &signer_public) < 0 ||
            tg_public_name(&null_public.publicArea, &null_name) < 0 ||
            RAND_bytes(nonce.buffer, nonce.size) != 1)
                return 1;
        r = tg_tpm_rc(Esys_Certify(tpm->esys, null_key.tr, signer.tr, ESYS_TR_PASSWORD, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                   &nonce, &scheme, &attest, &sig),
                      "Certify");
        if (r < 0)
                return 1;
        if (Tss2_MU_TPM2B_ATTEST_Marshal(attest, buf, sizeof buf, &off) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPMT_SIGNATURE_Marshal(sig, buf, sizeof buf, &off) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2B_PUBLIC_Marshal(&signer_public, buf, sizeof buf, &off) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2B_NAME_Marshal(&null_name, buf, sizeof buf, &off) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2B_DATA_Marshal(&nonce, buf, sizeof buf, &off) != TSS2_RC_SUCCESS)
                return 1;
        Esys_Free(attest);
        Esys_Free(sig);
        f = fopen(argv[2], "we");
        if (!f || fwrite(buf, 1, off, f) != off || fclose(f) != 0)
                return 1;
        return 0;
}
