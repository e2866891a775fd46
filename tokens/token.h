/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "config.h"
#include "json-util.h"
#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>
#include <tss2/tss2_tpm2_types.h>

#include "macro.h"
#include "pin.h"

/*
 * The LUKS2 token, type "tpmguard", formats 1 and 2 (design §4,
 * docs/token-format.md). Only these functions read or write it.
 *
 * The token sits in the LUKS2 header, which an evil maid can edit. It
 * therefore holds only what the TPM itself enforces (the sealed blob and its
 * policy inputs) or what merely breaks unlocking when edited (parent name,
 * PIN KDF parameters). Security policy — which keys are trusted, whether the
 * kernel's null_name is required — comes from /etc/tpmguard and never from
 * here; ek_signing_key_name is an informational copy for diagnostics.
 *
 * Parsing is strict on every known key (type, size, range, encoding) and
 * ignores unknown keys so that a newer writer can add fields. Every
 * rejection is -TG_ERR_TOKEN with a message naming the offending field.
 *
 *   {
 *     "type": "tpmguard", "keyslots": ["1"], "version": 1,
 *     "blob": base64(TPM2B_PRIVATE ‖ TPM2B_PUBLIC),
 *     "pcr_bank": "sha256", "pcrs": [7], "policy_hash": hex(32 bytes),
 *     "pin": true,
 *     "pin_kdf": { "type": "pbkdf2-sha256", "iterations": 100000, "salt": base64(32 bytes) },
 *     "parent_name": hex(34 bytes), "ek_signing_key_name": hex(34 bytes)
 *   }
 *
 * Format 2 (a PIN token; written by every seal with a PIN since December 2026;
 * docs/token-format.md, "The PIN in format 2"):
 * "version": 2, "pin": true and
 *     "pin_kdf": { "type": "argon2id", "time": 3, "memory": 65536 (KiB), "parallel": 1, "salt": base64(32 bytes) }
 * and the TPM holds the keyslot passphrase masked with a key of the PIN's
 * Argon2id (tokens/pin.h). The parser bounds the Argon2id parameters
 * (TG_ARGON2_*), so an edited token cannot make the unlock allocate more
 * than 1 GiB or run more than 64 passes (at the ceiling a minute or more
 * per try on a slow machine: availability only, as any edit that breaks the
 * unlock), nor weaken the search an attacker with the TPM's data has to
 * run, below the floor. No-PIN tokens stay format 1.
 */

#define TG_TOKEN_TYPE "tpmguard"
#define TG_TOKEN_VERSION 2u           /* the newest format read */
#define TG_TOKEN_VERSION_PIN 2u       /* the format a PIN seal writes */
#define TG_TOKEN_VERSION_NO_PIN 1u    /* the format a no-PIN seal writes: format 2 gives it nothing */
#define TG_TOKEN_JSON_MAX (64u * 1024u)
#define TG_PIN_KDF_TYPE "pbkdf2-sha256"
#define TG_PIN_KDF_TYPE_V2 "argon2id"
#define TG_PIN_KDF_ITERATIONS_MIN 1000u
#define TG_PIN_KDF_ITERATIONS_MAX 10000000u
#define TG_PIN_SALT_SIZE 32u

/*
 * The object attributes of the sealed object we create: fixedTPM,
 * fixedParent and adminWithPolicy; never userWithAuth (only the policy
 * authorizes use), never sensitiveDataOrigin (we supply the data). noDA is
 * allowed only without a PIN: a PIN-protected object must count towards
 * dictionary-attack lockout. adminWithPolicy (set since December 2026) puts
 * the ADMIN role (ObjectChangeAuth, Certify of the object) under the policy
 * too, which names no admin command, so the PIN cannot be tried through
 * those commands outside the PCR policy; tokens sealed before lack it and
 * stay valid.
 */
#define TG_SEALED_ATTRIBUTES_REQUIRED (TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT)
#define TG_SEALED_ATTRIBUTES_OPTIONAL (TPMA_OBJECT_ADMINWITHPOLICY)
#define TG_SEALED_ATTRIBUTES_NO_PIN_OPTIONAL (TPMA_OBJECT_NODA)

/*
 * Alternate seals (docs/design.md "Updates", docs/token-format.md "alternates"): the same
 * masked secret under the same PIN authValue (the main seal's pin_kdf salt and parameters),
 * each under a policy of its own, for an update of the boot chain:
 *  - grace: the TPM's resetCount at most reset_count_max and its restartCount 0
 *    (tokens/policy.h), so it opens with the PIN alone in the boots up to that count (only in
 *    a boot from a TPM Reset, not after a Restart or Resume) and never after, while the token's
 *    PCRs the update does not change (pcr_mask, a strict subset of the token's; 0: none) keep
 *    their values at prepare (pcr_digest);
 *  - predicted: the main policy's PCRs with the values an update will produce (pcr_digest).
 * Only a format 2 PIN token has them, at most one of each kind. The reader recomputes each one's
 * policy from its fields and refuses a blob whose authPolicy differs: the fields shown and used
 * are what the TPM enforces.
 */
#define TG_ALT_MAX 2u
#define TG_GRACE_BOOTS_MAX 16u
typedef enum tg_alt_kind {
        TG_ALT_GRACE = 1,
        TG_ALT_PREDICTED = 2,
} tg_alt_kind;

typedef struct tg_token_alt {
        tg_alt_kind kind;
        TPM2B_PRIVATE private_blob;
        TPM2B_PUBLIC public_blob;
        TPM2B_DIGEST policy_hash;        /* recomputed by the reader from the fields below */
        uint32_t reset_count_max;        /* grace */
        uint32_t pcr_mask;               /* grace: the PCRs it keeps (0: none) */
        TPM2B_DIGEST pcr_digest;         /* PolicyPCR's pcrDigest: of the predicted values, or of the grace's
                                          * kept PCRs at prepare */
} tg_token_alt;

typedef struct tg_token {
        unsigned version;
        TPM2B_PRIVATE private_blob;
        TPM2B_PUBLIC public_blob;
        uint16_t pcr_bank;               /* TPM2_ALG_* */
        uint32_t pcr_mask;               /* bit N = PCR N (0..23) */
        TPM2B_DIGEST policy_hash;
        bool pin;
        uint32_t pin_kdf_iterations;     /* format 1 */
        tg_argon2_params argon2;         /* format 2 */
        uint8_t pin_salt[32];
        TPM2B_NAME parent_name;
        TPM2B_NAME ek_signing_key_name;  /* size 0 if absent */
        int keyslot;                     /* -1 if none */
        unsigned n_alt;                  /* alternates, 0..TG_ALT_MAX */
        tg_token_alt alt[TG_ALT_MAX];
        /* Not stored: */
        TPM2B_DIGEST pcr_digest;         /* tg_seal(): the pcrDigest it sealed to */
        bool grace;                      /* a view of a grace alternate (tg_token_alt_view()) */
        uint32_t reset_count_max;        /* its bound */
} tg_token;

/* The alternate of this kind, or NULL. */
const tg_token_alt *tg_token_alt_find(const tg_token *t, tg_alt_kind kind);
/*
 * The token as seen through alternate a: its blob and policy, the main token's PIN KDF and
 * parent, no alternates; a grace view has grace set and the grace's kept PCRs (pcr_mask,
 * pcr_digest; maybe none). tg_unseal() takes it.
 */
void tg_token_alt_view(const tg_token *t, const tg_token_alt *a, tg_token *ret);
/* Adds a (replacing an alternate of its kind); -TG_ERR_INVALID when the token cannot hold it. */
int tg_token_alt_put(tg_token *t, const tg_token_alt *a);
/* "grace" or "predicted". */
const char *tg_alt_kind_to_string(tg_alt_kind kind);

/* Validates a LUKS2 token object; strict on known keys, ignores unknown keys. */
int tg_token_from_json(json_object *jobj, tg_token *ret);
/* Parses and validates token JSON text; rejects more than TG_TOKEN_JSON_MAX bytes and trailing data. */
int tg_token_from_string(const char *json, tg_token *ret);
/* Builds the token object, including "type" and "keyslots"; refuses a token tg_token_from_json would reject. */
int tg_token_to_json(const tg_token *t, json_object **ret);
/* The token as compact JSON text (JSON_C_TO_STRING_PLAIN); free() the result. */
int tg_token_to_string(const tg_token *t, char **ret);
/*
 * Is the token's policy weaker than the configuration's? The LUKS2 header
 * is attacker-writable, so a token that claims less than tpmguard.conf asks
 * for (no PIN where PINs are required, another PCR bank, a PCR set that
 * lacks one of the configured PCRs) may have been edited (docs/design.md §9.1).
 * True with a reason in why[size]; a superset of the PCRs is not weaker.
 */
bool tg_token_policy_weaker(const tg_token *t, const tg_config *config, char *why, size_t size);
/*
 * A format 1 PIN token: the TPM holds the keyslot passphrase itself, so a TPM
 * that leaks its secrets opens the volume without the PIN. 'change-pin' or
 * 'rotate' upgrade it to format 2.
 */
bool tg_token_exposed_to_leaking_tpm(const tg_token *t);
/*
 * A "pin": false token whose sealed object lacks noDA: every no-PIN seal sets
 * noDA and every PIN seal clears it, and the TPM refuses a public area edited
 * apart from its private part, so the header's "pin" was edited (a PIN token
 * made to look PIN-less). Its unseal fails the policy (no PolicyAuthValue),
 * which must not read as a PCR change. ("pin": true on a noDA object is
 * refused by the parser.)
 */
bool tg_token_pin_edited(const tg_token *t);
/* "sha256 PCRs 7,11, PIN": what a token is sealed to, for messages. */
void tg_token_policy_format(const tg_token *t, char *buf, size_t size);

/* Human-readable lines for `cryptsetup luksDump`: each passed to print without a trailing newline. */
void tg_token_dump(const tg_token *t, void (*print)(const char *line, void *userdata), void *userdata);

