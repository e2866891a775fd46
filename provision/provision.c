/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <tss2/tss2_rc.h>

#include "ek.h"
#include "error.h"
#include "lockout.h"
#include "log.h"
#include "nullname.h"
#include "provision.h"
#include "tpm.h"
#include "util.h"
#include "verify.h"

static const TPM2B_SENSITIVE_CREATE empty_sensitive = {};
static const TPM2B_DATA no_outside_info = {};
static const TPML_PCR_SELECTION no_pcrs = {};

/*
 * The session that authorizes the endorsement hierarchy until the EK is
 * certified: salted to the NULL primary (the kernel's template), whose name
 * must be the kernel's null_name when the kernel exports one. A passive
 * recording of the bus then never holds the endorsement password, not even
 * an HMAC keyed by it alone.
 *
 * Without a null_name nothing vouches for that key until the end. Threat:
 * an active interposer that substitutes only this first NULL key stands in
 * the middle of the session. So (provision_key, tg_provision):
 *  - no endorsement password is sent in it: with one, provisioning refuses
 *    before any HMAC keyed by it is on the bus (a weak password could be
 *    guessed offline from one);
 *  - its name (*ret_name) must be the name of the NULL key the pinned key
 *    certifies at the end (provision_lockout): a substitution is refused as
 *    an interposer, and the pin is kept only after that check;
 *  - what the session authenticated without a password (the TOFU listing of
 *    the EK certificate indices) is said to be the bus's word (warning).
 */
static int bootstrap_session(const tg_config *config, tg_tpm *tpm, tg_handle *null_key, tg_handle *ret_session,
                             TPM2B_NAME *ret_name, bool *ret_anchored) {
        static const TPMT_SYM_DEF aes128cfb = {
                .algorithm = TPM2_ALG_AES,
                .keyBits.aes = 128,
                .mode.aes = TPM2_ALG_CFB,
        };
        _cleanup_free_ TPM2B_PUBLIC *out = NULL;
        TPM2B_NAME name, kernel_name;
        TPM2B_PUBLIC tmpl;
        TSS2_RC rc;
        int r;

        tg_template_srk_ecc(&tmpl);
        rc = Esys_CreatePrimary(tpm->esys, ESYS_TR_RH_NULL, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                &empty_sensitive, &tmpl, &no_outside_info, &no_pcrs, &null_key->tr, &out, NULL, NULL,
                                NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "CreatePrimary (NULL hierarchy)");
        if (!tg_public_is_srk_ecc(&out->publicArea))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM returned a NULL key that is not of the kernel's template: an interposer "
                                    "may be substituting keys. Nothing was pinned; provision on a machine whose TPM "
                                    "bus you trust.");
        r = tg_public_name(&out->publicArea, &name);
        if (r < 0)
                return r;
        r = tg_null_name_read(config->null_name_path, config->tcti, &kernel_name);
        if (r >= 0 && !tg_name_equal(&name, &kernel_name))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM's NULL key does not match the name the kernel recorded at boot: the TPM "
                                    "was reset since boot, or an interposer sits on the TPM bus. Nothing was pinned; "
                                    "reboot, and provision on a machine whose TPM bus you trust.");
        if (r < 0 && r != -TG_ERR_NOT_FOUND)
                return log_error_rc(r, "The kernel's null_name cannot be used. Nothing was pinned.");
        if (r == -TG_ERR_NOT_FOUND)
                log_debug("No kernel null_name: the NULL key salting the bootstrap session is compared with "
                          "the certified one at the end.");

        rc = Esys_StartAuthSession(tpm->esys, null_key->tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                   NULL, TPM2_SE_HMAC, &aes128cfb, TPM2_ALG_SHA256, &ret_session->tr);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "StartAuthSession (salted to the NULL key)");
        (void) Esys_TRSess_SetAttributes(tpm->esys, ret_session->tr, TPMA_SESSION_CONTINUESESSION, 0xff);
        *ret_name = name;
        *ret_anchored = r >= 0;
        return 0;
}

/*
 * Steps 1-3: the EK signing key, proven against the EK certificate; fills pinned.
 * With options->trust_on_first_use and no EK certificate in NV: pinned unproven.
 */
static int provision_key(const tg_config *config, const tg_provision_options *options, tg_pinned_key *pinned,
                         TPM2B_NAME *ret_bootstrap_name, bool *ret_anchored) {
        _cleanup_tpm_ tg_tpm *tpm = NULL;
        _cleanup_(tg_ek_certified_freep) tg_ek_certified *certified = NULL;
        _cleanup_handle_ tg_handle signer = TG_HANDLE_NULL, null_key = TG_HANDLE_NULL, session = TG_HANDLE_NULL;
        _cleanup_free_ TPM2B_PUBLIC *signer_public = NULL;
        _cleanup_free_ char *cert_hex = NULL, *anchor_hex = NULL;
        tg_ek_result ek = {};
        tg_ek_options ek_options = {
                .cert_file = options->ek_cert_file,
                .ca_store = options->ek_ca ?: config->ek_ca,
                .intermediates_file = options->ek_intermediates,
        };
        time_t now = time(NULL);
        struct tm tm;
        TPM2B_PUBLIC tmpl;
        bool tofu = false, anchored = false;
        TSS2_RC rc;
        int r;

        if (options->trust_on_first_use && options->ek_cert_file)
                return log_error_rc(-TG_ERR_INVALID,
                                    "--trust-on-first-use and --ek-cert exclude each other: with a certificate the "
                                    "key is proven, so drop --trust-on-first-use.");
        if (!options->trust_on_first_use &&
            (!ek_options.ca_store || ek_options.ca_store[strspn(ek_options.ca_store, " \t")] == '\0'))
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "No manufacturer CA store: give --ek-ca FILE|DIR or set ek_ca in %s (its default "
                                    "is the TPM manufacturers' CAs tpmguard ships). Without it the EK certificate "
                                    "cannot be trusted.", config->path);

        r = tg_tpm_open_config(config, &tpm);
        if (r < 0)
                return r;
        r = tg_tpm_set_hierarchy_auth(tpm->esys, ESYS_TR_RH_ENDORSEMENT, options->endorsement_auth, "endorsement");
        if (r < 0)
                return r;
        null_key.esys = session.esys = signer.esys = tpm->esys;

        tg_progress("Provisioning: proving the EK against its certificate (EK re-creation; several seconds on "
                    "some TPMs)...");
        r = bootstrap_session(config, tpm, &null_key, &session, ret_bootstrap_name, &anchored);
        if (r < 0)
                return r;
        *ret_anchored = anchored;
        if (!anchored && options->endorsement_auth && options->endorsement_auth->size > 0)
                return log_error_rc(-TG_ERR_NO_NULL_NAME,
                                    "The kernel exports no TPM null_name, so nothing can verify the TPM before the "
                                    "endorsement password's authorization would be sent: an interposer that "
                                    "substitutes the first NULL key would receive an HMAC keyed by that password "
                                    "and could guess a weak one offline. Nothing was sent or pinned. Provision "
                                    "under a kernel that exports null_name (Linux >= 6.10 with "
                                    "CONFIG_TCG_TPM2_HMAC=y); the pinned key then also serves boots without it.");
        if (options->trust_on_first_use) {
                bool present;

                /*
                 * A TPM that has a certificate is proven against it: TOFU only where there is none.
                 * An interposer that hides the certificate indices would have its own key pinned,
                 * so the listing is read in the bootstrap session as an audit session: with the
                 * kernel's null_name that session is salted to the key the kernel made at boot,
                 * and a forged "none" fails its response HMAC. Without it, the answer is the
                 * bus's word, and the warning below says so.
                 */
                r = tg_ek_cert_in_nv(tpm, session.tr, &present);
                if (r < 0)
                        return r;
                tofu = !present;
                if (tofu && !anchored)
                        /* Checked at the end (the bootstrap key must be the certified one), but a
                         * first-use pin is what the end is checked with. */
                        log_warning("No kernel null_name: nothing authenticates the TPM's answer that it has no "
                                    "EK certificate, so an interposer present now could hide one to have its own "
                                    "key pinned. Use --trust-on-first-use here only for a TPM known to have no EK "
                                    "certificate (docs/hardware.md) on a bus you trust now.");
                else if (tofu)
                        /* The kernel's null_name names whatever answered the kernel at boot: an interposer
                         * there since boot holds that key too (red-team review). */
                        log_warning("The TPM's answer that it has no EK certificate was checked against the "
                                    "NULL key the kernel saw at boot: an interposer that came later cannot forge "
                                    "it, one present since boot can. Use --trust-on-first-use only for a TPM "
                                    "known to have no EK certificate (docs/hardware.md).");
                if (present)
                        log_info("This TPM has an EK certificate in NV: the EK signing key is proven against it, "
                                 "and --trust-on-first-use is not used.");
                if (present && (!ek_options.ca_store || ek_options.ca_store[strspn(ek_options.ca_store, " \t")] == '\0'))
                        return log_error_rc(-TG_ERR_EK_CERT,
                                            "No manufacturer CA store: give --ek-ca FILE|DIR or set ek_ca in %s.",
                                            config->path);
        }
        if (!tofu) {
                r = tg_ek_certified_load(tpm, &ek_options, session.tr, &certified);
                if (r < 0)
                        return r;
                /* The EK is trusted now: its own salted session takes over (and swtpm's few slots are freed). */
                tg_handle_release(&session);
                tg_handle_release(&null_key);
        }

        tg_progress(tofu ? "Provisioning: creating the EK signing key (trust on first use: no proof)..."
                         : "Provisioning: creating the EK signing key and proving it (credential activation)...");
        tg_template_ek_signing_key(&tmpl);
        /*
         * TOFU: the endorsement authorization goes in the bootstrap session, salted to the
         * NULL key (the kernel's, when it exports a null_name): still never in clear.
         */
        rc = Esys_CreatePrimary(tpm->esys, ESYS_TR_RH_ENDORSEMENT,
                                tofu ? session.tr : tg_ek_certified_session(certified), ESYS_TR_NONE,
                                ESYS_TR_NONE, &empty_sensitive, &tmpl, &no_outside_info, &no_pcrs,
                                &signer.tr, &signer_public, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS) {
                if (tg_rc_is_auth_failure(rc))
                        return tg_endorsement_auth_failed(tpm->esys, "CreatePrimary (EK signing key)");
                return tg_tpm_rc(rc, "CreatePrimary (EK signing key)");
        }
        r = tg_pinned_public_check(&signer_public->publicArea);
        if (r < 0)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM returned a key that is not of the EK signing key template: an "
                                    "interposer may be substituting keys. Nothing was pinned; provision on a "
                                    "machine whose TPM bus you trust.");
        pinned->public = *signer_public;
        r = tg_public_name(&signer_public->publicArea, &pinned->name);
        if (r < 0)
                return r;

        if (tofu) {
                /*
                 * Nothing proves this key is a TPM's: whatever answered now (a relay, a software
                 * TPM in front of the real one) is trusted at every later boot. Said loudly here,
                 * recorded in the pin, and repeated by verify, status and doctor.
                 */
                log_warning("TRUST ON FIRST USE: this TPM has no EK certificate, so nothing proves that the key "
                            "being pinned belongs to a genuine TPM. If an interposer or a relayed software TPM "
                            "answers right now, it is pinned and trusted at every boot. Later substitutions, "
                            "resets and interposers ARE still detected against this pin. Acceptable for a "
                            "firmware TPM (no bus to tap) on a machine you trust now; for a discrete TPM, get "
                            "its EK certificate (docs/hardware.md).");
                pinned->tofu = true;
                gmtime_r(&now, &tm);
                strftime(pinned->provisioned_at, sizeof pinned->provisioned_at, "%Y-%m-%dT%H:%M:%SZ", &tm);
                return 0;
        }

        r = tg_ek_certified_prove(tpm, certified, signer.tr, &pinned->name, &ek);
        if (r < 0)
                return r;

        pinned->ek_nv_index = ek.nv_index;
        snprintf(pinned->ek_template, sizeof pinned->ek_template, "%s", ek.template_name ?: "");
        snprintf(pinned->ek_cert_issuer, sizeof pinned->ek_cert_issuer, "%s", ek.cert_issuer ?: "");
        snprintf(pinned->ek_anchor_vendor, sizeof pinned->ek_anchor_vendor, "%s", ek.anchor.vendor ?: "");
        r = tg_hex_encode(ek.cert_sha256, sizeof ek.cert_sha256, &cert_hex);
        if (r >= 0)
                r = tg_hex_encode(ek.anchor.sha256, sizeof ek.anchor.sha256, &anchor_hex);
        tg_ek_result_done(&ek);
        if (r < 0)
                return r;
        snprintf(pinned->ek_anchor_sha256, sizeof pinned->ek_anchor_sha256, "%s", anchor_hex);
        snprintf(pinned->ek_cert_sha256, sizeof pinned->ek_cert_sha256, "%s", cert_hex);
        gmtime_r(&now, &tm);
        strftime(pinned->provisioned_at, sizeof pinned->provisioned_at, "%Y-%m-%dT%H:%M:%SZ", &tm);
        return 0;
}

/*
 * Step 4a (docs/design.md §2.2 step 4): the EK signing key persisted at TG_EK_SIGNING_HANDLE, so that every
 * verification reads it (one ReadPublic) instead of re-creating it (a CreatePrimary in a salted
 * endorsement session). Nothing here is trusted later: verification compares the name at the
 * handle with the pinned name before use and checks the certification against the pinned public
 * key. Best effort: a failure leaves the key unpersisted and verification re-creates it.
 * Both authorizations (endorsement for the CreatePrimary, owner for EvictControl) are HMACs in the
 * verified TPM's salted session, never clear passwords.
 */
static void provision_persist(tg_verified_tpm *v, const tg_provision_options *options, tg_pinned_key *pinned) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_handle_ tg_handle present = { .esys = esys, .tr = ESYS_TR_NONE, .close_only = true };
        _cleanup_handle_ tg_handle transient = { .esys = esys, .tr = ESYS_TR_NONE };
        _cleanup_free_ TPM2B_PUBLIC *pub = NULL;
        _cleanup_free_ TPM2B_NAME *present_name = NULL;
        ESYS_TR persisted = ESYS_TR_NONE;
        TPM2B_NAME name;
        TPM2B_PUBLIC tmpl;
        TSS2_RC rc;

        pinned->persistent_handle = 0;
        rc = Esys_TR_FromTPMPublic(esys, TG_EK_SIGNING_HANDLE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &present.tr);
        if (rc == TSS2_RC_SUCCESS) {
                if (Esys_TR_GetName(esys, present.tr, &present_name) == TSS2_RC_SUCCESS &&
                    tg_name_equal(present_name, &pinned->name)) {
                        log_debug("The EK signing key is already persisted at 0x%08" PRIx32 ".", TG_EK_SIGNING_HANDLE);
                        pinned->persistent_handle = TG_EK_SIGNING_HANDLE;
                } else
                        log_warning("0x%08" PRIx32 " holds another key: the EK signing key is not persisted, and "
                                    "every verification re-creates it (slower). Free that handle and run "
                                    "'tpmguard provision' again to persist it.", TG_EK_SIGNING_HANDLE);
                return;
        }
        if (tg_tpm_rc_base(rc) != TPM2_RC_HANDLE) {
                log_warning("Cannot read 0x%08" PRIx32 " (%s): the EK signing key is not persisted, and every "
                            "verification re-creates it.", TG_EK_SIGNING_HANDLE, Tss2_RC_Decode(rc));
                return;
        }

        tg_template_ek_signing_key(&tmpl);
        rc = Esys_CreatePrimary(esys, ESYS_TR_RH_ENDORSEMENT, tg_vtpm_session(v, false, false), ESYS_TR_NONE,
                                ESYS_TR_NONE, &empty_sensitive, &tmpl, &no_outside_info, &no_pcrs, &transient.tr,
                                &pub, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS || tg_public_name(&pub->publicArea, &name) < 0 || !tg_name_equal(&name, &pinned->name)) {
                log_warning("The EK signing key could not be re-created as pinned (%s): it is not persisted.",
                            rc != TSS2_RC_SUCCESS ? Tss2_RC_Decode(rc) : "another name");
                return;
        }
        if (tg_tpm_set_hierarchy_auth(esys, ESYS_TR_RH_OWNER, options->owner_auth, "owner") < 0)
                return;
        rc = Esys_EvictControl(esys, ESYS_TR_RH_OWNER, transient.tr, tg_vtpm_session(v, false, false), ESYS_TR_NONE,
                               ESYS_TR_NONE, TG_EK_SIGNING_HANDLE, &persisted);
        if (rc != TSS2_RC_SUCCESS) {
                TSS2_RC base = tg_tpm_rc_base(rc);
                if (base == TPM2_RC_BAD_AUTH || base == TPM2_RC_AUTH_FAIL)
                        log_warning("The owner hierarchy has a password: the EK signing key is not persisted, and "
                                    "every verification re-creates it (slower). Give --owner-auth-file to "
                                    "'tpmguard provision' to persist it.");
                else
                        log_warning("Could not persist the EK signing key at 0x%08" PRIx32 " (%s); every "
                                    "verification re-creates it.", TG_EK_SIGNING_HANDLE, Tss2_RC_Decode(rc));
                return;
        }
        (void) Esys_TR_Close(esys, &persisted);
        /* Reported with the result (cmd_provision), not here: a log line would cut the progress line. */
        log_debug("Persisted the EK signing key at 0x%08" PRIx32 ".", TG_EK_SIGNING_HANDLE);
        pinned->persistent_handle = TG_EK_SIGNING_HANDLE;
}

/*
 * Step 4: the persisted key and the lockout hierarchy, over a verification with the key just
 * pinned in pin_dir; the lockout password goes to dir.
 */
static int provision_lockout(const tg_config *config, const tg_provision_options *options, const char *pin_dir,
                             const char *dir, const TPM2B_NAME *bootstrap_name, tg_pinned_key *pinned,
                             tg_lockout_result *ret) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        tg_verify_report report = {};
        tg_config c = *config;
        TPM2B_NAME kernel_name;
        int r;

        c.state_dir = (char *) pin_dir;
        /*
         * Without a kernel null_name the NULL key is certified by the key pinned a moment
         * ago, on this install-time machine: as trustworthy as the pin itself, so
         * provisioning needs no null_name even when later unlocks do. Only "required" is
         * relaxed, to the default ("prefer"); any other setting is the user's and stays.
         */
        if (config->kernel_null_name == TG_NULL_NAME_REQUIRED &&
            tg_null_name_read(config->null_name_path, config->tcti, &kernel_name) == -TG_ERR_NOT_FOUND)
                c.kernel_null_name = TG_NULL_NAME_PREFER;
        r = tg_verify(&c, &(tg_verify_options) { .endorsement_auth = options->endorsement_auth }, &report, &v);
        if (r < 0)
                return r;
        /*
         * The bootstrap session's NULL key (bootstrap_session()) must be the one the pinned key
         * has just certified: same NULL seed, same template, same name. Without the kernel's
         * null_name nothing else checks it.
         */
        if (!tg_name_equal(&report.null_name, bootstrap_name))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The NULL key that salted provisioning's first session is not the one the TPM "
                                    "certified at the end: an interposer substituted it (or the TPM was reset "
                                    "during provisioning). The pin is not kept. Provision again on a TPM bus you "
                                    "trust, or under a kernel that exports null_name.");
        provision_persist(v, options, pinned);
        if (pinned->persistent_handle != 0) {
                r = tg_pinned_key_save(pin_dir, pinned);
                if (r < 0)
                        return r;
        }
        return tg_lockout_setup(v, config, dir, options->lockout_auth, ret);
}

static void remove_pin_dir(char *pin_dir) {
        _cleanup_free_ char *path = NULL;

        if (tg_asprintf(&path, "%s/%s", pin_dir, TG_PINNED_FILE_NAME) >= 0)
                (void) unlink(path);
        if (rmdir(pin_dir) < 0 && errno != ENOENT)
                log_warning("Could not remove %s: %m.", pin_dir);
}

int tg_provision(const tg_config *config, const tg_provision_options *options, tg_pinned_key *ret_pinned,
                 tg_lockout_result *ret_lockout) {
        const char *dir = options->output_dir ?: config->state_dir;
        _cleanup_free_ char *tofu_dir = NULL;
        tg_pinned_key pinned = {};
        tg_lockout_result lockout = {};
        TPM2B_NAME bootstrap_name = {};
        bool anchored = false;
        int r;

        r = provision_key(config, options, &pinned, &bootstrap_name, &anchored);
        tg_progress_done();
        if (r < 0)
                return r;
        if (pinned.tofu || !anchored) {
                /*
                 * Nothing proves an unproven key, and without the kernel's null_name nothing has
                 * checked the bootstrap session's NULL key yet: the key is pinned only once the
                 * verification made with it (which compares that NULL key) and the lockout step have
                 * passed. Until then it lives in a private directory beside state_dir, so that
                 * whatever ends this run early (an interposer alert, a dropped connection, a forged
                 * error) leaves the pin that was there, untouched, or none.
                 */
                if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                        return log_error_rc(-TG_ERR_IO, "Cannot create %s: %m", dir);
                if (tg_asprintf(&tofu_dir, "%s/.tofu-pin.XXXXXX", dir) < 0)
                        return -TG_ERR_NOMEM;
                if (!mkdtemp(tofu_dir))
                        return log_error_rc(-TG_ERR_IO, "Cannot create a directory in %s: %m", dir);
        }
        r = tg_pinned_key_save(tofu_dir ?: dir, &pinned);
        if (r < 0) {
                if (tofu_dir)
                        remove_pin_dir(tofu_dir);
                return r;
        }

        tg_progress("Provisioning: the lockout hierarchy and the dictionary-attack parameters...");
        r = provision_lockout(config, options, tofu_dir ?: dir, dir, &bootstrap_name, &pinned, &lockout);
        tg_progress_done();
        if (tofu_dir) {
                if (r >= 0)
                        r = tg_pinned_key_save(dir, &pinned);
                remove_pin_dir(tofu_dir);
                if (r < 0)
                        return log_error_rc(r, "The new pin was not kept: the verification with it or the lockout "
                                            "step failed (above), and %s. The previous pin, if any, is unchanged. "
                                            "Provision again on a TPM bus you trust.",
                                            pinned.tofu ? "nothing proves whose key it was"
                                                        : "without the kernel's null_name that verification is "
                                                          "what checks provisioning's first session");
        }
        if (ret_pinned)
                *ret_pinned = pinned;
        if (r < 0)
                return log_error_rc(r, "The EK signing key is pinned, but the lockout hierarchy was not set up. "
                                    "Fix the cause above, then run 'tpmguard lockout setup'.");
        if (ret_lockout)
                *ret_lockout = lockout;
        return 0;
}
