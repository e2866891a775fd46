/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * TPM responses: a TPM2_Certify result as it crosses the bus, verified by
 * tg_certify_verify. The input is, marshalled with tss2-mu and in this order,
 *
 *   TPM2B_ATTEST ‖ TPMT_SIGNATURE ‖ TPM2B_PUBLIC (signer) ‖ TPM2B_NAME (certified) ‖ TPM2B_DATA (nonce)
 *
 * so that a seed recorded from swtpm verifies completely (and every check
 * after the signature is reachable), while mutations explore the unmarshaller
 * and every rejection. Whatever is accepted must really be what was asked:
 * the property is re-checked here independently of attest.c.
 */
#include <tss2/tss2_mu.h>

#include "attest.h"
#include "fuzz.h"
#include "tpm.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_silence_logs();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        TPM2B_ATTEST attest = {};
        TPMT_SIGNATURE sig = {};
        TPM2B_PUBLIC signer = {};
        TPM2B_NAME certified = {}, certified_qn, signer_name, signer_qn;
        TPM2B_DATA nonce = {};
        TPMS_ATTEST parsed = {};
        tg_attest_info info;
        size_t off = 0, aoff = 0;

        if (Tss2_MU_TPM2B_ATTEST_Unmarshal(data, size, &off, &attest) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPMT_SIGNATURE_Unmarshal(data, size, &off, &sig) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2B_PUBLIC_Unmarshal(data, size, &off, &signer) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2B_NAME_Unmarshal(data, size, &off, &certified) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2B_DATA_Unmarshal(data, size, &off, &nonce) != TSS2_RC_SUCCESS)
                return 0;
        if (tg_public_name(&signer.publicArea, &signer_name) < 0 ||
            tg_ek_signing_key_qualified_name(&signer_name, &signer_qn) < 0 ||
            tg_null_key_qualified_name(&certified, &certified_qn) < 0)
                return 0;

        if (tg_certify_verify(&attest, &sig, &signer.publicArea, &signer_qn, nonce.buffer, nonce.size,
                              &certified, &certified_qn, &info) != 0)
                return 0;

        /* Accepted: it must be a well-formed Certify of exactly what was asked, with this nonce. */
        if (Tss2_MU_TPMS_ATTEST_Unmarshal(attest.attestationData, attest.size, &aoff, &parsed) != TSS2_RC_SUCCESS ||
            aoff != attest.size)
                abort();
        if (parsed.magic != TPM2_GENERATED_VALUE || parsed.type != TPM2_ST_ATTEST_CERTIFY ||
            nonce.size == 0 || parsed.extraData.size != nonce.size ||
            memcmp(parsed.extraData.buffer, nonce.buffer, nonce.size) != 0 ||
            parsed.attested.certify.name.size != certified.size ||
            memcmp(parsed.attested.certify.name.name, certified.name, certified.size) != 0 ||
            info.reset_count != parsed.clockInfo.resetCount)
                abort();
        return 0;
}
