/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The TPM commands: provision, verify, lockout setup|export, lockout-reset,
 * sleep pre|post.
 * Thin, like the rest of the command line: they turn the trust floor's
 * results into output.
 */
#include <errno.h>
#include <openssl/evp.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd-tpm.h"
#include "cmdline.h"
#include "boot-anchor.h"
#include "error.h"
#include "json-util.h"
#include "lockout.h"
#include "log.h"
#include "nullname.h"
#include "pinned.h"
#include "prompt.h"
#include "provision.h"
#include "seal.h"
#include "tpm.h"
#include "tpmguard-config.h"
#include "util.h"
#include "verify.h"

/* --lockout-auth-file: tpmguard's 64-hex-digit format, or another owner's password byte for byte. */
static int read_lockout_auth(const cli *c, tg_secret **ret) {
        _cleanup_secret_ tg_secret *text = NULL;
        int r;

        *ret = NULL;
        if (!c->lockout_auth_file)
                return 0;
        r = tg_pin_read(c->lockout_auth_file, "Lockout hierarchy password: ", false, &text);
        if (r < 0)
                return r;
        return tg_lockout_auth_from_text(text, ret);
}

/*
 * What lockout setup and lockout-reset start with: the endorsement password (when a file names
 * one) for the verification, the lockout password, and the verified TPM.
 */
static int lockout_begin(const cli *c, tg_config *config, tg_secret **ret_lauth, tg_verified_tpm **ret_v) {
        _cleanup_secret_ tg_secret *eauth = NULL, *lauth = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        int r;

        r = cli_read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        r = read_lockout_auth(c, &lauth);
        if (r < 0)
                return r;
        r = tg_verify(config, &(tg_verify_options) { .endorsement_auth = eauth }, NULL, &v);
        if (r < 0)
                return r;
        *ret_lauth = TAKE_PTR(lauth);
        *ret_v = TAKE_PTR(v);
        return 0;
}

static const char *lockout_ownership_string(tg_lockout_ownership o) {
        switch (o) {
        case TG_LOCKOUT_TAKEN: return "taken";
        case TG_LOCKOUT_HELD: return "held";
        case TG_LOCKOUT_FOREIGN: return "foreign";
        }
        return "unknown";
}

static json_object *lockout_state_json(const tg_da_state *st) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "lockout_auth_set", json_object_new_boolean(st->lockout_auth_set));
        json_object_object_add(o, "in_lockout", json_object_new_boolean(st->in_lockout));
        json_object_object_add(o, "failures", json_object_new_int64(st->failures));
        json_object_object_add(o, "max_tries", json_object_new_int64(st->max_failures));
        json_object_object_add(o, "recovery_time", json_object_new_int64(st->recovery_seconds));
        json_object_object_add(o, "lockout_recovery", json_object_new_int64(st->lockout_recovery_seconds));
        return o;
}

/*
 * --lockout-auth-copy F: the new lockout password also goes to a file the user named, created
 * (never overwritten: a name that exists may be someone's link) root-only.
 */
static int lockout_auth_copy(const char *path, const char *hex) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        size_t len = strlen(hex);

        if (fd < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot create %s for the lockout password: %m. Nothing is lost: "
                                    "'tpmguard lockout export' prints it.", path);
        if (write(fd, hex, len) != (ssize_t) len || write(fd, "\n", 1) != 1 || fsync(fd) < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot write the lockout password to %s: %m.", path);
        return 0;
}

/* What provision and lockout setup did to the lockout hierarchy, for people. */
static int lockout_result_print(const tg_lockout_result *res, const char *state_dir, const char *copy_path) {
        _cleanup_secret_ tg_secret *auth = NULL;
        _cleanup_free_ char *hex = NULL;
        int r;

        switch (res->ownership) {
        case TG_LOCKOUT_TAKEN:
                /*
                 * Printed once, for the owner's recovery records: the only other copy is root's file.
                 * Only to a terminal: standard output of an automated run ends up in logs, which
                 * outlive the machine's secrets. Otherwise the file named by --lockout-auth-copy.
                 */
                r = tg_lockout_auth_load(state_dir, &auth);
                if (r < 0)
                        return r;
                r = tg_hex_encode(auth->data, auth->size, &hex);
                if (r < 0)
                        return r;
                if (copy_path)
                        r = lockout_auth_copy(copy_path, hex);
                if (isatty(STDOUT_FILENO))
                        printf("  took the TPM's lockout hierarchy (it had no password); its new password is in %s/%s:\n"
                               "    %s\n"
                               "  Keep it with your recovery records ('tpmguard lockout export' prints it again).\n",
                               state_dir, TG_LOCKOUT_FILE_NAME, hex);
                else
                        printf("  took the TPM's lockout hierarchy (it had no password); its new password is in %s/%s%s%s\n"
                               "  (not shown: standard output is not a terminal). Keep a copy with your recovery\n"
                               "  records: 'tpmguard lockout export' on a terminal prints it.\n",
                               state_dir, TG_LOCKOUT_FILE_NAME, copy_path && r >= 0 ? " and " : "",
                               copy_path && r >= 0 ? copy_path : "");
                explicit_bzero(hex, strlen(hex));
                if (r < 0)
                        return r;
                break;
        case TG_LOCKOUT_HELD:
                printf("  lockout hierarchy: tpmguard holds its password (%s/%s)\n", state_dir, TG_LOCKOUT_FILE_NAME);
                break;
        case TG_LOCKOUT_FOREIGN:
                printf("  lockout hierarchy: its password was set by another owner and is unknown to tpmguard; the\n"
                       "  DA parameters were left as they are (give --lockout-auth-file F to set them)\n");
                break;
        }
        if (res->params_set)
                printf("  DA parameters: lockout after %u failures, one forgiven every %u s, %u s after a wrong "
                       "lockout password\n", res->state.max_failures, res->state.recovery_seconds,
                       res->state.lockout_recovery_seconds);
        return 0;
}

static json_object *lockout_result_json(const tg_lockout_result *res) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "ownership", json_object_new_string(lockout_ownership_string(res->ownership)));
        json_object_object_add(o, "params_set", json_object_new_boolean(res->params_set));
        json_object_object_add(o, "state", lockout_state_json(&res->state));
        return o;
}

int cmd_provision(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *eauth = NULL, *lauth = NULL, *oauth = NULL;
        tg_lockout_result lockout = {};
        tg_pinned_key pinned;
        tg_provision_options o = {
                .ek_cert_file = c->ek_cert,
                .ek_ca = c->ek_ca,
                .ek_intermediates = c->ek_intermediates,
                .output_dir = c->output_dir,
                .trust_on_first_use = c->trust_on_first_use,
        };
        _cleanup_free_ char *name_hex = NULL;
        int r;

        r = cli_read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o.endorsement_auth = eauth;
        r = cli_read_optional_secret(c->owner_auth_file, "Owner hierarchy password: ", &oauth);
        if (r < 0)
                return r;
        o.owner_auth = oauth;
        r = read_lockout_auth(c, &lauth);
        if (r < 0)
                return r;
        o.lockout_auth = lauth;

        pinned = (tg_pinned_key) {};
        r = tg_provision(config, &o, &pinned, &lockout);
        if (r < 0 && pinned.name.size > 0)
                return log_error_rc(r, "Provisioning did not finish: %s. The EK signing key is pinned; run "
                                    "'tpmguard lockout setup' once the cause above is fixed.", tg_err_str(r));
        if (r < 0)
                return log_error_rc(r, "Provisioning failed: %s. Nothing was pinned; fix the cause above and run "
                                    "'tpmguard provision' again.", tg_err_str(r));

        r = tg_hex_encode(pinned.name.name, pinned.name.size, &name_hex);
        if (r < 0)
                return r;
        if (c->json) {
                _cleanup_(json_object_putp) json_object *o_json = json_object_new_object();
                if (!o_json)
                        return -TG_ERR_NOMEM;
                json_object_object_add(o_json, "result", json_object_new_string("provisioned"));
                json_object_object_add(o_json, "ek_signing_key_name", json_object_new_string(name_hex));
                json_object_object_add(o_json, "ek_trust", json_object_new_string(tg_pinned_trust(&pinned)));
                json_object_object_add(o_json, "ek_template", json_object_new_string(pinned.ek_template));
                json_object_object_add(o_json, "ek_nv_index", json_object_new_int64(pinned.ek_nv_index));
                /* 0: not persisted; every verification re-creates the key. */
                json_object_object_add(o_json, "ek_signing_key_handle", json_object_new_int64(pinned.persistent_handle));
                json_object_object_add(o_json, "ek_certificate_sha256", json_object_new_string(pinned.ek_cert_sha256));
                json_object_object_add(o_json, "ek_certificate_issuer", json_object_new_string(pinned.ek_cert_issuer));
                json_object_object_add(o_json, "ek_anchor_vendor", json_object_new_string(pinned.ek_anchor_vendor));
                json_object_object_add(o_json, "ek_anchor_sha256", json_object_new_string(pinned.ek_anchor_sha256));
                json_object_object_add(o_json, "state_dir",
                                       json_object_new_string(c->output_dir ?: config->state_dir));
                /* No password here: JSON ends up in logs. 'tpmguard lockout export' prints it. */
                json_object_object_add(o_json, "lockout", lockout_result_json(&lockout));
                cli_json_print(o_json);
        } else if (pinned.tofu) {
                printf("Provisioned ON TRUST: EK signing key %s\n"
                       "  pinned on first use, NOT proven: this TPM has no EK certificate, so nothing shows\n"
                       "  that the key belongs to a genuine TPM rather than to whatever answered just now\n"
                       "  pinned in %s/%s (\"ek_trust\": \"%s\"; verify, status and doctor say so)\n",
                       name_hex, c->output_dir ?: config->state_dir, TG_PINNED_FILE_NAME, TG_PINNED_TRUST_TOFU);
                r = lockout_result_print(&lockout, c->output_dir ?: config->state_dir, c->lockout_auth_copy);
                if (r < 0)
                        return r;
        } else {
                char persisted[96];

                if (pinned.persistent_handle)
                        snprintf(persisted, sizeof persisted, "persisted at 0x%08" PRIx32 ": verifications read it there",
                                 pinned.persistent_handle);
                else
                        snprintf(persisted, sizeof persisted, "not persisted (see above): every verification re-creates it");
                printf("Provisioned. EK signing key %s\n"
                       "  proven against EK certificate %s (%s, issuer %s)\n"
                       "  anchored by the %s root CA with SHA-256 %s\n"
                       "  pinned in %s/%s\n"
                       "  %s\n"
                       "Compare the EK certificate's SHA-256 fingerprint above with a second, independent reading\n"
                       "(docs/hardware.md): a relay between this system and its TPM would show another one.\n",
                       name_hex, pinned.ek_cert_sha256, pinned.ek_template, pinned.ek_cert_issuer,
                       pinned.ek_anchor_vendor, pinned.ek_anchor_sha256,
                       c->output_dir ?: config->state_dir, TG_PINNED_FILE_NAME,
                       persisted);
                r = lockout_result_print(&lockout, c->output_dir ?: config->state_dir, c->lockout_auth_copy);
                if (r < 0)
                        return r;
        }
        if (!c->json) {
                TPM2B_NAME kernel_name;

                /* The one place provisioning says it, with the reason (verify.c says it at debug level only). */
                if (tg_null_name_read(config->null_name_path, config->tcti, &kernel_name) == -TG_ERR_NOT_FOUND)
                        printf("The kernel exports no TPM null_name (it needs Linux >= 6.10 built with "
                               "CONFIG_TCG_TPM2_HMAC=y): at every boot a TPM reset is detected from the first "
                               "verification on (the boot anchor), not before it, and suspend and hibernate need "
                               "the sleep hook %s.\n", TPMGUARD_SLEEP_HOOK);
        }
        return 0;
}

/* tpmguard lockout setup|export */
int cmd_lockout(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *lauth = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        tg_lockout_result res;
        int r;

        if (c->n_args != 1 || (strcmp(c->args[0], "setup") != 0 && strcmp(c->args[0], "export") != 0))
                return log_error_rc(-TG_ERR_INVALID, "Usage: tpmguard lockout setup|export");

        if (strcmp(c->args[0], "export") == 0) {
                _cleanup_free_ char *hex = NULL;

                if (c->lockout_auth_file || c->endorsement_auth_file || c->lockout_auth_copy)
                        return log_error_rc(-TG_ERR_INVALID, "lockout export takes no options but --json.");
                r = tg_lockout_auth_load(config->state_dir, &lauth);
                if (r == -TG_ERR_NOT_FOUND)
                        return log_error_rc(r, "tpmguard holds no lockout password (%s/%s): the TPM's lockout "
                                            "hierarchy was never taken by 'tpmguard provision'.", config->state_dir,
                                            TG_LOCKOUT_FILE_NAME);
                if (r < 0)
                        return r;
                r = tg_hex_encode(lauth->data, lauth->size, &hex);
                if (r < 0)
                        return r;
                if (c->json) {
                        /* Printed here, not through json-c, whose copies of the string could not be wiped;
                         * hex digits need no escaping. */
                        printf("{\n  \"command\": \"lockout export\",\n  \"lockout_password_hex\": \"%s\"\n}\n", hex);
                        cli_json_printed_set();
                } else
                        printf("%s\n", hex);
                explicit_bzero(hex, strlen(hex));
                return 0;
        }

        r = lockout_begin(c, config, &lauth, &v);
        if (r < 0)
                return r;
        r = tg_lockout_setup(v, config, config->state_dir, lauth, &res);
        if (r < 0)
                return r;
        if (c->json) {
                _cleanup_(json_object_putp) json_object *o = lockout_result_json(&res);
                if (!o)
                        return -TG_ERR_NOMEM;
                cli_json_print(o);
                return 0;
        }
        printf("Lockout hierarchy set up.\n");
        return lockout_result_print(&res, config->state_dir, c->lockout_auth_copy);
}

int cmd_lockout_reset(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *lauth = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        tg_da_state st;
        int r;

        r = lockout_begin(c, config, &lauth, &v);
        if (r < 0)
                return r;
        r = tg_lockout_reset(v, config->state_dir, lauth, &st);
        if (r < 0)
                return log_error_rc(r, "The DA counter was not reset: %s.", tg_err_str(r));
        if (c->json) {
                _cleanup_(json_object_putp) json_object *o = lockout_state_json(&st);
                if (!o)
                        return -TG_ERR_NOMEM;
                cli_json_print(o);
        } else
                printf("DA counter reset: %u of %u failures, %s.\n", st.failures, st.max_failures,
                       st.in_lockout ? "still in lockout" : "not in lockout");
        return 0;
}

static json_object *verify_report_json(const tg_config *config, const tg_verify_report *rep, int r) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        _cleanup_free_ char *null_hex = NULL, *signer_hex = NULL;

        if (!o)
                return NULL;
        if (rep->null_name.size > 0 && tg_hex_encode(rep->null_name.name, rep->null_name.size, &null_hex) < 0)
                return NULL;
        if (rep->ek_signing_key_name.size > 0 &&
            tg_hex_encode(rep->ek_signing_key_name.name, rep->ek_signing_key_name.size, &signer_hex) < 0)
                return NULL;
        json_object_object_add(o, "verdict", json_object_new_string(r >= 0 ? "verified" : tg_err_id(r)));
        json_object_object_add(o, "null_name", null_hex ? json_object_new_string(null_hex) : NULL);
        json_object_object_add(o, "ek_signing_key_name", signer_hex ? json_object_new_string(signer_hex) : NULL);
        json_object_object_add(o, "ek_trust", json_object_new_string(rep->ek_tofu ? TG_PINNED_TRUST_TOFU
                                                                                  : TG_PINNED_TRUST_CERT));
        json_object_object_add(o, "kernel_null_name",
                               json_object_new_string(rep->kernel_null_name_present ? "present" : "absent"));
        json_object_object_add(o, "policy", json_object_new_string(tg_null_name_policy_to_string(config->kernel_null_name)));
        json_object_object_add(o, "anchor", json_object_new_string(tg_anchor_kind_to_string(rep->anchor)));
        json_object_object_add(o, "cached", json_object_new_boolean(r >= 0 && rep->cached));
        json_object_object_add(o, "anchor_detects", json_object_new_string(tg_anchor_detects(rep->anchor)));
        if (rep->anchor == TG_ANCHOR_BOOT)
                json_object_object_add(o, "anchor_recorded", json_object_new_boolean(rep->anchor_recorded));
        if (r >= 0) {
                json_object_object_add(o, "clock", json_object_new_int64((int64_t) rep->clock));
                json_object_object_add(o, "reset_count", json_object_new_int64(rep->reset_count));
                json_object_object_add(o, "restart_count", json_object_new_int64(rep->restart_count));
                json_object_object_add(o, "safe", json_object_new_boolean(rep->safe));
        }
        json_object_object_add(o, "message", json_object_new_string(r >= 0 ? "TPM verified" : tg_err_str(r)));
        return TAKE_PTR(o);
}

static int record_verify_result(const tg_config *config, const char *text) {
        _cleanup_free_ char *path = NULL;

        if (mkdir(config->cache_dir, 0700) < 0 && errno != EEXIST)
                return log_error_rc(-TG_ERR_IO, "The TPM verification itself is done, but its record cannot be "
                                    "written: cannot create %s: %m (cache_dir in tpmguard.conf; run as root).",
                                    config->cache_dir);
        if (tg_asprintf(&path, "%s/boot-verify.json", config->cache_dir) < 0)
                return -TG_ERR_NOMEM;
        if (tg_write_file_atomic(path, text, strlen(text), 0600) < 0)
                return log_error_rc(-TG_ERR_IO, "The TPM verification itself is done, but its record %s cannot be "
                                    "written (cache_dir in tpmguard.conf; run as root).", path);
        return 0;
}

int cmd_verify(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *eauth = NULL;
        _cleanup_(json_object_putp) json_object *json = NULL;
        tg_verify_report report = {};
        /* Always a full verification; --record also leaves this boot's cache for the unlocks. */
        tg_verify_options o = { .null_name_path = c->null_name, .use_cache = c->record };
        const char *text;
        int r, q;

        r = cli_read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o.endorsement_auth = eauth;

        r = tg_verify(config, &o, &report, NULL);

        json = verify_report_json(config, &report, r);
        if (!json)
                return -TG_ERR_NOMEM;
        text = tg_json_pretty(json);
        if (c->record) {
                q = record_verify_result(config, text);
                if (q < 0 && r >= 0) {
                        /* Not a verification failure: say what failed. */
                        if (c->json)
                                printf("%s\n", text);
                        else
                                printf("TPM verified, but the record in %s was not written (see above).\n", config->cache_dir);
                        return q;
                }
        }
        if (c->json)
                cli_json_print(json);
        else if (r >= 0)
                printf("TPM verified: NULL key %s by the pinned EK signing key (reset anchor: %s: %s).\n",
                       report.kernel_null_name_present ? "matches the kernel's null_name and is certified"
                                                       : "is certified",
                       tg_anchor_kind_to_string(report.anchor), tg_anchor_detects(report.anchor));
        if (r >= 0 && report.ek_tofu)
                log_warning("The pinned EK signing key was pinned on first use (no EK certificate): nothing "
                            "proves it is a genuine TPM's. Changes since provisioning are detected; what "
                            "answered at provisioning is trusted (docs/security.md).");
        if (r < 0)
                log_error("Verification failed: %s. 'tpmguard doctor' shows the whole state and what to do.",
                          tg_err_str(r));
        return r;
}

/*
 * tpmguard sleep pre|post KIND: what the system-sleep hook runs (design
 * §2.8, "Sleep"). Threat model: an attacker who restarts the TPM and
 * replays its PCRs after this boot's anchor was recorded. A suspend moves
 * the same counter, so the hook announces it: "pre" records, next to the
 * counters a full verification has just authenticated, the sleep and a
 * digest of the PCRs (audited PCR_Read in the session salted to the
 * certified NULL key, so an interposer can fake neither); "post" certifies
 * the NULL key again and re-anchors only when the counters moved exactly as
 * that sleep moves them and, after a suspend, the PCRs are unchanged.
 * With the kernel's null_name nothing is anchored (a Resume keeps the NULL
 * seed): nothing to do.
 */
/*
 * What a sleep must keep: the TG_SLEEP_PCR_MASK PCRs of every active bank, as one SHA-256 over,
 * per bank, its algorithm ID, the PCRs read and the digest of their values (tg_pcr_values_digest()).
 * Every bank, not only SHA-256: a token may be sealed to any of them, and a Restart that replays
 * SHA-256 exactly but leaves another bank otherwise would pass a SHA-256-only comparison (the
 * red-team gap in docs/design.md §2.8). The bank list comes from a GetCapability in the audit
 * session (its response HMAC makes it the TPM's), and goes into the digest too: a bank hidden
 * or added after the sleep changes it, so the comparison fails closed.
 */
static int sleep_pcr_digest(tg_verified_tpm *v, TPM2B_DIGEST *ret) {
        static const uint16_t banks[] = { TPM2_ALG_SHA1, TPM2_ALG_SHA256, TPM2_ALG_SHA384, TPM2_ALG_SHA512 };
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        _cleanup_free_ TPMS_CAPABILITY_DATA *cap = NULL;
        TPMI_YES_NO more = TPM2_NO;
        unsigned int len = 0, n_banks = 0;
        TSS2_RC rc;
        int r;

        if (!md)
                return -TG_ERR_NOMEM;
        rc = Esys_GetCapability(tg_vtpm_esys(v), tg_vtpm_audit_session(v), ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_PCRS,
                                0, 1, &more, &cap);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "GetCapability (PCR banks)");
        if (cap->capability != TPM2_CAP_PCRS || cap->data.assignedPCR.count > TPM2_NUM_PCR_BANKS)
                return log_error_rc(-TG_ERR_TPM, "GetCapability returned a malformed PCR bank list.");
        if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1)
                return -TG_ERR_IO;
        for (size_t b = 0; b < ELEMENTSOF(banks); b++)
                for (UINT32 i = 0; i < cap->data.assignedPCR.count; i++) {
                        const TPMS_PCR_SELECTION *sel = &cap->data.assignedPCR.pcrSelections[i];
                        uint8_t id[2] = { banks[b] >> 8, banks[b] & 0xff }, mask_bytes[4];
                        uint32_t mask = 0;
                        tg_pcr_values values;
                        TPM2B_DIGEST d;

                        if (sel->hash != banks[b])
                                continue;
                        for (unsigned k = 0; k < 3 && k < sel->sizeofSelect; k++)
                                mask |= (uint32_t) sel->pcrSelect[k] << (8 * k);
                        mask &= TG_SLEEP_PCR_MASK;
                        if (mask == 0)
                                continue;
                        r = tg_vtpm_pcr_read(v, banks[b], mask, &values);
                        if (r < 0)
                                return r;
                        r = tg_pcr_values_digest(&values, &d);
                        if (r < 0)
                                return r;
                        mask_bytes[0] = mask >> 24, mask_bytes[1] = mask >> 16, mask_bytes[2] = mask >> 8;
                        mask_bytes[3] = mask & 0xff;
                        if (EVP_DigestUpdate(md, id, sizeof id) != 1 ||
                            EVP_DigestUpdate(md, mask_bytes, sizeof mask_bytes) != 1 ||
                            EVP_DigestUpdate(md, d.buffer, d.size) != 1)
                                return -TG_ERR_IO;
                        n_banks++;
                }
        if (n_banks == 0)
                return log_error_rc(-TG_ERR_TPM, "The TPM reports no active SHA-1, SHA-256, SHA-384 or SHA-512 PCR bank.");
        if (EVP_DigestFinal_ex(md, ret->buffer, &len) != 1)
                return -TG_ERR_IO;
        ret->size = (UINT16) len;
        return 0;
}

int cmd_sleep(const cli *c, tg_config *config) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        tg_verify_report report = {};
        tg_verify_options o = {};
        TPM2B_DIGEST digest;
        tg_sleep_kind kind;
        bool post, reanchored = false;
        int r;

        if (c->n_args != 2 || (strcmp(c->args[0], "pre") != 0 && strcmp(c->args[0], "post") != 0))
                return log_error_rc(-TG_ERR_INVALID, "Usage: tpmguard sleep pre|post KIND (what systemd-sleep passes "
                                    "its hooks, see %s).", TPMGUARD_SLEEP_HOOK);
        if (tg_sleep_kind_from_string(c->args[1], &kind) < 0)
                return log_error_rc(-TG_ERR_INVALID, "Unknown sleep type '%s': tpmguard knows suspend, hibernate, "
                                    "hybrid-sleep and suspend-then-hibernate. After this sleep the TPM will be "
                                    "refused until the next boot.", c->args[1]);
        post = strcmp(c->args[0], "post") == 0;
        o.accept_resume = post;

        r = tg_verify(config, &o, &report, &v);
        if (r < 0)
                return log_error_rc(r, "The TPM did not verify %s the %s: %s. 'tpmguard doctor' shows the whole "
                                    "state and what to do.", post ? "after" : "before", tg_sleep_kind_to_string(kind),
                                    tg_err_str(r));
        if (report.kernel_null_name_present) {
                printf("Nothing to announce: the kernel's null_name detects a TPM reset, and a %s keeps the NULL "
                       "key.\n", tg_sleep_kind_to_string(kind));
                return 0;
        }
        r = sleep_pcr_digest(v, &digest);
        if (r < 0)
                return log_error_rc(r, "Cannot read the TPM's PCRs %s the %s.", post ? "after" : "before",
                                    tg_sleep_kind_to_string(kind));
        if (!post) {
                r = tg_anchor_sleep_begin(config->cache_dir, &report.null_name, report.reset_count,
                                          report.restart_count, kind, &digest);
                if (r < 0)
                        return r;
                printf("%s announced to the boot anchor (restartCount %" PRIu32 ").\n",
                       tg_sleep_kind_to_string(kind), report.restart_count);
                return 0;
        }
        r = tg_anchor_resume(config->cache_dir, &report.null_name, report.reset_count, report.restart_count,
                             &digest, &reanchored);
        if (r < 0)
                return r;
        if (reanchored)
                printf("Resumed from %s: the TPM's counters moved as that sleep moves them%s; boot anchor renewed "
                       "(resetCount %" PRIu32 ", restartCount %" PRIu32 ").\n", tg_sleep_kind_to_string(kind),
                       kind == TG_SLEEP_SUSPEND || kind == TG_SLEEP_HYBRID ? " and its PCRs are unchanged" : "",
                       report.reset_count, report.restart_count);
        else
                printf("The TPM's counters did not move: the %s did not reach the TPM; boot anchor unchanged.\n",
                       tg_sleep_kind_to_string(kind));
        return 0;
}
