/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <tss2/tss2_esys.h>

#include "boot-anchor.h"
#include "config.h"
#include "macro.h"
#include "secret.h"

/*
 * Verification of the TPM (design §2 step 2) and the verified-session API
 * (§2 step 3).
 *
 * tg_verified_tpm is opaque and only tg_verify() creates one, after every
 * check passed. Everything that sends a secret to the TPM or receives one
 * from it takes a tg_verified_tpm and uses only the sessions it hands out,
 * which are salted to the NULL key whose name the kernel recorded (or,
 * without a null_name under kernel_null_name = prefer, to the NULL key that
 * was just certified by the pinned EK signing key and matches this boot's
 * anchor).
 */
typedef struct tg_verified_tpm tg_verified_tpm;

typedef struct tg_verify_report {
        bool kernel_null_name_present;
        tg_null_name_policy policy;
        tg_anchor_kind anchor;          /* what detects a TPM reset during this boot (design §2.7) */
        bool anchor_recorded;           /* TG_ANCHOR_BOOT: this verification recorded the boot anchor */
        bool resuming;                  /* accept_resume: the counters moved as the announced sleep moves
                                         * them; not re-anchored yet (tg_anchor_resume()) */
        TPM2B_NAME null_name;           /* the name of the NULL key we created and certified */
        TPM2B_NAME ek_signing_key_name; /* the pinned (and matched) signer */
        uint64_t clock;                 /* clock fields: 0 when a cached NULL key was proven without ReadClock */
        uint32_t reset_count;
        uint32_t restart_count;
        bool safe;
        bool cached;                    /* the NULL key came from this boot's verification cache */
        bool ek_tofu;                   /* the pinned key was pinned on first use, unproven (provision
                                         * --trust-on-first-use): say so wherever the verdict is shown */
} tg_verify_report;

typedef struct tg_verify_options {
        const char *null_name_path;     /* overrides the configuration when set */
        const tg_secret *endorsement_auth; /* NULL: empty endorsement hierarchy password */
        bool use_cache;                 /* load (when a session is wanted) and store the per-boot cache */
        bool one_shot;                  /* the verified TPM serves one tg_unseal() and nothing after it:
                                         * no salted HMAC session (only without the kernel's null_name,
                                         * from the cache, one that ends with tg_unseal()'s Load), and
                                         * the NULL key is flushed as soon as the policy session, the
                                         * last one salted to it, is started */
        bool accept_resume;             /* a full verification that lets a move of the TPM's counters the
                                         * announced sleep explains through (report->resuming), for the
                                         * sleep hook's re-anchoring only (boot-anchor.h) */
} tg_verify_options;

/*
 * Runs the whole verification. report (optional) is filled as far as the
 * verification got, on failure too, for diagnostics (--json). On success,
 * when ret_vtpm is not NULL, hands out the verified TPM with its salted HMAC
 * session open. On failure returns -TG_ERR_INTERPOSER (a check failed),
 * -TG_ERR_NOT_PROVISIONED, -TG_ERR_NO_NULL_NAME, -TG_ERR_TPM_UNREACHABLE or
 * -TG_ERR_TPM, having logged the cause and the next step. ret_vtpm is
 * written only on success.
 */
int tg_verify(const tg_config *config, const tg_verify_options *options,
              tg_verify_report *report, tg_verified_tpm **ret_vtpm);

void tg_verified_tpm_free(tg_verified_tpm *v);
DEFINE_TRIVIAL_CLEANUP_FUNC(tg_verified_tpm *, tg_verified_tpm_free);
#define _cleanup_vtpm_ _cleanup_(tg_verified_tpm_freep)

/* The ESAPI context of a verified TPM, for commands that carry no secret. */
ESYS_CONTEXT *tg_vtpm_esys(tg_verified_tpm *v);

/*
 * The salted HMAC session, with parameter encryption set as requested for
 * the next command: decrypt = the command's first TPM2B parameter is
 * encrypted, encrypt = the response's first TPM2B parameter is.
 */
ESYS_TR tg_vtpm_session(tg_verified_tpm *v, bool decrypt, bool encrypt);

/*
 * The salted HMAC session for its last command when the verified TPM is
 * one-shot (tg_verify_options.one_shot): continueSession clear, so that the
 * TPM flushes it when the command succeeds. Otherwise the same as
 * tg_vtpm_session(). After the command, call tg_vtpm_session_done() with
 * whether it succeeded; a failed command leaves the session open (the TPM
 * flushes a session only on success), and it is flushed as usual.
 */
ESYS_TR tg_vtpm_session_last(tg_verified_tpm *v, bool decrypt, bool encrypt);
void tg_vtpm_session_done(tg_verified_tpm *v, bool succeeded);

/*
 * Whether the verified TPM has a salted HMAC session. A one-shot verified
 * TPM has none when the kernel exports a null_name or after a full
 * verification (docs/design.md §2.4): its only salted session is the Unseal's policy
 * session (tg_vtpm_start_policy_session()), and tg_unseal() loads under a
 * password authorization (see there for which check replaces the HMAC).
 */
bool tg_vtpm_has_session(const tg_verified_tpm *v);

/*
 * Hands over the persistent SRK (TG_SRK_HANDLE) when verification already
 * read it (a full verification's ReadPublic, or this boot's cache, whose
 * entry was written after one) and ESYS_TR_NONE otherwise. The caller owns
 * the returned ESYS_TR (Esys_TR_Close it). Its public area is as unverified
 * as any ReadPublic's: it may be used only as the parent of a Load, where a
 * different key makes the TPM refuse the private blob (its integrity is
 * keyed by the real SRK's seed).
 */
ESYS_TR tg_vtpm_take_srk(tg_verified_tpm *v);

/*
 * Hands the persistent SRK's ESYS_TR back after use (a Load or Create under
 * it), so that a later seal or unseal on the same verified TPM reads it no
 * more (docs/design.md §2.4: the lifecycle's unseal, seal and test unseal read it once).
 * Takes ownership; closes it when one is already held.
 */
void tg_vtpm_give_srk(tg_verified_tpm *v, ESYS_TR srk);

/* The salted HMAC session as an audit session (TPMA_SESSION_AUDIT): integrity for commands without handles. */
ESYS_TR tg_vtpm_audit_session(tg_verified_tpm *v);

/*
 * True when the verified TPM is one-shot (the plugin's unlock) and reached through a
 * resource manager that flushes the connection's transient objects and sessions when it
 * closes (tg_tpm.resource_manager, tpmguard.conf's resource_manager): the one-shot
 * unlock's last FlushContext is then left to it (tg_unseal()). The connection closes with
 * tg_verified_tpm_free(), at the end of every token open call.
 */
bool tg_vtpm_rm_flushes(const tg_verified_tpm *v);

/* Starts a policy session salted to the verified NULL key, AES-128-CFB. Caller flushes it. */
int tg_vtpm_start_policy_session(tg_verified_tpm *v, ESYS_TR *ret_session);

/*
 * Certifies, with the pinned EK signing key of state_dir, that the persistent
 * key described by an Esys_TR_Serialize()d ESYS_TR (systemd >= 255's
 * tpm2_srk) is an owner-hierarchy primary of this TPM with exactly the name
 * the blob claims. 0 when it is (*ret_name, optional, gets that name);
 * -TG_ERR_INTERPOSER when the TPM holds no such key there or the attestation
 * does not verify; -TG_ERR_INVALID for a blob that cannot be read.
 */
int tg_vtpm_certify_persistent(tg_verified_tpm *v, const char *state_dir, const uint8_t *serialized, size_t size,
                               TPM2B_NAME *ret_name);
