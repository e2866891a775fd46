/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * TPM responses as the bus delivers them, through the real code paths
 * (issue 22): verify, the plugin's unseal, seal, provision. The input
 * format, the TCTI module that answers from it and the oracle are described
 * in tpm-response.h; seeds are whole recorded sessions against swtpm.
 */
#include "fuzz.h"
#include "tpm-response.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        /* TPMGUARD_TPM_RESPONSE_VERBOSE=1: tpmguard's messages on stderr, to see how far an input gets. */
        if (!getenv("TPMGUARD_TPM_RESPONSE_VERBOSE"))
                fuzz_silence_logs();
        else
                tg_log_set_journal(false);
        if (tgr_setup(TGR_CONTEXT_DIR, TGR_MODULE_PATH) < 0) {
                fprintf(stderr, "fuzz-tpm-response: setup failed\n");
                abort();
        }
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        (void) tgr_run(data, size);
        return 0;
}
