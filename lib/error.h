/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * tpmguard's one error space. Every core function returns 0 on success or the
 * negative of one of these codes. The CLI turns them into exit codes, the
 * plugin turns them into libcryptsetup's errno contract; both do it once, at
 * their boundary, from the table in error.c.
 */
typedef enum tg_err {
        TG_OK = 0,
        TG_ERR_NOMEM,            /* out of memory */
        TG_ERR_INVALID,          /* bad argument or malformed input (file, JSON, hex) */
        TG_ERR_IO,               /* file or device I/O failed */
        TG_ERR_CONFIG,           /* /etc/tpmguard/tpmguard.conf is invalid */
        TG_ERR_NOT_PROVISIONED,  /* no pinned EK signing key: run tpmguard provision */
        TG_ERR_NO_NULL_NAME,     /* kernel exports no null_name and the policy requires it */
        TG_ERR_INTERPOSER,       /* a verification failed: interposer or TPM reset suspected */
        TG_ERR_TPM_UNREACHABLE,  /* no TPM answers on the configured transport */
        TG_ERR_TPM,              /* the TPM refused a command for another reason */
        TG_ERR_EK_CERT,          /* EK certificate missing, invalid or untrusted */
        TG_ERR_EK_PROOF,         /* the TPM answering is not the TPM of the EK certificate */
        TG_ERR_AUTH_NEEDED,      /* a hierarchy password is needed */
        TG_ERR_PIN_NEEDED,       /* the token needs a PIN and none was given */
        TG_ERR_BAD_PIN,          /* wrong PIN */
        TG_ERR_LOCKOUT,          /* the TPM is in dictionary-attack lockout */
        TG_ERR_PCR_MISMATCH,     /* PCR values do not satisfy the sealed policy */
        TG_ERR_TOKEN,            /* the LUKS2 token is malformed */
        TG_ERR_CRYPTSETUP,       /* libcryptsetup reported a failure */
        TG_ERR_NOT_FOUND,        /* device, token or keyslot not found */
        TG_ERR_CANCELLED,        /* the user gave up (empty input, EOF) */
        TG_ERR_VOLUME_BINDING,   /* the volume is not the one enrolled on this machine (decoy suspected) */
        TG_ERR_PIN_RETRY,        /* wrong PIN, and the retry budget allows another try (plugin only) */
        TG_ERR_EXPOSED,          /* audit: a token an interposer or a TPM reset can read (not a failure of the command) */
        _TG_ERR_MAX,
} tg_err;

/* A short, stable identifier ("interposer", "bad-pin", ...) for JSON output. */
const char *tg_err_id(int r);
/* A one-line human description of the failure class. */
const char *tg_err_str(int r);
/* The documented process exit code for a failure class (0 for r >= 0). */
int tg_err_exit_code(int r);
/* The errno libcryptsetup's token contract expects for a failure class (negative). */
int tg_err_to_cryptsetup_errno(int r);
/* Map a negative errno from libc or libcryptsetup onto our space. */
int tg_err_from_errno(int negative_errno);
