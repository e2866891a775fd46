/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "seal.h"
#include "secret.h"
#include "token.h"
#include "otp.h"
#include "verify.h"

/*
 * Genuine before typed (issue 32): a TOTP secret (RFC 6238) that the machine can
 * only turn into a code when it booted the measured chain it was enrolled
 * under, on the pinned TPM. The initrd shows the code before the PIN prompt;
 * the person at the keyboard compares it with an authenticator app and types
 * the PIN only when they match (docs/security.md, "Genuine before typed").
 *
 * The secret is sealed WITHOUT a PIN to the PCR policy of tokens/seal.c (the
 * same policy code, the same PCR choice rules as tokens), over the verified
 * sessions: it crosses the bus only inside Create's parameter-encrypted
 * inSensitive and Unseal's response-encrypted outData, both in sessions salted
 * to the verified NULL key. The sealed blob and its metadata are in
 * state_dir/totp.json (TG_TOTP_FILE_NAME, root-only, copied into the initrd).
 *
 *   {
 *     "version": 1,
 *     "sealed": { a tpmguard token (docs/token-format.md), "pin": false, "keyslots": [] },
 *     "algorithm": "SHA1", "digits": 6, "period": 30,
 *     "label": "tpmguard:HOSTNAME",
 *     "check": hex(HMAC-SHA256(secret, "tpmguard totp check")),
 *     "created": "2026-12-05T02:30:00Z",
 *     "predicted": { a token like "sealed", to the PCR values 'update prepare' predicted },
 *     "update_pending": "2026-12-05T02:40:00Z"
 *   }
 *
 * The last two are optional, written by the PCR update path (tg_totp_update_prepare(),
 * tg_totp_follow(); docs/security.md, "The TOTP across an update"): "predicted" the same
 * secret sealed to the values the next boot chain will measure, "update_pending" the time an
 * update with a grace was prepared (a grace carries no TOTP, so the next boot shows none and
 * says why). Both are dropped when the TOTP is resealed to the values of a booted chain.
 *
 * "check" lets 'totp show' refuse a secret that is not the enrolled one (an
 * object of an interposer's, swapped in on the bus: without a PIN the TPM
 * checks no command HMAC on the Unseal) with a message instead of a wrong code.
 */

#define TG_TOTP_FILE_NAME "totp.json"
#define TG_TOTP_FILE_VERSION 1
#define TG_TOTP_FILE_MAX (64u * 1024u)
#define TG_TOTP_SECRET_SIZE 20u          /* 160 bits: RFC 4226 §4 R6's recommendation, SHA-1's block output */
#define TG_TOTP_DIGITS_DEFAULT 6u
#define TG_TOTP_PERIOD_DEFAULT 30u
#define TG_TOTP_LABEL_MAX 128u
#define TG_TOTP_ISSUER "tpmguard"

typedef struct tg_totp_file {
        tg_token sealed;                 /* the sealed secret: no PIN, no keyslot */
        tg_totp_alg alg;
        unsigned digits;
        unsigned period;
        char label[TG_TOTP_LABEL_MAX + 1];
        uint8_t check[32];
        char created[32];                /* ISO 8601 UTC, informational */
        bool has_predicted;
        tg_token predicted;              /* the same secret sealed to predicted PCR values (update prepare) */
        char update_pending[32];         /* ISO 8601 UTC: an update with a grace was prepared then; "" if not */
} tg_totp_file;

/* One code, and what it is for. */
typedef struct tg_totp_code {
        uint32_t code;
        unsigned digits;
        unsigned period;
        tg_totp_alg alg;
        uint64_t window_start;           /* unix time of the period's first second, by this machine's clock */
        uint16_t pcr_bank;               /* what the secret is sealed to */
        uint32_t pcr_mask;
} tg_totp_code;

/* state_dir/totp.json. */
int tg_totp_path(const tg_config *config, char **ret);

/*
 * Reads and checks the TOTP file, hostile on read: root-owned and writable by no one
 * else (tg_check_trusted), at most TG_TOTP_FILE_MAX bytes, one JSON object in json-c's
 * strict mode, every field checked, errors naming the file and the field.
 * -TG_ERR_NOT_FOUND (nothing logged) when it does not exist; -TG_ERR_TOKEN when it is
 * malformed.
 */
int tg_totp_load(const char *path, tg_totp_file *ret);
/* The file's JSON text (refusing what tg_totp_load() would refuse); free() it. */
int tg_totp_format(const tg_totp_file *t, char **ret);

/*
 * tpmguard totp enroll: verifies the TPM, makes a random TG_TOTP_SECRET_SIZE-byte secret,
 * seals it without a PIN with params (params->pin must be NULL), proves the seal by
 * unsealing it again, and writes the file (atomically, 0600). label is the otpauth label
 * ("tpmguard:HOSTNAME"). Refuses to replace an existing TOTP (-TG_ERR_INVALID): the
 * authenticator's entry would silently stop matching. ret_uri: the otpauth:// URI, the
 * only output of the secret (the user scans it), NUL-terminated in a tg_secret.
 */
int tg_totp_enroll(const tg_config *config, const tg_seal_params *params, const tg_secret *endorsement_auth,
                   const char *label, tg_secret **ret_uri);

/*
 * tpmguard totp show: unseals the secret over verified sessions (this boot's verification
 * cache when warm) and computes the code for unix_time. No code without a verified TPM
 * (-TG_ERR_INTERPOSER, ...), with the sealed PCR policy unmet (-TG_ERR_PCR_MISMATCH, said
 * before the Unseal), or with a released secret that is not the enrolled one
 * (-TG_ERR_INTERPOSER); each logged with its cause. -TG_ERR_NOT_FOUND when none is enrolled.
 */
int tg_totp_show(const tg_config *config, uint64_t unix_time, tg_totp_code *ret);

/* tpmguard totp remove: deletes the file (-TG_ERR_NOT_FOUND when there is none). */
int tg_totp_remove(const tg_config *config);

/*
 * Reseals the enrolled TOTP secret to new PCR values, keeping the secret (the
 * authenticator's entry stays valid): for the PCR update path (reseal,
 * 'update prepare'/'finish'). The current secret is unsealed on v (its sealed policy must
 * hold now), sealed again with params (params->pcr_mask 0: the file's bank and PCRs;
 * params->explicit_values: predicted values, then no test unseal is possible and none is
 * made; otherwise the new seal is proven by unsealing it), and the file replaced
 * atomically. -TG_ERR_NOT_FOUND (nothing logged) when no TOTP is enrolled.
 */
int tg_totp_reseal(const tg_config *config, tg_verified_tpm *v, const tg_seal_params *params);

/*
 * update prepare: with predicted values (those of its PCRs the TOTP is sealed to), the same
 * secret also sealed to them, without a PIN ("predicted"), so that the next boot shows the
 * code; the current seal must unseal now. predicted NULL (a grace): nothing is sealed, and
 * the file records that an update with a grace is pending ("update_pending"): a grace TOTP
 * without a PIN would show on any boot chain for the grace's boots and prove nothing, so the
 * boot through the grace says why it shows no code instead. A prediction that names none of
 * the TOTP's PCRs leaves the file as it is. Verifies the TPM itself (as 'update prepare' does
 * for each volume). -TG_ERR_NOT_FOUND (nothing logged) when no TOTP is enrolled.
 */
int tg_totp_update_prepare(const tg_config *config, const tg_pcr_values *predicted);

/*
 * update finish and reseal: the TOTP follows the tokens. The secret is unsealed through
 * whichever seal holds now (the main one or the predicted one) and sealed again to the PCR
 * values now, or to explicit_values (those of the TOTP's PCRs they name, the others as
 * now), with the file's bank and PCRs; "predicted" and "update_pending" are dropped. With
 * always false and neither "predicted" nor "update_pending" in the file, nothing is done
 * (*ret_changed false, no TPM command). -TG_ERR_NOT_FOUND (nothing logged) when no TOTP is
 * enrolled; -TG_ERR_PCR_MISMATCH, the file untouched, when no seal holds (after a grace, or
 * an update nobody prepared: the secret cannot follow; enroll again).
 */
int tg_totp_follow(const tg_config *config, const tg_pcr_values *explicit_values, bool always, bool *ret_changed);
