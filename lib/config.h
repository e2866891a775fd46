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
        TG_NULL_NAME_PREFER,       /* no null_name → certify a fresh NULL key, and detect resets after the
                                    * first verification of this boot with the boot anchor (the default) */
        TG_NULL_NAME_IF_AVAILABLE, /* the old name of PREFER, kept for old configurations: the same behaviour */
} tg_null_name_policy;

/*
 * Whether the TPM is reached through a resource manager that flushes a client's
 * transient objects and sessions when its connection closes: the Linux kernel's
 * /dev/tpmrmN and tpm2-abrmd do. The plugin's one-shot unlock then leaves its last
 * FlushContext to it (tokens/seal.c, tg_unseal(); docs/design.md §2.4, the last flush
 * under a resource manager).
 */
typedef enum tg_resource_manager {
        TG_RESOURCE_MANAGER_AUTO, /* from the tcti: device:/dev/tpmrmN or tabrmd (the default) */
        TG_RESOURCE_MANAGER_YES,  /* another resource manager that flushes at close (and the benchmark) */
        TG_RESOURCE_MANAGER_NO,   /* never: flush everything ourselves */
} tg_resource_manager;

/* cache_dir's default; units that watch it (tpmguard-splash.path, tpmguard-update-finish.service) name it too. */
#define TG_DEFAULT_CACHE_DIR "/run/tpmguard"

typedef struct tg_config {
        char *path;            /* the file this was read from (or would have been) */
        char *tcti;            /* TCTI configuration; default device:/dev/tpmrm0 */
        char *state_dir;       /* where the pinned EK signing key lives */
        char *null_name_path;  /* kernel null_name file; NULL → sysfs of tpm0 via libsystemd */
        char *ek_ca;           /* manufacturer CA stores, whitespace-separated: PEM files or directories;
                                * default: the shipped store and /etc/tpmguard/ek-ca */
        char *cache_dir;       /* per-boot verification cache; default /run/tpmguard */
        tg_null_name_policy kernel_null_name;
        tg_resource_manager resource_manager;
        uint16_t pcr_bank;     /* TPM2_ALG_SHA256 by default */
        uint32_t pcr_mask;     /* bit N = PCR N; PCR 7 by default */
        /* TPM2_DictionaryAttackParameters that 'tpmguard provision' and 'lockout setup' set. */
        uint32_t da_max_tries;        /* failures before lockout; default TG_DA_MAX_TRIES */
        uint32_t da_recovery_time;    /* seconds after which one failure is forgiven; TG_DA_RECOVERY_TIME */
        uint32_t da_lockout_recovery; /* seconds after a failed lockout authorization; TG_DA_LOCKOUT_RECOVERY */
        unsigned pin_tries;    /* wrong PINs per unlock before giving up to the passphrase */
        unsigned pin_da_reserve; /* TPM DA tries an unlock never spends */
        bool allow_no_pin;     /* --no-pin tokens allowed at all (default no: docs/design.md §9.1) */
        bool allow_unextended_pcrs; /* seal to PCRs at their reset value (default no) */
        unsigned pin_min_length; /* shortest new PIN accepted (default TG_PIN_MIN_LENGTH_DEFAULT) */
        unsigned pin_kdf_memory;  /* MiB of the PIN's Argon2id in a new seal (format 2) */
        unsigned pin_kdf_time_ms; /* the time its passes are benchmarked to, on the enrolling machine */
        /* Not a file setting: set by the CLI's --accept-token-policy, to carry
         * over a token whose policy is weaker than this configuration. */
        bool accept_token_policy;
} tg_config;

/*
 * The PIN's Argon2id in a format 2 token (tokens/pin.h): 64 MiB, benchmarked
 * to 1 s, fits an initrd on a low-end laptop; the token parser's bounds are
 * 32 MiB..1 GiB, and so are these.
 */
#define TG_PIN_KDF_MEMORY_DEFAULT 64
#define TG_PIN_KDF_MEMORY_MIN 32
#define TG_PIN_KDF_MEMORY_MAX 1024
#define TG_PIN_KDF_TIME_MS_DEFAULT 1000
#define TG_PIN_KDF_TIME_MS_MIN 10
#define TG_PIN_KDF_TIME_MS_MAX 10000

/* Like booster: three PIN attempts per unlock, then the recovery passphrase. */
#define TG_DEFAULT_PIN_TRIES 3
#define TG_PIN_TRIES_MAX 10
/*
 * The last TPM dictionary-attack tries an unlock never spends: a typo
 * storm at the boot prompt can never lock the TPM out, and the owner keeps
 * tries for 'tpmguard change-pin' or a later boot.
 */
#define TG_DEFAULT_PIN_DA_RESERVE 2
#define TG_PIN_DA_RESERVE_MAX 100

/*
 * The DA defaults: what canonical/secboot sets on TPMs it provisions, and
 * Windows on TPM 2.0 before 1607 (since then it forgives one failure every
 * 10 minutes). 32 tries then one every 2 hours is about 4,400 guesses a
 * year; 10 minutes would be 52,000. See docs/design.md, "Lockout".
 */
#define TG_DA_MAX_TRIES 32
#define TG_DA_RECOVERY_TIME 7200
#define TG_DA_LOCKOUT_RECOVERY 86400

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
 * or else from the compiled-in /etc/tpmguard/tpmguard.conf. A missing default
 * file gives the defaults; a missing file named explicitly is an error. A
 * malformed file, a key given twice, or a file that someone other than root
 * could write (tg_check_trusted()) is an error naming the cause.
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
const char *tg_resource_manager_to_string(tg_resource_manager m);
/*
 * True when the TCTI configuration string names a resource manager that flushes a
 * client's handles when its connection closes: "device:/dev/tpmrmN" (the kernel's; a
 * "device:" path that is anything else, "device" alone or an empty string is not) or
 * tpm2-abrmd ("tabrmd", "tabrmd:...", "libtss2-tcti-tabrmd.so...").
 */
bool tg_tcti_is_resource_manager(const char *tcti);
/* The effective resource_manager setting: auto resolved from c->tcti. */
bool tg_config_resource_manager(const tg_config *c);
/* Parses "7,11,14" or "7+11" into a bit mask (PCRs 0..23). */
int tg_pcr_list_parse(const char *s, uint32_t *ret_mask);
/* Formats a mask as "7,11" into buf. */
void tg_pcr_list_format(uint32_t mask, char *buf, size_t size);
/* "sha256" ↔ TPM2_ALG_SHA256 (sha1, sha256, sha384, sha512). */
int tg_pcr_bank_from_string(const char *s, uint16_t *ret);
const char *tg_pcr_bank_to_string(uint16_t alg);
