/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard totp enroll|show|reseal|remove: genuine before typed (lifecycle/totp.h).
 * The enrolment prints the otpauth:// URI (and, on a terminal, its QR code):
 * the only output of the secret, written with write(2) from wiped memory,
 * never logged. 'show --console' is what the initrd runs before the PIN
 * prompt: the code, or why there is none, on the console and through plymouth.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd-totp.h"
#include "cmdline.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "prompt.h"
#include "qr.h"
#include "subprocess.h"
#include "totp.h"
#include "util.h"
#include "verify.h"

#define CONSOLE "/dev/console"

/* The TOTP's output (the URI, the code) to fd: all of it, or an error that says so. */
static int write_out(int fd, const void *data, size_t size) {
        return tg_write_all(fd, data, size) < 0 ? log_error_rc(-TG_ERR_IO, "Cannot write the TOTP output: %m") : 0;
}

static int totp_enroll(const cli *c, const tg_config *config) {
        _cleanup_secret_ tg_secret *owner = NULL, *eauth = NULL, *uri = NULL;
        char host[256] = "", label[TG_TOTP_LABEL_MAX + 1];
        bool tty = isatty(STDOUT_FILENO);
        tg_seal_params p = { .pcr_bank = config->pcr_bank, .pcr_mask = config->pcr_mask,
                             .allow_unextended = c->allow_unextended || config->allow_unextended_pcrs };
        char pcrs[96];
        int r;

        /* The same PCR choice as a token's: tpmguard.conf's pcr_bank and pcrs, or --pcr-bank and --pcrs. */
        if (c->pcr_bank && tg_pcr_bank_from_string(c->pcr_bank, &p.pcr_bank) < 0)
                return log_error_rc(-TG_ERR_INVALID, "--pcr-bank: unknown bank \"%s\" (sha1, sha256, sha384, sha512).", c->pcr_bank);
        if (c->pcrs && tg_pcr_list_parse(c->pcrs, &p.pcr_mask) < 0)
                return log_error_rc(-TG_ERR_INVALID, "--pcrs: \"%s\" is not a list like 7 or 0,2,7 (PCRs 0..23).", c->pcrs);
        if (c->owner_auth_file) {
                r = tg_pin_read(c->owner_auth_file, "Owner hierarchy password: ", false, &owner);
                if (r < 0)
                        return r;
                p.owner_auth = owner;
        }
        r = cli_read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        if (gethostname(host, sizeof host - 1) < 0 || host[0] == '\0')
                (void) snprintf(host, sizeof host, "localhost");
        (void) snprintf(label, sizeof label, "%s:%s", TG_TOTP_ISSUER, host);

        r = tg_totp_enroll(config, &p, eauth, label, &uri);
        if (r < 0)
                return r;
        tg_pcr_list_format(p.pcr_mask, pcrs, sizeof pcrs);
        /* What a matching code then proves, said where the choice is made: without a PCR that
         * measures the initrd, an initrd edited on the unencrypted /boot shows the right code. */
        if (!(p.pcr_mask & ((1u << 9) | (1u << 11))))
                log_warning("The TOTP is sealed to PCR %s, which does not measure the kernel or the initrd: an initrd "
                            "edited on the unencrypted /boot, or a live system signed under the same Secure Boot keys, "
                            "shows the right code too. For a code that proves the boot chain, enroll with --pcrs 7,9 "
                            "(GRUB measures the kernel and initrd into PCR 9) or 7,11 (a unified kernel image), and "
                            "enroll it again after each kernel or initrd update (docs/security.md, \"Genuine before "
                            "typed\").", pcrs);
        fflush(stdout);
        if (tty) {
                char head[512];

                (void) snprintf(head, sizeof head,
                                "A TOTP secret is sealed to %s PCR %s, without a PIN: this TPM shows its code only while "
                                "these PCRs hold the values they hold now.\nAdd it to your authenticator app now (it is "
                                "shown only now and stored nowhere readable):\n\n    ",
                                tg_pcr_bank_to_string(p.pcr_bank), pcrs);
                r = write_out(STDOUT_FILENO, head, strlen(head));
        }
        /* Without a terminal, the URI alone (for scripts). */
        if (r >= 0)
                r = write_out(STDOUT_FILENO, uri->data, uri->size);
        if (r >= 0)
                r = write_out(STDOUT_FILENO, tty ? "\n\n" : "\n", tty ? 2 : 1);
        if (r >= 0 && tty)
                r = tg_show_qr(uri);
        if (r < 0)
                return r;
        if (tty)
                printf("Rebuild the initrd (update-initramfs -u, or dracut -f) so that it shows the code before the PIN "
                       "prompt; compare it with the app's, and type the PIN only when they match.\n");
        return 0;
}

/* "123 456", "1234 5678": as authenticator apps group the digits. */
static void code_format(const tg_totp_code *code, char *buf, size_t size) {
        char digits[16];
        unsigned half = code->digits / 2;

        (void) snprintf(digits, sizeof digits, "%0*" PRIu32, (int) code->digits, code->code);
        (void) snprintf(buf, size, "%.*s %s", (int) half, digits, digits + half);
        explicit_bzero(digits, sizeof digits);
}

static void utc_format(uint64_t t, bool date, char *buf, size_t size) {
        time_t tt = (time_t) t;
        struct tm tm;

        if (!gmtime_r(&tt, &tm) || strftime(buf, size, date ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &tm) == 0)
                (void) snprintf(buf, size, "%" PRIu64, t);
}

/*
 * The console (a framed block) and plymouth, which hides the console while a splash runs.
 * TPMGUARD_CONSOLE names another file instead of /dev/console, for tests (as the boot script's;
 * ignored in set-user-ID programs, like TPMGUARD_CONFIG).
 */
static void console_show(const char *line1, const char *line2) {
        _cleanup_close_ int fd = open(secure_getenv("TPMGUARD_CONSOLE") ?: CONSOLE,
                                      O_WRONLY | O_APPEND | O_NOCTTY | O_CLOEXEC);
        _cleanup_free_ char *block = NULL, *text = NULL, *out = NULL;
        char plymouth[256];
        int status = 0;

        if (fd >= 0 && tg_asprintf(&block, "\n*********************************************************************\n"
                                   "** %s\n** %s\n"
                                   "*********************************************************************\n\n",
                                   line1, line2) >= 0)
                (void) write_out(fd, block, strlen(block));
        if (!tg_find_program("plymouth", plymouth, sizeof plymouth))
                return;
        if (tg_run_capture((char *[]) { plymouth, (char *) "--ping", NULL }, &out, &status) < 0 || status != 0)
                return;
        free(TAKE_PTR(out));
        if (tg_asprintf(&text, "--text=%s %s", line1, line2) < 0)
                return;
        (void) tg_run_capture((char *[]) { plymouth, (char *) "display-message", text, NULL }, &out, &status);
}

static const char *refusal_reason(int r) {
        switch (-r) {
        case TG_ERR_PCR_MISMATCH: return "the boot chain is not the one the TOTP was enrolled under (PCR mismatch)";
        case TG_ERR_INTERPOSER: return "the TPM failed verification (interposer or TPM reset suspected)";
        case TG_ERR_NOT_PROVISIONED: return "tpmguard is not provisioned in this initrd";
        case TG_ERR_TPM_UNREACHABLE: return "no TPM answers";
        default: return tg_err_str(r);
        }
}

/* Whether the TOTP file notes an update with a grace (a hostile file: it changes only which refusal is shown). */
static bool update_pending(const tg_config *config) {
        _cleanup_free_ char *path = NULL;
        tg_totp_file t;
        bool pending;

        if (tg_totp_path(config, &path) < 0 || tg_totp_load(path, &t) < 0)
                return false;
        pending = t.update_pending[0] != '\0';
        explicit_bzero(&t, sizeof t);
        return pending;
}

static int totp_show(const cli *c, const tg_config *config) {
        _cleanup_json_ json_object *o = NULL;
        uint64_t now = (uint64_t) time(NULL);
        char code[24], from[32], to[32], pcrs[96], line1[256];
        tg_totp_code result;
        int r;

        r = tg_totp_show(config, now, &result);
        if (r == -TG_ERR_NOT_FOUND && c->console) {
                /* Nothing enrolled: nothing to show, and nothing failed (the initrd calls this on every boot). */
                log_info("No TOTP enrolled: nothing to show.");
                return 0;
        }
        if (r == -TG_ERR_NOT_FOUND)
                return log_error_rc(r, "No TOTP is enrolled: 'tpmguard totp enroll' makes one.");
        if (r < 0) {
                if (c->console && r == -TG_ERR_PCR_MISMATCH && update_pending(config)) {
                        /* An update with a grace was prepared: a grace carries no TOTP (lifecycle/totp.h). */
                        console_show("tpmguard: NO TOTP CODE: the boot chain changed, and an update with a grace is "
                                     "pending (a grace carries no TOTP code).",
                                     "Type your PIN only if you installed that update yourself; then 'tpmguard update "
                                     "finish' and enroll the TOTP again.");
                } else if (c->console) {
                        (void) snprintf(line1, sizeof line1, "tpmguard WARNING: NO TOTP CODE: %s.", refusal_reason(r));
                        console_show(line1, "This machine cannot prove itself genuine: do not type your PIN unless "
                                     "you know why.");
                }
                return r;
        }
        code_format(&result, code, sizeof code);
        utc_format(result.window_start, true, from, sizeof from);
        utc_format(result.window_start + result.period, false, to, sizeof to);
        tg_pcr_list_format(result.pcr_mask, pcrs, sizeof pcrs);
        if (c->json) {
                char digits[16];

                (void) snprintf(digits, sizeof digits, "%0*" PRIu32, (int) result.digits, result.code);
                o = json_object_new_object();
                if (!o)
                        return -TG_ERR_NOMEM;
                json_object_object_add(o, "code", json_object_new_string(digits));
                json_object_object_add(o, "window_start", json_object_new_int64((int64_t) result.window_start));
                json_object_object_add(o, "window_end", json_object_new_int64((int64_t) (result.window_start + result.period)));
                json_object_object_add(o, "period", json_object_new_int((int) result.period));
                json_object_object_add(o, "digits", json_object_new_int((int) result.digits));
                json_object_object_add(o, "algorithm", json_object_new_string(tg_totp_alg_to_string(result.alg)));
                json_object_object_add(o, "pcr_bank", json_object_new_string(tg_pcr_bank_to_string(result.pcr_bank)));
                json_object_object_add(o, "pcrs", json_object_new_string(pcrs));
                cli_json_print(o);
                explicit_bzero(digits, sizeof digits);
        } else if (!c->console)
                printf("%s  for %s to %s UTC (this machine's clock)\n", code, from, to);
        /* --console: the console and the splash only, not standard output too, which the initrd's
         * unit sends to the journal: no code is kept in the persistent log. */
        if (c->console) {
                (void) snprintf(line1, sizeof line1, "tpmguard: this machine's code is %s (for %s to %s UTC).", code,
                                from, to);
                console_show(line1, "Compare it with your authenticator app; type the PIN only if they match.");
        }
        explicit_bzero(code, sizeof code);
        return 0;
}

/*
 * tpmguard totp reseal: the same secret (the app's entry stays valid) sealed to the PCR values
 * now, or to predicted ones (--pcr, before an update that changes them). The current seal must
 * unseal: after the PCRs changed, only 'totp remove' and 'totp enroll' are left.
 */
static int totp_reseal(const cli *c, const tg_config *config) {
        _cleanup_secret_ tg_secret *owner = NULL, *eauth = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        tg_pcr_values explicit_values;
        tg_seal_params p = { .allow_unextended = c->allow_unextended || config->allow_unextended_pcrs };
        int r;

        /* Without --pcrs/--pcr-bank the enrolled bank and PCRs (tg_totp_reseal: pcr_mask 0). */
        if (c->pcrs || c->pcr_bank) {
                p.pcr_bank = config->pcr_bank;
                p.pcr_mask = config->pcr_mask;
        }
        if (c->pcr_bank && tg_pcr_bank_from_string(c->pcr_bank, &p.pcr_bank) < 0)
                return log_error_rc(-TG_ERR_INVALID, "--pcr-bank: unknown bank \"%s\" (sha1, sha256, sha384, sha512).", c->pcr_bank);
        if (c->pcrs && tg_pcr_list_parse(c->pcrs, &p.pcr_mask) < 0)
                return log_error_rc(-TG_ERR_INVALID, "--pcrs: \"%s\" is not a list like 7 or 0,2,7 (PCRs 0..23).", c->pcrs);
        if (c->n_pcr_values > 0) {
                if (!c->pcrs)
                        return log_error_rc(-TG_ERR_INVALID, "--pcr needs --pcrs: name every PCR the TOTP is sealed to.");
                explicit_values = (tg_pcr_values) { .bank = p.pcr_bank };
                for (int i = 0; i < c->n_pcr_values; i++) {
                        r = tg_pcr_value_parse(c->pcr_values[i], &explicit_values);
                        if (r < 0)
                                return r;
                }
                if (explicit_values.given_mask & ~p.pcr_mask)
                        return log_error_rc(-TG_ERR_INVALID, "--pcr gives a value for a PCR that --pcrs does not select.");
                p.explicit_values = &explicit_values;
        }
        if (c->owner_auth_file) {
                r = tg_pin_read(c->owner_auth_file, "Owner hierarchy password: ", false, &owner);
                if (r < 0)
                        return r;
                p.owner_auth = owner;
        }
        r = cli_read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        r = tg_verify(config, &(tg_verify_options) { .endorsement_auth = eauth }, NULL, &v);
        if (r < 0)
                return log_error_rc(r, "The TOTP was not resealed: the TPM could not be verified (see above).");
        r = tg_totp_reseal(config, v, &p);
        if (r == -TG_ERR_NOT_FOUND)
                return log_error_rc(r, "No TOTP is enrolled: 'tpmguard totp enroll' makes one.");
        if (r < 0)
                return r;
        printf("TOTP resealed%s; the authenticator's entry stays valid. Rebuild the initrd (update-initramfs -u, "
               "or dracut -f).\n", p.explicit_values ? " to the given PCR values" : "");
        return 0;
}

static int totp_remove(const cli *c, const tg_config *config) {
        int r;

        r = tg_totp_remove(config);
        if (r < 0)
                return r;
        printf("TOTP removed. Delete its entry in your authenticator app, and rebuild the initrd (update-initramfs -u, "
               "or dracut -f) so that it no longer carries it.\n");
        return 0;
}

int cmd_totp_update_prepare(const tg_config *config, const tg_pcr_values *predicted) {
        int r;

        r = tg_totp_update_prepare(config, predicted);
        if (r == -TG_ERR_NOT_FOUND)
                return 0;
        if (r < 0)
                return log_error_rc(r, "The volumes are prepared, the TOTP is not (above): the next boot shows no TOTP "
                                    "code. Fix the cause and run 'tpmguard update prepare' again.");
        if (predicted)
                printf("TOTP: also sealed to the predicted PCR values, so the next boot shows its code. Rebuild the "
                       "initrd before the reboot (update-initramfs -u, or dracut -f; a kernel update does it) so that "
                       "it carries this seal.\n");
        else
                printf("TOTP: a grace carries no TOTP (it has no PIN: under a grace it would show its code on any "
                       "boot chain). The boot through the grace shows no code and says that an update is pending "
                       "(rebuild the initrd so that it says so). After 'tpmguard update finish', run 'tpmguard totp "
                       "remove' and 'tpmguard totp enroll'; a predicted update ('tpmguard pcrs --predict') keeps the "
                       "TOTP instead.\n");
        return 0;
}

int cmd_totp_follow(const tg_config *config, const tg_pcr_values *explicit_values, bool always) {
        bool changed = false;
        int r;

        r = tg_totp_follow(config, explicit_values, always, &changed);
        if (r == -TG_ERR_NOT_FOUND)
                return 0;
        if (r == -TG_ERR_PCR_MISMATCH)
                return log_error_rc(r, "The TOTP cannot follow: none of its seals holds for this boot's PCR values "
                                    "(a grace carries none, and an update nobody prepared changed them), so no boot "
                                    "shows its code now. Run 'tpmguard totp remove' and 'tpmguard totp enroll', and "
                                    "replace the entry in your authenticator app.");
        if (r < 0)
                return log_error_rc(r, "The TOTP was not resealed (above).");
        if (changed)
                printf("TOTP: resealed to %s; the authenticator's entry stays valid. Rebuild the initrd "
                       "(update-initramfs -u, or dracut -f).\n",
                       explicit_values ? "the given PCR values" : "this boot's PCR values");
        return 0;
}

/* The command table checks options per command; the sub-commands that do not take one refuse it here. */
static int options_check(const cli *c, const char *sub) {
        bool seal = strcmp(sub, "enroll") == 0 || strcmp(sub, "reseal") == 0;
        const char *bad = NULL;

        if (!seal && (c->pcrs || c->pcr_bank || c->allow_unextended || c->owner_auth_file || c->endorsement_auth_file))
                bad = c->pcrs ? "pcrs" : c->pcr_bank ? "pcr-bank" : c->allow_unextended ? "allow-unextended-pcrs" :
                      c->owner_auth_file ? "owner-auth-file" : "endorsement-auth-file";
        else if (strcmp(sub, "reseal") != 0 && c->n_pcr_values > 0)
                bad = "pcr";
        else if (strcmp(sub, "show") != 0 && (c->json || c->console))
                bad = c->json ? "json" : "console";
        if (bad)
                return log_error_rc(-TG_ERR_INVALID, "--%s does not apply to 'totp %s'. See 'tpmguard totp --help'.",
                                    bad, sub);
        return 0;
}

int cmd_totp(const cli *c, tg_config *config) {
        int r;

        if (c->n_args == 1) {
                r = options_check(c, c->args[0]);
                if (r < 0)
                        return r;
        }
        if (c->n_args == 1 && strcmp(c->args[0], "enroll") == 0)
                return totp_enroll(c, config);
        if (c->n_args == 1 && strcmp(c->args[0], "show") == 0)
                return totp_show(c, config);
        if (c->n_args == 1 && strcmp(c->args[0], "reseal") == 0)
                return totp_reseal(c, config);
        if (c->n_args == 1 && strcmp(c->args[0], "remove") == 0)
                return totp_remove(c, config);
        return log_error_rc(-TG_ERR_INVALID, "Usage: tpmguard totp enroll|show|reseal|remove. See 'tpmguard totp --help'.");
}
