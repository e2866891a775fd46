/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Verifying the TPM before any secret touches the bus (design §2).
 *
 * Threat model: everything between this process and the TPM chip is
 * hostile — an interposer on LPC/SPI/I2C may record, drop, alter, inject and
 * replay commands and responses, substitute every public key the TPM
 * returns, and reset the TPM and replay PCR extends. What we trust: this
 * code, the kernel's sysfs null_name (the kernel created its NULL primary at
 * boot over its own protected sessions), and the pinned EK signing key
 * (proven against the manufacturer's EK certificate at install time).
 *
 * So: every public key the TPM hands us is hashed by us and compared with a
 * name we already trust (kernel null_name, pinned name); the TPM must then
 * certify the NULL key with the pinned key, over a fresh nonce we chose,
 * and we check that signature and every field of the attestation in
 * software. Only after all of that succeeds do we hand out sessions, and
 * they are salted to exactly the public area we verified. A TPM reset since
 * boot changes the NULL seed, so the NULL key no longer matches the
 * kernel's record: that is how reset-and-replay attacks are caught.
 */
#include <assert.h>
#include <inttypes.h>
#include <openssl/rand.h>
#include <tss2/tss2_rc.h>

#include "attest.h"
#include "error.h"
#include "log.h"
#include "nullname.h"
#include "pinned.h"
#include "tpm.h"
#include "util.h"
#include "vcache.h"
#include "verify.h"

#define TG_NONCE_SIZE 32

struct tg_verified_tpm {
        tg_tpm *tpm;
        tg_handle null_key;   /* the verified NULL primary: salt key for every session */
        tg_handle hmac_session;
        tg_handle srk;        /* TG_SRK_HANDLE, when verification read it (close_only) */
        TPM2B_NAME null_name;
        bool one_shot;        /* see tg_verify_options.one_shot */
        bool null_key_trusted; /* null_key matched the kernel's null_name, or the pinned key certified it */
        bool endorsement_auth; /* a non-empty endorsement password is set on the context */
        bool session_ended;   /* the TPM flushed hmac_session (continueSession clear, success) */
};

void tg_verified_tpm_free(tg_verified_tpm *v) {
        if (!v)
                return;
        tg_handle_release(&v->hmac_session);
        tg_handle_release(&v->srk);
        tg_handle_release(&v->null_key);
        tg_tpm_free(v->tpm);
        free(v);
}

ESYS_CONTEXT *tg_vtpm_esys(tg_verified_tpm *v) {
        return v->tpm->esys;
}

static ESYS_TR session_with(tg_verified_tpm *v, TPMA_SESSION attrs, bool decrypt, bool encrypt) {
        /* Programmer error: a one-shot verified TPM's session was used after its last command, or
         * it has none (see tg_vtpm_has_session()). */
        assert(!v->session_ended && v->hmac_session.tr != ESYS_TR_NONE);

        if (decrypt)
                attrs |= TPMA_SESSION_DECRYPT;
        if (encrypt)
                attrs |= TPMA_SESSION_ENCRYPT;
        /* Cannot fail for a valid session handle, which we own. */
        (void) Esys_TRSess_SetAttributes(v->tpm->esys, v->hmac_session.tr, attrs, 0xff);
        return v->hmac_session.tr;
}

ESYS_TR tg_vtpm_session(tg_verified_tpm *v, bool decrypt, bool encrypt) {
        return session_with(v, TPMA_SESSION_CONTINUESESSION, decrypt, encrypt);
}

ESYS_TR tg_vtpm_session_last(tg_verified_tpm *v, bool decrypt, bool encrypt) {
        return session_with(v, v->one_shot ? 0 : TPMA_SESSION_CONTINUESESSION, decrypt, encrypt);
}

void tg_vtpm_session_done(tg_verified_tpm *v, bool succeeded) {
        if (!v->one_shot || !succeeded)
                return;
        /*
         * The TPM flushed the session when the command succeeded with
         * continueSession clear. Whether or not ESAPI already dropped its
         * metadata, closing it sends nothing to the TPM.
         */
        v->hmac_session.close_only = true;
        tg_handle_release(&v->hmac_session);
        v->session_ended = true;
}

bool tg_vtpm_rm_flushes(const tg_verified_tpm *v) {
        return v->one_shot && v->tpm->resource_manager;
}

bool tg_vtpm_has_session(const tg_verified_tpm *v) {
        return v->hmac_session.tr != ESYS_TR_NONE;
}

ESYS_TR tg_vtpm_take_srk(tg_verified_tpm *v) {
        ESYS_TR srk = v->srk.tr;

        v->srk.tr = ESYS_TR_NONE;
        return srk;
}

void tg_vtpm_give_srk(tg_verified_tpm *v, ESYS_TR srk) {
        if (srk == ESYS_TR_NONE)
                return;
        if (v->srk.tr != ESYS_TR_NONE) {
                (void) Esys_TR_Close(v->tpm->esys, &srk);
                return;
        }
        v->srk.tr = srk;
}

ESYS_TR tg_vtpm_audit_session(tg_verified_tpm *v) {
        assert(!v->session_ended && v->hmac_session.tr != ESYS_TR_NONE);
        (void) Esys_TRSess_SetAttributes(v->tpm->esys, v->hmac_session.tr,
                                         TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_AUDIT, 0xff);
        return v->hmac_session.tr;
}

static int start_salted_session(tg_verified_tpm *v, TPM2_SE type, ESYS_TR *ret) {
        static const TPMT_SYM_DEF aes128cfb = {
                .algorithm = TPM2_ALG_AES,
                .keyBits.aes = 128,
                .mode.aes = TPM2_ALG_CFB,
        };
        ESYS_TR session = ESYS_TR_NONE;
        TSS2_RC rc;

        rc = Esys_StartAuthSession(v->tpm->esys, v->null_key.tr, ESYS_TR_NONE,
                                   ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                   NULL, type, &aes128cfb, TPM2_ALG_SHA256, &session);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "StartAuthSession (salted to the verified NULL key)");
        (void) Esys_TRSess_SetAttributes(v->tpm->esys, session, TPMA_SESSION_CONTINUESESSION, 0xff);
        *ret = session;
        return 0;
}

int tg_vtpm_start_policy_session(tg_verified_tpm *v, ESYS_TR *ret_session) {
        int r = start_salted_session(v, TPM2_SE_POLICY, ret_session);

        /*
         * One-shot, with the HMAC session ended or never started: this is the last session
         * salted to the NULL key, which is only the salt key. Flushing it now (the same one FlushContext, earlier)
         * keeps one handle fewer live for the policy commands and the Unseal, which through
         * /dev/tpmrm0 saves a ContextLoad and a ContextSave per command. Also under a resource
         * manager (tg_vtpm_rm_flushes()), which would flush it at close: leaving it to the RM
         * saves this command but costs more (measured: 791 ms modelled via tpmrm0 instead of
         * 660 ms for the warm unlock; docs/performance.md, "Fewer flushes under tpmrm0").
         */
        if (r >= 0 && v->one_shot && v->hmac_session.tr == ESYS_TR_NONE)
                tg_handle_release(&v->null_key);
        return r;
}

/*
 * The proof of the cached path: one command in the salted session, with its
 * response HMAC checked by ESAPI, shows that the TPM and we derived the same
 * session key. That command is the ReadPublic of the persistent SRK, which
 * unsealing needs anyway, so the proof costs no extra round trip:
 *  - with the SRK's ESYS_TR from the cache, one audited ReadPublic on it,
 *    whose authenticated response must also carry the cached SRK name;
 *  - without, Esys_TR_FromTPMPublic in the audit session (tpm2-tss sends a
 *    plain ReadPublic first, to learn the name for the cpHash);
 *  - with no SRK at TG_SRK_HANDLE (an error response carries no HMAC),
 *    ReadClock.
 * Nothing secret has been sent before the proof.
 */
/*
 * A failed proof of the cached NULL key. Each way it can fail means something on the bus or
 * in /run lied, except the last, so each but the last is an alarm, never a silent fall back to
 * a full verification (which would succeed over the genuine key and hide the attack):
 *  - a response that fails its HMAC under the session salted to the certified key was altered
 *    or replayed on the bus (ESAPI also refuses every later command on this context);
 *  - the TPM refusing the command's HMAC (TPM_RC_BAD_AUTH/AUTH_FAIL for the audit session):
 *    it does not share our session key (the salt went to another key, the saved context is
 *    not the key it claims) or the name ESAPI hashed into the command was altered (the
 *    unauthenticated ReadPublic before an Esys_TR_FromTPMPublic). No TPM state we do not
 *    control explains it: the session is one we just started, to a key whose name was checked;
 *  - any other TPM error (a full object memory, TPM_RC_RETRY...): no proof either way, a full
 *    verification decides (and proves what it uses).
 * The cached SRK's ReadPublic is the exception: its name is this boot's cache's, and a TPM
 * cleared and re-provisioned since has another SRK at that handle, which makes the TPM refuse
 * the HMAC too; prove_cached_session() tells the two apart with a ReadClock, which names nothing.
 */
static int proof_failed(TSS2_RC rc, const char *what) {
        if (rc == TSS2_ESYS_RC_RSP_AUTH_FAILED || rc == TSS2_ESYS_RC_MALFORMED_RESPONSE)
                return tg_tpm_rc(rc, "The proof of the cached NULL key");
        if ((rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER &&
            (tg_tpm_rc_base(rc) == TPM2_RC_BAD_AUTH || tg_tpm_rc_base(rc) == TPM2_RC_AUTH_FAIL))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The proof of this boot's cached NULL key failed: the TPM refused the session "
                                    "salted to it on %s (%s), so the TPM does not hold that key or the command was "
                                    "altered on the TPM bus (or the cache in /run was replaced). Interposer "
                                    "suspected; nothing secret was sent. Run 'tpmguard doctor'.",
                                    what, Tss2_RC_Decode(rc));
        return log_debug_rc(-TG_ERR_TPM, "The cached NULL key failed its proof on %s (%s): verifying in full.", what,
                            Tss2_RC_Decode(rc));
}

/* An audited ReadClock: proves the session key (the TPM holds the salted-to key) and
 * makes the clock counters in the response authentic. */
static int prove_by_clock(tg_verified_tpm *v, tg_verify_report *report) {
        _cleanup_free_ TPMS_TIME_INFO *time_info = NULL;
        TSS2_RC rc;

        rc = Esys_ReadClock(v->tpm->esys, tg_vtpm_audit_session(v), ESYS_TR_NONE, ESYS_TR_NONE, &time_info);
        if (rc != TSS2_RC_SUCCESS)
                return proof_failed(rc, "ReadClock");
        report->clock = time_info->clockInfo.clock;
        report->reset_count = time_info->clockInfo.resetCount;
        report->restart_count = time_info->clockInfo.restartCount;
        report->safe = time_info->clockInfo.safe;
        return 0;
}

static int prove_cached_session(tg_verified_tpm *v, tg_verify_report *report) {
        ESYS_TR srk = ESYS_TR_NONE;
        TSS2_RC rc;

        if (v->srk.tr != ESYS_TR_NONE) {
                _cleanup_free_ TPM2B_PUBLIC *pub = NULL;
                _cleanup_free_ TPM2B_NAME *name = NULL, *cached_name = NULL;

                rc = Esys_ReadPublic(v->tpm->esys, v->srk.tr, tg_vtpm_audit_session(v), ESYS_TR_NONE, ESYS_TR_NONE,
                                     &pub, &name, NULL);
                if ((rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER &&
                    (tg_tpm_rc_base(rc) == TPM2_RC_BAD_AUTH || tg_tpm_rc_base(rc) == TPM2_RC_AUTH_FAIL)) {
                        /* The cached SRK name in the command, or the session key: a ReadClock names
                         * nothing, so it proves the session alone (an alarm if it fails). */
                        int r = prove_by_clock(v, report);
                        if (r < 0)
                                return r;
                        log_info("cache: the SRK at 0x%08x is not the one this boot's cache recorded (TPM cleared "
                                 "or re-provisioned since?): verifying in full.", TG_SRK_HANDLE);
                        return -TG_ERR_INVALID;
                }
                if (rc != TSS2_RC_SUCCESS)
                        return proof_failed(rc, "ReadPublic (cached SRK)");
                rc = Esys_TR_GetName(v->tpm->esys, v->srk.tr, &cached_name);
                if (rc != TSS2_RC_SUCCESS || !tg_name_equal(cached_name, name))
                        return log_debug_rc(-TG_ERR_INVALID, "cache: the SRK at 0x%08x is not the cached one.",
                                            TG_SRK_HANDLE);
                return 0;
        }

        rc = Esys_TR_FromTPMPublic(v->tpm->esys, TG_SRK_HANDLE, tg_vtpm_audit_session(v), ESYS_TR_NONE, ESYS_TR_NONE,
                                   &srk);
        if (rc == TSS2_RC_SUCCESS) {
                v->srk = (tg_handle) { .esys = v->tpm->esys, .tr = srk, .close_only = true };
                return 0;
        }
        if (tg_tpm_rc_base(rc) != TPM2_RC_HANDLE)
                return proof_failed(rc, "ReadPublic (SRK)");

        return prove_by_clock(v, report);
}

/*
 * The cheap path: this boot's cache of the certified NULL key. Before the
 * verified TPM is handed out, one audited command proves that the TPM and
 * we derived the same session key from the salt, i.e. that the TPM holds
 * the private key of exactly the public area we salted to, whose name is
 * the kernel's null_name. Any failure leaves v as it was.
 */
static int verify_from_cache(const tg_config *config, tg_verified_tpm *v, const TPM2B_NAME *kernel_null_name,
                             const TPM2B_NAME *signer_name, tg_verify_report *report) {
        int r;

        r = tg_vcache_load(config, v->tpm->esys, kernel_null_name, signer_name, &v->null_key.tr, &v->null_name,
                           &v->srk.tr);
        if (r < 0)
                return r;
        if (!kernel_null_name) {
                /* The cached key must be the one this boot's anchor names; if not (or no anchor), verify
                 * in full, which records or checks the anchor. */
                r = tg_anchor_names(config->cache_dir, &v->null_name);
                if (r < 0)
                        goto fail;
                report->anchor = TG_ANCHOR_BOOT;
        }
        if (kernel_null_name && v->one_shot) {
                /*
                 * One-shot with the kernel's null_name (docs/design.md §2.4): no HMAC session and no proof
                 * command. The only salted session is the Unseal's policy session, salted to the
                 * public area vcache_load() checked against the kernel's null_name (so only the TPM
                 * that holds that NULL key's private part can derive its session key). The proof
                 * round trip was there to show key agreement before anything secret moved; on this
                 * path nothing before the Unseal is secret, and the Unseal carries its own proof:
                 *  - its command HMAC (PolicyAuthValue: keyed by the session key and the PIN-derived
                 *    authValue, over a cpHash that names the sealed object by the name of the
                 *    token's public area) stops a PIN-guessing oracle on the bus (the interposer
                 *    cannot derive the session key) and a substituted sealed object (its name is not
                 *    ours: the TPM refuses the HMAC);
                 *  - its response HMAC, checked by ESAPI under the same session key, and outData's
                 *    encryption stop an altered, replayed or read-off secret, and a cached context
                 *    that is not the TPM's key (the TPM would derive another session key).
                 * A context the TPM refuses (a reset since the cache was written) still costs a
                 * full verification here (tg_vcache_load). See tokens/seal.c, tg_unseal(), and
                 * docs/design.md, "The warm unlock's one salted session".
                 */
                report->null_name = v->null_name;
                report->ek_signing_key_name = *signer_name;
                report->cached = true;
                log_debug("TPM verified from this boot's cache: NULL key loaded from its saved context; "
                          "the Unseal's salted session proves it.");
                return 0;
        }
        r = start_salted_session(v, TPM2_SE_HMAC, &v->hmac_session.tr);
        if (r < 0)
                goto fail;
        if (!kernel_null_name) {
                tg_anchor_state state;

                /* A TPM Restart (Shutdown(STATE), reset, Startup(CLEAR)) keeps the NULL seed, so the cached
                 * key still loads and proves, while the PCRs were reset and may have been replayed: the
                 * anchor's counters must still be this TPM's, read in an audited ReadClock (authentic:
                 * the response is MACed with the session key salted to the certified NULL key). */
                r = prove_by_clock(v, report);
                if (r < 0) {
                        tg_vcache_drop(config);
                        goto fail;
                }
                r = tg_anchor_check(config->cache_dir, &v->null_name, report->reset_count, report->restart_count, false,
                                    &state);
                if (r < 0)
                        goto fail;
        }
        r = prove_cached_session(v, report);
        if (r < 0) {
                tg_vcache_drop(config);
                goto fail;
        }
        report->null_name = v->null_name;
        report->ek_signing_key_name = *signer_name;
        report->cached = true;
        log_debug("TPM verified from this boot's cache: NULL key loaded from its saved context and proven.");
        return 0;

fail:
        tg_handle_release(&v->srk);
        tg_handle_release(&v->hmac_session);
        tg_handle_release(&v->null_key);
        return r;
}

/* auth_session: the hierarchy's authorization (ESYS_TR_PASSWORD only for the NULL hierarchy, which has no password). */
static int create_primary(tg_tpm *tpm, ESYS_TR hierarchy, ESYS_TR auth_session, const TPM2B_PUBLIC *template,
                          const char *what, tg_handle *ret_handle, TPM2B_PUBLIC *ret_public, TPM2B_NAME *ret_name) {
        static const TPM2B_SENSITIVE_CREATE empty_sensitive = {};
        static const TPM2B_DATA no_outside_info = {};
        static const TPML_PCR_SELECTION no_pcrs = {};
        _cleanup_handle_ tg_handle h = { .esys = tpm->esys, .tr = ESYS_TR_NONE };
        _cleanup_free_ TPM2B_PUBLIC *out_public = NULL;
        TPM2B_NAME name, *esys_name = NULL;
        TSS2_RC rc;
        int r;

        rc = Esys_CreatePrimary(tpm->esys, hierarchy, auth_session, ESYS_TR_NONE, ESYS_TR_NONE,
                                &empty_sensitive, template, &no_outside_info, &no_pcrs,
                                &h.tr, &out_public, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS) {
                if (hierarchy == ESYS_TR_RH_ENDORSEMENT && tg_rc_is_auth_failure(rc))
                        return tg_endorsement_auth_failed(tpm->esys, what);
                return tg_tpm_rc(rc, what);
        }

        /* Our own hash of what the TPM returned; ESAPI will salt to exactly this area. */
        r = tg_public_name(&out_public->publicArea, &name);
        if (r < 0)
                return r;
        rc = Esys_TR_GetName(tpm->esys, h.tr, &esys_name);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "Esys_TR_GetName");
        if (!tg_name_equal(esys_name, &name)) {
                free(esys_name);
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "%s: the name the TPM gave for the key does not match its public area: an "
                                    "interposer is suspected. The TPM will not be used; unlock with the recovery "
                                    "passphrase.", what);
        }
        free(esys_name);

        *ret_handle = h;
        h.tr = ESYS_TR_NONE;
        if (ret_public)
                *ret_public = *out_public;
        *ret_name = name;
        return 0;
}

static int signer_gone(const tg_pinned_key *pinned) {
        log_notice("The EK signing key is no longer persisted at 0x%08" PRIx32 "; re-creating it (slower). "
                   "'tpmguard provision' persists it again.", pinned->persistent_handle);
        return 0;
}

/* Is rc the TPM's error base about the Certify's signHandle (handle 2), or its authorization (session 2)? */
static bool signer_at(TSS2_RC rc, TSS2_RC base) {
        TSS2_RC where = base == TPM2_RC_HANDLE ? TPM2_RC_2 : TPM2_RC_S | TPM2_RC_2;

        return (rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER && (rc & TPM2_RC_FMT1) && tg_tpm_rc_base(rc) == base &&
               (rc & (TPM2_RC_P | TPM2_RC_S | TPM2_RC_N_MASK)) == where;
}

static int signer_substituted(const tg_pinned_key *pinned) {
        return log_alert_rc(-TG_ERR_INTERPOSER,
                            "The key persisted at 0x%08" PRIx32 " is not the pinned EK signing key: it was "
                            "substituted (by someone with the owner password), or an interposer sits on the "
                            "TPM bus. The TPM will not be used; unlock with the recovery passphrase and "
                            "investigate ('tpmguard doctor').", pinned->persistent_handle);
}

/*
 * The EK signing key persisted at provisioning (docs/design.md §2.2 step 4): no CreatePrimary in an
 * endorsement-authorized salted session (≈ 0.5 s on a discrete TPM).
 *
 * Check kept: the key that certifies the NULL key is the pinned one. When read (unread false), the
 * name of what answers at the handle (Esys_TR_GetName: ESAPI's hash of the returned public area,
 * not the name field of the response) must be the pinned name before the key is used; a different
 * key there (put there by someone with owner authorization, or an altered ReadPublic response) is
 * an alert and we fail closed, never falling back to a key we did not pin.
 *
 * Unread (the full verification, issue 33): the ESYS_TR is made from the pinned handle and name
 * alone, and no ReadPublic is sent (≈ 7 ms modelled, one command fewer in every verification).
 * That read was never what made the key trusted: it is unauthenticated, and an interposer could
 * answer it with the pinned public area whatever the handle holds. What does is the Certify,
 * checked against the pinned public key from state_dir, never against anything the TPM returned
 * (tg_certify_verify), with the pinned key's qualifiedName as the endorsement primary's. The
 * Certify is password-authorized (the key's authValue is empty), so ESAPI needs no public area
 * for it. A substituted key at the handle now shows at the Certify, as the same alert
 * (signer_substituted()); an empty handle as TPM_RC_HANDLE, after which the caller re-creates the key.
 * A substituted key with an authValue of its own fails the empty password; when it is not noDA
 * that costs a dictionary-attack try, which whoever can put a key there (owner authorization)
 * or answer for the handle (an interposer) can spend directly anyway.
 *
 * Returns 1 with the key (a persistent handle: closed, never flushed), 0 when the pinned file
 * records no handle or (read) the handle is empty (evicted, TPM cleared: the caller re-creates the
 * key, the path every verification took before), < 0 on error.
 */
static int persisted_signer(tg_verified_tpm *v, const tg_pinned_key *pinned, bool unread, tg_handle *ret,
                            TPM2B_NAME *ret_name) {
        _cleanup_handle_ tg_handle h = { .esys = v->tpm->esys, .tr = ESYS_TR_NONE, .close_only = true };
        _cleanup_free_ TPM2B_NAME *name = NULL;
        TSS2_RC rc;

        if (pinned->persistent_handle == 0)
                return 0;
        if (unread) {
                uint8_t buf[sizeof(TPM2_HANDLE) + sizeof(TPM2B_NAME) + sizeof(UINT32)];
                size_t offset = 0;

                /* Esys_TR_Deserialize of an IESYS_RESOURCE without public area: handle, name, no misc. */
                if (Tss2_MU_TPM2_HANDLE_Marshal(pinned->persistent_handle, buf, sizeof buf, &offset) != TSS2_RC_SUCCESS ||
                    Tss2_MU_TPM2B_NAME_Marshal(&pinned->name, buf, sizeof buf, &offset) != TSS2_RC_SUCCESS ||
                    Tss2_MU_UINT32_Marshal(0, buf, sizeof buf, &offset) != TSS2_RC_SUCCESS ||
                    Esys_TR_Deserialize(v->tpm->esys, buf, offset, &h.tr) != TSS2_RC_SUCCESS)
                        return log_error_rc(-TG_ERR_INVALID, "No ESYS_TR for the pinned EK signing key's handle "
                                            "0x%08" PRIx32 ".", pinned->persistent_handle);
                *ret_name = pinned->name;
                *ret = h;
                h.tr = ESYS_TR_NONE;
                return 1;
        }
        rc = Esys_TR_FromTPMPublic(v->tpm->esys, pinned->persistent_handle, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                   &h.tr);
        if (rc != TSS2_RC_SUCCESS && tg_tpm_rc_base(rc) == TPM2_RC_HANDLE)
                return signer_gone(pinned);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "ReadPublic (persisted EK signing key)");
        rc = Esys_TR_GetName(v->tpm->esys, h.tr, &name);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "Esys_TR_GetName");
        if (!tg_name_equal(name, &pinned->name))
                return signer_substituted(pinned);
        *ret_name = *name;
        *ret = h;
        h.tr = ESYS_TR_NONE;
        return 1;
}

/*
 * The EK signing key that certifies: the one persisted at provisioning when
 * there is one (persisted_signer), else re-created in the endorsement
 * hierarchy. The endorsement authorization is an HMAC in a session salted
 * to the NULL key, never the password: a recording of the bus learns nothing
 * of it. With the kernel's null_name the NULL key is already trusted here;
 * without, a substituted NULL key would give an active interposer that HMAC
 * to guess a weak password offline, so no password is sent then (refused;
 * design §2, "Hierarchy passwords"). Either way its name must be
 * the pinned one. *ret_name is set whenever a key was found, also when it is
 * not the pinned one (the report names it).
 */
typedef enum signer_mode {
        SIGNER_READ,      /* the persisted key's public area read and compared first */
        SIGNER_UNREAD,    /* the persisted key named from the pin, nothing sent (persisted_signer()) */
        SIGNER_RECREATE,  /* its handle was empty at the Certify: re-created */
} signer_mode;

static int pinned_signer(tg_verified_tpm *v, const tg_pinned_key *pinned, signer_mode mode, tg_handle *ret,
                         TPM2B_NAME *ret_name) {
        int r = 0;

        *ret_name = (TPM2B_NAME) {};
        if (mode != SIGNER_RECREATE)
                r = persisted_signer(v, pinned, mode == SIGNER_UNREAD, ret, ret_name);
        if (r < 0)
                return r;
        if (r == 0) {
                _cleanup_handle_ tg_handle endorsement = { .esys = v->tpm->esys, .tr = ESYS_TR_NONE };
                TPM2B_PUBLIC tmpl;

                /*
                 * Re-creating the key sends an HMAC of the endorsement password in a session salted
                 * to a NULL key nothing has verified yet (no kernel null_name): an interposer that
                 * substitutes the NULL key (and, when the pin says the key was persisted, forges the
                 * empty handle) gets it to guess offline. Refused; a persisted key needs no password.
                 */
                if (v->endorsement_auth && !v->null_key_trusted && pinned->persistent_handle == 0)
                        return log_error_rc(-TG_ERR_NO_NULL_NAME,
                                            "The EK signing key is not persisted, and re-creating it needs the "
                                            "endorsement password. Without the kernel's null_name, tpmguard does "
                                            "not send that password's authorization before the TPM is verified (an "
                                            "interposer could guess a weak password from it). Run 'tpmguard "
                                            "provision --owner-auth-file ...' under a kernel that exports null_name "
                                            "to persist the key, or boot such a kernel.");
                if (pinned->persistent_handle != 0 && v->endorsement_auth && !v->null_key_trusted)
                        return log_error_rc(-TG_ERR_TPM,
                                            "The EK signing key is no longer at 0x%08" PRIx32 ", where 'tpmguard "
                                            "provision' persisted it (evicted, or an interposer says so). Without "
                                            "the kernel's null_name, tpmguard does not send the endorsement password "
                                            "to re-create it before the TPM is verified. Run 'tpmguard provision' "
                                            "again to persist the key, on a TPM bus you trust (provisioning sends "
                                            "that authorization before it can verify anything) or under a kernel "
                                            "that exports null_name; until then unlock with the recovery "
                                            "passphrase.", pinned->persistent_handle);

                r = start_salted_session(v, TPM2_SE_HMAC, &endorsement.tr);
                if (r < 0)
                        return r;
                tg_template_ek_signing_key(&tmpl);
                r = create_primary(v->tpm, ESYS_TR_RH_ENDORSEMENT, endorsement.tr, &tmpl,
                                   "CreatePrimary (EK signing key)", ret, NULL, ret_name);
                if (r < 0)
                        return r;
        }
        if (!tg_name_equal(ret_name, &pinned->name))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM's EK signing key is not the pinned one. An interposer is substituting keys, "
                                    "or this is a different or cleared-and-replaced TPM. If the TPM was replaced on "
                                    "purpose, run 'tpmguard provision' again.");
        return 0;
}

static void log_name(const char *label, const TPM2B_NAME *n) {
        _cleanup_free_ char *hex = NULL;
        if (tg_hex_encode(n->name, n->size, &hex) >= 0)
                log_debug("%s: %s", label, hex);
}

static int verify_internal(const tg_config *config, const tg_verify_options *options,
                           tg_verify_report *report, tg_verified_tpm **ret_vtpm) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_handle_ tg_handle signer = TG_HANDLE_NULL;
        _cleanup_free_ TPM2B_ATTEST *certify_info = NULL;
        _cleanup_free_ TPMT_SIGNATURE *signature = NULL;
        const char *null_name_path = options && options->null_name_path ? options->null_name_path : config->null_name_path;
        tg_pinned_key pinned;
        TPM2B_NAME kernel_null_name = {}, signer_name, signer_qn, null_qn;
        TPM2B_DATA nonce = { .size = TG_NONCE_SIZE };
        /* cppcheck-suppress legacyUninitvar ; the member .scheme is not the variable */
        TPMT_SIG_SCHEME scheme = { .scheme = TPM2_ALG_NULL };
        tg_attest_info info;
        bool unread = false;
        TSS2_RC rc;
        int r;

        *report = (tg_verify_report) { .policy = config->kernel_null_name };

        /* 1. The trust anchors: the pinned signer and the kernel's record. */
        r = tg_pinned_key_load(config->state_dir, &pinned);
        if (r < 0)
                return r;
        report->ek_tofu = pinned.tofu;

        r = tg_null_name_read(null_name_path, config->tcti, &kernel_null_name);
        if (r == -TG_ERR_NOT_FOUND) {
                if (config->kernel_null_name == TG_NULL_NAME_REQUIRED)
                        return log_error_rc(-TG_ERR_NO_NULL_NAME,
                                            "The kernel exports no TPM null_name (needs Linux >= 6.10 with CONFIG_TCG_TPM2_HMAC=y), "
                                            "and %s requires it. Boot such a kernel, or set kernel_null_name = prefer "
                                            "to detect TPM resets from the first verification of each boot on.", config->path);
                /* Said once, with its reason, where the user reads the state (status, doctor, provision,
                 * verify's result line), not by every command and unlock. */
                log_debug("The kernel exports no TPM null_name: TPM resets are detected from this boot's first "
                          "verification on (boot anchor in %s), not before it (kernel_null_name = %s).",
                          config->cache_dir, tg_null_name_policy_to_string(config->kernel_null_name));
        } else if (r < 0)
                return log_error_rc(-TG_ERR_INVALID,
                                    "The kernel's null_name cannot be used. Refusing to use the TPM.");
        else {
                report->kernel_null_name_present = true;
                report->anchor = TG_ANCHOR_KERNEL;
        }

        /* 2. The TPM. */
        v = calloc(1, sizeof *v);
        if (!v)
                return -TG_ERR_NOMEM;
        v->null_key = TG_HANDLE_NULL;
        v->hmac_session = TG_HANDLE_NULL;
        v->srk = (tg_handle) { .esys = NULL, .tr = ESYS_TR_NONE, .close_only = true };
        v->one_shot = options && options->one_shot;
        r = tg_tpm_open_config(config, &v->tpm);
        if (r < 0)
                return r;
        v->null_key.esys = v->tpm->esys;
        v->hmac_session.esys = v->tpm->esys;
        v->srk.esys = v->tpm->esys;

        r = tg_tpm_set_hierarchy_auth(v->tpm->esys, ESYS_TR_RH_ENDORSEMENT,
                                      options ? options->endorsement_auth : NULL, "endorsement");
        if (r < 0)
                return r;
        v->endorsement_auth = options && options->endorsement_auth && options->endorsement_auth->size > 0;

        if (ret_vtpm && options && options->use_cache) {
                r = verify_from_cache(config, v, report->kernel_null_name_present ? &kernel_null_name : NULL,
                                      &pinned.name, report);
                if (r >= 0) {
                        v->null_key_trusted = true; /* the cached key, proven (verify_from_cache) */
                        *ret_vtpm = TAKE_PTR(v);
                        return 0;
                }
                if (r == -TG_ERR_INTERPOSER)
                        return r;
        }

        /*
         * 3. The NULL primary, by the kernel's template; its name must be the kernel's. Its public
         * area must be exactly that template (only the point is the TPM's to choose): an
         * interposer's own key, which it could load into the TPM with its private part and have
         * certified, is not fixedTPM. See attest.c for why this and the qualifiedName check in
         * tg_certify_verify() are both needed.
         */
        {
                TPM2B_PUBLIC tmpl, null_public;
                tg_template_srk_ecc(&tmpl);
                r = create_primary(v->tpm, ESYS_TR_RH_NULL, ESYS_TR_PASSWORD, &tmpl, "CreatePrimary (NULL hierarchy)",
                                   &v->null_key, &null_public, &v->null_name);
                if (r < 0)
                        return r;
                r = tg_null_key_public_check(&null_public.publicArea);
                if (r < 0)
                        return r;
        }
        report->null_name = v->null_name;
        log_name("NULL key name (computed)", &v->null_name);
        if (report->kernel_null_name_present && !tg_name_equal(&v->null_name, &kernel_null_name))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM's NULL key does not match the name the kernel recorded at boot. "
                                    "The TPM was reset since boot, or an interposer sits on the TPM bus. "
                                    "The TPM will not be used; unlock with the recovery passphrase and investigate.");
        v->null_key_trusted = report->kernel_null_name_present;

        /*
         * 4. The EK signing key, persisted (named from the pin, not read: persisted_signer()) or
         * re-created; it must be the pinned one (pinned_signer).
         */
        signer.esys = v->tpm->esys;
        r = pinned_signer(v, &pinned, SIGNER_UNREAD, &signer, &signer_name);
        if (r >= 0 && pinned.persistent_handle != 0 && signer.tr != ESYS_TR_NONE)
                unread = true;
        if (signer_name.size > 0 && !unread)
                report->ek_signing_key_name = signer_name;
        if (r < 0)
                return r;

        /* 5. The pinned key certifies the NULL key over our fresh nonce. */
        if (RAND_bytes(nonce.buffer, TG_NONCE_SIZE) != 1)
                return log_error_rc(-TG_ERR_IO, "The OpenSSL random generator failed.");
        rc = Esys_Certify(v->tpm->esys, v->null_key.tr, signer.tr, ESYS_TR_PASSWORD, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                          &nonce, &scheme, &certify_info, &signature);
        if (unread && signer_at(rc, TPM2_RC_HANDLE)) {
                /* Nothing at the persisted handle (evicted, TPM cleared): re-created, as a read would have. */
                tg_handle_release(&signer);
                unread = false;
                (void) signer_gone(&pinned);
                r = pinned_signer(v, &pinned, SIGNER_RECREATE, &signer, &signer_name);
                if (signer_name.size > 0)
                        report->ek_signing_key_name = signer_name;
                if (r < 0)
                        return r;
                rc = Esys_Certify(v->tpm->esys, v->null_key.tr, signer.tr, ESYS_TR_PASSWORD, ESYS_TR_PASSWORD,
                                  ESYS_TR_NONE, &nonce, &scheme, &certify_info, &signature);
        }
        /* A key at the handle whose authValue is not the pinned key's empty one. */
        if (unread && (signer_at(rc, TPM2_RC_AUTH_FAIL) || signer_at(rc, TPM2_RC_BAD_AUTH)))
                return signer_substituted(&pinned);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "Certify (NULL key by the EK signing key)");
        tg_handle_release(&signer);

        r = tg_primary_qualified_name(TPM2_RH_ENDORSEMENT, &pinned.name, &signer_qn);
        if (r < 0)
                return r;
        r = tg_null_key_qualified_name(&v->null_name, &null_qn);
        if (r < 0)
                return r;
        r = tg_certify_verify(certify_info, signature, &pinned.public.publicArea, &signer_qn,
                              nonce.buffer, nonce.size, &v->null_name, &null_qn, &info);
        if (r == -TG_ERR_INTERPOSER && unread)
                /* The key at the handle signed, and it is not the pinned one (or the bus altered it). */
                return signer_substituted(&pinned);
        if (r < 0)
                return r;
        if (unread)
                report->ek_signing_key_name = pinned.name;   /* the key that just certified, proven */
        v->null_key_trusted = true;
        report->clock = info.clock;
        report->reset_count = info.reset_count;
        report->restart_count = info.restart_count;
        report->safe = info.safe;

        /*
         * 5b. Without the kernel's record, this boot's anchor: the first full verification of the
         * boot records the certified key and counters, every later one must find them unchanged.
         */
        if (!report->kernel_null_name_present) {
                tg_anchor_state state;

                r = tg_anchor_check(config->cache_dir, &v->null_name, info.reset_count, info.restart_count,
                                    options && options->accept_resume, &state);
                /* An alarm, or a resume the sleep hook has not confirmed yet ("try again"): fail
                 * closed. Only a missing or damaged anchor file lets the verification go on
                 * without one (said in the report). */
                if (r == -TG_ERR_INTERPOSER || r == -TG_ERR_TPM_UNREACHABLE)
                        return r;
                if (r >= 0) {
                        report->resuming = state == TG_ANCHOR_RESUMING;
                        /* A damaged anchor anchored nothing this time: say so in the report too. */
                        report->anchor = state == TG_ANCHOR_REPLACED_DAMAGED ? TG_ANCHOR_NONE : TG_ANCHOR_BOOT;
                        report->anchor_recorded = state != TG_ANCHOR_MATCHED;
                }
        }

        if (options && options->use_cache) {
                /*
                 * Without the kernel's null_name, the persistent SRK's ESYS_TR is cached with the
                 * NULL key: the cached path's audited proof reads it (unsealing then takes it from
                 * there, so this ReadPublic is not an extra one); none if there is no SRK yet. With
                 * the null_name (docs/design.md §2.4) no cached path reads it: the one-shot unlock loads under
                 * the SRK with a password authorization, which needs no ReadPublic (tokens/seal.c).
                 */
                if (!report->kernel_null_name_present &&
                    Esys_TR_FromTPMPublic(v->tpm->esys, TG_SRK_HANDLE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                          &v->srk.tr) != TSS2_RC_SUCCESS)
                        v->srk.tr = ESYS_TR_NONE;
                (void) tg_vcache_store(config, v->tpm->esys, v->null_key.tr, &v->null_name, &pinned.name, v->srk.tr);
        }

        /*
         * 6. Only now: the session every later secret travels in. A one-shot verified TPM (the
         *    plugin's unlock) needs none: its Unseal's policy session, salted to the NULL key
         *    certified above, is the only salted session (see verify_from_cache()).
         */
        if (ret_vtpm && !v->one_shot) {
                r = start_salted_session(v, TPM2_SE_HMAC, &v->hmac_session.tr);
                if (r < 0)
                        return r;
        }

        log_debug("TPM verified: NULL key certified by the pinned EK signing key%s.",
                  report->kernel_null_name_present ? " and equal to the kernel's null_name" : "");
        if (ret_vtpm)
                *ret_vtpm = TAKE_PTR(v);
        return 0;
}

/*
 * Is the persistent key a token pins (systemd >= 255's tpm2_srk: an
 * Esys_TR_Serialize()d ESYS_TR, whose name is the public area the token
 * salts its sessions to) a key of this TPM? The pinned EK signing key,
 * re-created and compared as in verify_internal(), certifies the key at the
 * handle the blob names, over our fresh nonce, and the attestation must
 * carry exactly the blob's name as an owner-hierarchy primary's. The key's
 * authorization travels in the verified session (salted to the certified
 * NULL key): an interposer that answers for a key of its own at that handle
 * cannot complete the HMAC, and cannot forge the pinned key's signature.
 */
int tg_vtpm_certify_persistent(tg_verified_tpm *v, const char *state_dir, const uint8_t *serialized, size_t size,
                               TPM2B_NAME *ret_name) {
        _cleanup_handle_ tg_handle signer = TG_HANDLE_NULL, object = TG_HANDLE_NULL;
        _cleanup_free_ TPM2B_ATTEST *certify_info = NULL;
        _cleanup_free_ TPMT_SIGNATURE *signature = NULL;
        _cleanup_free_ TPM2B_NAME *claimed = NULL;
        tg_pinned_key pinned;
        TPM2B_NAME signer_name, signer_qn, claimed_qn;
        TPM2B_DATA nonce = { .size = TG_NONCE_SIZE };
        /* cppcheck-suppress legacyUninitvar ; the member .scheme is not the variable */
        TPMT_SIG_SCHEME scheme = { .scheme = TPM2_ALG_NULL };
        TSS2_RC rc;
        int r;

        assert(v && !v->session_ended);
        r = tg_pinned_key_load(state_dir, &pinned);
        if (r < 0)
                return r;
        object.esys = signer.esys = v->tpm->esys;
        /* Only the blob's own metadata: nothing is read from the TPM to make it. */
        rc = Esys_TR_Deserialize(v->tpm->esys, serialized, size, &object.tr);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_INVALID, "The pinned key's serialized handle cannot be read.");
        object.close_only = true;   /* a persistent key: never flushed */
        rc = Esys_TR_GetName(v->tpm->esys, object.tr, &claimed);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_INVALID, "The pinned key's serialized handle has no name.");

        r = pinned_signer(v, &pinned, SIGNER_READ, &signer, &signer_name);
        if (r < 0)
                return r;
        /*
         * Before any authorization: the key at that handle must claim the blob's name and be noDA (an SRK
         * is). The header is attacker-editable, and a failed authorization of a key that is not noDA
         * would cost a dictionary-attack try. A forged answer here gains nothing: Certify checks again.
         */
        {
                _cleanup_free_ TPM2B_PUBLIC *pub = NULL;
                _cleanup_free_ TPM2B_NAME *name = NULL;
                TPM2_HANDLE handle = 0;

                (void) Esys_TR_GetTpmHandle(v->tpm->esys, object.tr, &handle);
                rc = Esys_ReadPublic(v->tpm->esys, object.tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &pub, &name, NULL);
                if (rc != TSS2_RC_SUCCESS || !tg_name_equal(name, claimed) ||
                    !(pub->publicArea.objectAttributes & TPMA_OBJECT_NODA)) {
                        log_warning("The TPM holds no noDA key with the pinned name at handle 0x%08x.", (unsigned) handle);
                        return -TG_ERR_INTERPOSER;
                }
        }
        if (RAND_bytes(nonce.buffer, TG_NONCE_SIZE) != 1)
                return log_error_rc(-TG_ERR_IO, "The OpenSSL random generator failed.");
        rc = Esys_Certify(v->tpm->esys, object.tr, signer.tr, tg_vtpm_session(v, false, false), ESYS_TR_PASSWORD,
                          ESYS_TR_NONE, &nonce, &scheme, &certify_info, &signature);
        if (rc != TSS2_RC_SUCCESS) {
                TSS2_RC base = tg_tpm_rc_base(rc);
                /* The HMAC over the claimed name failed at the TPM, or the response's at ESAPI: not that key. */
                if (base == TPM2_RC_AUTH_FAIL || base == TPM2_RC_BAD_AUTH || rc == TSS2_ESYS_RC_RSP_AUTH_FAILED) {
                        log_warning("The TPM did not certify the pinned key: %s.", Tss2_RC_Decode(rc));
                        return -TG_ERR_INTERPOSER;
                }
                return tg_tpm_rc(rc, "Certify (a pinned persistent key by the EK signing key)");
        }
        r = tg_primary_qualified_name(TPM2_RH_ENDORSEMENT, &pinned.name, &signer_qn);
        if (r >= 0)
                r = tg_primary_qualified_name(TPM2_RH_OWNER, claimed, &claimed_qn);
        if (r < 0)
                return r;
        r = tg_certify_verify(certify_info, signature, &pinned.public.publicArea, &signer_qn, nonce.buffer, nonce.size,
                              claimed, &claimed_qn, NULL);
        if (r < 0)
                return r;
        if (ret_name)
                *ret_name = *claimed;
        return 0;
}

int tg_verify(const tg_config *config, const tg_verify_options *options,
              tg_verify_report *report, tg_verified_tpm **ret_vtpm) {
        tg_verify_report scratch;
        int r;

        tg_progress("Verifying the TPM (NULL key, pinned EK signing key, certification)...");
        r = verify_internal(config, options, report ?: &scratch, ret_vtpm);
        tg_progress_done();
        return r;
}
