/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Sealing and unsealing the keyslot secret (design §2 step 3, §4).
 *
 * Threat model: as in verify.c, the bus is hostile. Every command that
 * carries a secret (Create's inSensitive: the secret and the PIN-derived
 * authValue; Unseal's outData) is parameter-encrypted with AES-128-CFB in a
 * session salted to the verified NULL key, so a recorder learns nothing and
 * a substituted key never protects anything. Every command that names an
 * object (Create's parent, Load's parent, Unseal's object) is authorized
 * with an HMAC over the names ESAPI computed from public areas we hold: a
 * substituted parent or object name makes the TPM reject the HMAC. The PIN
 * never travels: the policy session proves knowledge of the authValue by
 * HMAC keyed with a salted session key the interposer cannot derive, so a
 * captured unlock gives nothing to brute-force offline. The sealed object is
 * not noDA when a PIN is set, so the TPM's dictionary-attack lockout bounds
 * online guessing.
 *
 * A TPM that leaks what it holds (firmware flaw, fault attack, decapped chip)
 * is stopped by token format 2 (tokens/pin.h): a PIN seal hands the TPM
 * S XOR K and an authValue, both from the PIN's Argon2id, never S, so what the
 * TPM holds or releases opens nothing without the PIN. No-PIN seals stay
 * format 1: there is nothing to mask with.
 */
#include <assert.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <tss2/tss2_rc.h>

#include "da.h"
#include "error.h"
#include "log.h"
#include "pcr-values.h"
#include "pin.h"
#include "policy.h"
#include "seal.h"
#include "tpm.h"
#include "util.h"

static int owner_auth_error(TSS2_RC rc, const char *what) {
        TSS2_RC base = tg_tpm_rc_base(rc);

        if (base == TPM2_RC_BAD_AUTH || base == TPM2_RC_AUTH_FAIL)
                return log_error_rc(-TG_ERR_AUTH_NEEDED,
                                    "%s: the owner hierarchy has a password. Give it with --owner-auth-file.", what);
        return tg_tpm_rc(rc, what);
}

/* Create the SRK in the owner hierarchy (deterministic from the owner seed). */
static int srk_create(tg_verified_tpm *v, tg_handle *ret, TPM2B_NAME *ret_name) {
        static const TPM2B_SENSITIVE_CREATE empty_sensitive = {};
        static const TPM2B_DATA no_outside_info = {};
        static const TPML_PCR_SELECTION no_pcrs = {};
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_handle_ tg_handle h = { .esys = esys, .tr = ESYS_TR_NONE };
        _cleanup_free_ TPM2B_PUBLIC *pub = NULL;
        TPM2B_PUBLIC tmpl;
        TSS2_RC rc;
        int r;

        tg_template_srk_ecc(&tmpl);
        /*
         * The owner authorization is an HMAC in the salted session, never a clear password. A
         * one-shot unlock has no HMAC session (tg_vtpm_has_session()) and never an owner password
         * (only enrolment sets one, tg_tpm_set_hierarchy_auth() in srk_for_seal()): its empty
         * password tells the bus nothing, and the key made is only a Load parent.
         */
        rc = Esys_CreatePrimary(esys, ESYS_TR_RH_OWNER,
                                tg_vtpm_has_session(v) ? tg_vtpm_session(v, false, false) : ESYS_TR_PASSWORD,
                                ESYS_TR_NONE, ESYS_TR_NONE,
                                &empty_sensitive, &tmpl, &no_outside_info, &no_pcrs, &h.tr, &pub, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return owner_auth_error(rc, "CreatePrimary (owner SRK)");
        r = tg_public_name(&pub->publicArea, ret_name);
        if (r < 0)
                return r;
        *ret = h;
        h.tr = ESYS_TR_NONE;
        return 0;
}

/*
 * The public area and name ESAPI holds for a key's ESYS_TR (from the
 * ReadPublic that made it): Esys_TR_Serialize's IESYS_RESOURCE (handle, name,
 * resource type, public area), unmarshalled with tss2-mu. No TPM command.
 */
#define TG_IESYSC_KEY_RSRC UINT32_C(1)
static int tr_public(ESYS_CONTEXT *esys, ESYS_TR tr, TPM2B_PUBLIC *ret_public, TPM2B_NAME *ret_name) {
        _cleanup_free_ uint8_t *buf = NULL;
        TPM2B_PUBLIC pub = {};
        TPM2B_NAME name = {};
        TPM2_HANDLE handle;
        size_t size = 0, offset = 0;
        UINT32 type = 0;

        if (Esys_TR_Serialize(esys, tr, &buf, &size) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2_HANDLE_Unmarshal(buf, size, &offset, &handle) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2B_NAME_Unmarshal(buf, size, &offset, &name) != TSS2_RC_SUCCESS ||
            Tss2_MU_UINT32_Unmarshal(buf, size, &offset, &type) != TSS2_RC_SUCCESS || type != TG_IESYSC_KEY_RSRC ||
            Tss2_MU_TPM2B_PUBLIC_Unmarshal(buf, size, &offset, &pub) != TSS2_RC_SUCCESS || offset != size)
                return log_debug_rc(-TG_ERR_INVALID, "The SRK's ESYS_TR holds no public area.");
        *ret_public = pub;
        *ret_name = name;
        return 0;
}

/*
 * The parent for sealing: the persistent SRK at 0x81000001 if it has the SRK
 * template; if that handle is free, a new SRK persisted there; otherwise a
 * transient SRK. Its public area is unverified, and needs no verification:
 * Create names it in an HMAC-authorized command, so a substituted public
 * area breaks the HMAC at the TPM.
 */
static int srk_for_seal(tg_verified_tpm *v, const tg_secret *owner_auth, tg_handle *ret, TPM2B_NAME *ret_name) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_handle_ tg_handle persistent = { .esys = esys, .tr = ESYS_TR_NONE, .close_only = true };
        _cleanup_handle_ tg_handle transient = TG_HANDLE_NULL;
        _cleanup_free_ TPM2B_PUBLIC *pub = NULL;
        _cleanup_free_ TPM2B_NAME *name = NULL;
        ESYS_TR new_persistent = ESYS_TR_NONE;
        TSS2_RC rc;
        int r;

        r = tg_tpm_set_hierarchy_auth(esys, ESYS_TR_RH_OWNER, owner_auth, "owner");
        if (r < 0)
                return r;

        /*
         * The SRK's ESYS_TR this verified TPM already holds (an unseal before, in a lifecycle
         * operation), else one ReadPublic (Esys_TR_FromTPMPublic); its public area and name come
         * from ESAPI's metadata (tr_public), not from a second ReadPublic (docs/design.md §2.4). Either is
         * what one ReadPublic returned, checked below exactly as before.
         */
        persistent.tr = tg_vtpm_take_srk(v);
        rc = persistent.tr != ESYS_TR_NONE ? TSS2_RC_SUCCESS :
                Esys_TR_FromTPMPublic(esys, TG_SRK_HANDLE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &persistent.tr);
        if (rc == TSS2_RC_SUCCESS) {
                pub = malloc(sizeof *pub);
                name = malloc(sizeof *name);
                if (!pub || !name)
                        return -TG_ERR_NOMEM;
                if (tr_public(esys, persistent.tr, pub, name) < 0) {
                        free(TAKE_PTR(pub));
                        free(TAKE_PTR(name));
                        rc = Esys_ReadPublic(esys, persistent.tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &pub, &name,
                                             NULL);
                        if (rc != TSS2_RC_SUCCESS)
                                return tg_tpm_rc(rc, "ReadPublic (0x81000001)");
                }
                if (tg_public_is_srk_ecc(&pub->publicArea)) {
                        r = tg_public_name(&pub->publicArea, ret_name);
                        if (r < 0)
                                return r;
                        /* ESAPI authorizes Create with the name the TPM returned, the token records
                         * the name of the public area: they must be one name, or an altered public
                         * area would make a token that can never unseal. */
                        if (!tg_name_equal(ret_name, name))
                                return log_alert_rc(-TG_ERR_INTERPOSER,
                                                    "ReadPublic of the SRK at 0x81000001 returned a public area that "
                                                    "does not hash to the name returned with it: altered on the TPM "
                                                    "bus. Interposer suspected; nothing was sealed.");
                        log_debug("Sealing under the persistent SRK at 0x81000001.");
                        *ret = persistent;
                        persistent.tr = ESYS_TR_NONE;
                        return 0;
                }
                log_warning("0x81000001 holds a key that is not an ECC SRK; sealing under a transient SRK, "
                            "so every unlock re-creates it (slower, and needs an empty owner password).");
        }

        transient.esys = esys;
        r = srk_create(v, &transient, ret_name);
        if (r < 0)
                return r;
        if (persistent.tr == ESYS_TR_NONE) {
                rc = Esys_EvictControl(esys, ESYS_TR_RH_OWNER, transient.tr, tg_vtpm_session(v, false, false),
                                       ESYS_TR_NONE, ESYS_TR_NONE, TG_SRK_HANDLE, &new_persistent);
                if (rc == TSS2_RC_SUCCESS) {
                        log_info("Persisted the SRK at 0x81000001.");
                        (void) Esys_TR_Close(esys, &new_persistent);
                } else
                        log_warning("Could not persist the SRK at 0x81000001 (%s); every unlock will re-create it.",
                                    Tss2_RC_Decode(rc));
        }
        *ret = transient;
        transient.tr = ESYS_TR_NONE;
        return 0;
}

/*
 * An ESYS_TR for the persistent SRK handle, made without a TPM command (docs/design.md §2.4): the
 * IESYS_RESOURCE of Esys_TR_Serialize (handle, name, resource type) with no public area,
 * named by the token's parent_name. Only for a password-authorized Load (no HMAC names
 * the parent): the TPM then refuses the token's private blob under any key but the real
 * SRK, so nothing here needs to be true, and a failed Load falls back to srk_for_unseal().
 */
#define TG_IESYSC_WITHOUT_MISC_RSRC UINT32_C(0)
static int srk_tr_unread(ESYS_CONTEXT *esys, const TPM2B_NAME *name, tg_handle *ret) {
        uint8_t buf[sizeof(TPM2_HANDLE) + sizeof(TPM2B_NAME) + sizeof(UINT32)];
        ESYS_TR tr = ESYS_TR_NONE;
        size_t offset = 0;

        if (Tss2_MU_TPM2_HANDLE_Marshal(TG_SRK_HANDLE, buf, sizeof buf, &offset) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2B_NAME_Marshal(name, buf, sizeof buf, &offset) != TSS2_RC_SUCCESS ||
            Tss2_MU_UINT32_Marshal(TG_IESYSC_WITHOUT_MISC_RSRC, buf, sizeof buf, &offset) != TSS2_RC_SUCCESS ||
            Esys_TR_Deserialize(esys, buf, offset, &tr) != TSS2_RC_SUCCESS)
                return log_debug_rc(-TG_ERR_INVALID, "No ESYS_TR for 0x%08x without reading it.", TG_SRK_HANDLE);
        *ret = (tg_handle) { .esys = esys, .tr = tr, .close_only = true };
        return 0;
}

/*
 * The parent for unsealing: whichever SRK has the name the token recorded.
 * The persistent SRK's ESYS_TR comes from the verification when it already
 * read it (a full verification's ReadPublic, or this boot's cache), else
 * from a ReadPublic here. Either public area is unverified and needs no
 * verification: a substituted parent fails at the TPM, which refuses the
 * token's private blob under any key but the real SRK (its integrity is
 * keyed by that SRK's seed), and, in a salted HMAC session, the Load's
 * HMAC names it too.
 */
static int srk_for_unseal(tg_verified_tpm *v, const TPM2B_NAME *expected, tg_handle *ret) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_handle_ tg_handle persistent = { .esys = esys, .tr = tg_vtpm_take_srk(v), .close_only = true };
        _cleanup_handle_ tg_handle transient = { .esys = esys, .tr = ESYS_TR_NONE };
        _cleanup_free_ TPM2B_NAME *name = NULL;
        TPM2B_NAME created;
        int r;

        if (persistent.tr != ESYS_TR_NONE) {
                if (Esys_TR_GetName(esys, persistent.tr, &name) == TSS2_RC_SUCCESS && tg_name_equal(name, expected)) {
                        *ret = persistent;
                        persistent.tr = ESYS_TR_NONE;
                        return 0;
                }
                /* A cached entry that names another key (edited, or a stale cache): read the handle. */
                log_debug("The cached SRK entry is not this token's parent; reading 0x%08x.", TG_SRK_HANDLE);
                tg_handle_release(&persistent);
                free(TAKE_PTR(name));
        }
        if (Esys_TR_FromTPMPublic(esys, TG_SRK_HANDLE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                  &persistent.tr) == TSS2_RC_SUCCESS &&
            Esys_TR_GetName(esys, persistent.tr, &name) == TSS2_RC_SUCCESS &&
            tg_name_equal(name, expected)) {
                *ret = persistent;
                persistent.tr = ESYS_TR_NONE;
                return 0;
        }

        r = srk_create(v, &transient, &created);
        if (r < 0)
                return r;
        if (!tg_name_equal(&created, expected))
                return log_error_rc(-TG_ERR_TOKEN,
                                    "The TPM's storage key is not the one this token was sealed under "
                                    "(TPM cleared, or token field \"parent_name\" edited). "
                                    "Unlock with the recovery passphrase and enroll again.");
        *ret = transient;
        transient.tr = ESYS_TR_NONE;
        return 0;
}

int tg_seal(tg_verified_tpm *v, const tg_seal_params *params, const tg_secret *secret, tg_token *ret_token) {
        return tg_seal_loaded(v, params, secret, ret_token, NULL);
}

int tg_seal_loaded(tg_verified_tpm *v, const tg_seal_params *params, const tg_secret *secret, tg_token *ret_token,
                   tg_handle *ret_object) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_handle_ tg_handle parent = TG_HANDLE_NULL;
        _cleanup_secret_ tg_secret *auth = NULL, *mask = NULL;
        _cleanup_free_ TPM2B_PRIVATE *out_private = NULL;
        _cleanup_free_ TPM2B_PUBLIC *out_public = NULL;
        static const TPM2B_DATA no_outside_info = {};
        static const TPML_PCR_SELECTION no_pcrs = {};
        tg_pcr_values values;
        TPM2B_DIGEST pcr_digest, policy;
        TPM2B_SENSITIVE_CREATE sensitive = {};
        TPM2B_PUBLIC tmpl = {};
        tg_token token = { .version = TG_TOKEN_VERSION_NO_PIN, .keyslot = -1 };
        TSS2_RC rc;
        int r;

        if (secret->size == 0 || secret->size > sizeof sensitive.sensitive.data.buffer)
                return log_error_rc(-TG_ERR_INVALID, "The secret must be 1..%zu bytes.",
                                    sizeof sensitive.sensitive.data.buffer);
        if ((params->grace || params->pin_of) && (!params->pin || !params->pin_of || params->pin_of->version < 2))
                return log_error_rc(-TG_ERR_INVALID, "An update seal needs the PIN of a format 2 token.");

        if (params->grace) {
                /* The counters' bounds, the PCRs the update keeps (maybe none) as read now, the PIN. */
                token.pcr_mask = params->pcr_mask;
                r = !params->pcr_mask ? 0 : tg_vtpm_pcr_read(v, params->pin_of->pcr_bank, params->pcr_mask, &values);
                if (r >= 0 && params->pcr_mask)
                        r = tg_pcr_values_digest(&values, &token.pcr_digest);
                if (r < 0)
                        return r;
                r = tg_policy_digest_grace(params->reset_count_max, params->pin_of->pcr_bank, params->pcr_mask,
                                           &token.pcr_digest, &policy);
                if (r < 0)
                        return r;
                token.grace = true;
                token.reset_count_max = params->reset_count_max;
        } else {
                if (params->pcr_mask == 0)
                        log_warning("Sealing without any PCR: the TPM releases the secret to whoever knows the PIN.");

                /* The PCR values: current ones over the audited session, overridden by explicit ones. */
                r = tg_vtpm_pcr_read(v, params->pcr_bank, params->pcr_mask, &values);
                if (r < 0)
                        return r;
                if (params->explicit_values) {
                        const tg_pcr_values *e = params->explicit_values;
                        if (e->given_mask & ~params->pcr_mask)
                                return log_error_rc(-TG_ERR_INVALID, "--pcr gives a value for a PCR that is not in --pcrs.");
                        for (unsigned i = 0; i < TG_PCR_COUNT; i++)
                                if (e->given_mask & (UINT32_C(1) << i))
                                        memcpy(values.value[i], e->value[i], values.value_size);
                }
                if (!params->allow_unextended) {
                        r = tg_pcr_values_check_extended(&values, params->pcr_mask);
                        if (r < 0)
                                return r;
                }
                r = tg_pcr_values_digest(&values, &pcr_digest);
                if (r < 0)
                        return r;
                r = tg_policy_digest_compute(params->pcr_bank, params->pcr_mask, &pcr_digest, params->pin != NULL,
                                             &policy);
                if (r < 0)
                        return r;
                token.pcr_digest = pcr_digest;
                token.pcr_bank = params->pcr_bank;
                token.pcr_mask = params->pcr_mask;
        }

        token.policy_hash = policy;
        token.pin = params->pin != NULL;
        if (params->pin_of) {
                /* The token's salt and parameters: the same authValue and mask K as its main seal. */
                token.version = TG_TOKEN_VERSION_PIN;
                token.pcr_bank = params->pin_of->pcr_bank;
                token.argon2 = params->pin_of->argon2;
                memcpy(token.pin_salt, params->pin_of->pin_salt, sizeof token.pin_salt);
                r = tg_pin_derive_v2(params->pin, token.pin_salt, sizeof token.pin_salt, &token.argon2,
                                     secret->size, &auth, &mask);
                if (r < 0)
                        return r;
        } else if (token.pin) {
                /*
                 * Format 2: one Argon2id of the PIN under a fresh salt gives the authValue and the
                 * mask K, and the TPM holds secret XOR K (tokens/pin.h). The fresh salt makes K new
                 * for every seal, even with the same PIN and secret (a one-time pad per sealed blob).
                 */
                token.version = TG_TOKEN_VERSION_PIN;
                token.argon2 = params->argon2;
                if (token.argon2.memory_kib == 0)
                        token.argon2.memory_kib = TG_ARGON2_MEMORY_DEFAULT;
                if (token.argon2.parallel == 0)
                        token.argon2.parallel = 1;
                if (token.argon2.time_cost == 0) {
                        unsigned ms = 0;

                        r = tg_argon2_benchmark(token.argon2.memory_kib, token.argon2.parallel,
                                                params->argon2_target_ms ?: TG_ARGON2_TARGET_MS_DEFAULT,
                                                &token.argon2.time_cost, &ms);
                        if (r < 0)
                                return r;
                        log_info("PIN key: Argon2id with %" PRIu32 " MiB, %" PRIu32 " passes, %" PRIu32 " lane(s) "
                                 "(%u ms here).", token.argon2.memory_kib / 1024, token.argon2.time_cost,
                                 token.argon2.parallel, ms);
                }
                if (RAND_bytes(token.pin_salt, sizeof token.pin_salt) != 1)
                        return log_error_rc(-TG_ERR_IO, "The OpenSSL random generator failed.");
                r = tg_pin_derive_v2(params->pin, token.pin_salt, sizeof token.pin_salt, &token.argon2,
                                     secret->size, &auth, &mask);
                if (r < 0)
                        return r;
        }

        r = srk_for_seal(v, params->owner_auth, &parent, &token.parent_name);
        if (r < 0)
                return r;

        tmpl.publicArea = (TPMT_PUBLIC) {
                .type = TPM2_ALG_KEYEDHASH,
                .nameAlg = TPM2_ALG_SHA256,
                /*
                 * Policy only, for both roles: no userWithAuth, and adminWithPolicy, so that the PIN's
                 * authValue alone authorizes nothing (ObjectChangeAuth would otherwise test PIN guesses
                 * in any PCR state). DA-protected whenever a PIN guards it.
                 */
                .objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_ADMINWITHPOLICY |
                                    (token.pin ? 0 : TPMA_OBJECT_NODA),
                .authPolicy = policy,
                .parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL,
        };
        if (auth) {
                sensitive.sensitive.userAuth.size = (UINT16) auth->size;
                memcpy(sensitive.sensitive.userAuth.buffer, auth->data, auth->size);
        }
        sensitive.sensitive.data.size = (UINT16) secret->size;
        for (size_t i = 0; i < secret->size; i++)
                sensitive.sensitive.data.buffer[i] = secret->data[i] ^ (mask ? mask->data[i] : 0);

        /* inSensitive is the first parameter: encrypted in the salted session. */
        if (ret_object) {
                /*
                 * CreateLoaded (docs/design.md §2.4): the object stays loaded for the caller's test unseal,
                 * one Load (and the parent's ReadPublic) fewer. Its response (the handle's name,
                 * outPrivate, outPublic) is authenticated by the salted HMAC session like Create's,
                 * so the loaded object is the one the token describes.
                 */
                _cleanup_handle_ tg_handle object = { .esys = esys, .tr = ESYS_TR_NONE };
                TPM2B_TEMPLATE in_public = {};
                size_t offset = 0;

                rc = Tss2_MU_TPMT_PUBLIC_Marshal(&tmpl.publicArea, in_public.buffer, sizeof in_public.buffer, &offset);
                if (rc != TSS2_RC_SUCCESS) {
                        explicit_bzero(&sensitive, sizeof sensitive);
                        return tg_tpm_rc(rc, "Marshalling the sealed object's template");
                }
                in_public.size = (UINT16) offset;
                rc = Esys_CreateLoaded(esys, parent.tr, tg_vtpm_session(v, true, false), ESYS_TR_NONE, ESYS_TR_NONE,
                                       &sensitive, &in_public, &object.tr, &out_private, &out_public);
                explicit_bzero(&sensitive, sizeof sensitive);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "CreateLoaded (sealed object)");
                *ret_object = object;
                object.tr = ESYS_TR_NONE;
        } else {
                rc = Esys_Create(esys, parent.tr, tg_vtpm_session(v, true, false), ESYS_TR_NONE, ESYS_TR_NONE,
                                 &sensitive, &tmpl, &no_outside_info, &no_pcrs,
                                 &out_private, &out_public, NULL, NULL, NULL);
                explicit_bzero(&sensitive, sizeof sensitive);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "Create (sealed object)");
        }
        /* The persistent SRK goes back to the verified TPM for the next seal or unseal. */
        if (parent.close_only)
                tg_vtpm_give_srk(v, parent.tr), parent.tr = ESYS_TR_NONE;

        token.private_blob = *out_private;
        token.public_blob = *out_public;
        *ret_token = token;
        return 0;
}

static bool digest_is_policy(const TPM2B_DIGEST *digest, const tg_token *token);

static int unseal_error(tg_verified_tpm *v, const tg_token *token, TSS2_RC rc) {
        TSS2_RC base = tg_tpm_rc_base(rc);
        char pcrs[96];
        tg_da_state da;

        if (base == TPM2_RC_PCR_CHANGED)
                /* unseal_object() retried it TG_PCR_RACE_TRIES times: a race, whatever the PCRs hold. */
                return log_error_rc(-TG_ERR_TPM,
                                    "Another process extended PCRs during each of %u unseal attempts (a race, not a "
                                    "changed boot chain). Try again in a moment. If it repeats, an interposer on "
                                    "the TPM bus may be forging it: 'tpmguard status' shows whether the TPM's "
                                    "dictionary-attack counter moved (a real race spends no PIN try).",
                                    TG_PCR_RACE_TRIES);
        /*
         * A "pin" edited to false (tg_token_pin_edited(): the object, which the TPM just loaded,
         * was sealed with a PIN): its policy needs PolicyAuthValue, which policy_run() left out.
         * Threat: an edited header read as a PCR mismatch, and the advice to reseal over it.
         */
        if (base == TPM2_RC_POLICY_FAIL && tg_token_pin_edited(token))
                return log_alert_rc(-TG_ERR_TOKEN,
                                    "The token's \"pin\" field does not match the sealed object: the header was "
                                    "edited (\"pin\" is false, but the object was sealed with a PIN). This is not a "
                                    "PCR change: find out who wrote the LUKS2 header. Unlock with the recovery "
                                    "passphrase; 'tpmguard reseal DEVICE' (it asks for that passphrase) then writes "
                                    "a token from tpmguard.conf, never from the edited header.");
        if (base == TPM2_RC_POLICY_FAIL) {
                tg_pcr_list_format(token->pcr_mask, pcrs, sizeof pcrs);
                return log_error_rc(-TG_ERR_PCR_MISMATCH,
                                    "PCR mismatch: the %s values of PCR %s no longer match the sealed policy. "
                                    "Run 'tpmguard pcrs' to see which boot events changed. If you did not update "
                                    "firmware, the boot loader, the kernel or the Secure Boot settings, suspect "
                                    "tampering and do not type your PIN again. If you did: unlock with the "
                                    "recovery passphrase and run 'tpmguard reseal DEVICE' (it asks for that "
                                    "passphrase); before the next update, 'tpmguard update prepare DEVICE' keeps "
                                    "the PIN working.",
                                    tg_pcr_bank_to_string(token->pcr_bank), pcrs);
        }
        if (base == TPM2_RC_AUTH_FAIL || base == TPM2_RC_BAD_AUTH) {
                /*
                 * The policy session was proven before (policy_prove()): a broken salt never gets here.
                 * The TPM answers a wrong PIN and an Unseal altered on the bus (its HMAC or session
                 * attributes) alike, so the message says both are possible.
                 */
                if (tg_da_read(tg_vtpm_esys(v), ESYS_TR_NONE, &da) >= 0 && da.max_failures > 0) {
                        if (da.in_lockout || da.failures >= da.max_failures)
                                return log_error_rc(-TG_ERR_LOCKOUT,
                                                    "Wrong PIN (or the command was altered on the TPM bus: the TPM "
                                                    "cannot tell which). The TPM is now in dictionary-attack "
                                                    "lockout; one try returns every %u s. Use the recovery passphrase.",
                                                    da.recovery_seconds);
                        return log_error_rc(-TG_ERR_BAD_PIN,
                                            "Wrong PIN (or the command was altered on the TPM bus: the TPM cannot "
                                            "tell which). %u of %u tries left before the TPM locks out "
                                            "(one failure is forgiven every %u s).",
                                            da.max_failures - da.failures, da.max_failures, da.recovery_seconds);
                }
                return log_error_rc(-TG_ERR_BAD_PIN, "Wrong PIN (or the command was altered on the TPM bus: the TPM "
                                    "cannot tell which).");
        }
        return tg_tpm_rc(rc, "Unseal");
}

static int load_error(TSS2_RC rc) {
        TSS2_RC base = tg_tpm_rc_base(rc);

        if (base == TPM2_RC_INTEGRITY || base == TPM2_RC_SIZE || base == TPM2_RC_VALUE || base == TPM2_RC_ATTRIBUTES)
                return log_error_rc(-TG_ERR_TOKEN,
                                    "The TPM rejects the token's sealed blob (edited, or sealed by another TPM). "
                                    "Unlock with the recovery passphrase and enroll again.");
        return tg_tpm_rc(rc, "Load (sealed object)");
}

/* The token's policy, run in a policy session (fresh, or after PolicyRestart). */
static int policy_run(tg_verified_tpm *v, const tg_token *token, ESYS_TR policy) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        TPM2B_DIGEST no_pcr_digest = {};
        TPML_PCR_SELECTION sel;
        TSS2_RC rc;

        (void) Esys_TRSess_SetAttributes(esys, policy, TPMA_SESSION_CONTINUESESSION, 0xff);
        if (token->grace) {
                TPM2B_OPERAND operand;

                /*
                 * The TPM compares its own resetCount now (Part 3, PolicyCounterTimer), before
                 * anything needs the PIN: a failure costs no dictionary-attack try. A success
                 * forged on the bus leaves the TPM's session without this step, so the Unseal
                 * fails its policy check, which the TPM makes before the authValue's (no try
                 * either).
                 */
                tg_policy_grace_operand(token->reset_count_max, &operand);
                rc = Esys_PolicyCounterTimer(esys, policy, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &operand,
                                             TG_RESET_COUNT_OFFSET, TPM2_EO_UNSIGNED_LE);
                if (tg_tpm_rc_base(rc) == TPM2_RC_POLICY)
                        return log_error_rc(-TG_ERR_PCR_MISMATCH,
                                            "The update grace has expired: the TPM has been reset (booted) more "
                                            "often than 'tpmguard update prepare' allowed (resetCount > %" PRIu32 "). "
                                            "Unlock with the recovery passphrase and run 'tpmguard reseal DEVICE'.",
                                            token->reset_count_max);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "PolicyCounterTimer");
                /* Threat: boots that do not count (an unauthenticated Shutdown(STATE) before the
                 * power cycle makes the next boot a TPM Restart: PCRs reset, resetCount kept). */
                rc = Esys_PolicyCounterTimer(esys, policy, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                             &(const TPM2B_OPERAND) { .size = 4 }, TG_RESTART_COUNT_OFFSET,
                                             TPM2_EO_EQ);
                if (tg_tpm_rc_base(rc) == TPM2_RC_POLICY)
                        return log_error_rc(-TG_ERR_PCR_MISMATCH, "%s", TG_GRACE_RESTART_MESSAGE);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "PolicyCounterTimer (restartCount)");
        }
        tg_pcr_selection(token->pcr_bank, token->pcr_mask, &sel);
        if (token->pcr_mask) {
                rc = Esys_PolicyPCR(esys, policy, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &no_pcr_digest, &sel);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "PolicyPCR");
        }
        if (token->pin) {
                rc = Esys_PolicyAuthValue(esys, policy, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "PolicyAuthValue");
        }
        return 0;
}

/*
 * The proof of a fresh policy session (before its policy is run).
 *
 * Threat: an interposer that breaks the session's salt (StartAuthSession's tpmKey pointed at
 * another key, a swapped saved context) leaves the TPM with a session key we do not have. The
 * PIN-bearing Unseal would then be the first command to show it, as TPM_RC_AUTH_FAIL: a "wrong
 * PIN" that costs a dictionary-attack try, and another at every PIN retyped. So the session
 * is proven first: it is the non-authorizing encrypt session of one command, whose response HMAC
 * the TPM keys with its session key and ESAPI checks. A mismatch is
 * TSS2_ESYS_RC_RSP_AUTH_FAILED, bus tampering (-TG_ERR_INTERPOSER), before any PIN was tried.
 *
 * The TPM resets a policy session's policy after every command that carries it with
 * continueSession (TPM 2.0 Part 4, UpdateInternalSession()), so the proof comes before the
 * policy commands, never in them. The one-shot unlock proves the session on the sealed object's
 * Load, which it sends anyway (tg_unseal(): no command more on the warm path); elsewhere it is
 * PolicyGetDigest (policyDigest is a TPM2B: encrypt is allowed), one command.
 */
static int policy_prove(tg_verified_tpm *v, ESYS_TR policy) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_free_ TPM2B_DIGEST *digest = NULL;
        TSS2_RC rc;

        (void) Esys_TRSess_SetAttributes(esys, policy, TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_ENCRYPT, 0xff);
        rc = Esys_PolicyGetDigest(esys, policy, policy, ESYS_TR_NONE, ESYS_TR_NONE, &digest);
        /* The TPM checks the command HMAC of every session it is given, and names nothing but
         * the session here: a refused one means its session key is not ours either. */
        if ((rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER &&
            (tg_tpm_rc_base(rc) == TPM2_RC_BAD_AUTH || tg_tpm_rc_base(rc) == TPM2_RC_AUTH_FAIL))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM does not share the key of the policy session salted to the verified "
                                    "NULL key (%s): the session was redirected or swapped on the TPM bus. "
                                    "Interposer suspected; the PIN was not tried and no PIN try was spent.",
                                    Tss2_RC_Decode(rc));
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "PolicyGetDigest (the proof of the salted policy session, before the PIN)");
        return 0;
}

/*
 * The one-shot unlock's Load (password-authorized), with the policy session as its encrypt
 * session: the proof of that session (policy_prove()) at no command's cost. *proving says
 * whether it was; it is cleared when the TPM refuses the proof session's HMAC, which covers
 * the parent's name too: that name may come from the token's parent_name (a hint there,
 * srk_tr_unread()), so the Load goes again without it, and the caller proves the session
 * with policy_prove() instead, where no name can be wrong.
 */
static TSS2_RC load_proving(ESYS_CONTEXT *esys, ESYS_TR parent, const tg_token *token, ESYS_TR policy, bool *proving,
                            ESYS_TR *ret_object) {
        TSS2_RC rc;

        if (*proving) {
                (void) Esys_TRSess_SetAttributes(esys, policy, TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_ENCRYPT,
                                                 0xff);
                rc = Esys_Load(esys, parent, ESYS_TR_PASSWORD, policy, ESYS_TR_NONE, &token->private_blob,
                               &token->public_blob, ret_object);
                if ((rc & TSS2_RC_LAYER_MASK) != TSS2_TPM_RC_LAYER ||
                    (rc & (TPM2_RC_S | TPM2_RC_N_MASK)) != (TPM2_RC_S | TPM2_RC_2) ||
                    (tg_tpm_rc_base(rc) != TPM2_RC_BAD_AUTH && tg_tpm_rc_base(rc) != TPM2_RC_AUTH_FAIL))
                        return rc;
                log_debug("The Load's proof session was refused (%s): loading without it, proving it next.",
                          Tss2_RC_Decode(rc));
                *proving = false;
        }
        return Esys_Load(esys, parent, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &token->private_blob,
                         &token->public_blob, ret_object);
}

/* The policy session for the Unseal, salted to the verified NULL key, proven, with the token's policy run in it. */
static int policy_start(tg_verified_tpm *v, const tg_token *token, tg_handle *policy) {
        int r;

        r = tg_vtpm_start_policy_session(v, &policy->tr);
        if (r < 0)
                return r;
        r = policy_prove(v, policy->tr);
        if (r < 0)
                return r;
        return policy_run(v, token, policy->tr);
}

/* After the Load: a persistent SRK goes back to the verified TPM (a later seal or unseal reads it no more),
 * a transient one is flushed, freeing its slot before the policy session. */
static void parent_done(tg_verified_tpm *v, tg_handle *parent) {
        if (parent->close_only && parent->tr != ESYS_TR_NONE) {
                tg_vtpm_give_srk(v, parent->tr);
                parent->tr = ESYS_TR_NONE;
                return;
        }
        tg_handle_release(parent);
}

/* A refusal that names a handle or session the TPM does not hold (TPM_RC_REFERENCE_*, TPM_RC_HANDLE). */
static bool unseal_rc_not_loaded(TSS2_RC rc) {
        TSS2_RC base = tg_tpm_rc_base(rc);

        return base == TPM2_RC_HANDLE || (base >= TPM2_RC_REFERENCE_H0 && base <= TPM2_RC_REFERENCE_H6) ||
               (base >= TPM2_RC_REFERENCE_S0 && base <= TPM2_RC_REFERENCE_S6);
}

/*
 * What an Unseal's refusal means, before it is believed. An error response carries no HMAC: an
 * interposer can forward the Unseal, let the TPM release the secret for the right PIN, and answer
 * with an error of its choosing: AUTH_FAIL reads as a wrong PIN, POLICY_FAIL as a PCR mismatch (and
 * the advice to reseal), LOCKOUT sends the user to the recovery passphrase; "retry" makes ESAPI send
 * the same Unseal again, each a dictionary-attack try when the PIN was wrong. So:
 *  - after "retry", one resend only (trust/tcti.c: a genuine TPM needs one); a second "retry"
 *    is checked like any refusal below, and said;
 *  - a successful Unseal ends the policy session (continueSession clear) and a refused one leaves
 *    it open, so one command in that session, as its encrypt session (its response HMAC checked by
 *    ESAPI), tells them apart: a session the TPM no longer holds, or an answer failing its HMAC, is
 *    the forgery; so is a POLICY_FAIL while the session's policyDigest is the token's policy.
 * One command more, on the refusal path only.
 */
static int unseal_refusal_check(tg_verified_tpm *v, const tg_token *token, ESYS_TR policy, TSS2_RC rc) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_free_ TPM2B_DIGEST *digest = NULL;
        bool resend_refused = tg_tpm_unseal_resend_refused(esys);
        TSS2_RC prc;

        if ((rc & TSS2_RC_LAYER_MASK) != TSS2_TPM_RC_LAYER)
                return 0;   /* not the TPM's answer: the transport's or ESAPI's own, named by the caller */
        (void) Esys_TRSess_SetAttributes(esys, policy, TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_ENCRYPT, 0xff);
        prc = Esys_PolicyGetDigest(esys, policy, policy, ESYS_TR_NONE, ESYS_TR_NONE, &digest);
        if (prc == TSS2_ESYS_RC_RSP_AUTH_FAILED || prc == TSS2_ESYS_RC_MALFORMED_RESPONSE)
                return tg_tpm_rc(prc, "The check of the Unseal's refusal");
        /* Neither the object nor the session there: the TPM lost both (a reset), or both answers were forged. */
        if (prc != TSS2_RC_SUCCESS && unseal_rc_not_loaded(rc))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM no longer holds the sealed object and the policy session it loaded a "
                                    "moment ago (%s): it was reset during the unlock, or its answers were forged on "
                                    "the TPM bus. Interposer or TPM reset suspected; nothing was unsealed, and this "
                                    "is not a wrong PIN. If the machine was suspended during this command, run it "
                                    "again; otherwise use the recovery passphrase and run 'tpmguard doctor'.",
                                    Tss2_RC_Decode(rc));
        if (prc != TSS2_RC_SUCCESS)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM refused the Unseal (%s), but then no longer held its policy session "
                                    "(%s), which the TPM ends only when the Unseal succeeds: the refusal was forged "
                                    "on the TPM bus. Interposer suspected; no secret was received, and this is not "
                                    "a wrong PIN. Use the recovery passphrase and run 'tpmguard doctor'.",
                                    resend_refused ? "\"retry\", twice" : Tss2_RC_Decode(rc), Tss2_RC_Decode(prc));
        if (tg_tpm_rc_base(rc) == TPM2_RC_POLICY_FAIL && digest_is_policy(digest, token))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM's answer to the Unseal says its policy failed, but the policy session "
                                    "holds exactly the token's policy: the answer was forged on the TPM bus. "
                                    "Interposer suspected; this is not a PCR change (do not reseal). Use the "
                                    "recovery passphrase and run 'tpmguard doctor'.");
        /* The session alive: the TPM did not unseal (busy, or a wrong PIN's answer replaced). */
        if (resend_refused)
                return log_error_rc(-TG_ERR_PIN_RETRY,
                                    "The TPM answered the PIN's Unseal with \"retry\" twice. It was not sent a third "
                                    "time: if that answer was forged on the TPM bus after the TPM had checked the "
                                    "PIN, each resend would cost another dictionary-attack try. Type the PIN again "
                                    "(this counts as one of the PIN tries); if this repeats, suspect the TPM bus and "
                                    "run 'tpmguard doctor'.");
        return 0;
}

/* The Unseal itself, of a loaded object in a started policy session (flushed here unless the TPM ended it). */
static int unseal_object(tg_verified_tpm *v, const tg_token *token, const tg_secret *auth, const tg_secret *mask,
                         ESYS_TR object, tg_handle *policy, tg_secret **ret_secret) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_secret_ tg_secret *secret = NULL;
        TPM2B_SENSITIVE_DATA *out = NULL;
        TPM2B_AUTH object_auth = {};
        TSS2_RC rc;
        int r;

        if (token->pin) {
                object_auth.size = (UINT16) auth->size;
                memcpy(object_auth.buffer, auth->data, auth->size);
                rc = Esys_TR_SetAuth(esys, object, &object_auth);
                explicit_bzero(&object_auth, sizeof object_auth);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "Esys_TR_SetAuth");
        }

        /*
         * outData is the first response parameter: encrypted in the salted policy session.
         * continueSession clear: a successful Unseal ends the policy session in the TPM, so it
         * needs no FlushContext; a failed one leaves it open, and it is flushed as usual.
         */
        for (unsigned attempt = 1;; attempt++) {
                (void) Esys_TRSess_SetAttributes(esys, policy->tr, TPMA_SESSION_ENCRYPT, 0xff);
                rc = Esys_Unseal(esys, object, policy->tr, ESYS_TR_NONE, ESYS_TR_NONE, &out);
                tg_tpm_wipe_last_response(esys);
                if (tg_tpm_rc_base(rc) != TPM2_RC_PCR_CHANGED || attempt >= TG_PCR_RACE_TRIES)
                        break;
                /*
                 * A PCR was extended (by anyone: IMA, systemd's measurements, another
                 * service) between PolicyPCR and the Unseal. The TPM checks this before the
                 * authValue, so it cost no dictionary-attack try, and says nothing about the
                 * values of the token's PCRs: run the policy again. PolicyRestart is the
                 * spec's answer to TPM_RC_PCR_CHANGED (Part 3, PolicyRestart): it keeps the
                 * salted, proven session (a fresh one would need the NULL key, which a one-shot
                 * unlock has already flushed) and clears its policy digest and PCR counter.
                 */
                log_debug("TPM_RC_PCR_CHANGED on Unseal (attempt %u of %u): running the policy again.", attempt,
                          TG_PCR_RACE_TRIES);
                rc = Esys_PolicyRestart(esys, policy->tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE);
                r = rc == TSS2_RC_SUCCESS ? policy_run(v, token, policy->tr) : 0;
                if (rc != TSS2_RC_SUCCESS || r < 0) {
                        /*
                         * The "PCR changed" answer is unauthenticated, and so are PolicyRestart's and the
                         * policy commands' answers: was the Unseal executed after all (the session gone)?
                         * Asked before PolicyRestart's own error is named.
                         */
                        int k = unseal_refusal_check(v, token, policy->tr, TSS2_TPM_RC_LAYER | TPM2_RC_PCR_CHANGED);

                        r = k == -TG_ERR_INTERPOSER ? k : rc != TSS2_RC_SUCCESS ? tg_tpm_rc(rc, "PolicyRestart") : r;
                        goto wipe_auth;
                }
        }
        r = rc == TSS2_RC_SUCCESS ? 0 : unseal_refusal_check(v, token, policy->tr, rc);
wipe_auth:
        if (token->pin) {
                /* ESAPI keeps the authValue in the object's metadata and frees it unwiped on flush. */
                TPM2B_AUTH empty = {};
                (void) Esys_TR_SetAuth(esys, object, &empty);
        }
        if (r < 0)
                return r;
        if (rc != TSS2_RC_SUCCESS)
                return unseal_error(v, token, rc);
        policy->close_only = true;

        r = mask && out->size > mask->size ? log_error_rc(-TG_ERR_TOKEN, "The TPM released %u bytes, more than a "
                                                            "format 2 secret has.", out->size) :
                tg_secret_new_copy(out->buffer, out->size, &secret);
        explicit_bzero(out, sizeof *out);
        Esys_Free(out);
        if (r < 0)
                return r;
        /* Format 2: what the TPM released is S XOR K; only the PIN's Argon2id gives K. */
        if (mask)
                for (size_t i = 0; i < secret->size; i++)
                        secret->data[i] ^= mask->data[i];
        *ret_secret = TAKE_PTR(secret);
        return 0;
}

/*
 * The sealed object's authValue, derived from the PIN for a PIN token (none without), and for
 * format 2 the mask K (TG_MASK_MAX bytes: HKDF output of a shorter length is its prefix, so the
 * secret's length need not be known before the Unseal). Argon2id runs here, before any command
 * of the unseal, once per PIN tried.
 */
#define TG_MASK_MAX sizeof(((TPM2B_SENSITIVE_DATA *) NULL)->buffer)
static int token_auth(const tg_token *token, const tg_secret *pin, tg_secret **ret, tg_secret **ret_mask) {
        _cleanup_secret_ tg_secret *auth = NULL, *mask = NULL;
        int r;

        if (token->pin && !pin)
                return log_debug_rc(-TG_ERR_PIN_NEEDED, "The token needs a PIN.");
        if (token->pin && token->version >= 2)
                r = tg_pin_derive_v2(pin, token->pin_salt, sizeof token->pin_salt, &token->argon2, TG_MASK_MAX,
                                     &auth, &mask);
        else if (token->pin)
                r = tg_pin_derive_auth(pin, token->pin_salt, sizeof token->pin_salt, token->pin_kdf_iterations, &auth);
        else
                r = 0;
        if (r < 0)
                return r;
        *ret = TAKE_PTR(auth);
        *ret_mask = TAKE_PTR(mask);
        return 0;
}

/* Hands a handle over: the caller owns it, and the cleanup of h releases nothing. */
static tg_handle take_handle(tg_handle *h) {
        tg_handle t = *h;

        h->tr = ESYS_TR_NONE;
        return t;
}

/*
 * Everything of an unseal that needs no PIN value: the sealed object loaded and the policy session
 * started, proven and run (PolicyAuthValue needs no PIN: only the Unseal's HMAC uses it). Handles
 * are handed out only on success; on failure everything loaded here is flushed.
 */
static int unseal_begin(tg_verified_tpm *v, const tg_token *token, tg_handle *ret_object, tg_handle *ret_policy) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_handle_ tg_handle parent = TG_HANDLE_NULL, object = TG_HANDLE_NULL, policy = TG_HANDLE_NULL;
        TSS2_RC rc;
        int r;

        object.esys = policy.esys = esys;
        if (tg_vtpm_has_session(v)) {
                r = srk_for_unseal(v, &token->parent_name, &parent);
                if (r < 0)
                        return r;
                /* Load is the salted HMAC session's last command here (one-shot: the TPM then flushes it). */
                rc = Esys_Load(esys, parent.tr, tg_vtpm_session_last(v, false, false), ESYS_TR_NONE, ESYS_TR_NONE,
                               &token->private_blob, &token->public_blob, &object.tr);
                tg_vtpm_session_done(v, rc == TSS2_RC_SUCCESS);
                if (rc != TSS2_RC_SUCCESS)
                        return load_error(rc);
                parent_done(v, &parent);
                r = policy_start(v, token, &policy);
                if (r < 0)
                        return r;
        } else {
                _cleanup_free_ TPM2B_NAME *loaded_name = NULL;
                TPM2B_NAME our_name;
                bool proving = true;

                /*
                 * No HMAC session (one-shot, docs/design.md §2.4): the policy session is the only salted
                 * session, started first (which flushes the NULL key, so that through /dev/tpmrm0
                 * fewer handles are live per command), and the Load has a password authorization:
                 * the SRK has an empty authValue, so the password tells the bus nothing. What the
                 * HMAC on the Load used to stop, and what stops it now:
                 *  - a substituted parent (a key of the interposer's at the SRK's handle): the
                 *    TPM refuses the private blob, whose integrity is keyed by the real SRK's seed
                 *    (TPM_RC_INTEGRITY), as before;
                 *  - a substituted sealed object (the interposer swaps the blobs, or the handle, for
                 *    an object of its own with our policy): with a PIN, the Unseal's command HMAC
                 *    (PolicyAuthValue) covers a cpHash naming the object by the name of the token's
                 *    public area, so the TPM refuses it; without a PIN the TPM checks no command
                 *    HMAC, and the interposer's object would give us data of its choosing, in our
                 *    session (it learns nothing): tg_volume_binding_check() and the keyslot refuse
                 *    it, a failed unlock it could cause by dropping any command anyway;
                 *  - an altered name in the Load response (it would go into that cpHash and turn a
                 *    bus attack into a "wrong PIN" that costs a DA try): compared below with our own
                 *    hash of the token's public area, before the Unseal; and, since the policy
                 *    session is the Load's encrypt session (the proof, policy_prove()), the
                 *    response HMAC covers that name too.
                 */
                r = tg_vtpm_start_policy_session(v, &policy.tr);
                if (r < 0)
                        return r;
                /*
                 * The parent: the SRK's ESYS_TR the verification holds (cache, or a verification
                 * without the kernel's null_name), else one made from the token's parent_name
                 * without a ReadPublic; if the Load under that fails, the SRK is read (or, when
                 * 0x81000001 holds another key, re-created) as before and the Load sent again.
                 */
                parent.tr = tg_vtpm_take_srk(v);
                if (parent.tr != ESYS_TR_NONE)
                        parent = (tg_handle) { .esys = esys, .tr = parent.tr, .close_only = true };
                else if (srk_tr_unread(esys, &token->parent_name, &parent) < 0)
                        parent = TG_HANDLE_NULL;
                /* The policy session as the Load's encrypt session (load_proving()). An error
                 * response proves nothing and changes nothing in the session: the retry below
                 * proves it then. */
                rc = parent.tr == ESYS_TR_NONE ? (TSS2_TPM_RC_LAYER | TPM2_RC_HANDLE) :
                        load_proving(esys, parent.tr, token, policy.tr, &proving, &object.tr);
                /* A TPM error (no key there, or another key: the token may be sealed under a
                 * transient SRK); anything else (the response itself) is not retried. */
                if (rc != TSS2_RC_SUCCESS && (rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER) {
                        log_debug("Load under 0x%08x without reading it: %s; reading the SRK.", TG_SRK_HANDLE,
                                  Tss2_RC_Decode(rc));
                        tg_handle_release(&parent);
                        r = srk_for_unseal(v, &token->parent_name, &parent);
                        if (r < 0)
                                return r;
                        rc = load_proving(esys, parent.tr, token, policy.tr, &proving, &object.tr);
                }
                if (rc != TSS2_RC_SUCCESS)
                        return load_error(rc);
                parent_done(v, &parent);
                r = tg_public_name(&token->public_blob.publicArea, &our_name);
                if (r < 0)
                        return r;
                rc = Esys_TR_GetName(esys, object.tr, &loaded_name);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "Esys_TR_GetName");
                if (!tg_name_equal(loaded_name, &our_name))
                        return log_alert_rc(-TG_ERR_INTERPOSER,
                                            "Load of the sealed object returned a name that is not the token's: "
                                            "altered on the TPM bus. Interposer suspected; the PIN was not tried.");
                if (!proving) {
                        r = policy_prove(v, policy.tr);
                        if (r < 0)
                                return r;
                }
                r = policy_run(v, token, policy.tr);
                if (r < 0)
                        return r;
        }

        *ret_object = take_handle(&object);
        *ret_policy = take_handle(&policy);
        return 0;
}

/* The Unseal of what unseal_begin() loaded and started, with the PIN's authValue (and format 2's
 * mask); object and policy released here, on every path. */
static int unseal_end(tg_verified_tpm *v, const tg_token *token, const tg_secret *auth, const tg_secret *mask,
                      tg_handle *object, tg_handle *policy, tg_secret **ret_secret) {
        int r;

        r = unseal_object(v, token, auth, mask, object->tr, policy, ret_secret);
        if (r >= 0 && tg_vtpm_rm_flushes(v))
                /*
                 * One-shot through a resource manager that flushes at close (docs/design.md §2.4): the sealed
                 * object is not flushed by us but closed in ESAPI only, and the RM flushes it when
                 * tg_verified_tpm_free() closes the connection, at the end of this token open call.
                 * That is strictly cheaper there: the kernel would ContextLoad the object only to
                 * flush it. It is safe: a resource manager's space is per connection, so no other
                 * client of it (another process, root's included) can name, use or read the loaded
                 * object while it lingers, and nothing more is sent on this connection; the kernel
                 * flushes it when the connection closes, on every path (tg_verified_tpm_free(); a
                 * crash closes the fd too). Its Unseal would need our PIN and PCR policy anyway.
                 * Only after a successful Unseal: a failed one
                 * (a wrong PIN) is followed by a DA-state read on this connection, and every handle
                 * left live would cost a ContextLoad and a ContextSave around it.
                 */
                object->close_only = true;
        tg_handle_release(object);
        tg_handle_release(policy);
        return r;
}

static int gate_pass(const tg_unseal_gate *gate) {
        return gate && gate->before_unseal ? gate->before_unseal(gate->userdata) : 0;
}

int tg_unseal(tg_verified_tpm *v, const tg_token *token, const tg_secret *pin, tg_secret **ret_secret) {
        return tg_unseal_gated(v, token, pin, NULL, ret_secret);
}

int tg_unseal_gated(tg_verified_tpm *v, const tg_token *token, const tg_secret *pin, const tg_unseal_gate *gate,
                    tg_secret **ret_secret) {
        _cleanup_handle_ tg_handle object = TG_HANDLE_NULL, policy = TG_HANDLE_NULL;
        _cleanup_secret_ tg_secret *auth = NULL, *mask = NULL;
        int r;

        /* Argon2id before any command: a PIN-less call fails here, having sent nothing. */
        r = token_auth(token, pin, &auth, &mask);
        if (r < 0)
                return r;
        r = unseal_begin(v, token, &object, &policy);
        if (r < 0)
                return r;
        /* The gate right before the Unseal: a turn among volumes covers the PIN-bearing command only. */
        r = gate_pass(gate);
        if (r < 0)
                return r;
        return unseal_end(v, token, auth, mask, &object, &policy, ret_secret);
}

/* Whether a policy session's policyDigest is the token's policy_hash (its policy is satisfied). */
static bool digest_is_policy(const TPM2B_DIGEST *digest, const tg_token *token) {
        return digest->size == token->policy_hash.size &&
               memcmp(digest->buffer, token->policy_hash.buffer, digest->size) == 0;
}

int tg_unseal_prepare(tg_verified_tpm *v, const tg_token *token, bool *ret_satisfied, tg_handle *ret_object,
                      tg_handle *ret_policy) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_handle_ tg_handle object = TG_HANDLE_NULL, policy = TG_HANDLE_NULL;
        _cleanup_free_ TPM2B_DIGEST *digest = NULL;
        bool satisfied = true;
        TSS2_RC rc;
        int r;

        r = unseal_begin(v, token, &object, &policy);
        if (r < 0)
                return r;
        if (token->pcr_mask) {
                /*
                 * Is the token's PCR policy satisfied now? The session's policyDigest after the
                 * token's policy equals the token's policy_hash exactly when it is. Read first
                 * without any session: a plain PolicyGetDigest leaves the policy the TPM built
                 * in place, so the Unseal after the PIN needs no second PolicyPCR and
                 * PolicyAuthValue (carrying the session, as encrypt or audit session, would make
                 * the TPM reset its policy, Part 4 UpdateInternalSession()). Its answer is not
                 * authenticated, and it need not be when it says "satisfied": a forged match only
                 * lets us ask, and the Unseal is still judged by the TPM against authPolicy, which
                 * it checks before the authValue (TPM_RC_POLICY_FAIL: no dictionary-attack try),
                 * as an interposer that drops the check could always make us ask.
                 */
                rc = Esys_PolicyGetDigest(esys, policy.tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &digest);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "PolicyGetDigest (is the token's PCR policy satisfied?)");
                satisfied = digest_is_policy(digest, token);
                if (!satisfied) {
                        /* A mismatch sends the user to the recovery passphrase with a message that looks
                         * legitimate: confirmed first, with the session as the encrypt session of its own
                         * PolicyGetDigest (as policy_prove()), whose response HMAC, keyed by the session
                         * key salted to the verified NULL key, makes the digest authentic. That resets
                         * the policy, which no longer matters: no Unseal follows a mismatch. */
                        free(TAKE_PTR(digest));
                        (void) Esys_TRSess_SetAttributes(esys, policy.tr,
                                                         TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_ENCRYPT, 0xff);
                        rc = Esys_PolicyGetDigest(esys, policy.tr, policy.tr, ESYS_TR_NONE, ESYS_TR_NONE, &digest);
                        /* As in policy_prove(): a refused session HMAC means the session key is not ours. */
                        if ((rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER &&
                            (tg_tpm_rc_base(rc) == TPM2_RC_BAD_AUTH || tg_tpm_rc_base(rc) == TPM2_RC_AUTH_FAIL))
                                return log_alert_rc(-TG_ERR_INTERPOSER,
                                                    "The TPM does not share the key of the policy session salted to "
                                                    "the verified NULL key (%s): the session was redirected or "
                                                    "swapped on the TPM bus. Interposer suspected; no PIN was asked "
                                                    "for.", Tss2_RC_Decode(rc));
                        if (rc != TSS2_RC_SUCCESS)
                                return tg_tpm_rc(rc, "PolicyGetDigest (is the token's PCR policy satisfied?)");
                        /* PCRs are only ever extended: a mismatch that turns into a match was forged. */
                        if (digest_is_policy(digest, token))
                                return log_alert_rc(-TG_ERR_INTERPOSER,
                                                    "The TPM's policy digest read without a session said the PCR values "
                                                    "do not satisfy the token's policy; read again over the verified "
                                                    "session, they do: the first answer was forged on the TPM bus. "
                                                    "Interposer suspected; no PIN was asked for.");
                }
        }
        *ret_satisfied = satisfied;
        *ret_object = take_handle(&object);
        *ret_policy = take_handle(&policy);
        return 0;
}

int tg_unseal_prepared(tg_verified_tpm *v, const tg_token *token, const tg_secret *pin, const tg_unseal_gate *gate,
                       tg_handle *object, tg_handle *policy, tg_secret **ret_secret) {
        _cleanup_secret_ tg_secret *auth = NULL, *mask = NULL;
        int r;

        /* The PIN's Argon2id: CPU time after the PIN, but no TPM command. */
        r = token_auth(token, pin, &auth, &mask);
        if (r >= 0)
                r = gate_pass(gate);
        if (r < 0) {
                tg_handle_release(object);
                tg_handle_release(policy);
                return r;
        }
        return unseal_end(v, token, auth, mask, object, policy, ret_secret);
}

int tg_unseal_loaded(tg_verified_tpm *v, const tg_token *token, const tg_secret *pin, tg_handle *object,
                     tg_secret **ret_secret) {
        _cleanup_handle_ tg_handle policy = { .esys = tg_vtpm_esys(v), .tr = ESYS_TR_NONE };
        _cleanup_secret_ tg_secret *auth = NULL, *mask = NULL;
        int r;

        assert(tg_vtpm_has_session(v));
        r = token_auth(token, pin, &auth, &mask);
        if (r < 0)
                return r;
        r = policy_start(v, token, &policy);
        if (r < 0)
                return r;
        r = unseal_object(v, token, auth, mask, object->tr, &policy, ret_secret);
        tg_handle_release(object);
        return r;
}

int tg_vtpm_counters(tg_verified_tpm *v, tg_tpm_counters *ret) {
        _cleanup_free_ TPMS_TIME_INFO *time_info = NULL;
        TSS2_RC rc;

        rc = Esys_ReadClock(tg_vtpm_esys(v), tg_vtpm_audit_session(v), ESYS_TR_NONE, ESYS_TR_NONE, &time_info);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "ReadClock");
        *ret = (tg_tpm_counters) { time_info->clockInfo.resetCount, time_info->clockInfo.restartCount };
        return 0;
}

int tg_token_policy_satisfied(tg_verified_tpm *v, const tg_token *token, bool *ret_satisfied) {
        tg_pcr_values values;
        TPM2B_DIGEST pcr_digest, policy;
        tg_tpm_counters counters;
        int r;

        if (token->grace) {
                r = tg_vtpm_counters(v, &counters);
                if (r < 0)
                        return r;
                if (counters.reset_count > token->reset_count_max || counters.restart_count != 0 || !token->pcr_mask) {
                        *ret_satisfied = counters.reset_count <= token->reset_count_max && counters.restart_count == 0;
                        return 0;
                }
        }

        r = tg_vtpm_pcr_read(v, token->pcr_bank, token->pcr_mask, &values);
        if (r < 0)
                return r;
        r = tg_pcr_values_digest(&values, &pcr_digest);
        if (r < 0)
                return r;
        if (token->grace)
                r = tg_policy_digest_grace(token->reset_count_max, token->pcr_bank, token->pcr_mask, &pcr_digest,
                                           &policy);
        else
                r = tg_policy_digest_compute(token->pcr_bank, token->pcr_mask, &pcr_digest, token->pin, &policy);
        if (r < 0)
                return r;
        *ret_satisfied = policy.size == token->policy_hash.size &&
                         memcmp(policy.buffer, token->policy_hash.buffer, policy.size) == 0;
        return 0;
}
