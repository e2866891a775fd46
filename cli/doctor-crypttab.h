/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * doctor's "crypttab-options" check: the crypttab options of the volumes that
 * carry a tpmguard token that turn tpmguard's unlock off, or that the initrd
 * flavour installed here ignores, with the reason and what to do. The same
 * rules as the initrd hooks apply at build time (docs/initrd.md, "crypttab
 * options the hooks name at build time"): doctor names them before the next
 * update-initramfs or dracut run fails on them.
 */

typedef struct tg_crypttab_finding {
        bool problem;      /* true: tpmguard's unlock is off or the build fails; false: a warning */
        char *subject;     /* the crypttab name */
        char *summary;     /* the option, what it does to tpmguard, in which flavour */
        char *next_step;
} tg_crypttab_finding;

/* The findings for crypttab (none when it is missing or unreadable: the volume
 * check reports that). pin_tries: tpmguard.conf's. Fails only when out of memory. */
int tg_crypttab_option_findings(const char *crypttab, unsigned pin_tries, tg_crypttab_finding **ret, size_t *ret_n);
void tg_crypttab_findings_free(tg_crypttab_finding *f, size_t n);
