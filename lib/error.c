/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>

#include "error.h"
#include "macro.h"

/*
 * Exit codes are part of the CLI's documented interface (tpmguard(8)).
 * cryptsetup_errno follows libcryptsetup 2.6's token contract: it only keeps
 * trying other tokens (and the cryptsetup binary and systemd-cryptsetup only
 * fall back to the passphrase prompt cleanly) after -ENOENT, -EPERM, -EAGAIN
 * or -ENOANO. Every failure of ours is therefore one of those four, except
 * running out of memory, which should stop everything.
 *
 * -ENOANO ("PIN missing or wrong") is the only one after which cryptsetup
 * (--tries) and systemd-cryptsetup ask for the PIN again: a wrong PIN within
 * the retry budget (tokens/unlock.c) is TG_ERR_PIN_RETRY → -ENOANO; the last
 * wrong PIN of the budget, or one that would eat into the DA reserve, is
 * TG_ERR_BAD_PIN → -EPERM, and the caller goes on to the passphrase.
 */
static const struct {
        const char *id;
        const char *str;
        int exit_code;
        int cryptsetup_errno;
} tg_err_table[_TG_ERR_MAX] = {
        [TG_OK]                  = { "ok",               "success",                                            0,  0 },
        [TG_ERR_NOMEM]           = { "nomem",            "out of memory",                                      1,  -ENOMEM },
        [TG_ERR_INVALID]         = { "invalid",          "invalid input",                                      2,  -ENOENT },
        [TG_ERR_IO]              = { "io",               "I/O error",                                          1,  -ENOENT },
        [TG_ERR_CONFIG]          = { "config",           "invalid configuration",                              2,  -ENOENT },
        [TG_ERR_INTERPOSER]      = { "interposer",       "TPM verification failed: interposer or TPM reset suspected", 3, -ENOENT },
        [TG_ERR_NOT_PROVISIONED] = { "not-provisioned",  "not provisioned",                                    4,  -ENOENT },
        [TG_ERR_NO_NULL_NAME]    = { "no-null-name",     "kernel exports no TPM null_name and policy requires it", 5, -ENOENT },
        [TG_ERR_TPM_UNREACHABLE] = { "tpm-unreachable",  "TPM unreachable",                                    6,  -EAGAIN },
        [TG_ERR_TPM]             = { "tpm",              "TPM error",                                          7,  -ENOENT },
        [TG_ERR_EK_CERT]         = { "ek-cert",          "EK certificate invalid or untrusted",                8,  -ENOENT },
        [TG_ERR_EK_PROOF]        = { "ek-proof",         "the TPM answering is not the TPM of the EK certificate", 9, -ENOENT },
        [TG_ERR_AUTH_NEEDED]     = { "auth-needed",      "a TPM hierarchy password is needed",                 10, -ENOENT },
        [TG_ERR_PIN_NEEDED]      = { "pin-needed",       "a PIN is needed",                                    11, -ENOANO },
        [TG_ERR_BAD_PIN]         = { "bad-pin",          "wrong PIN or passphrase",                           12, -EPERM },
        [TG_ERR_LOCKOUT]         = { "lockout",          "TPM is in dictionary-attack lockout",                13, -EAGAIN },
        [TG_ERR_PCR_MISMATCH]    = { "pcr-mismatch",     "PCR values do not match the sealed policy",          14, -ENOENT },
        [TG_ERR_TOKEN]           = { "token",            "malformed tpmguard token",                           15, -ENOENT },
        [TG_ERR_CRYPTSETUP]      = { "cryptsetup",       "cryptsetup operation failed",                        16, -ENOENT },
        [TG_ERR_NOT_FOUND]       = { "not-found",        "not found",                                          17, -ENOENT },
        [TG_ERR_CANCELLED]       = { "cancelled",        "cancelled",                                          18, -ENOENT },
        [TG_ERR_VOLUME_BINDING]  = { "volume-binding",   "the volume is not the one enrolled on this machine", 19, -ENOENT },
        [TG_ERR_PIN_RETRY]       = { "pin-retry",        "wrong PIN, another try is allowed",                  20, -ENOANO },
        [TG_ERR_EXPOSED]         = { "exposed",          "a token is exposed to an interposer, a TPM reset or a header edit", 21, -ENOENT },
};

static int tg_err_index(int r) {
        if (r >= 0)
                return TG_OK;
        if (-r >= _TG_ERR_MAX)
                return TG_ERR_INVALID; /* programmer error, but never crash on it */
        return -r;
}

const char *tg_err_id(int r) {
        return tg_err_table[tg_err_index(r)].id;
}

const char *tg_err_str(int r) {
        return tg_err_table[tg_err_index(r)].str;
}

int tg_err_exit_code(int r) {
        return tg_err_table[tg_err_index(r)].exit_code;
}

int tg_err_to_cryptsetup_errno(int r) {
        return tg_err_table[tg_err_index(r)].cryptsetup_errno;
}

int tg_err_from_errno(int negative_errno) {
        switch (negative_errno) {
        case 0:
                return 0;
        case -ENOMEM:
                return -TG_ERR_NOMEM;
        case -ENOENT:
        case -ENODEV:
        case -ENXIO:
                return -TG_ERR_NOT_FOUND;
        case -EINVAL:
                return -TG_ERR_INVALID;
        case -EPERM:
        case -EACCES:
                return -TG_ERR_IO;
        default:
                return negative_errno < 0 ? -TG_ERR_IO : 0;
        }
}
