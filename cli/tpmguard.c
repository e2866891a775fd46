/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard: the command line. Thin: parses arguments, reads secrets from
 * files or the terminal (never argv or the environment), calls the core and
 * turns its error space into the exit codes documented in tpmguard(8).
 */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "doctor.h"
#include "error.h"
#include "json-util.h"
#include "lifecycle.h"
#include "log.h"
#include "pin.h"
#include "prompt.h"
#include "pinned.h"
#include "luks.h"
#include "provision.h"
#include "seal.h"
#include "token.h"
#include "secret.h"
#include "tpmguard-config.h"
#include "util.h"
#include "verify.h"


typedef struct cli {
        const char *config_path;
        const char *tcti;
        const char *null_name;
        bool json;
        bool record;
        const char *ek_cert;
        const char *ek_ca;
        const char *ek_intermediates;
        const char *output_dir;
        const char *endorsement_auth_file;
        const char *owner_auth_file;
        const char *pin_file;
        bool no_pin;
        const char *unlock_key_file;
        const char *secret_file;
        const char *pcrs;
        const char *pcr_bank;
        const char *pcr_values[TG_PCR_COUNT];
        int n_pcr_values;
        int keyslot;
        const char *initrd;
        const char *crypttab;
        int token;
        const char *new_pin_file;
        char **args;
        int n_args;
} cli;

static void help(void) {
        printf("Usage: tpmguard [OPTIONS] COMMAND [ARGS]\n"
               "\n"
               "Unlock LUKS2 volumes with a TPM, safely against TPM bus interposers.\n"
               "\n"
               "Commands:\n"
               "  provision   Pin the EK signing key after proving it against the EK certificate\n"
               "  verify      Verify the TPM: kernel null_name, pinned key, certification\n"
               "  enroll DEV  Add a keyslot with a TPM-sealed secret (PIN + PCR policy) and its token\n"
               "  seal        Seal a given keyslot secret; print token JSON for 'cryptsetup token import'\n"
               "  doctor [DEV...]  Explain the whole state, with a next step for each problem\n"
               "  change-pin DEV  Change the PIN of a token (unseal, reseal with the new PIN)\n"
               "  rotate DEV  Move a token to a new random secret in a new keyslot\n"
               "  reseal DEV  Seal to new PCR values (after a firmware or boot chain update)\n"
               "  remove DEV  Remove a token and its keyslot (never the last keyslot)\n"
               "  status DEV  Tokens, keyslots, PCR policy state, interrupted operations, TPM state\n"
               "  cleanup DEV Finish or undo interrupted operations, remove orphans\n"
               "\n"
               "Options:\n"
               "  -c --config FILE             Configuration file (default %s)\n"
               "     --tcti TCTI               TPM transport, overrides the configuration\n"
               "     --null-name FILE          Read the kernel's null_name from FILE\n"
               "     --json                    Machine-readable output\n"
               "  -v --verbose                 More messages (repeat for debug)\n"
               "  -q --quiet                   Errors only\n"
               "  -h --help                    This help\n"
               "     --version                 Version\n"
               "\n"
               "provision options:\n"
               "     --ek-cert FILE            EK certificate (default: read from TPM NV)\n"
               "     --ek-ca FILE|DIR          Manufacturer CA store (default: ek_ca setting)\n"
               "     --ek-intermediates FILE   Extra untrusted intermediate certificates\n"
               "     --output DIR              Where to pin the key (default: state_dir)\n"
               "     --endorsement-auth-file F Endorsement hierarchy password ('-' = stdin)\n"
               "\n"
               "verify options:\n"
               "     --record                  Also write the result to cache_dir/boot-verify.json\n"
               "     --endorsement-auth-file F Endorsement hierarchy password ('-' = stdin)\n"
               "\n"
               "enroll and seal options:\n"
               "     --pcrs LIST               PCRs to seal to, e.g. 7 or 0,2,7 (default: pcrs setting)\n"
               "     --pcr-bank BANK           sha256 (default: pcr_bank setting), sha1, sha384, sha512\n"
               "     --pcr N=BANK:HEX          Seal to this value instead of the current one (repeatable)\n"
               "     --pin-file F              Read the new PIN from F ('-' = stdin) instead of the terminal\n"
               "     --no-pin                  No PIN: anyone who boots this machine unlocks the volume\n"
               "     --owner-auth-file F       Owner hierarchy password ('-' = stdin)\n"
               "enroll options:\n"
               "     --unlock-key-file F       An existing passphrase/key file (default: prompt)\n"
               "     --key-slot N              Keyslot for the new secret (default: first free)\n"
               "change-pin, rotate, reseal, remove options:\n"
               "     --token N                 The tpmguard token (needed when there are several)\n"
               "     --pin-file F              Read the current PIN from F ('-' = stdin)\n"
               "     --new-pin-file F          change-pin: read the new PIN from F ('-' = stdin)\n"
               "reseal options:\n"
               "     --pcrs LIST, --pcr-bank BANK, --pcr N=BANK:HEX  The new policy (default: the token's)\n"
               "     --unlock-key-file F       Authorize with the recovery passphrase instead of unsealing\n"
               "                               (when the PCRs changed); adds a new keyslot\n"
               "status options:\n"
               "     --json                    Machine-readable output\n"
               "seal options:\n"
               "     --secret-file F           The keyslot secret to seal, byte for byte ('-' = stdin)\n"
               "doctor options:\n"
               "     --initrd FILE             The initrd to inspect (default /boot/initrd.img-$(uname -r))\n"
               "     --crypttab FILE           Where to find volumes when none is given (default /etc/crypttab)\n"
               "     --endorsement-auth-file F Endorsement hierarchy password ('-' = stdin)\n"
               "\n"
               "See tpmguard(8) for exit codes.\n", TPMGUARD_CONFIG_PATH);
}

static int load_config(const cli *c, tg_config **ret) {
        _cleanup_config_ tg_config *config = NULL;
        int r = tg_config_load(c->config_path, &config);

        if (r < 0)
                return r;
        if (c->tcti) {
                free(config->tcti);
                config->tcti = strdup(c->tcti);
                if (!config->tcti)
                        return -TG_ERR_NOMEM;
        }
        *ret = TAKE_PTR(config);
        return 0;
}

static int read_optional_secret(const char *file, const char *prompt, tg_secret **ret) {
        if (!file) {
                *ret = NULL;
                return 0;
        }
        return tg_pin_read(file, prompt, false, ret);
}

static int cmd_provision(const cli *c) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_secret_ tg_secret *eauth = NULL;
        tg_pinned_key pinned;
        tg_provision_options o = {
                .ek_cert_file = c->ek_cert,
                .ek_ca = c->ek_ca,
                .ek_intermediates = c->ek_intermediates,
                .output_dir = c->output_dir,
        };
        _cleanup_free_ char *name_hex = NULL;
        int r;

        r = load_config(c, &config);
        if (r < 0)
                return r;
        r = read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o.endorsement_auth = eauth;

        r = tg_provision(config, &o, &pinned);
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
                json_object_object_add(o_json, "ek_template", json_object_new_string(pinned.ek_template));
                json_object_object_add(o_json, "ek_nv_index", json_object_new_int64(pinned.ek_nv_index));
                json_object_object_add(o_json, "ek_certificate_sha256", json_object_new_string(pinned.ek_cert_sha256));
                json_object_object_add(o_json, "ek_certificate_issuer", json_object_new_string(pinned.ek_cert_issuer));
                json_object_object_add(o_json, "state_dir",
                                       json_object_new_string(c->output_dir ?: config->state_dir));
                printf("%s\n", json_object_to_json_string_ext(o_json, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
        } else
                printf("Provisioned. EK signing key %s\n"
                       "  proven against EK certificate %s (%s, issuer %s)\n"
                       "  pinned in %s/%s\n"
                       "Compare the EK certificate's SHA-256 fingerprint above with a second, independent reading\n"
                       "(docs/hardware.md): a relay between this system and its TPM would show another one.\n",
                       name_hex, pinned.ek_cert_sha256, pinned.ek_template, pinned.ek_cert_issuer,
                       c->output_dir ?: config->state_dir, TG_PINNED_FILE_NAME);
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
        json_object_object_add(o, "kernel_null_name",
                               json_object_new_string(rep->kernel_null_name_present ? "present" : "absent"));
        json_object_object_add(o, "policy", json_object_new_string(tg_null_name_policy_to_string(config->kernel_null_name)));
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

static int cmd_verify(const cli *c) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_secret_ tg_secret *eauth = NULL;
        _cleanup_(json_object_putp) json_object *json = NULL;
        tg_verify_report report = {};
        /* Always a full verification; --record also leaves this boot's cache for the unlocks. */
        tg_verify_options o = { .null_name_path = c->null_name, .use_cache = c->record };
        const char *text;
        int r, q;

        r = load_config(c, &config);
        if (r < 0)
                return r;
        r = read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o.endorsement_auth = eauth;

        r = tg_verify(config, &o, &report, NULL);

        json = verify_report_json(config, &report, r);
        if (!json)
                return -TG_ERR_NOMEM;
        text = json_object_to_json_string_ext(json, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
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
                printf("%s\n", text);
        else if (r >= 0)
                printf("TPM verified: NULL key %s by the pinned EK signing key%s.\n",
                       report.kernel_null_name_present ? "matches the kernel's null_name and is certified"
                                                       : "is certified",
                       report.kernel_null_name_present ? ""
                                                       : " (kernel exports no null_name: TPM resets during boot are not detectable)");
        if (r < 0)
                log_error("Verification failed: %s. 'tpmguard doctor' shows the whole state and what to do.",
                          tg_err_str(r));
        return r;
}

static int seal_params_from_cli(const cli *c, const tg_config *config, tg_seal_params *p,
                                tg_pcr_values *explicit_values, tg_secret **ret_pin, tg_secret **ret_owner_auth) {
        _cleanup_secret_ tg_secret *pin = NULL, *owner = NULL;
        int r;

        *p = (tg_seal_params) { .pcr_bank = config->pcr_bank, .pcr_mask = config->pcr_mask };
        if (c->pcr_bank && tg_pcr_bank_from_string(c->pcr_bank, &p->pcr_bank) < 0)
                return log_error_rc(-TG_ERR_INVALID, "--pcr-bank: unknown bank \"%s\" (sha1, sha256, sha384, sha512).", c->pcr_bank);
        if (c->pcrs && tg_pcr_list_parse(c->pcrs, &p->pcr_mask) < 0)
                return log_error_rc(-TG_ERR_INVALID, "--pcrs: \"%s\" is not a list like 7 or 0,2,7 (PCRs 0..23).", c->pcrs);
        if (c->n_pcr_values > 0) {
                *explicit_values = (tg_pcr_values) { .bank = p->pcr_bank };
                for (int i = 0; i < c->n_pcr_values; i++) {
                        r = tg_pcr_value_parse(c->pcr_values[i], explicit_values);
                        if (r < 0)
                                return r;
                }
                if (explicit_values->given_mask & ~p->pcr_mask)
                        return log_error_rc(-TG_ERR_INVALID, "--pcr gives a value for a PCR that --pcrs does not select.");
                p->explicit_values = explicit_values;
        }
        if (c->no_pin) {
                if (c->pin_file)
                        return log_error_rc(-TG_ERR_INVALID, "--no-pin and --pin-file contradict each other.");
                log_warning("Enrolling without a PIN: anyone who can boot this machine into the sealed PCR state "
                            "unlocks the volume.");
        } else {
                r = tg_pin_read(c->pin_file, "New TPM PIN: ", true, &pin);
                if (r == -TG_ERR_CANCELLED)
                        return log_error_rc(r, "No PIN given. Use --no-pin to enroll without one.");
                if (r < 0)
                        return log_error_rc(r, "Cannot read the new PIN: %s (see above).", tg_err_str(r));
        }
        if (c->owner_auth_file) {
                r = tg_pin_read(c->owner_auth_file, "Owner hierarchy password: ", false, &owner);
                if (r < 0)
                        return r;
        }
        p->pin = pin;
        p->owner_auth = owner;
        *ret_pin = TAKE_PTR(pin);
        *ret_owner_auth = TAKE_PTR(owner);
        return 0;
}

static int cmd_enroll(const cli *c) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_secret_ tg_secret *pin = NULL, *owner = NULL, *unlock = NULL;
        tg_enroll_options o = { .keyslot = c->keyslot };
        tg_pcr_values explicit_values;
        char pcrs[96];
        int keyslot, token, r;

        if (c->n_args != 1)
                return log_error_rc(-TG_ERR_INVALID, "enroll takes one argument: the LUKS2 device.");
        r = load_config(c, &config);
        if (r < 0)
                return r;
        if (c->unlock_key_file)
                r = tg_secret_read_file(c->unlock_key_file, 8192, &unlock);
        else
                r = tg_pin_read(NULL, "Existing passphrase of the volume: ", false, &unlock);
        if (r < 0)
                return r;
        r = seal_params_from_cli(c, config, &o.seal, &explicit_values, &pin, &owner);
        if (r < 0)
                return r;

        r = tg_enroll(config, c->args[0], unlock, &o, &keyslot, &token);
        if (r == -TG_ERR_AUTH_NEEDED && !owner && isatty(STDIN_FILENO)) {
                /* The owner hierarchy has a password: ask for it, never assume one. */
                r = tg_pin_read(NULL, "Owner hierarchy password: ", false, &owner);
                if (r < 0)
                        return r;
                o.seal.owner_auth = owner;
                r = tg_enroll(config, c->args[0], unlock, &o, &keyslot, &token);
        }
        if (r < 0)
                return log_error_rc(r, "Enrollment failed: %s. The volume is unchanged.", tg_err_str(r));
        tg_pcr_list_format(o.seal.pcr_mask, pcrs, sizeof pcrs);
        printf("Enrolled %s: keyslot %d, token %d, %s PCRs %s, %s.\n", c->args[0], keyslot, token,
               tg_pcr_bank_to_string(o.seal.pcr_bank), pcrs[0] ? pcrs : "(none)", pin ? "PIN" : "no PIN");
        return 0;
}

static int cmd_seal(const cli *c) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_secret_ tg_secret *pin = NULL, *owner = NULL, *secret = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_free_ char *json = NULL;
        tg_seal_params p;
        tg_pcr_values explicit_values;
        tg_verify_report report;
        tg_token token;
        int r;

        if (!c->secret_file)
                return log_error_rc(-TG_ERR_INVALID, "seal needs --secret-file F (the keyslot secret; '-' = stdin).");
        r = load_config(c, &config);
        if (r < 0)
                return r;
        r = tg_secret_read_file(c->secret_file, 8192, &secret);
        if (r < 0)
                return r;
        r = seal_params_from_cli(c, config, &p, &explicit_values, &pin, &owner);
        if (r < 0)
                return r;
        r = tg_verify(config, NULL, &report, &v);
        if (r < 0)
                return r;
        r = tg_seal(v, &p, secret, &token);
        if (r == -TG_ERR_AUTH_NEEDED && !owner && isatty(STDIN_FILENO)) {
                r = tg_pin_read(NULL, "Owner hierarchy password: ", false, &owner);
                if (r < 0)
                        return r;
                p.owner_auth = owner;
                r = tg_seal(v, &p, secret, &token);
        }
        if (r < 0)
                return r;
        token.ek_signing_key_name = report.ek_signing_key_name;
        r = tg_token_to_string(&token, &json);
        explicit_bzero(&token, sizeof token);
        if (r < 0)
                return r;
        printf("%s\n", json);
        return 0;
}

static int cmd_doctor(const cli *c) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_secret_ tg_secret *eauth = NULL;
        _cleanup_doctor_report_ tg_doctor_report *report = NULL;
        tg_doctor_options o = {
                .null_name_path = c->null_name,
                .devices = c->args,
                .n_devices = (size_t) c->n_args,
                .crypttab = c->crypttab,
                .initrd = c->initrd,
        };
        int r;

        r = load_config(c, &config);
        if (r < 0)
                return log_error_rc(r, "Fix the configuration first: doctor needs it to know what to check.");
        r = read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o.endorsement_auth = eauth;

        r = tg_doctor_run(config, &o, &report);
        if (r < 0)
                return log_error_rc(r, "doctor could not finish: %s.", tg_err_str(r));
        if (c->json) {
                _cleanup_(json_object_putp) json_object *j = NULL;
                r = tg_doctor_report_to_json(report, &j);
                if (r < 0)
                        return r;
                printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
        } else
                tg_doctor_report_print(report, stdout);
        return tg_doctor_report_worst(report);
}

/* ---- lifecycle commands ---- */

static int one_device(const cli *c, const char *command) {
        if (c->n_args != 1)
                return log_error_rc(-TG_ERR_INVALID, "%s takes one argument: the LUKS2 device.", command);
        return 0;
}

/* The current PIN of the token, read only when the token has one. */
static int read_current_pin(const cli *c, const tg_token *t, tg_secret **ret) {
        int r;

        *ret = NULL;
        if (!t->pin)
                return 0;
        r = tg_pin_read(c->pin_file, "Current TPM PIN: ", false, ret);
        return r < 0 ? log_error_rc(r, "The token needs its current PIN (terminal, or --pin-file F).") : 0;
}

/* The common start of change-pin and rotate: one device, the configuration,
 * and the token's current PIN when it has one. */
static int token_command_begin(const cli *c, const char *command, tg_config **ret_config, tg_secret **ret_pin) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_secret_ tg_secret *pin = NULL;
        tg_token t;
        int r;

        r = one_device(c, command);
        if (r < 0)
                return r;
        r = load_config(c, &config);
        if (r < 0)
                return r;
        r = tg_lifecycle_token_peek(c->args[0], c->token, &t);
        if (r < 0)
                return r;
        r = read_current_pin(c, &t, &pin);
        explicit_bzero(&t, sizeof t);
        if (r < 0)
                return r;
        *ret_config = TAKE_PTR(config);
        *ret_pin = TAKE_PTR(pin);
        return 0;
}

static int cmd_change_pin(const cli *c) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_secret_ tg_secret *pin = NULL, *new_pin = NULL;
        tg_lifecycle_result res;
        int r;

        r = token_command_begin(c, "change-pin", &config, &pin);
        if (r < 0)
                return r;
        r = tg_pin_read(c->new_pin_file, "New TPM PIN: ", true, &new_pin);
        if (r < 0)
                return log_error_rc(r, "No new PIN given (terminal, or --new-pin-file F).");
        r = tg_change_pin(config, c->args[0], c->token, pin, new_pin, &res);
        if (r < 0)
                return log_error_rc(r, "Changing the PIN failed: %s.", tg_err_str(r));
        printf("Changed the PIN of token %d (keyslot %d).\n", res.token, res.keyslot);
        return 0;
}

static int cmd_rotate(const cli *c) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_secret_ tg_secret *pin = NULL;
        tg_lifecycle_result res;
        int r;

        r = token_command_begin(c, "rotate", &config, &pin);
        if (r < 0)
                return r;
        r = tg_rotate(config, c->args[0], c->token, pin, &res);
        if (r < 0)
                return log_error_rc(r, "Rotation failed: %s.", tg_err_str(r));
        printf("Rotated token %d: keyslot %d replaces keyslot %d.\n", res.token, res.keyslot, res.old_keyslot);
        return 0;
}

static int cmd_reseal(const cli *c) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_secret_ tg_secret *pin = NULL, *unlock = NULL;
        tg_reseal_params p = {};
        tg_pcr_values explicit_values;
        tg_lifecycle_result res;
        tg_token t;
        int r;

        r = one_device(c, "reseal");
        if (r < 0)
                return r;
        r = load_config(c, &config);
        if (r < 0)
                return r;
        r = tg_lifecycle_token_peek(c->args[0], c->token, &t);
        if (r < 0)
                return r;
        p.pcr_bank = t.pcr_bank;
        p.pcr_mask = t.pcr_mask;
        if (c->pcr_bank && tg_pcr_bank_from_string(c->pcr_bank, &p.pcr_bank) < 0)
                r = log_error_rc(-TG_ERR_INVALID, "--pcr-bank: unknown bank \"%s\" (sha1, sha256, sha384, sha512).", c->pcr_bank);
        if (r >= 0 && c->pcrs) {
                if (tg_pcr_list_parse(c->pcrs, &p.pcr_mask) < 0)
                        r = log_error_rc(-TG_ERR_INVALID, "--pcrs: \"%s\" is not a list like 7 or 0,2,7 (PCRs 0..23).", c->pcrs);
                p.pcr_mask_set = true;
        }
        if (r >= 0 && c->n_pcr_values > 0) {
                explicit_values = (tg_pcr_values) { .bank = p.pcr_bank };
                for (int i = 0; r >= 0 && i < c->n_pcr_values; i++)
                        r = tg_pcr_value_parse(c->pcr_values[i], &explicit_values);
                p.explicit_values = &explicit_values;
        }
        if (r >= 0 && c->unlock_key_file && t.pin) {
                /*
                 * Authorized by the passphrase, nothing is unsealed: the PIN
                 * typed here becomes the PIN of the new seal (a forgotten PIN
                 * is replaced this way), so it is asked twice like any new PIN.
                 */
                r = tg_pin_read(c->pin_file, "New TPM PIN (the old PIN is not needed with --unlock-key-file): ", true, &pin);
                if (r < 0)
                        r = log_error_rc(r, "The new seal needs a PIN (terminal, or --pin-file F).");
        } else if (r >= 0)
                r = read_current_pin(c, &t, &pin);
        explicit_bzero(&t, sizeof t);
        if (r < 0)
                return r;
        if (c->unlock_key_file) {
                r = tg_secret_read_file(c->unlock_key_file, 8192, &unlock);
                if (r < 0)
                        return r;
        }
        p.pin = pin;
        p.unlock_passphrase = unlock;
        r = tg_reseal(config, c->args[0], c->token, &p, &res);
        if (r < 0)
                return log_error_rc(r, "Resealing failed: %s.", tg_err_str(r));
        if (res.keyslot != res.old_keyslot)
                printf("Resealed token %d into a new keyslot %d (keyslot %d removed).\n", res.token, res.keyslot, res.old_keyslot);
        else
                printf("Resealed token %d (keyslot %d).\n", res.token, res.keyslot);
        return 0;
}

static int cmd_remove(const cli *c) {
        tg_lifecycle_result res;
        int r;

        r = one_device(c, "remove");
        if (r < 0)
                return r;
        r = tg_remove(c->args[0], c->token, &res);
        if (r < 0)
                return log_error_rc(r, "Removal failed: %s.", tg_err_str(r));
        if (res.old_keyslot >= 0)
                printf("Removed token %d and keyslot %d.\n", res.token, res.old_keyslot);
        else
                printf("Removed token %d.\n", res.token);
        return 0;
}

static int cmd_cleanup(const cli *c) {
        unsigned actions = 0;
        int r;

        r = one_device(c, "cleanup");
        if (r < 0)
                return r;
        r = tg_cleanup(c->args[0], &actions);
        if (r < 0)
                return log_error_rc(r, "Cleanup failed: %s.", tg_err_str(r));
        printf(actions ? "Cleaned up %s (%u repairs).\n" : "Nothing to clean up on %s.\n", c->args[0], actions);
        return 0;
}

static int cmd_status(const cli *c) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_(json_object_putp) json_object *status = NULL;
        int r;

        r = one_device(c, "status");
        if (r < 0)
                return r;
        r = load_config(c, &config);
        if (r < 0)
                return r;
        r = tg_status(config, c->args[0], &status);
        if (r < 0)
                return r;
        if (c->json)
                printf("%s\n", json_object_to_json_string_ext(status, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
        else
                tg_status_print(status, stdout);
        return 0;
}

int main(int argc, char *argv[]) {
        enum {
                ARG_TCTI = 0x100, ARG_NULL_NAME, ARG_JSON, ARG_VERSION, ARG_RECORD,
                ARG_EK_CERT, ARG_EK_CA, ARG_EK_INTERMEDIATES, ARG_OUTPUT, ARG_EAUTH,
                ARG_OWNER_AUTH, ARG_PIN_FILE, ARG_NO_PIN, ARG_UNLOCK_KEY_FILE, ARG_SECRET_FILE,
                ARG_PCRS, ARG_PCR_BANK, ARG_PCR, ARG_KEY_SLOT,
                ARG_INITRD, ARG_CRYPTTAB,
                ARG_TOKEN, ARG_NEW_PIN_FILE,
        };
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "tcti", required_argument, NULL, ARG_TCTI },
                { "null-name", required_argument, NULL, ARG_NULL_NAME },
                { "json", no_argument, NULL, ARG_JSON },
                { "verbose", no_argument, NULL, 'v' },
                { "quiet", no_argument, NULL, 'q' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "record", no_argument, NULL, ARG_RECORD },
                { "ek-cert", required_argument, NULL, ARG_EK_CERT },
                { "ek-ca", required_argument, NULL, ARG_EK_CA },
                { "ek-intermediates", required_argument, NULL, ARG_EK_INTERMEDIATES },
                { "output", required_argument, NULL, ARG_OUTPUT },
                { "endorsement-auth-file", required_argument, NULL, ARG_EAUTH },
                { "owner-auth-file", required_argument, NULL, ARG_OWNER_AUTH },
                { "pin-file", required_argument, NULL, ARG_PIN_FILE },
                { "no-pin", no_argument, NULL, ARG_NO_PIN },
                { "unlock-key-file", required_argument, NULL, ARG_UNLOCK_KEY_FILE },
                { "secret-file", required_argument, NULL, ARG_SECRET_FILE },
                { "pcrs", required_argument, NULL, ARG_PCRS },
                { "pcr-bank", required_argument, NULL, ARG_PCR_BANK },
                { "pcr", required_argument, NULL, ARG_PCR },
                { "key-slot", required_argument, NULL, ARG_KEY_SLOT },
                { "initrd", required_argument, NULL, ARG_INITRD },
                { "crypttab", required_argument, NULL, ARG_CRYPTTAB },
                { "token", required_argument, NULL, ARG_TOKEN },
                { "new-pin-file", required_argument, NULL, ARG_NEW_PIN_FILE },
                {}
        };
        static const struct {
                const char *name;
                int (*run)(const cli *c);
        } commands[] = {
                { "provision", cmd_provision },
                { "verify", cmd_verify },
                { "enroll", cmd_enroll },
                { "seal", cmd_seal },
                { "doctor", cmd_doctor },
                { "change-pin", cmd_change_pin },
                { "rotate", cmd_rotate },
                { "reseal", cmd_reseal },
                { "remove", cmd_remove },
                { "status", cmd_status },
                { "cleanup", cmd_cleanup },
        };
        cli c = { .keyslot = CRYPT_ANY_SLOT, .token = CRYPT_ANY_TOKEN };
        int opt, r;

        tg_process_harden();
        /* tpm2-tss logs expected TPM refusals (wrong PIN, absent handle) as
         * errors on stderr; our messages explain them. TSS2_LOG set by the
         * user still wins. */
        (void) setenv("TSS2_LOG", "all+none", 0);

        while ((opt = getopt_long(argc, argv, "c:vqh", options, NULL)) >= 0)
                switch (opt) {
                case 'c': c.config_path = optarg; break;
                case ARG_TCTI: c.tcti = optarg; break;
                case ARG_NULL_NAME: c.null_name = optarg; break;
                case ARG_JSON: c.json = true; break;
                case 'v': tg_log_set_max_level(tg_log_get_max_level() >= LOG_INFO ? LOG_DEBUG : LOG_INFO); break;
                case 'q': tg_log_set_max_level(LOG_ERR); break;
                case 'h': help(); return 0;
                case ARG_VERSION: printf("tpmguard %s\n", TPMGUARD_VERSION); return 0;
                case ARG_RECORD: c.record = true; break;
                case ARG_EK_CERT: c.ek_cert = optarg; break;
                case ARG_EK_CA: c.ek_ca = optarg; break;
                case ARG_EK_INTERMEDIATES: c.ek_intermediates = optarg; break;
                case ARG_OUTPUT: c.output_dir = optarg; break;
                case ARG_EAUTH: c.endorsement_auth_file = optarg; break;
                case ARG_OWNER_AUTH: c.owner_auth_file = optarg; break;
                case ARG_PIN_FILE: c.pin_file = optarg; break;
                case ARG_NO_PIN: c.no_pin = true; break;
                case ARG_UNLOCK_KEY_FILE: c.unlock_key_file = optarg; break;
                case ARG_SECRET_FILE: c.secret_file = optarg; break;
                case ARG_PCRS: c.pcrs = optarg; break;
                case ARG_PCR_BANK: c.pcr_bank = optarg; break;
                case ARG_PCR:
                        if (c.n_pcr_values >= TG_PCR_COUNT)
                                return tg_err_exit_code(log_error_rc(-TG_ERR_INVALID, "Too many --pcr options."));
                        c.pcr_values[c.n_pcr_values++] = optarg;
                        break;
                case ARG_INITRD: c.initrd = optarg; break;
                case ARG_CRYPTTAB: c.crypttab = optarg; break;
                case ARG_KEY_SLOT: {
                        char *end;
                        long n = strtol(optarg, &end, 10);
                        if (*optarg == '\0' || *end != '\0' || n < 0 || n > 31)
                                return tg_err_exit_code(log_error_rc(-TG_ERR_INVALID, "--key-slot: \"%s\" is not a keyslot number 0..31.", optarg));
                        c.keyslot = (int) n;
                        break;
                }
                case ARG_TOKEN: {
                        char *end;
                        long n = strtol(optarg, &end, 10);
                        if (*optarg == '\0' || *end != '\0' || n < 0 || n > 31)
                                return tg_err_exit_code(log_error_rc(-TG_ERR_INVALID, "--token: \"%s\" is not a token number 0..31.", optarg));
                        c.token = (int) n;
                        break;
                }
                case ARG_NEW_PIN_FILE: c.new_pin_file = optarg; break;
                default: return tg_err_exit_code(-TG_ERR_INVALID);
                }

        if (optind >= argc) {
                help();
                return tg_err_exit_code(-TG_ERR_INVALID);
        }
        c.args = argv + optind + 1;
        c.n_args = argc - optind - 1;

        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(argv[optind], commands[i].name) == 0) {
                        r = commands[i].run(&c);
                        return tg_err_exit_code(r);
                }
        log_error("Unknown command \"%s\". See 'tpmguard --help'.", argv[optind]);
        return tg_err_exit_code(-TG_ERR_INVALID);
}
