/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

/*
 * /etc/tpmguard/tpmguard.conf: the only place security policy comes from.
 * The LUKS2 token never overrides anything here (design §4).
 */
typedef enum tg_null_name_policy {
        TG_NULL_NAME_REQUIRED,     /* no null_name → refuse: boot-time reset attacks must be detectable */
        TG_NULL_NAME_IF_AVAILABLE, /* no null_name → certify a fresh NULL key; reset attacks undetectable */
} tg_null_name_policy;

typedef struct tg_config {
        char *path;            /* the file this was read from (or would have been) */
        char *tcti;            /* TCTI configuration; default device:/dev/tpmrm0 */
        char *state_dir;       /* where the pinned EK signing key lives */
        char *null_name_path;  /* kernel null_name file; NULL → sysfs of tpm0 via libsystemd */
        char *ek_ca;           /* manufacturer CA store: a PEM file or a directory of them */
        char *cache_dir;       /* per-boot verification cache; default /run/tpmguard */
        tg_null_name_policy kernel_null_name;
        uint16_t pcr_bank;     /* TPM2_ALG_SHA256 by default */
        uint32_t pcr_mask;     /* bit N = PCR N; PCR 7 by default */
        bool allow_no_pin;     /* --no-pin tokens allowed at all (default no: issue 14 §3) */
        bool allow_unextended_pcrs; /* seal to PCRs at their reset value (default no) */
        unsigned pin_min_length; /* shortest new PIN accepted (default TG_PIN_MIN_LENGTH_DEFAULT) */
        /* Not a file setting: set by the CLI's --accept-token-policy, to carry
         * over a token whose policy is weaker than this configuration. */
        bool accept_token_policy;
} tg_config;

/*
 * BitLocker's default minimum PIN (Windows 10 1703 and later) is 6 digits;
 * the TPM's dictionary-attack lockout is what makes so short a secret
 * acceptable, and tpmguard's default DA budget is no more generous than
 * Windows'. Configurable down to 4 (BitLocker's lowest) and up to 64.
 */
#define TG_PIN_MIN_LENGTH_DEFAULT 6
#define TG_PIN_MIN_LENGTH_MIN 4
#define TG_PIN_MIN_LENGTH_MAX 64

/*
 * Loads the configuration from path, or when path is NULL from
 * $TPMGUARD_CONFIG (honoured only without elevated privileges' secure-exec),
 * or else from the compiled-in /etc/tpmguard/tpmguard.conf. A missing file
 * gives the defaults; a malformed one is an error naming the line.
 */
int tg_config_load(const char *path, tg_config **ret);
/* Parses configuration text; origin names the source in messages. */
int tg_config_parse(const char *text, const char *origin, tg_config **ret);
void tg_config_free(tg_config *c);
/*
 * The effective value of one setting, as text in the file's syntax (defaults
 * applied; "" for an unset optional path): what `tpmguard config get KEY`
 * prints, so that shell code never parses tpmguard.conf itself.
 */
int tg_config_get(const tg_config *c, const char *key, char **ret);
DEFINE_TRIVIAL_CLEANUP_FUNC(tg_config *, tg_config_free);
#define _cleanup_config_ _cleanup_(tg_config_freep)

const char *tg_null_name_policy_to_string(tg_null_name_policy p);
/* Parses "7,11,14" or "7+11" into a bit mask (PCRs 0..23). */
int tg_pcr_list_parse(const char *s, uint32_t *ret_mask);
/* Formats a mask as "7,11" into buf. */
void tg_pcr_list_format(uint32_t mask, char *buf, size_t size);
/* "sha256" ↔ TPM2_ALG_SHA256 (sha1, sha256, sha384, sha512). */
int tg_pcr_bank_from_string(const char *s, uint16_t *ret);
const char *tg_pcr_bank_to_string(uint16_t alg);
