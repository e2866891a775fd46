/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "seal.h"
#include "token.h"

/*
 * tpmguard update check (docs/design.md §9.2, issue 30 item 5): will a token open with the PIN
 * alone after the next boot? Computed in software from what the next boot will present to each
 * of the token's seals, the same way the TPM checks them (tokens/policy.h): the main seal's and a
 * predicted seal's PolicyPCR digest recomputed from the predicted values, a grace's resetCount
 * bound against the next boot's resetCount (this one's plus one). Nothing is unsealed and no PIN
 * is asked for: the hooks that run this before a reboot have none.
 *
 * Threat model: the inputs are the PCR values and resetCount read over the verified session and
 * a prediction from a log that replayed to them (lifecycle/pcr-predict.h); the token's fields are
 * hostile, but a forged field only makes this say "will open" for a seal the TPM will refuse
 * (the token's reader refuses a blob whose authPolicy differs from its fields): a wrong "ok" is
 * the recovery passphrase at the next boot, never a weaker unlock.
 */

typedef struct tg_next_boot {
        tg_pcr_values values;       /* the predicted bank's PCRs 0-23: this boot's, PCR 7 the predicted */
        uint32_t reset_count;       /* the TPM's resetCount now: the next boot's is one more */
        bool unpredictable;         /* a pending change no one can predict (a firmware capsule): only a grace holds */
} tg_next_boot;

typedef enum tg_next_verdict {
        TG_NEXT_WILL_NOT_OPEN = 0,
        TG_NEXT_MAIN,               /* the main seal's policy holds */
        TG_NEXT_PREDICTED,          /* the predicted update seal's */
        TG_NEXT_GRACE,              /* the grace's bound still holds */
} tg_next_verdict;

/*
 * Which of the token's seals the next boot opens. A token in another bank than the prediction's
 * is judged by its grace alone (its PCR 7 of the next boot is not predicted).
 */
int tg_next_boot_verdict(const tg_next_boot *next, const tg_token *t, tg_next_verdict *ret);
const char *tg_next_verdict_to_string(tg_next_verdict v);

/*
 * A firmware capsule update staged for the next boot, which changes PCRs 0-7 in ways no one can
 * predict: fwupd's uefi-capsule plugin writes one variable per capsule, fwupd-<class GUID>-<hw
 * instance>, of vendor GUID 0abba7dc-e516-4167-bbf5-4d9d1c739416, whose update_info status is
 * ATTEMPT_UPDATE (1) until fwupd's EFI binary has run it. 1 and the variable's name in *ret_what
 * (optional) when one is pending, 0 when none. Reads at most TG_CAPSULE_INFO_MAX bytes of each.
 */
#define TG_FWUPD_VENDOR_GUID "0abba7dc-e516-4167-bbf5-4d9d1c739416"
/*
 * TPM resets a staged capsule adds before the OS boots again: fwupd's EFI binary hands the capsule to
 * the firmware and resets, and the firmware resets once more after flashing. Each reset is a
 * Startup(CLEAR) (resetCount + 1), so a grace of one boot would have expired by the OS boot: the
 * routine update would meet the recovery prompt. A grace made while a capsule is staged defaults to
 * 1 + this many boots, and 'update check' counts them.
 */
#define TG_CAPSULE_RESETS 2u
#define TG_CAPSULE_INFO_MAX 4096u
int tg_capsule_pending(const char *efivars_dir, char **ret_what);
