/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The event log replayed against the verified PCR read (pcr-log.h). */
#include <string.h>

#include "config.h"
#include "error.h"
#include "log.h"
#include "pcr-log.h"
#include "seal.h"
#include "util.h"

int tg_pcr_log_read(const char *path, tg_eventlog **ret) {
        _cleanup_free_ uint8_t *data = NULL;
        size_t size = 0;
        int r;

        path = path ?: TG_EVENTLOG_PATH;
        r = tg_read_file(path, TG_EVENTLOG_MAX_SIZE, &data, &size);
        if (r == -TG_ERR_NOT_FOUND)
                return log_error_rc(r, "No event log at %s: the firmware gave the kernel none (no TPM 2.0 "
                                    "support in the firmware, or securityfs not mounted: mount -t securityfs "
                                    "securityfs /sys/kernel/security).", path);
        if (r < 0)
                return log_error_rc(r, "Cannot read the event log %s (larger than %u bytes, or unreadable: run as "
                                    "root).", path, TG_EVENTLOG_MAX_SIZE);
        r = tg_eventlog_parse(data, size, ret);
        if (r < 0)
                return log_error_rc(r, "The event log %s is malformed (see above): it cannot say what the firmware "
                                    "measured.", path);
        return 0;
}

const tg_pcr_bank_replay *tg_pcr_replay_bank(const tg_pcr_replay *r, uint16_t alg) {
        for (unsigned i = 0; i < r->n_banks; i++)
                if (r->banks[i].alg == alg)
                        return &r->banks[i];
        return NULL;
}

int tg_pcr_replay_verify(tg_verified_tpm *v, const tg_eventlog *log, uint16_t policy_bank, tg_pcr_replay *ret) {
        tg_pcr_replay out = { .policy_bank = policy_bank };
        int r;

        for (unsigned k = 0; k < log->n_banks; k++) {
                tg_pcr_bank_replay *b = &out.banks[out.n_banks++];
                tg_pcr_values values;

                b->alg = log->bank_alg[k];
                b->size = log->bank_size[k];
                /* A bank tpmguard cannot read (SM3) or hash is listed, not compared. */
                if (!tg_pcr_bank_to_string(b->alg))
                        continue;
                r = tg_eventlog_replay(log, b->alg, NULL, b->replayed, &b->log_mask);
                if (r < 0)
                        continue;
                b->replayed_ok = true;
                if (b->alg == policy_bank)
                        r = tg_vtpm_pcr_read(v, b->alg, (UINT32_C(1) << TG_PCR_COUNT) - 1, &values);
                else {
                        /* Another bank may well be inactive: a result here, not an error to log. */
                        int level = tg_log_get_max_level();
                        tg_log_set_max_level(LOG_CRIT);
                        r = tg_vtpm_pcr_read(v, b->alg, (UINT32_C(1) << TG_PCR_COUNT) - 1, &values);
                        tg_log_set_max_level(level);
                }
                /* The policy bank must be read when the log has it; another bank the TPM has not active (an audited
                 * answer: not forgeable) is reported as such. A failed HMAC is never "inactive". */
                if (r < 0 && (b->alg == policy_bank || r != -TG_ERR_TPM))
                        return log_error_rc(r, "Cannot read the TPM's %s PCRs over the verified session.",
                                            tg_pcr_bank_to_string(b->alg));
                if (r < 0)
                        continue;
                b->tpm_read = true;
                for (unsigned i = 0; i < TG_EVENTLOG_PCRS; i++) {
                        memcpy(b->tpm[i], values.value[i], b->size);
                        if (memcmp(b->tpm[i], b->replayed[i], b->size) == 0)
                                b->match_mask |= UINT32_C(1) << i;
                }
                out.firmware_mismatch |= ~b->match_mask & TG_FIRMWARE_PCR_MASK;
                out.n_compared++;
        }
        if (out.n_compared == 0)
                return log_error_rc(-TG_ERR_INVALID, "None of the event log's banks (a %s log) is active in the TPM: "
                                    "the log cannot be checked, and says nothing.",
                                    log->crypto_agile ? "crypto-agile" : "SHA-1-only");
        out.verified = out.firmware_mismatch == 0;
        *ret = out;
        return 0;
}
