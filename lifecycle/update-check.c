/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Will a token open after the next boot (update-check.h)? */
#include <dirent.h>
#include <errno.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "policy.h"
#include "update-check.h"
#include "util.h"

/* Does the PolicyPCR(+PolicyAuthValue) policy of t (main seal or a predicted view) hold for values? */
static int pcr_policy_holds(const tg_token *t, const tg_pcr_values *values, bool *ret) {
        tg_pcr_values sel = *values;
        TPM2B_DIGEST pcr_digest, policy;
        int r;

        sel.mask = t->pcr_mask;
        r = tg_pcr_values_digest(&sel, &pcr_digest);
        explicit_bzero(&sel, sizeof sel);
        if (r < 0)
                return r;
        r = tg_policy_digest_compute(t->pcr_bank, t->pcr_mask, &pcr_digest, t->pin, &policy);
        if (r < 0)
                return r;
        *ret = policy.size == t->policy_hash.size && memcmp(policy.buffer, t->policy_hash.buffer, policy.size) == 0;
        return 0;
}

int tg_next_boot_verdict(const tg_next_boot *next, const tg_token *t, tg_next_verdict *ret) {
        /* PCR values are judged only in the bank they were read (and predicted) in. */
        bool pcrs_known = !next->unpredictable && t->pcr_bank == next->values.bank;
        bool holds;
        int r;

        if (pcrs_known) {
                r = pcr_policy_holds(t, &next->values, &holds);
                if (r < 0)
                        return r;
                if (holds) {
                        *ret = TG_NEXT_MAIN;
                        return 0;
                }
        }
        /* In the unlock's order (tokens/unlock.c): the predicted seal before the grace. */
        for (unsigned i = 0; pcrs_known && i < t->n_alt && i < TG_ALT_MAX; i++) {
                const tg_token_alt *a = &t->alt[i];
                tg_token view;

                if (a->kind != TG_ALT_PREDICTED)
                        continue;
                tg_token_alt_view(t, a, &view);
                r = pcr_policy_holds(&view, &next->values, &holds);
                explicit_bzero(&view, sizeof view);
                if (r < 0)
                        return r;
                if (holds) {
                        *ret = TG_NEXT_PREDICTED;
                        return 0;
                }
        }
        for (unsigned i = 0; i < t->n_alt && i < TG_ALT_MAX; i++) {
                const tg_token_alt *a = &t->alt[i];

                /* resetCount + 1 at the next boot (+ a staged capsule's own resets, TG_CAPSULE_RESETS); a
                 * counter near its end never satisfies a bound. */
                uint32_t resets = 1 + (next->unpredictable ? TG_CAPSULE_RESETS : 0);

                if (a->kind != TG_ALT_GRACE || next->reset_count > UINT32_MAX - resets ||
                    next->reset_count + resets > a->reset_count_max)
                        continue;
                /* The PCRs the grace keeps must hold their values at prepare in the predicted boot. */
                if (pcrs_known && a->pcr_mask) {
                        tg_pcr_values sel = next->values;
                        TPM2B_DIGEST digest;

                        sel.mask = a->pcr_mask;
                        r = tg_pcr_values_digest(&sel, &digest);
                        explicit_bzero(&sel, sizeof sel);
                        if (r < 0)
                                return r;
                        if (digest.size != a->pcr_digest.size ||
                            memcmp(digest.buffer, a->pcr_digest.buffer, digest.size) != 0)
                                continue;
                }
                *ret = TG_NEXT_GRACE;
                return 0;
        }
        *ret = TG_NEXT_WILL_NOT_OPEN;
        return 0;
}

const char *tg_next_verdict_to_string(tg_next_verdict v) {
        switch (v) {
        case TG_NEXT_MAIN:      return "main";
        case TG_NEXT_PREDICTED: return "predicted";
        case TG_NEXT_GRACE:     return "grace";
        default:                return NULL;
        }
}

/* update_info (fwupd-efi): version u32, guid[16], capsule_flags u32, hw_inst u64, time_attempted[16], status u32. */
#define UPDATE_INFO_STATUS_OFFSET 48u
#define UPDATE_INFO_ATTEMPT_UPDATE 1u

int tg_capsule_pending(const char *efivars_dir, char **ret_what) {
        static const char suffix[] = "-" TG_FWUPD_VENDOR_GUID;
        DIR *d;
        struct dirent *de;
        int r = 0;

        d = opendir(efivars_dir);
        if (!d) {
                if (errno == ENOENT)
                        return 0; /* no EFI variables: no UEFI capsule either */
                return log_error_rc(-TG_ERR_IO, "Cannot read %s: %m", efivars_dir);
        }
        while (r == 0 && (de = readdir(d))) {
                _cleanup_free_ char *path = NULL;
                _cleanup_free_ uint8_t *data = NULL;
                size_t n = strlen(de->d_name), size = 0;
                uint32_t status;

                if (strncmp(de->d_name, "fwupd-", 6) != 0 || n <= strlen(suffix) ||
                    strcmp(de->d_name + n - strlen(suffix), suffix) != 0)
                        continue;
                if (tg_asprintf(&path, "%s/%s", efivars_dir, de->d_name) < 0) {
                        r = -TG_ERR_NOMEM;
                        break;
                }
                /* efivarfs: 4 bytes of attributes, then the variable. An unreadable or short one is not
                 * proof of a capsule, but fwupd named it: counted as pending (the safe answer is a grace). */
                if (tg_read_file(path, TG_CAPSULE_INFO_MAX, &data, &size) < 0 || size < 4 + UPDATE_INFO_STATUS_OFFSET + 4)
                        status = UPDATE_INFO_ATTEMPT_UPDATE;
                else
                        status = (uint32_t) data[4 + UPDATE_INFO_STATUS_OFFSET] |
                                 (uint32_t) data[4 + UPDATE_INFO_STATUS_OFFSET + 1] << 8 |
                                 (uint32_t) data[4 + UPDATE_INFO_STATUS_OFFSET + 2] << 16 |
                                 (uint32_t) data[4 + UPDATE_INFO_STATUS_OFFSET + 3] << 24;
                if (status != UPDATE_INFO_ATTEMPT_UPDATE)
                        continue;
                if (ret_what && !(*ret_what = strdup(de->d_name))) {
                        r = -TG_ERR_NOMEM;
                        break;
                }
                r = 1;
        }
        closedir(d);
        return r;
}
