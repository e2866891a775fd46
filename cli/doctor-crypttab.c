/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * crypttab options that turn tpmguard's unlock off or that the initrd
 * ignores, for doctor. Why it matters: guides tell users to add
 * tpm2-measure-pcr=yes or fixate-volume-key= against an OS swap, and
 * systemd-cryptsetup 253 and later then try no token plugin at all (its
 * use_token_plugins(), issue 37072): the line silently turns the TPM unlock
 * off, and the user types the recovery passphrase at every boot without
 * knowing why. tpmguard's volume binding answers the same attack
 * (docs/security.md). The rules are those of the initrd hooks
 * (initrd/hooks/tpmguard.in, dracut/90tpmguard/module-setup.sh.in).
 *
 * crypttab is root's file but never trusted for anything: it only chooses
 * what doctor reports. Each device is opened read-only through libcryptsetup;
 * only whether its header carries a tpmguard token is used.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crypttab.h"
#include "doctor-crypttab.h"
#include "error.h"
#include "log.h"
#include "luks.h"
#include "macro.h"
#include "token.h"
#include "util.h"

/* The rest of s after prefix, or NULL. */
static const char *after(const char *s, const char *prefix) {
        size_t n = strlen(prefix);

        return strncmp(s, prefix, n) == 0 ? s + n : NULL;
}

static bool in_list(const char *s, const char *const *list, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (strcmp(s, list[i]) == 0)
                        return true;
        return false;
}

typedef struct findings {
        tg_crypttab_finding *v;
        size_t n;
        bool oom;
} findings;

static void add(findings *f, bool problem, const char *name, char *summary, char *next_step) {
        tg_crypttab_finding *grown;

        if (!summary || !next_step)
                goto oom;
        grown = reallocarray(f->v, f->n + 1, sizeof *grown);
        if (!grown)
                goto oom;
        f->v = grown;
        f->v[f->n] = (tg_crypttab_finding) { .problem = problem, .subject = strdup(name), .summary = summary,
                                             .next_step = next_step };
        if (!f->v[f->n++].subject)
                f->oom = true;
        return;
oom:
        free(summary);
        free(next_step);
        f->oom = true;
}

static char *fmt(const char *format, ...) _printf_(1, 2);
static char *fmt(const char *format, ...) {
        char *s = NULL;
        va_list ap;

        va_start(ap, format);
        if (vasprintf(&s, format, ap) < 0)
                s = NULL;
        va_end(ap);
        return s;
}

static void discard_log(int level, const char *message, void *userdata) {
        (void) level;
        (void) message;
        (void) userdata;
}

/* Does the volume's header carry a tpmguard token? Errors (not LUKS2, missing) are "no". */
static bool has_tpmguard_token(const char *device) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        bool found = false;
        int r;

        tg_log_set_sink(discard_log, NULL);
        r = tg_luks_open(device, &cd);
        tg_log_set_sink(NULL, NULL);
        for (int id = 0; r >= 0 && !found && id < tg_luks_tokens_max(); id++)
                found = tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE);
        return found;
}

/* token-timeout= as scripts/local-top/tpmguard reads it: whole seconds or minutes. */
static bool timeout_readable(const char *v) {
        static const char *const units[] = { "", "s", "sec", "min", "m" };
        size_t digits = strspn(v, "0123456789");

        return digits > 0 && in_list(v + digits, units, ELEMENTSOF(units));
}

static bool is_measure_option(const char *o) {
        static const char *const off[] = { "tpm2-measure-pcr=no", "tpm2-measure-pcr=false", "tpm2-measure-pcr=0" };
        const char *v;

        if (after(o, "tpm2-measure-pcr"))
                return !in_list(o, off, ELEMENTSOF(off));
        return ((v = after(o, "tpm2-measure-keyslot-nvpcr=")) && *v) || ((v = after(o, "fixate-volume-key=")) && *v);
}

static void check_options(findings *f, const char *name, const char *options, bool dracut, bool itools,
                          unsigned pin_tries) {
        static const char *const headless[] = { "headless",     "headless=yes", "headless=y", "headless=true",
                                                "headless=t",   "headless=on",  "headless=1" };
        _cleanup_free_ char *copy = strdup(options);
        char *save = NULL;

        if (!copy) {
                f->oom = true;
                return;
        }
        for (char *o = strtok_r(copy, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
                const char *v;

                if (is_measure_option(o)) {
                        if (dracut)
                                add(f, true, name,
                                    fmt("crypttab option '%s' turns tpmguard's unlock off with dracut: systemd-cryptsetup "
                                        "253 and later try no token plugin when they must measure or check the volume key "
                                        "(systemd 252 ignores tpm2-measure-pcr=); the recovery passphrase is asked instead.",
                                        o),
                                    fmt("Remove '%s' from the line of %s in /etc/crypttab (tpmguard's volume binding "
                                        "refuses a swapped volume instead: docs/security.md), then rebuild the initrd.",
                                        o, name));
                        if (itools)
                                add(f, true, name,
                                    fmt("crypttab option '%s' is systemd-cryptsetup's: initramfs-tools ignores it, so "
                                        "nothing measures or checks the volume key, and update-initramfs refuses to build.",
                                        o),
                                    fmt("Remove '%s' from the line of %s in /etc/crypttab (tpmguard's volume binding "
                                        "refuses a swapped volume instead: docs/security.md), then update-initramfs -u.",
                                        o, name));
                } else if (in_list(o, headless, ELEMENTSOF(headless))) {
                        add(f, false, name,
                            fmt("crypttab option '%s': no PIN is asked for this volume; only a token without a PIN, or "
                                "the PIN typed for a previous volume, unlocks it.", o),
                            fmt("If the token of %s has a PIN (tpmguard status), remove '%s' or open %s after a volume "
                                "with the same PIN.", name, o, name));
                } else if ((v = after(o, "token-timeout=")) && itools && !timeout_readable(v)) {
                        add(f, true, name,
                            fmt("crypttab option '%s': initramfs-tools' tpmguard script reads token-timeout= as whole "
                                "seconds or minutes; update-initramfs refuses to build.", o),
                            fmt("Write it as 30, 30s or 2min in the line of %s in /etc/crypttab, then "
                                "update-initramfs -u.", name));
                } else if ((v = after(o, "tries=")) && itools && strtoul(v, NULL, 10) > pin_tries) {
                        add(f, false, name,
                            fmt("crypttab option '%s': the PIN is asked at most pin_tries=%u times (tpmguard.conf; the "
                                "TPM's dictionary-attack reserve), then the passphrase %s times.", o, pin_tries, v),
                            fmt("Nothing to do, unless you meant more PIN tries: raise pin_tries in tpmguard.conf, "
                                "then update-initramfs -u."));
                }
        }
}

/* The initrd flavour installed: dracut, initramfs-tools, or both when both
 * generators are (each then gets its own findings). */
static void flavours(bool *dracut, bool *itools) {
        *dracut = access("/usr/bin/dracut", X_OK) == 0 || access("/usr/sbin/dracut", X_OK) == 0;
        *itools = access("/usr/sbin/update-initramfs", X_OK) == 0 || access("/usr/sbin/mkinitramfs", X_OK) == 0;
        if (!*dracut && !*itools)
                *dracut = *itools = true;
}

int tg_crypttab_option_findings(const char *crypttab, unsigned pin_tries, tg_crypttab_finding **ret, size_t *ret_n) {
        char **names = NULL, **devices = NULL, **options = NULL;
        findings f = {};
        bool dracut, itools;
        size_t n = 0;
        int r;

        tg_log_set_sink(discard_log, NULL);
        r = tg_crypttab_entries(crypttab, &names, &devices, &options, &n);
        tg_log_set_sink(NULL, NULL);
        if (r == -TG_ERR_NOMEM)
                return r;
        flavours(&dracut, &itools);
        for (size_t i = 0; r >= 0 && i < n && !f.oom; i++)
                if (options[i][0] && has_tpmguard_token(devices[i]))
                        check_options(&f, names[i], options[i], dracut, itools, pin_tries);
        tg_strv_free(names, n);
        tg_strv_free(devices, n);
        tg_strv_free(options, n);
        if (f.oom) {
                tg_crypttab_findings_free(f.v, f.n);
                return -TG_ERR_NOMEM;
        }
        *ret = f.v;
        *ret_n = f.n;
        return 0;
}

void tg_crypttab_findings_free(tg_crypttab_finding *f, size_t n) {
        for (size_t i = 0; f && i < n; i++) {
                free(f[i].subject);
                free(f[i].summary);
                free(f[i].next_step);
        }
        free(f);
}
