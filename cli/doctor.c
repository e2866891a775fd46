/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard doctor (see doctor.h). Each check runs with a log sink that
 * captures what the core says while checking (warnings and errors) into the
 * check's detail, so the report is the one place the user reads, and the
 * core's messages (which name the cause) are not lost. Security alerts still
 * reach the journal through log_alert_rc.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <tss2/tss2_rc.h>

#include "binding.h"
#include "crypttab.h"
#include "da.h"
#include "doctor.h"
#include "doctor-crypttab.h"
#include "ek.h"
#include "error.h"
#include "log.h"
#include "lockout.h"
#include "luks.h"
#include "marker-auth.h"
#include "nullname.h"
#include "pinned.h"
#include "policy.h"
#include "seal.h"
#include "secureboot.h"
#include "subprocess.h"
#include "tpm.h"
#include "util.h"
#include "tpmguard-config.h"

#define DOCTOR_DETAIL_MAX 4096u

/* The capture sink: warnings and errors into a buffer; the rest to stderr as usual. */
typedef struct capture {
        char buf[DOCTOR_DETAIL_MAX];
        size_t len;
} capture;

static void capture_sink(int level, const char *message, void *userdata) {
        capture *c = userdata;
        int n;

        if (level > LOG_WARNING) {
                fprintf(stderr, "tpmguard: %s\n", message);
                return;
        }
        if (c->len >= sizeof c->buf - 1)
                return;
        n = snprintf(c->buf + c->len, sizeof c->buf - c->len, "%s%s", c->len ? " " : "", message);
        if (n > 0)
                c->len += (size_t) n < sizeof c->buf - c->len ? (size_t) n : sizeof c->buf - c->len - 1;
}

typedef struct doctor {
        const tg_config *config;
        const tg_doctor_options *options;
        tg_doctor_report *report;
        capture cap;
        bool oom;
        /* What later checks need from earlier ones. */
        bool tpm_reachable;
        bool provisioned;
        tg_pinned_key pinned;
        tg_verified_tpm *vtpm;
} doctor;

static void capture_begin(doctor *d) {
        d->cap.len = 0;
        d->cap.buf[0] = '\0';
        tg_log_set_sink(capture_sink, &d->cap);
}

static void capture_end(void) {
        tg_log_set_sink(NULL, NULL);
}

static char *vformat(doctor *d, const char *format, va_list ap) _printf_(2, 0);
static char *vformat(doctor *d, const char *format, va_list ap) {
        char *s = NULL;

        if (!format)
                return NULL;
        if (vasprintf(&s, format, ap) < 0) {
                d->oom = true;
                return NULL;
        }
        return s;
}

/*
 * Adds a check. summary and next_step are printf formats; next_step's
 * arguments follow summary's. The captured log becomes the detail.
 */
static tg_doctor_check *add_check(doctor *d, const char *id, const char *subject, tg_doctor_status status,
                                  int error, const char *summary, ...) _printf_(6, 7);
static tg_doctor_check *add_check(doctor *d, const char *id, const char *subject, tg_doctor_status status,
                                  int error, const char *summary, ...) {
        tg_doctor_report *r = d->report;
        tg_doctor_check *checks, *c;
        va_list ap;

        checks = reallocarray(r->checks, r->n_checks + 1, sizeof *checks);
        if (!checks) {
                d->oom = true;
                return NULL;
        }
        r->checks = checks;
        c = &r->checks[r->n_checks++];
        *c = (tg_doctor_check) { .id = id, .status = status, .error = status == TG_DOCTOR_PROBLEM ? error : 0 };
        if (subject && !(c->subject = strdup(subject)))
                d->oom = true;
        va_start(ap, summary);
        c->summary = vformat(d, summary, ap);
        va_end(ap);
        if (d->cap.len > 0 && !(c->detail = strdup(d->cap.buf)))
                d->oom = true;
        d->cap.len = 0;
        d->cap.buf[0] = '\0';
        return c;
}

static void set_next(doctor *d, tg_doctor_check *c, const char *format, ...) _printf_(3, 4);
static void set_next(doctor *d, tg_doctor_check *c, const char *format, ...) {
        va_list ap;

        if (!c)
                return;
        free(c->next_step);
        va_start(ap, format);
        c->next_step = vformat(d, format, ap);
        va_end(ap);
}

/* The next step for an error class, where it does not depend on which check found it. */
static void set_next_for_error(doctor *d, tg_doctor_check *c, int r) {
        const char *conf = d->config->path;

        switch (-r) {
        case TG_ERR_INTERPOSER:
                set_next(d, c, "Do not enter the PIN and do not unlock with the TPM on this boot: unlock with the "
                         "recovery passphrase. If the TPM was reset on purpose (firmware update, suspend failure), "
                         "reboot and run 'tpmguard doctor' again; if this persists, inspect the machine for hardware "
                         "on the TPM bus. If the TPM was replaced or cleared on purpose, run 'tpmguard provision' again.");
                break;
        case TG_ERR_NO_NULL_NAME:
                set_next(d, c, "Boot a kernel >= 6.10 built with CONFIG_TCG_TPM2_HMAC=y, or set "
                         "'kernel_null_name = prefer' in %s to detect TPM resets from the first verification "
                         "of each boot on (the boot anchor).", conf);
                break;
        case TG_ERR_NOT_PROVISIONED:
                set_next(d, c, "Run 'tpmguard provision' on a system you trust (it checks the EK certificate against "
                         "the TPM manufacturers' CAs of ek_ca in %s, by default the ones tpmguard ships), then "
                         "rebuild the initrd.", conf);
                break;
        case TG_ERR_TPM_UNREACHABLE:
                set_next(d, c, "Check that the TPM is enabled in the firmware setup and that its device exists "
                         "(ls /dev/tpm*; the tpm_tis or tpm_crb driver is loaded), or fix 'tcti' in %s.", conf);
                break;
        case TG_ERR_AUTH_NEEDED:
                set_next(d, c, "If the endorsement hierarchy has a password, give it with --endorsement-auth-file F "
                         "('-' for stdin).");
                break;
        case TG_ERR_LOCKOUT:
                set_next(d, c, "Wait for the TPM to leave lockout (see the recovery time above) or unlock with the "
                         "recovery passphrase. Do not keep guessing the PIN: each try extends the lockout.");
                break;
        case TG_ERR_EK_CERT:
        case TG_ERR_EK_PROOF:
                set_next(d, c, "Make sure ek_ca in %s reaches the TPM manufacturer's root and intermediate CA "
                         "certificates (add missing ones to " TPMGUARD_EK_CA_LOCAL_DIR ", and check its distrust "
                         "list). If the TPM or its certificate changed, run 'tpmguard provision' again on a system "
                         "you trust; an unexplained change means the TPM is not the one provisioned.", conf);
                break;
        case TG_ERR_INVALID:
        case TG_ERR_CONFIG:
                set_next(d, c, "Correct the input named above and run 'tpmguard doctor' again.");
                break;
        default:
                set_next(d, c, "See the detail above; 'tpmguard -v doctor' shows more.");
                break;
        }
}

/* ---- Checks. ---- */

static void check_config(doctor *d) {
        char pcrs[96];

        tg_pcr_list_format(d->config->pcr_mask, pcrs, sizeof pcrs);
        add_check(d, "config", d->config->path, TG_DOCTOR_OK, 0,
                  "kernel_null_name = %s, tcti = %s, state_dir = %s, ek_ca = %s, defaults %s PCRs %s.",
                  tg_null_name_policy_to_string(d->config->kernel_null_name), d->config->tcti,
                  d->config->state_dir, d->config->ek_ca ?: "(not set)",
                  tg_pcr_bank_to_string(d->config->pcr_bank), pcrs[0] ? pcrs : "(none)");
}

/* "CONFIG_TCG_TPM2_HMAC=y", "not set" or NULL, from /boot/config-$(uname -r). */
static const char *kernel_hmac_config(const char *release, char *path, size_t path_size) {
        _cleanup_fclose_ FILE *f = NULL;
        char line[256];

        snprintf(path, path_size, "/boot/config-%s", release);
        f = fopen(path, "re");
        if (!f)
                return NULL;
        while (fgets(line, sizeof line, f)) {
                if (strncmp(line, "CONFIG_TCG_TPM2_HMAC=y", 22) == 0)
                        return "set";
                if (strncmp(line, "# CONFIG_TCG_TPM2_HMAC is not set", 33) == 0)
                        return "not set";
        }
        return "absent (kernel older than 6.10)";
}

static void check_kernel(doctor *d) {
        const char *path = d->options->null_name_path ?: d->config->null_name_path;
        char config_path[320], note[512] = "";
        struct utsname u;
        TPM2B_NAME name;
        tg_doctor_check *c;
        int r;

        if (uname(&u) == 0) {
                const char *hmac = kernel_hmac_config(u.release, config_path, sizeof config_path);
                if (hmac)
                        snprintf(note, sizeof note, " Kernel %s: CONFIG_TCG_TPM2_HMAC %s (%s).", u.release, hmac,
                                 config_path);
                else
                        snprintf(note, sizeof note, " Kernel %s.", u.release);
        }

        capture_begin(d);
        r = tg_null_name_read(path, d->config->tcti, &name);
        capture_end();
        if (r >= 0) {
                add_check(d, "kernel", path, TG_DOCTOR_OK, 0,
                          "The kernel exports the TPM null_name: a TPM reset after boot is detectable.%s", note);
                return;
        }
        if (r == -TG_ERR_NOT_FOUND) {
                if (d->config->kernel_null_name == TG_NULL_NAME_REQUIRED) {
                        c = add_check(d, "kernel", path, TG_DOCTOR_PROBLEM, -TG_ERR_NO_NULL_NAME,
                                      "The kernel exports no TPM null_name and kernel_null_name = required: "
                                      "tpmguard refuses to use the TPM.%s", note);
                        set_next_for_error(d, c, -TG_ERR_NO_NULL_NAME);
                } else {
                        /* A warning, not a problem: the boot anchor cannot see a reset before it. */
                        c = add_check(d, "kernel", path, TG_DOCTOR_WARNING, 0,
                                      "The kernel exports no TPM null_name (kernel_null_name = %s): every "
                                      "transaction is still certified, and a TPM reset (to replay PCR values) is "
                                      "detected from this boot's first verification on (the boot anchor), not "
                                      "before it.%s", tg_null_name_policy_to_string(d->config->kernel_null_name), note);
                        set_next(d, c, "For reset detection from the start of the boot, boot a kernel >= 6.10 built "
                                 "with CONFIG_TCG_TPM2_HMAC=y.");
                        /* Without it, every suspend and hibernate reads as a TPM restart: an alarm. */
                        if (access(TPMGUARD_SLEEP_HOOK, X_OK) < 0) {
                                c = add_check(d, "sleep", TPMGUARD_SLEEP_HOOK, TG_DOCTOR_WARNING, 0,
                                              "The systemd-sleep hook is missing or not executable: after every "
                                              "suspend or hibernate the boot anchor refuses the TPM (exit 3) until "
                                              "the next boot.");
                                set_next(d, c, "Reinstall the tpmguard package (or make %s executable); until "
                                         "then, reboot after a resume.", TPMGUARD_SLEEP_HOOK);
                        }
                }
                return;
        }
        c = add_check(d, "kernel", path, TG_DOCTOR_PROBLEM, r == -TG_ERR_NOMEM ? r : -TG_ERR_INVALID,
                      "The kernel's null_name cannot be read or is malformed: tpmguard refuses to use the TPM.%s",
                      note);
        set_next(d, c, "Check the file named above (it must hold 68 lowercase hex digits); if null_name_path "
                 "is set in %s, correct or remove it.", d->config->path);
}

/* Manufacturer as four ASCII characters, and firmware version. */
static void tpm_identity(ESYS_CONTEXT *esys, char *buf, size_t size) {
        TPMS_CAPABILITY_DATA *cap = NULL;
        uint32_t manufacturer = 0, fw1 = 0;

        snprintf(buf, size, "(identity unknown)");
        if (tg_tpm_get_properties(esys, TPM2_PT_MANUFACTURER, 3, &cap) < 0)
                return;
        for (UINT32 i = 0; i < cap->data.tpmProperties.count; i++) {
                const TPMS_TAGGED_PROPERTY *p = &cap->data.tpmProperties.tpmProperty[i];
                if (p->property == TPM2_PT_MANUFACTURER)
                        manufacturer = p->value;
                else if (p->property == TPM2_PT_FIRMWARE_VERSION_1)
                        fw1 = p->value;
        }
        Esys_Free(cap);
        char m[5];
        for (int i = 0; i < 4; i++) {
                unsigned char ch = (unsigned char) (manufacturer >> (24 - 8 * i));
                m[i] = ch >= 0x20 && ch < 0x7f ? (char) ch : ' ';
        }
        m[4] = '\0';
        snprintf(buf, size, "manufacturer \"%s\", firmware %u.%u", m, fw1 >> 16, fw1 & 0xffff);
}

static void check_da(doctor *d, tg_tpm *tpm) {
        tg_da_state da;
        tg_doctor_check *c;
        int r;

        capture_begin(d);
        r = tg_da_read(tpm->esys, ESYS_TR_NONE, &da);
        capture_end();
        if (r < 0) {
                c = add_check(d, "da-lockout", NULL, TG_DOCTOR_PROBLEM, r,
                              "The TPM did not report its dictionary-attack state.");
                set_next_for_error(d, c, r);
                return;
        }
        if (da.in_lockout) {
                c = add_check(d, "da-lockout", NULL, TG_DOCTOR_PROBLEM, -TG_ERR_LOCKOUT,
                              "The TPM is in dictionary-attack lockout (%u of %u failed authorizations): it refuses "
                              "every PIN. One failure is forgiven every %u s; a lockout-hierarchy reset waits %u s.",
                              da.failures, da.max_failures, da.recovery_seconds, da.lockout_recovery_seconds);
                set_next_for_error(d, c, -TG_ERR_LOCKOUT);
                return;
        }
        if (da.failures > 0) {
                c = add_check(d, "da-lockout", NULL, TG_DOCTOR_WARNING, 0,
                              "%u of %u failed authorizations are counted; at %u the TPM locks out. One failure is "
                              "forgiven every %u s.", da.failures, da.max_failures, da.max_failures,
                              da.recovery_seconds);
                set_next(d, c, "None if the failures were your own mistyped PINs; otherwise someone is guessing "
                         "PINs on this machine.");
                return;
        }
        add_check(d, "da-lockout", NULL, TG_DOCTOR_OK, 0,
                  "No failed authorizations counted (lockout after %u; one forgiven every %u s).",
                  da.max_failures, da.recovery_seconds);
}

/*
 * The lockout hierarchy and the DA parameters: the PIN is the last line of
 * defence against the attacks no verification sees (forged firmware PCR
 * extends, a reset through the TPM's reset line from the attacker's own OS),
 * and it holds only if nobody else can reset the DA counter and the TPM
 * allows few guesses. Read over the unverified TPM: a report, not a decision.
 */
static void check_lockout(doctor *d, tg_tpm *tpm) {
        _cleanup_secret_ tg_secret *stored = NULL;
        tg_da_state st;
        tg_doctor_check *c;
        bool held;
        int r;

        capture_begin(d);
        r = tg_da_read(tpm->esys, ESYS_TR_NONE, &st);
        capture_end();
        if (r < 0) {
                c = add_check(d, "lockout", NULL, TG_DOCTOR_PROBLEM, r, "The TPM did not report its lockout state.");
                set_next_for_error(d, c, r);
                return;
        }
        capture_begin(d);
        r = tg_lockout_auth_load(d->config->state_dir, &stored);
        capture_end();
        held = r >= 0;
        if (r < 0 && r != -TG_ERR_NOT_FOUND) {
                c = add_check(d, "lockout", d->config->state_dir, TG_DOCTOR_PROBLEM, r,
                              "The stored lockout password cannot be used.");
                set_next(d, c, "Fix the file named above (root-only, mode 0400), then run 'tpmguard lockout setup'.");
        } else if (!st.lockout_auth_set) {
                c = add_check(d, "lockout", NULL, TG_DOCTOR_PROBLEM, -TG_ERR_NOT_PROVISIONED,
                              "The TPM's lockout hierarchy has no password: anyone, from any OS on this machine, "
                              "can reset the dictionary-attack counter and guess PINs without limit.");
                set_next(d, c, "Run 'tpmguard lockout setup' (or 'tpmguard provision'): it sets a random lockout "
                         "password, stored root-only in %s.", d->config->state_dir);
        } else if (!held)
                add_check(d, "lockout", NULL, TG_DOCTOR_WARNING, 0,
                          "The TPM's lockout hierarchy has a password that tpmguard does not hold (set by another "
                          "owner): 'tpmguard lockout-reset' cannot reset the DA counter after a lockout.");
        else
                add_check(d, "lockout", d->config->state_dir, TG_DOCTOR_OK, 0,
                          "The TPM's lockout hierarchy has a password, held by tpmguard.");

        if (tg_lockout_params_weaker(&st, d->config)) {
                c = add_check(d, "da-parameters", NULL, TG_DOCTOR_PROBLEM, -TG_ERR_NOT_PROVISIONED,
                              "The TPM's DA parameters allow fast PIN guessing: %u tries, one forgiven every %u s%s, "
                              "%u s after a wrong lockout password (configured: %u, %u s, %u s).",
                              st.max_failures, st.recovery_seconds, st.recovery_seconds == 0 ? " (DA protection off)" : "",
                              st.lockout_recovery_seconds, d->config->da_max_tries, d->config->da_recovery_time,
                              d->config->da_lockout_recovery);
                if (!st.lockout_auth_set || held)
                        set_next(d, c, "Run 'tpmguard lockout setup'.");
                else
                        set_next(d, c, "Run 'tpmguard lockout setup --lockout-auth-file F' with the lockout password "
                                 "of the TPM's other owner, or ask that owner to set them.");
        } else
                add_check(d, "da-parameters", NULL, TG_DOCTOR_OK, 0,
                          "DA parameters: lockout after %u failures, one forgiven every %u s, %u s after a wrong "
                          "lockout password.", st.max_failures, st.recovery_seconds, st.lockout_recovery_seconds);
}

static void check_provisioning(doctor *d) {
        _cleanup_free_ char *name_hex = NULL, *path = NULL;
        tg_doctor_check *c;
        int r;

        if (tg_asprintf(&path, "%s/%s", d->config->state_dir, TG_PINNED_FILE_NAME) < 0) {
                d->oom = true;
                return;
        }
        capture_begin(d);
        r = tg_pinned_key_load(d->config->state_dir, &d->pinned);
        capture_end();
        if (r < 0) {
                if (r != -TG_ERR_NOMEM)
                        r = -TG_ERR_NOT_PROVISIONED;
                c = add_check(d, "provisioning", path, TG_DOCTOR_PROBLEM, r,
                              "No usable pinned EK signing key: this machine is not provisioned, so tpmguard cannot "
                              "verify the TPM and will not use it.");
                set_next_for_error(d, c, r);
                return;
        }
        d->provisioned = true;
        if (tg_hex_encode(d->pinned.name.name, d->pinned.name.size, &name_hex) < 0) {
                d->oom = true;
                return;
        }
        if (d->pinned.tofu) {
                /* Not a failure (the owner chose it), but never silent: nothing proves the pin. */
                c = add_check(d, "provisioning", path, TG_DOCTOR_WARNING, 0,
                              "EK signing key %s pinned %s on TRUST ON FIRST USE: the TPM had no EK "
                              "certificate, so nothing proves the key is a genuine TPM's. Changes "
                              "since then are detected; whatever answered at provisioning is "
                              "trusted.", name_hex,
                              d->pinned.provisioned_at[0] ? d->pinned.provisioned_at : "(time unknown)");
                set_next(d, c, "If the TPM is discrete (a bus to tap), get its EK certificate (tpm2_getekcertificate, "
                         "docs/hardware.md) and run 'tpmguard provision --ek-cert FILE' to replace the pin with a "
                         "proven one.");
                return;
        }
        add_check(d, "provisioning", path, TG_DOCTOR_OK, 0,
                  "EK signing key %s pinned %s, proven against the %s EK certificate (issuer %s).",
                  name_hex, d->pinned.provisioned_at[0] ? d->pinned.provisioned_at : "(time unknown)",
                  d->pinned.ek_template[0] ? d->pinned.ek_template : "(unknown)",
                  d->pinned.ek_cert_issuer[0] ? d->pinned.ek_cert_issuer : "(unknown)");
}

/*
 * The pending-marker key (lifecycle/marker-auth.c), read as every lifecycle
 * command reads it: a key other users can read or write would let them
 * forge the markers that decide which keyslot a resumed operation destroys,
 * so those commands refuse it; doctor says so before one of them does.
 * Absent is fine: the first lifecycle command makes it.
 */
static void check_marker_key(doctor *d) {
        _cleanup_secret_ tg_secret *key = NULL;
        _cleanup_free_ char *path = NULL;
        tg_doctor_check *c;
        int r;

        if (tg_asprintf(&path, "%s/%s", d->config->state_dir, TG_MARKER_KEY_FILE_NAME) < 0) {
                d->oom = true;
                return;
        }
        capture_begin(d);
        r = tg_marker_key_load(d->config->state_dir, false, &key);
        capture_end();
        if (r == -TG_ERR_NOT_FOUND) {
                add_check(d, "marker-key", path, TG_DOCTOR_OK, 0,
                          "No pending-marker key yet: the first lifecycle command creates it.");
                return;
        }
        if (r < 0) {
                c = add_check(d, "marker-key", path, TG_DOCTOR_PROBLEM, r,
                              "The pending-marker key is refused: reseal, rotate, change-pin, passwd, recovery-key, "
                              "remove and cleanup will not run, and an interrupted one cannot be finished.");
                set_next(d, c, "Fix what the detail names (root-owned, mode 0600, in a directory only root writes), "
                         "or remove the file if no lifecycle command is pending ('tpmguard status' shows pending "
                         "markers).");
                return;
        }
        add_check(d, "marker-key", path, TG_DOCTOR_OK, 0, "The pending-marker key is root-only.");
}

static void check_ek_certificate(doctor *d, tg_tpm *tpm) {
        _cleanup_(X509_freep) X509 *cert = NULL;
        _cleanup_(tg_ek_anchor_done) tg_ek_anchor anchor = {};
        _cleanup_free_ char *hex = NULL, *anchor_hex = NULL;
        unsigned char *der = NULL;
        uint8_t digest[32];
        unsigned int digest_len = 0;
        tg_doctor_check *c;
        char nv[16];
        int len, r;

        if (!d->provisioned) {
                add_check(d, "ek-certificate", NULL, TG_DOCTOR_SKIPPED, 0, "Not checked: not provisioned.");
                return;
        }
        if (d->pinned.tofu) {
                add_check(d, "ek-certificate", NULL, TG_DOCTOR_SKIPPED, 0,
                          "Not checked: the EK signing key was pinned on first use, without an EK certificate.");
                return;
        }
        if (d->pinned.ek_nv_index == 0) {
                if (d->pinned.ek_anchor_vendor[0])
                        add_check(d, "ek-certificate", NULL, TG_DOCTOR_SKIPPED, 0,
                                  "Not re-checked: the EK certificate was given as a file at provisioning, not read "
                                  "from the TPM. At provisioning it chained to the %s root CA (SHA-256 %s).",
                                  d->pinned.ek_anchor_vendor, d->pinned.ek_anchor_sha256);
                else
                        add_check(d, "ek-certificate", NULL, TG_DOCTOR_SKIPPED, 0,
                                  "Not re-checked: the EK certificate was given as a file at provisioning, not read "
                                  "from the TPM.");
                return;
        }
        snprintf(nv, sizeof nv, "NV 0x%08x", d->pinned.ek_nv_index);
        if (!d->config->ek_ca) {
                c = add_check(d, "ek-certificate", nv, TG_DOCTOR_SKIPPED, 0,
                              "Not re-checked: no ek_ca is configured (the chain was verified at provisioning).");
                set_next(d, c, "To have doctor re-check the chain, set ek_ca in %s.", d->config->path);
                return;
        }

        capture_begin(d);
        r = tg_ek_cert_read_nv(tpm, d->pinned.ek_nv_index, &cert);
        if (r >= 0) {
                len = i2d_X509(cert, &der);
                if (len <= 0 || EVP_Digest(der, (size_t) len, digest, &digest_len, EVP_sha256(), NULL) != 1)
                        r = log_error_rc(-TG_ERR_EK_CERT, "The EK certificate cannot be re-encoded.");
                OPENSSL_free(der);
        }
        if (r >= 0 && tg_hex_encode(digest, digest_len, &hex) < 0)
                r = -TG_ERR_NOMEM;
        if (r >= 0 && strcasecmp(hex, d->pinned.ek_cert_sha256) != 0)
                r = log_error_rc(-TG_ERR_EK_CERT,
                                 "The EK certificate in the TPM (SHA-256 %s) is not the one proven at provisioning "
                                 "(%s).", hex, d->pinned.ek_cert_sha256);
        if (r >= 0) {
                _cleanup_(tg_ek_trust_freep) tg_ek_trust *trust = NULL;
                r = tg_ek_trust_load(d->config->ek_ca, NULL, &trust);
                if (r >= 0)
                        r = tg_ek_trust_add_nv_chain(trust, tpm);
                if (r >= 0)
                        r = tg_ek_cert_verify_anchor(trust, cert, &anchor);
                if (r >= 0 && tg_hex_encode(anchor.sha256, sizeof anchor.sha256, &anchor_hex) < 0)
                        r = -TG_ERR_NOMEM;
        }
        capture_end();
        if (r < 0) {
                if (r != -TG_ERR_NOMEM && r != -TG_ERR_TPM_UNREACHABLE)
                        r = -TG_ERR_EK_CERT;
                c = add_check(d, "ek-certificate", nv, TG_DOCTOR_PROBLEM, r,
                              "The EK certificate does not check out against %s.", d->config->ek_ca);
                set_next_for_error(d, c, r);
                return;
        }
        add_check(d, "ek-certificate", nv, TG_DOCTOR_OK, 0,
                  "The EK certificate is the one proven at provisioning and chains to the %s root CA \"%s\" "
                  "(SHA-256 %s) of %s.", anchor.vendor, anchor.subject, anchor_hex, d->config->ek_ca);
}

/* enroll and the unlock need room for a few transient objects and sessions (no resource manager keeps
 * them for us on /dev/tpm0): a full TPM fails them with an error far from its cause. */
static void check_tpm_memory(doctor *d, tg_tpm *tpm) {
        _cleanup_free_ TPMS_CAPABILITY_DATA *cap = NULL, *handles = NULL;
        uint32_t objects = UINT32_MAX, sessions = UINT32_MAX, loaded = 0;
        TPMI_YES_NO more;
        tg_doctor_check *c;

        if (tg_tpm_get_properties(tpm->esys, TPM2_PT_HR_LOADED_AVAIL, 4, &cap) < 0)
                return;
        for (UINT32 i = 0; i < cap->data.tpmProperties.count; i++) {
                const TPMS_TAGGED_PROPERTY *p = &cap->data.tpmProperties.tpmProperty[i];
                if (p->property == TPM2_PT_HR_TRANSIENT_AVAIL)
                        objects = p->value;
                else if (p->property == TPM2_PT_HR_LOADED_AVAIL)
                        sessions = p->value;
        }
        if (Esys_GetCapability(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_HANDLES,
                               /* tss2's TPM2_TRANSIENT_FIRST shifts a signed int into its sign bit. */
                               (TPM2_HANDLE) TPM2_HT_TRANSIENT << TPM2_HR_SHIFT, TPM2_MAX_CAP_HANDLES, &more,
                               &handles) == TSS2_RC_SUCCESS &&
            handles->capability == TPM2_CAP_HANDLES)
                loaded = handles->data.handles.count;
        if (objects != 0 && sessions != 0)
                return;
        c = add_check(d, "tpm-memory", d->config->tcti, TG_DOCTOR_PROBLEM, -TG_ERR_TPM,
                      "The TPM has no room for %s (%" PRIu32 " transient objects loaded): enroll, unlocking and "
                      "every verification fail until it is freed.", objects == 0 ? "another loaded object"
                      : "another session", loaded);
        set_next(d, c, "Without a resource manager, an earlier run that ended early or another program left them "
                 "loaded: flush them ('tpm2_flushcontext -t' and 'tpm2_flushcontext -s') or reboot, or use the "
                 "kernel's resource manager (tcti = device:/dev/tpmrm0 in %s).", d->config->path);
}

static void check_tpm(doctor *d) {
        _cleanup_tpm_ tg_tpm *tpm = NULL;
        TPMS_CAPABILITY_DATA *cap = NULL;
        TPMI_YES_NO more;
        tg_doctor_check *c;
        char identity[96];
        TSS2_RC rc;
        int r;

        capture_begin(d);
        r = tg_tpm_open_config(d->config, &tpm);
        if (r >= 0) {
                /* Esys_Initialize alone does not talk to the TPM: ask it something. */
                rc = Esys_GetCapability(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                        TPM2_CAP_TPM_PROPERTIES, TPM2_PT_FAMILY_INDICATOR, 1, &more, &cap);
                if (rc != TSS2_RC_SUCCESS)
                        r = tg_tpm_rc(rc, "GetCapability");
                Esys_Free(cap);
        }
        capture_end();
        if (r < 0) {
                c = add_check(d, "tpm", d->config->tcti, TG_DOCTOR_PROBLEM, r, "The TPM does not answer.");
                set_next_for_error(d, c, r);
                check_provisioning(d);
                check_marker_key(d);
                return;
        }
        d->tpm_reachable = true;
        tpm_identity(tpm->esys, identity, sizeof identity);
        add_check(d, "tpm", d->config->tcti, TG_DOCTOR_OK, 0, "A TPM 2.0 answers: %s.", identity);

        check_tpm_memory(d, tpm);
        check_da(d, tpm);
        check_lockout(d, tpm);
        check_provisioning(d);
        check_marker_key(d);
        check_ek_certificate(d, tpm);
        /* tpm is closed here: verification opens its own connection (an emulator takes one at a time). */
}

static void check_verification(doctor *d) {
        tg_verify_options o = {
                .null_name_path = d->options->null_name_path,
                .endorsement_auth = d->options->endorsement_auth,
        };
        tg_verify_report rep = {};
        tg_doctor_check *c;
        int r;

        if (!d->tpm_reachable || !d->provisioned) {
                add_check(d, "verification", NULL, TG_DOCTOR_SKIPPED, 0,
                          "Not run: %s. Fix that first.",
                          !d->tpm_reachable ? "the TPM does not answer" : "not provisioned");
                return;
        }
        tg_progress("Verifying the TPM (certifying its NULL key with the pinned EK signing key)...");
        capture_begin(d);
        r = tg_verify(d->config, &o, &rep, &d->vtpm);
        capture_end();
        tg_progress_done();
        if (r < 0) {
                c = add_check(d, "verification", NULL, TG_DOCTOR_PROBLEM, r,
                              "Verification failed: %s. No secret is sent to this TPM.", tg_err_str(r));
                set_next_for_error(d, c, r);
                return;
        }
        add_check(d, "verification", NULL, rep.anchor != TG_ANCHOR_NONE ? TG_DOCTOR_OK : TG_DOCTOR_WARNING, 0,
                  "TPM verified: its NULL key %s by the pinned EK signing key (TPM resets since manufacture: "
                  "%u). Reset anchor: %s: %s.",
                  rep.kernel_null_name_present ? "equals the kernel's null_name and is certified" : "is certified",
                  rep.reset_count, tg_anchor_kind_to_string(rep.anchor), tg_anchor_detects(rep.anchor));
}

/* ---- Volumes. ---- */

static void check_token(doctor *d, struct crypt_device *cd, const char *device, int id) {
        char subject[512], pcrs[96];
        const char *json = NULL;
        tg_token token;
        tg_doctor_check *c;
        crypt_keyslot_info ks;
        bool satisfied;
        int r;

        snprintf(subject, sizeof subject, "%s token %d", device, id);
        capture_begin(d);
        r = crypt_token_json_get(cd, id, &json);
        if (r < 0)
                r = log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot read token %d: %s", id, strerror(-r));
        else
                r = tg_token_from_string(json, &token);
        capture_end();
        if (r < 0) {
                c = add_check(d, "volume", subject, TG_DOCTOR_PROBLEM, r == -TG_ERR_NOMEM ? r : -TG_ERR_TOKEN,
                              "The tpmguard token is malformed: it cannot unlock this volume.");
                set_next(d, c, "Unlock with the recovery passphrase, remove the token (cryptsetup token remove "
                         "--token-id %d %s) and enroll again.", id, device);
                return;
        }
        tg_pcr_list_format(token.pcr_mask, pcrs, sizeof pcrs);
        {
                char why[256];
                /* The header is attacker-writable: a token weaker than the
                 * configuration may have been edited (docs/design.md §9.1). */
                if (tg_token_policy_weaker(&token, d->config, why, sizeof why)) {
                        c = add_check(d, "volume", subject, TG_DOCTOR_WARNING, 0,
                                      "The token's policy is weaker than the configuration: %s. It may have been "
                                      "edited in the LUKS2 header.", why);
                        set_next(d, c, "If you did not make it so, unlock with the recovery passphrase and seal again "
                                 "under the configured policy: tpmguard reseal --unlock-key-file F %s", device);
                }
        }
        if (tg_token_pin_edited(&token)) {
                /* Not a PCR change (the policy check below would say so): an edited header. */
                c = add_check(d, "volume", subject, TG_DOCTOR_PROBLEM, -TG_ERR_TOKEN,
                              "The token's \"pin\" field does not match the sealed object: the header was edited "
                              "(\"pin\" is false, but the object was sealed with a PIN). It cannot unlock.");
                set_next(d, c, "Find out who wrote the LUKS2 header. Unlock with the recovery passphrase; 'tpmguard "
                         "reseal %s' (it asks for that passphrase) writes a token from tpmguard.conf, never from "
                         "the header.", device);
                explicit_bzero(&token, sizeof token);
                return;
        }
        if ((token.pcr_mask & (1u << 7)) && tg_secure_boot_weakness()) {
                c = add_check(d, "secure-boot", subject, TG_DOCTOR_WARNING, 0, "The token binds PCR 7, but %s: PCR 7 "
                              "then binds almost nothing (any boot loader and kernel give the same value), and only "
                              "the PIN protects the volume.", tg_secure_boot_weakness());
                set_next(d, c, "Turn Secure Boot on in the firmware setup (out of setup mode), boot, then 'tpmguard "
                         "reseal %s' (docs/hardware.md, \"Which PCRs to seal to\").", device);
        }
        ks = token.keyslot >= 0 ? crypt_keyslot_status(cd, token.keyslot) : CRYPT_SLOT_INVALID;
        if (ks != CRYPT_SLOT_ACTIVE && ks != CRYPT_SLOT_ACTIVE_LAST) {
                c = add_check(d, "volume", subject, TG_DOCTOR_PROBLEM, -TG_ERR_TOKEN,
                              "The token points at keyslot %d, which is not an active keyslot: it cannot unlock "
                              "this volume.", token.keyslot);
                set_next(d, c, "Remove the token (cryptsetup token remove --token-id %d %s) and enroll again.",
                         id, device);
                explicit_bzero(&token, sizeof token);
                return;
        }
        if (!d->vtpm) {
                add_check(d, "volume", subject, TG_DOCTOR_SKIPPED, 0,
                          "Keyslot %d, %s PCRs %s, %s. PCR policy not checked: the TPM is not verified.",
                          token.keyslot, tg_pcr_bank_to_string(token.pcr_bank), pcrs[0] ? pcrs : "(none)",
                          token.pin ? "PIN" : "no PIN");
                explicit_bzero(&token, sizeof token);
                return;
        }
        capture_begin(d);
        r = tg_token_policy_satisfied(d->vtpm, &token, &satisfied);
        capture_end();
        if (r < 0) {
                c = add_check(d, "volume", subject, TG_DOCTOR_PROBLEM, r,
                              "Keyslot %d, %s PCRs %s: the current PCR values could not be read.",
                              token.keyslot, tg_pcr_bank_to_string(token.pcr_bank), pcrs[0] ? pcrs : "(none)");
                set_next_for_error(d, c, r);
        } else if (!satisfied) {
                c = add_check(d, "volume", subject, TG_DOCTOR_PROBLEM, -TG_ERR_PCR_MISMATCH,
                              "Keyslot %d, %s PCRs %s, %s: the current PCR values do not satisfy the sealed policy, "
                              "so the TPM will refuse to unseal.", token.keyslot,
                              tg_pcr_bank_to_string(token.pcr_bank), pcrs[0] ? pcrs : "(none)",
                              token.pin ? "PIN" : "no PIN");
                set_next(d, c, "If the firmware, boot loader or Secure Boot keys were updated on purpose, unlock "
                         "with the recovery passphrase and reseal to the new values ('tpmguard reseal %s', which asks for "
                         "that passphrase); if "
                         "nothing was updated, the boot chain changed unexpectedly: investigate first.", device);
        } else
                add_check(d, "volume", subject, TG_DOCTOR_OK, 0,
                          "Keyslot %d, %s PCRs %s, %s: the current PCR values satisfy the sealed policy.",
                          token.keyslot, tg_pcr_bank_to_string(token.pcr_bank), pcrs[0] ? pcrs : "(none)",
                          token.pin ? "PIN" : "no PIN");
        explicit_bzero(&token, sizeof token);
}

static void check_volume(doctor *d, const char *device, bool from_crypttab) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        tg_doctor_check *c;
        int n_tokens = 0, r;

        capture_begin(d);
        r = tg_luks_open(device, &cd);
        capture_end();
        if (r < 0) {
                if (from_crypttab && r == -TG_ERR_INVALID) {
                        add_check(d, "volume", device, TG_DOCTOR_SKIPPED, 0,
                                  "Listed in crypttab but not a LUKS2 volume: tpmguard does not apply.");
                        return;
                }
                c = add_check(d, "volume", device, TG_DOCTOR_PROBLEM, r,
                              r == -TG_ERR_INVALID ? "Not a LUKS2 volume." : "The volume cannot be opened.");
                set_next(d, c, "Check the device name%s.", from_crypttab ? " in /etc/crypttab" : "");
                return;
        }
        for (int id = 0; id < tg_luks_tokens_max(); id++) {
                if (!tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE))
                        continue;
                n_tokens++;
                check_token(d, cd, device, id);
        }
        if (n_tokens > 0) {
                bool exists = false, listed = false;
                /* Decoy volumes are refused against the bindings (tokens/binding.h). */
                r = tg_volume_binding_present(d->config->state_dir, crypt_get_uuid(cd) ?: "", &exists, &listed);
                if (r < 0) {
                        c = add_check(d, "volume", device, TG_DOCTOR_PROBLEM, -TG_ERR_VOLUME_BINDING,
                                      "The volume bindings in %s cannot be read: the TPM will not unlock any volume.",
                                      d->config->state_dir);
                        set_next(d, c, "Unlock with the recovery passphrase, remove %s/%s and run 'tpmguard bind %s'.",
                                 d->config->state_dir, TG_BINDINGS_FILE_NAME, device);
                } else if (!exists) {
                        c = add_check(d, "volume", device, TG_DOCTOR_WARNING, 0,
                                      "No volume is bound on this machine: a decoy volume with this volume's UUID "
                                      "would unlock without the PIN.");
                        set_next(d, c, "tpmguard bind %s, then rebuild the initrd.", device);
                } else if (!listed) {
                        c = add_check(d, "volume", device, TG_DOCTOR_PROBLEM, -TG_ERR_VOLUME_BINDING,
                                      "The volume is not bound on this machine: its token will be refused at unlock.");
                        set_next(d, c, "If this is your volume: tpmguard bind %s, then rebuild the initrd.", device);
                } else
                        add_check(d, "volume", device, TG_DOCTOR_OK, 0, "Bound to this machine (decoy volumes refused).");
        }
        if (n_tokens == 0) {
                c = add_check(d, "volume", device, TG_DOCTOR_WARNING, 0,
                              "No tpmguard token: this volume is not unlocked with the TPM.");
                set_next(d, c, "To unlock it with the TPM: tpmguard enroll %s", device);
        }
}

/* crypttab options that turn tpmguard off or that the initrd ignores (doctor-crypttab.c). */
static void check_crypttab_options(doctor *d, const char *crypttab) {
        tg_crypttab_finding *f = NULL;
        size_t n = 0;

        if (tg_crypttab_option_findings(crypttab, d->config->pin_tries, &f, &n) < 0)
                d->oom = true;
        for (size_t i = 0; i < n; i++)
                set_next(d, add_check(d, "crypttab-options", f[i].subject, f[i].problem ? TG_DOCTOR_PROBLEM : TG_DOCTOR_WARNING,
                                      -TG_ERR_INVALID, "%s", f[i].summary), "%s", f[i].next_step);
        tg_crypttab_findings_free(f, n);
}

static void check_volumes(doctor *d) {
        const char *crypttab = d->options->crypttab ?: "/etc/crypttab";
        char **devices = NULL;
        size_t n = 0;
        int r;

        if (d->options->n_devices > 0) {
                for (size_t i = 0; i < d->options->n_devices; i++)
                        check_volume(d, d->options->devices[i], false);
                return;
        }
        capture_begin(d);
        r = tg_crypttab_devices(crypttab, &devices, &n);
        capture_end();
        if (r < 0) {
                tg_doctor_check *c = add_check(d, "volume", crypttab, TG_DOCTOR_PROBLEM, r,
                                               "The volumes cannot be listed from crypttab.");
                set_next(d, c, "Correct the line named above, or name the volumes: tpmguard doctor DEVICE...");
                return;
        }
        if (n == 0) {
                add_check(d, "volume", crypttab, TG_DOCTOR_SKIPPED, 0,
                          "No volumes listed in crypttab; name them to check them: tpmguard doctor DEVICE...");
                return;
        }
        for (size_t i = 0; i < n; i++)
                check_volume(d, devices[i], true);
        tg_strv_free(devices, n);
        check_crypttab_options(d, crypttab);
}

/* ---- Initrd. ---- */

/* Does any line of the listing end in suffix (after an optional "./" or "/")? */
static bool listing_has(const char *listing, const char *suffix) {
        size_t sl = strlen(suffix);

        for (const char *l = listing; l && *l;) {
                const char *end = strchr(l, '\n');
                size_t ll = end ? (size_t) (end - l) : strlen(l);
                if (ll >= sl && memcmp(l + ll - sl, suffix, sl) == 0 &&
                    (ll == sl || l[ll - sl - 1] == '/' || l[ll - sl - 1] == ' '))
                        return true;
                l = end ? end + 1 : NULL;
        }
        return false;
}

/* Appends what to a NUL-terminated list in buf; a full buffer keeps what fits. */
static void append_missing(char *buf, size_t size, const char *what) {
        size_t len = strnlen(buf, size);

        if (len + 1 < size)
                (void) snprintf(buf + len, size - len, "%s", what);
}

static void check_initrd(doctor *d) {
        _cleanup_free_ char *listing = NULL, *default_path = NULL, *pinned_rel = NULL, *bindings_path = NULL, *bindings_rel = NULL;
        char tool[512], missing[512] = "", other[512] = "";
        const char *path = d->options->initrd;
        struct utsname u;
        struct stat st;
        tg_doctor_check *c;
        int status, r;

        if (path && path[0] == '\0')
                return;
        if (!path) {
                if (uname(&u) < 0 || tg_asprintf(&default_path, "/boot/initrd.img-%s", u.release) < 0) {
                        add_check(d, "initrd", NULL, TG_DOCTOR_SKIPPED, 0, "Not checked: no kernel release.");
                        return;
                }
                if (stat(default_path, &st) < 0) {
                        free(default_path);
                        default_path = NULL;
                        if (tg_asprintf(&default_path, "/boot/initramfs-%s.img", u.release) < 0) {
                                d->oom = true;
                                return;
                        }
                }
                path = default_path;
        }
        if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) {
                add_check(d, "initrd", path, TG_DOCTOR_SKIPPED, 0,
                          "Not checked: no initrd there (name one with --initrd FILE).");
                return;
        }
        if (!tg_find_program("lsinitramfs", tool, sizeof tool) && !tg_find_program("lsinitrd", tool, sizeof tool)) {
                add_check(d, "initrd", path, TG_DOCTOR_SKIPPED, 0,
                          "Not checked: neither lsinitramfs (initramfs-tools) nor lsinitrd (dracut) is installed.");
                return;
        }
        tg_progress("Listing the initrd %s...", path);
        capture_begin(d);
        r = tg_run_capture((char *const[]) { tool, (char *) path, NULL }, &listing, &status);
        capture_end();
        tg_progress_done();
        if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || listing[0] == '\0') {
                add_check(d, "initrd", path, TG_DOCTOR_SKIPPED, 0, "Not checked: %s could not list it.", tool);
                return;
        }

        /* What the initrd needs to unlock with tpmguard: the plugin, the CLI (boot verification), the pin. */
        if (!listing_has(listing, "cryptsetup/libcryptsetup-token-tpmguard.so"))
                append_missing(missing, sizeof missing, " the token plugin,");
        if (!listing_has(listing, "sbin/tpmguard") && !listing_has(listing, "bin/tpmguard"))
                append_missing(missing, sizeof missing, " the tpmguard command,");
        if (d->provisioned) {
                const char *sd = d->config->state_dir;
                while (*sd == '/')
                        sd++;
                if (tg_asprintf(&pinned_rel, "%s/%s", sd, TG_PINNED_FILE_NAME) < 0) {
                        d->oom = true;
                        return;
                }
                if (!listing_has(listing, pinned_rel))
                        append_missing(missing, sizeof missing, " the pinned EK signing key,");
                /* Bindings on this system but not in the initrd: the initrd would unlock a decoy
                 * volume with a warning instead of refusing it (tokens/binding.h). */
                if (tg_asprintf(&bindings_path, "%s/%s", d->config->state_dir, TG_BINDINGS_FILE_NAME) < 0 ||
                    tg_asprintf(&bindings_rel, "%s/%s", sd, TG_BINDINGS_FILE_NAME) < 0) {
                        d->oom = true;
                        return;
                }
                if (access(bindings_path, F_OK) == 0 && !listing_has(listing, bindings_rel))
                        append_missing(missing, sizeof missing, " the volume bindings (decoys would not be refused),");
        }
        /* The initrd sits unencrypted in /boot: the lockout password would let anyone with the disk reset
         * the DA lockout and guess PINs without limit, the marker key forge pending markers. Only root
         * state that the boot does not need is ever written there (an install_items or a copied
         * /etc/tpmguard would put it in). */
        {
                static const char *const secrets[] = { TG_LOCKOUT_FILE_NAME, TG_MARKER_KEY_FILE_NAME };
                const char *sd = d->config->state_dir;

                while (*sd == '/')
                        sd++;
                for (size_t i = 0; i < ELEMENTSOF(secrets); i++) {
                        _cleanup_free_ char *rel = NULL;

                        if (tg_asprintf(&rel, "%s/%s", sd, secrets[i]) < 0) {
                                d->oom = true;
                                return;
                        }
                        if (!listing_has(listing, rel))
                                continue;
                        c = add_check(d, "initrd", path, TG_DOCTOR_PROBLEM, -TG_ERR_CONFIG,
                                      "The initrd, which is not encrypted, carries /%s: anyone who reads /boot has it.",
                                      rel);
                        set_next(d, c, "Remove it from the initrd configuration (dracut install_items, "
                                 "initramfs-tools hooks), rebuild the initrd, then change the secret: "
                                 "'tpmguard lockout setup' for the lockout password; for the marker key, remove it "
                                 "when no lifecycle command is pending.");
                        return;
                }
        }
        if (missing[0]) {
                missing[strlen(missing) - 1] = '\0';
                c = add_check(d, "initrd", path, TG_DOCTOR_PROBLEM, -TG_ERR_NOT_FOUND,
                              "The initrd lacks%s: volumes needed at boot will not unlock with the TPM.", missing);
                set_next(d, c, "Rebuild the initrd (update-initramfs -u, or dracut -f) with the tpmguard package "
                         "installed%s.", d->provisioned ? "" : ", after 'tpmguard provision'");
                return;
        }
        add_check(d, "initrd", path, TG_DOCTOR_OK, 0, "Holds the token plugin, the tpmguard command%s.",
                  d->provisioned ? " and the pinned EK signing key" : "");

        /*
         * Decoy volumes past the binding: the volume binding is checked by tpmguard's plugin only.
         * systemd-cryptsetup (no tpm2-device=) tries every token type, the next one after ours
         * refused a volume, so an initrd that also carries another plugin that unseals from this
         * TPM unlocks a decoy (the victim's UUID, a systemd-tpm2 token of its own sealed to this
         * TPM's PCR values from the attacker's OS, no PIN) with no PIN and no binding check, and
         * boots the attacker's root in the good PCR state. clevis' tpm2 pin in the initrd does the
         * same through clevis' own unlocker.
         */
        if (listing_has(listing, "cryptsetup/libcryptsetup-token-systemd-tpm2.so"))
                append_missing(other, sizeof other, " systemd's TPM2 token plugin (libcryptsetup-token-systemd-tpm2.so),");
        if (listing_has(listing, "bin/clevis-decrypt-tpm2"))
                append_missing(other, sizeof other, " clevis' tpm2 pin (clevis-decrypt-tpm2),");
        if (other[0]) {
                other[strlen(other) - 1] = '\0';
                c = add_check(d, "initrd-decoy", path, TG_DOCTOR_PROBLEM, -TG_ERR_VOLUME_BINDING,
                              "The initrd also holds%s: a decoy volume (this volume's UUID, a token of that kind "
                              "sealed to this TPM's PCR values, no PIN) would be unlocked by it, with no PIN and "
                              "without tpmguard's volume binding check.", other);
                set_next(d, c, "If no volume needs it at boot: remove tpm2-device= from /etc/crypttab, leave the "
                         "module out (dracut: omit_dracutmodules+=\" tpm2-tss clevis \"; initramfs-tools: remove "
                         "clevis-initramfs), and rebuild the initrd.");
        }
}

int tg_doctor_run(const tg_config *config, const tg_doctor_options *options, tg_doctor_report **ret) {
        static const tg_doctor_options no_options = {};
        _cleanup_doctor_report_ tg_doctor_report *report = calloc(1, sizeof *report);
        doctor d = { .config = config, .options = options ?: &no_options };

        if (!report)
                return -TG_ERR_NOMEM;
        report->config_path = strdup(config->path ?: "(defaults)");
        if (!report->config_path)
                return -TG_ERR_NOMEM;
        d.report = report;

        check_config(&d);
        check_kernel(&d);
        tg_progress("Checking the TPM...");
        check_tpm(&d);
        tg_progress_done();
        check_verification(&d);
        check_volumes(&d);
        if (d.options->update_check && d.options->update_check(config, d.options, d.report) < 0)
                d.oom = true;
        tg_verified_tpm_free(TAKE_PTR(d.vtpm));
        check_initrd(&d);
        explicit_bzero(&d.pinned, sizeof d.pinned);

        if (d.oom)
                return -TG_ERR_NOMEM;
        *ret = TAKE_PTR(report);
        return 0;
}

/* ---- Output. ---- */
