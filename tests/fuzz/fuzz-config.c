/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /etc/tpmguard/tpmguard.conf: tg_config_parse on arbitrary text. */
#include "config.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_silence_logs();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size);
        _cleanup_config_ tg_config *c = NULL;

        if (!text)
                return 0;
        if (tg_config_parse(text, "fuzz", &c) == 0) {
                /* An accepted configuration is complete: the defaults fill every gap. */
                if (!c->tcti || !c->state_dir || !c->cache_dir)
                        abort();
                if (!tg_pcr_bank_to_string(c->pcr_bank) || (c->pcr_mask >> 24) != 0)
                        abort();
        }
        return 0;
}
