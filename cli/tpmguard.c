/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard: the command line. Thin: parses arguments, reads secrets from
 * files or the terminal (never argv or the environment), calls the core and
 * turns its error space into the exit codes documented in tpmguard(8).
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "binding.h"
#include "cleanup.h"
#include "config.h"
#include "doctor.h"
#include "enroll.h"
#include "error.h"
#include "json-util.h"
#include "lifecycle.h"
#include "lockout.h"
#include "log.h"
#include "migrate.h"
#include "passphrase.h"
#include "pin.h"
#include "prompt.h"
#include "pinned.h"
#include "luks.h"
#include "provision.h"
#include "qr.h"
#include "seal.h"
#include "token-ops.h"
#include "token.h"
#include "secret.h"
#include "status.h"
#include "tpmguard-config.h"
#include "util.h"
#include "verify.h"


typedef struct cli {
        const char *config_path;
        const char *tcti;
        const char *null_name;
        bool json;
        bool record;
        bool trust_on_first_use;
        const char *ek_cert;
        const char *ek_ca;
        const char *ek_intermediates;
        const char *output_dir;
        const char *endorsement_auth_file;
        const char *owner_auth_file;
        const char *lockout_auth_file;
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
        const char *old_pin_file;
        const char *new_passphrase_file;
        int replace;
        uint32_t iter_time;
        bool accept_token_policy;
        bool allow_unextended;
        bool keep_old;
        char **args;
        int n_args;
} cli;

/* ---- options and commands: one table each, so help, per-command usage and
 * the check that an option applies to the command all come from one place ---- */

enum {
        OPT_CONFIG, OPT_TCTI, OPT_NULL_NAME, OPT_JSON, OPT_VERBOSE, OPT_QUIET, OPT_HELP, OPT_VERSION,
        OPT_RECORD, OPT_EK_CERT, OPT_EK_CA, OPT_EK_INTERMEDIATES, OPT_OUTPUT, OPT_EAUTH, OPT_OWNER_AUTH,
        OPT_PIN_FILE, OPT_NO_PIN, OPT_UNLOCK_KEY_FILE, OPT_SECRET_FILE, OPT_PCRS, OPT_PCR_BANK, OPT_PCR,
        OPT_KEY_SLOT, OPT_INITRD, OPT_CRYPTTAB, OPT_TOKEN, OPT_NEW_PIN_FILE, OPT_ACCEPT_TOKEN_POLICY,
        OPT_ALLOW_UNEXTENDED, OPT_REPLACE, OPT_NEW_PASSPHRASE_FILE, OPT_ITER_TIME, OPT_LOCKOUT_AUTH,
        OPT_KEEP_OLD, OPT_OLD_PIN_FILE,
        OPT_TOFU,
        _OPT_MAX,
};

static const struct option_doc {
        const char *name;   /* long name */
        char short_name;    /* or 0 */
        const char *arg;    /* NULL: a flag */
        const char *text;
} option_docs[_OPT_MAX] = {
        [OPT_CONFIG]           = { "config", 'c', "FILE", "Configuration file (default " TPMGUARD_CONFIG_PATH ")" },
        [OPT_TCTI]             = { "tcti", 0, "TCTI", "TPM transport, overrides the configuration" },
        [OPT_NULL_NAME]        = { "null-name", 0, "FILE", "Read the kernel's null_name from FILE" },
        [OPT_JSON]             = { "json", 0, NULL, "Machine-readable output (also on failure)" },
        [OPT_VERBOSE]          = { "verbose", 'v', NULL, "More messages (repeat for debug)" },
        [OPT_QUIET]            = { "quiet", 'q', NULL, "Errors only" },
        [OPT_HELP]             = { "help", 'h', NULL, "This help, or the command's" },
        [OPT_VERSION]          = { "version", 'V', NULL, "Version" },
        [OPT_RECORD]           = { "record", 0, NULL, "Also write the result to cache_dir/boot-verify.json" },
        [OPT_EK_CERT]          = { "ek-cert", 0, "FILE", "EK certificate (default: read from TPM NV)" },
        [OPT_EK_CA]            = { "ek-ca", 0, "FILE|DIR", "Manufacturer CA store (default: ek_ca setting)" },
        [OPT_EK_INTERMEDIATES] = { "ek-intermediates", 0, "FILE", "Extra untrusted intermediate certificates" },
        [OPT_OUTPUT]           = { "output", 0, "DIR", "Where to pin the key (default: state_dir)" },
        [OPT_EAUTH]            = { "endorsement-auth-file", 0, "F", "Endorsement hierarchy password ('-' = stdin)" },
        [OPT_OWNER_AUTH]       = { "owner-auth-file", 0, "F", "Owner hierarchy password ('-' = stdin)" },
        [OPT_PIN_FILE]         = { "pin-file", 0, "F", "Read the PIN from F ('-' = stdin) instead of the terminal" },
        [OPT_NO_PIN]           = { "no-pin", 0, NULL, "No PIN: anyone who boots this machine unlocks the volume" },
        [OPT_UNLOCK_KEY_FILE]  = { "unlock-key-file", 0, "F", "An existing passphrase or key file of the volume" },
        [OPT_SECRET_FILE]      = { "secret-file", 0, "F", "The keyslot secret to seal, byte for byte ('-' = stdin)" },
        [OPT_PCRS]             = { "pcrs", 0, "LIST", "PCRs to seal to, e.g. 7 or 0,2,7 (default: pcrs setting)" },
        [OPT_PCR_BANK]         = { "pcr-bank", 0, "BANK", "sha256 (default: pcr_bank setting), sha1, sha384, sha512" },
        [OPT_PCR]              = { "pcr", 0, "N=BANK:HEX", "Seal to this value instead of the current one (repeatable)" },
        [OPT_KEY_SLOT]         = { "key-slot", 0, "N", "enroll: keyslot for the new secret (default: first free); "
                                                       "passwd: the passphrase keyslot to change" },
        [OPT_INITRD]           = { "initrd", 0, "FILE", "The initrd to inspect (default /boot/initrd.img-$(uname -r))" },
        [OPT_CRYPTTAB]         = { "crypttab", 0, "FILE", "Where to find volumes when none is given (default /etc/crypttab)" },
        [OPT_TOKEN]            = { "token", 0, "N", "The tpmguard token (needed when there are several)" },
        [OPT_NEW_PIN_FILE]     = { "new-pin-file", 0, "F", "Read the new PIN from F ('-' = stdin)" },
        [OPT_ALLOW_UNEXTENDED] = { "allow-unextended-pcrs", 0, NULL,
                                   "Seal to PCRs that were never extended (all zeros or ones)" },
        [OPT_REPLACE]          = { "replace", 0, "SLOT", "Destroy this keyslot once the new key is proven and shown" },
        [OPT_NEW_PASSPHRASE_FILE] = { "new-passphrase-file", 0, "F", "Read the new passphrase from F's first line ('-' = stdin)" },
        [OPT_ITER_TIME]        = { "iter-time", 0, "MS", "argon2id time for the new keyslot (default 2000, cryptsetup's)" },
        [OPT_ACCEPT_TOKEN_POLICY] = { "accept-token-policy", 0, NULL,
                                      "Carry over a token policy weaker than tpmguard.conf (no PIN, fewer PCRs)" },
        [OPT_LOCKOUT_AUTH]     = { "lockout-auth-file", 0, "F", "Lockout hierarchy password set by another owner ('-' = stdin)" },
        [OPT_KEEP_OLD]         = { "keep-old", 0, NULL, "Keep the old token and its keyslot (they stay exposed)" },
        [OPT_OLD_PIN_FILE]     = { "old-pin-file", 0, "F", "The old token's PIN, to prove its keyslot ('-' = stdin)" },
        [OPT_TOFU]             = { "trust-on-first-use", 0, NULL,
                                   "No EK certificate in NV: pin the EK signing key unproven (firmware TPMs)" },
};

/* Options every command takes. */
#define OPTS_GENERAL ((1ull << OPT_CONFIG) | (1ull << OPT_TCTI) | (1ull << OPT_VERBOSE) | (1ull << OPT_QUIET) | \
                      (1ull << OPT_HELP) | (1ull << OPT_VERSION))
#define O(x) (1ull << OPT_##x)
#define OPTS_SEAL (O(PCRS) | O(PCR_BANK) | O(PCR) | O(PIN_FILE) | O(NO_PIN) | O(OWNER_AUTH) | O(EAUTH) | \
                   O(ALLOW_UNEXTENDED))

/* What the dispatcher does before a command runs. The synopsis decides the
 * argument check: "" takes none, "DEV" exactly one device; any other synopsis
 * is checked by the command. */
enum {
        CMD_CONFIG = 1 << 0, /* load tpmguard.conf (+ --config, --tcti) and pass it */
};

typedef struct cli_command {
        const char *name;
        const char *args;      /* synopsis of the arguments */
        const char *summary;
        uint64_t options;      /* besides OPTS_GENERAL */
        unsigned needs;        /* CMD_* */
        int (*run)(const cli *c, tg_config *config);
} cli_command;

static const cli_command *command_find(const char *name);

static void option_print(int id) {
        const struct option_doc *d = &option_docs[id];
        char head[64];

        if (d->short_name)
                snprintf(head, sizeof head, "-%c --%s%s%s", d->short_name, d->name, d->arg ? " " : "", d->arg ?: "");
        else
                snprintf(head, sizeof head, "   --%s%s%s", d->name, d->arg ? " " : "", d->arg ?: "");
        printf("  %-28s %s\n", head, d->text);
}

static void help_general(const cli_command *commands, size_t n) {
        printf("Usage: tpmguard [OPTIONS] COMMAND [ARGS]\n"
               "\n"
               "Unlock LUKS2 volumes with a TPM, safely against TPM bus interposers.\n"
               "\n"
               "Commands:\n");
        for (size_t i = 0; i < n; i++) {
                char head[40];
                snprintf(head, sizeof head, "%s%s%s", commands[i].name, commands[i].args[0] ? " " : "", commands[i].args);
                printf("  %-18s %s\n", head, commands[i].summary);
        }
        printf("\nOptions:\n");
        for (int id = 0; id < _OPT_MAX; id++)
                if (OPTS_GENERAL & (1ull << id))
                        option_print(id);
        for (size_t i = 0; i < n; i++) {
                bool any = false;
                for (int id = 0; id < _OPT_MAX; id++)
                        if (commands[i].options & (1ull << id)) {
                                if (!any)
                                        printf("\n%s options:\n", commands[i].name);
                                any = true;
                                option_print(id);
                        }
        }
        printf("\n'tpmguard help COMMAND' or 'tpmguard COMMAND --help' shows one command.\n"
               "See tpmguard(8) for exit codes.\n");
}

static void help_command(const cli_command *cmd) {
        printf("Usage: tpmguard [OPTIONS] %s%s%s\n\n%s.\n\nOptions:\n", cmd->name, cmd->args[0] ? " " : "", cmd->args,
               cmd->summary);
        for (int id = 0; id < _OPT_MAX; id++)
                if (cmd->options & (1ull << id))
                        option_print(id);
        for (int id = 0; id < _OPT_MAX; id++)
                if (OPTS_GENERAL & (1ull << id))
                        option_print(id);
        printf("\nSee tpmguard(8) for details and exit codes.\n");
}

/* Edit distance, for "did you mean" (commands are short: a small matrix will do). */
static size_t edit_distance(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b), prev[33], cur[33];

        if (la > 32 || lb > 32)
                return SIZE_MAX;
        for (size_t j = 0; j <= lb; j++)
                prev[j] = j;
        for (size_t i = 1; i <= la; i++) {
                cur[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
                        size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
                        cur[j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
                }
                memcpy(prev, cur, sizeof prev);
        }
        return prev[lb];
}

/* Set by a command that printed its own JSON object (--json), success or not. */
static bool json_printed;

static int load_config(const cli *c, tg_config **ret) {
        _cleanup_config_ tg_config *config = NULL;
        int r = tg_config_load(c->config_path, &config);

        if (r < 0)
                return r;
        config->accept_token_policy = c->accept_token_policy;
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

static const char *lockout_ownership_string(tg_lockout_ownership o) {
        switch (o) {
        case TG_LOCKOUT_TAKEN: return "taken";
        case TG_LOCKOUT_HELD: return "held";
        case TG_LOCKOUT_FOREIGN: return "foreign";
        }
        return "unknown";
}

static json_object *lockout_state_json(const tg_lockout_state *st) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, "lockout_auth_set", json_object_new_boolean(st->lockout_auth_set));
        json_object_object_add(o, "in_lockout", json_object_new_boolean(st->in_lockout));
        json_object_object_add(o, "failures", json_object_new_int64(st->failures));
        json_object_object_add(o, "max_tries", json_object_new_int64(st->max_tries));
        json_object_object_add(o, "recovery_time", json_object_new_int64(st->recovery_time));
        json_object_object_add(o, "lockout_recovery", json_object_new_int64(st->lockout_recovery));
        return o;
}

/* What provision and lockout setup did to the lockout hierarchy, for people. */
static int lockout_result_print(const tg_lockout_result *res, const char *state_dir) {
        _cleanup_secret_ tg_secret *auth = NULL;
        _cleanup_free_ char *hex = NULL;
        int r;

        switch (res->ownership) {
        case TG_LOCKOUT_TAKEN:
                /* Printed once, for the owner's recovery records: the only other copy is root's file. */
                r = tg_lockout_auth_load(state_dir, &auth);
                if (r < 0)
                        return r;
                r = tg_hex_encode(auth->data, auth->size, &hex);
                if (r < 0)
                        return r;
                printf("  took the TPM's lockout hierarchy (it had no password); its new password is in %s/%s:\n"
                       "    %s\n"
                       "  Keep it with your recovery records ('tpmguard lockout export' prints it again).\n",
                       state_dir, TG_LOCKOUT_FILE_NAME, hex);
                explicit_bzero(hex, strlen(hex));
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
                       "lockout password\n", res->state.max_tries, res->state.recovery_time,
                       res->state.lockout_recovery);
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

static int cmd_provision(const cli *c, tg_config *config) {
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

        r = read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o.endorsement_auth = eauth;
        r = read_optional_secret(c->owner_auth_file, "Owner hierarchy password: ", &oauth);
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
                printf("%s\n", json_object_to_json_string_ext(o_json, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
                json_printed = true;
        } else if (pinned.tofu) {
                printf("Provisioned ON TRUST: EK signing key %s\n"
                       "  pinned on first use, NOT proven: this TPM has no EK certificate, so nothing shows\n"
                       "  that the key belongs to a genuine TPM rather than to whatever answered just now\n"
                       "  pinned in %s/%s (\"ek_trust\": \"%s\"; verify, status and doctor say so)\n",
                       name_hex, c->output_dir ?: config->state_dir, TG_PINNED_FILE_NAME, TG_PINNED_TRUST_TOFU);
                r = lockout_result_print(&lockout, c->output_dir ?: config->state_dir);
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
                r = lockout_result_print(&lockout, c->output_dir ?: config->state_dir);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* tpmguard lockout setup|export */
static int cmd_lockout(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *eauth = NULL, *lauth = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        tg_lockout_result res;
        int r;

        if (c->n_args != 1 || (strcmp(c->args[0], "setup") != 0 && strcmp(c->args[0], "export") != 0))
                return log_error_rc(-TG_ERR_INVALID, "Usage: tpmguard lockout setup|export");

        if (strcmp(c->args[0], "export") == 0) {
                _cleanup_free_ char *hex = NULL;

                if (c->json || c->lockout_auth_file || c->endorsement_auth_file)
                        return log_error_rc(-TG_ERR_INVALID, "lockout export takes no options.");
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
                printf("%s\n", hex);
                explicit_bzero(hex, strlen(hex));
                return 0;
        }

        r = read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        r = read_lockout_auth(c, &lauth);
        if (r < 0)
                return r;
        r = tg_verify(config, &(tg_verify_options) { .endorsement_auth = eauth }, NULL, &v);
        if (r < 0)
                return r;
        r = tg_lockout_setup(v, config, config->state_dir, lauth, &res);
        if (r < 0)
                return r;
        if (c->json) {
                _cleanup_(json_object_putp) json_object *o = lockout_result_json(&res);
                if (!o)
                        return -TG_ERR_NOMEM;
                printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
                json_printed = true;
                return 0;
        }
        printf("Lockout hierarchy set up.\n");
        return lockout_result_print(&res, config->state_dir);
}

static int cmd_lockout_reset(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *eauth = NULL, *lauth = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        tg_lockout_state st;
        int r;

        r = read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        r = read_lockout_auth(c, &lauth);
        if (r < 0)
                return r;
        r = tg_verify(config, &(tg_verify_options) { .endorsement_auth = eauth }, NULL, &v);
        if (r < 0)
                return r;
        r = tg_lockout_reset(v, config->state_dir, lauth, &st);
        if (r < 0)
                return log_error_rc(r, "The DA counter was not reset: %s.", tg_err_str(r));
        if (c->json) {
                _cleanup_(json_object_putp) json_object *o = lockout_state_json(&st);
                if (!o)
                        return -TG_ERR_NOMEM;
                printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
                json_printed = true;
        } else
                printf("DA counter reset: %u of %u failures, %s.\n", st.failures, st.max_tries,
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

static int cmd_verify(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *eauth = NULL;
        _cleanup_(json_object_putp) json_object *json = NULL;
        tg_verify_report report = {};
        /* Always a full verification; --record also leaves this boot's cache for the unlocks. */
        tg_verify_options o = { .null_name_path = c->null_name, .use_cache = c->record };
        const char *text;
        int r, q;

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
        if (c->json) {
                printf("%s\n", text);
                json_printed = true;
        }
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
 * A token without a PIN is refused unless tpmguard.conf allows it
 * (allow_no_pin = yes) as well as --no-pin: against an active interposer it
 * protects nothing, since the interposer can run Load, PolicyPCR and Unseal
 * in a session of its own on any normal boot (issue 14 §3).
 */
static int check_no_pin_allowed(const cli *c, const tg_config *config) {
        if (c->pin_file)
                return log_error_rc(-TG_ERR_INVALID, "--no-pin and --pin-file contradict each other.");
        if (!config->allow_no_pin)
                return log_error_rc(-TG_ERR_INVALID,
                                    "--no-pin is refused: %s does not allow tokens without a PIN. A token without a PIN "
                                    "unseals for anyone who boots this machine, and an active interposer on the TPM bus "
                                    "can unseal it with commands of its own. To accept that, set allow_no_pin = yes "
                                    "there.", config->path ?: "tpmguard.conf");
        log_warning("Sealing without a PIN: anyone who can boot this machine into the sealed PCR state unlocks the "
                    "volume, and an active interposer on the TPM bus can unseal the secret with commands of its own "
                    "on any normal boot. Only the recovery passphrase then stands between a thief and the data.");
        return 0;
}

/* A new PIN, asked twice on a terminal (or read from file), at least pin_min_length bytes. */
static int read_new_pin(const tg_config *config, const char *file, tg_secret **ret) {
        _cleanup_secret_ tg_secret *pin = NULL;
        int r;

        r = tg_pin_read(file, "New TPM PIN: ", true, &pin);
        if (r == -TG_ERR_CANCELLED)
                return log_error_rc(r, "No PIN given (an empty PIN is no PIN).%s",
                                    config->allow_no_pin ? " Use --no-pin to seal without one." : "");
        if (r < 0)
                return r;
        if (pin->size < config->pin_min_length)
                return log_error_rc(-TG_ERR_INVALID, "The PIN has %zu characters; at least %u are required "
                                    "(pin_min_length in %s).", pin->size, config->pin_min_length,
                                    config->path ?: "tpmguard.conf");
        *ret = TAKE_PTR(pin);
        return 0;
}

static int seal_params_from_cli(const cli *c, const tg_config *config, tg_seal_params *p,
                                tg_pcr_values *explicit_values, tg_secret **ret_pin, tg_secret **ret_owner_auth) {
        _cleanup_secret_ tg_secret *pin = NULL, *owner = NULL;
        int r;

        *p = (tg_seal_params) { .pcr_bank = config->pcr_bank, .pcr_mask = config->pcr_mask,
                                .allow_unextended = c->allow_unextended || config->allow_unextended_pcrs };
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
                r = check_no_pin_allowed(c, config);
                if (r < 0)
                        return r;
        } else {
                r = read_new_pin(config, c->pin_file, &pin);
                if (r < 0)
                        return r;
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

/*
 * What enroll and migrate read before they touch the volume: the volume's
 * passphrase (a key file or PROMPT), the new seal's policy and secrets from
 * the command line and tpmguard.conf (seal_params_from_cli), and the
 * endorsement password if a file names it. O points at the secrets, which
 * the caller's cleanup wipes.
 */
static int enroll_inputs_from_cli(const cli *c, const tg_config *config, const char *prompt, tg_enroll_options *o,
                                  tg_pcr_values *explicit_values, tg_secret **ret_unlock, tg_secret **ret_pin,
                                  tg_secret **ret_owner_auth, tg_secret **ret_endorsement_auth) {
        _cleanup_secret_ tg_secret *unlock = NULL, *pin = NULL, *owner = NULL, *eauth = NULL;
        int r;

        if (c->unlock_key_file)
                r = tg_secret_read_file(c->unlock_key_file, 8192, &unlock);
        else
                r = tg_pin_read(NULL, prompt, false, &unlock);
        if (r < 0)
                return r;
        r = seal_params_from_cli(c, config, &o->seal, explicit_values, &pin, &owner);
        if (r < 0)
                return r;
        r = read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o->endorsement_auth = eauth;
        *ret_unlock = TAKE_PTR(unlock);
        *ret_pin = TAKE_PTR(pin);
        *ret_owner_auth = TAKE_PTR(owner);
        *ret_endorsement_auth = TAKE_PTR(eauth);
        return 0;
}

static int cmd_enroll(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *owner = NULL, *unlock = NULL, *eauth = NULL;
        tg_enroll_options o = { .keyslot = c->keyslot };
        tg_pcr_values explicit_values;
        char pcrs[96];
        int keyslot, token, r;

        r = enroll_inputs_from_cli(c, config, "Existing passphrase of the volume: ", &o, &explicit_values, &unlock,
                                   &pin, &owner, &eauth);
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

/*
 * The old systemd-tpm2 token's PIN, which only proves which keyslot is the
 * token's (tg_migrate): --old-pin-file, else the terminal when there is one.
 * NULL when the token has none, with --keep-old (the old token is not used),
 * or when there is no terminal or the owner gives none: then the old keyslot
 * is kept, never destroyed on doubt.
 */
static int read_old_pin(const cli *c, tg_secret **ret) {
        int r;

        *ret = NULL;
        if (c->keep_old) {
                if (c->old_pin_file)
                        return log_error_rc(-TG_ERR_INVALID, "--keep-old uses nothing of the old token: "
                                            "--old-pin-file does not apply.");
                return 0;
        }
        if (c->old_pin_file && strcmp(c->old_pin_file, "-") == 0 &&
            ((c->pin_file && strcmp(c->pin_file, "-") == 0) || (c->unlock_key_file && strcmp(c->unlock_key_file, "-") == 0)))
                return log_error_rc(-TG_ERR_INVALID, "Only one of --old-pin-file, --pin-file and --unlock-key-file "
                                    "can read stdin.");
        r = tg_migrate_token_wants_pin(c->args[0], c->token);
        if (r <= 0)
                return r;
        if (!c->old_pin_file && !isatty(STDIN_FILENO))
                return 0;
        r = tg_pin_read(c->old_pin_file, "PIN of the old token (to prove which keyslot is its own; empty: keep "
                        "that keyslot): ", false, ret);
        if (r == -TG_ERR_CANCELLED && !c->old_pin_file)
                return 0;
        return r < 0 ? log_error_rc(r, "Cannot read the old token's PIN. Nothing was changed.") : 0;
}

/*
 * tpmguard migrate DEVICE --token N: a systemd-tpm2 or clevis token replaced
 * by a tpmguard one, authorized by the recovery passphrase or a key file
 * only (tokens/lifecycle.h: tg_migrate). The new policy is the command
 * line's or tpmguard.conf's, never the old token's.
 */
static int cmd_migrate(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *owner = NULL, *unlock = NULL, *eauth = NULL, *old_pin = NULL;
        tg_enroll_options o = { .keyslot = CRYPT_ANY_SLOT };
        tg_pcr_values explicit_values;
        tg_migrate_result res;
        char policy[128];
        tg_token sealed;
        int r;

        if (c->token == CRYPT_ANY_TOKEN)
                return log_error_rc(-TG_ERR_INVALID, "migrate needs the token to replace: --token N ('tpmguard audit "
                                    "%s' lists them).", c->args[0]);
        r = enroll_inputs_from_cli(c, config, "Recovery passphrase of the volume: ", &o, &explicit_values, &unlock,
                                   &pin, &owner, &eauth);
        if (r < 0)
                return r;

        r = read_old_pin(c, &old_pin);
        if (r < 0)
                return r;
        /* The old PIN crossed the bus at every unlock in sessions salted to a key nobody verified: an
         * interposer there may have searched it offline from the sessions' HMACs. */
        if (pin && old_pin && pin->size == old_pin->size && memeq_const(pin->data, old_pin->data, pin->size))
                log_warning("The new PIN is the old token's. systemd-tpm2 sent it to the TPM in sessions salted to a "
                            "key it never verified, so an interposer may have learnt it; choose a new one with "
                            "'tpmguard change-pin %s'.", c->args[0]);

        r = tg_migrate(config, c->args[0], c->token, unlock, old_pin, &o, c->keep_old, &res);
        if (r < 0)
                return log_error_rc(r, "Migration failed: %s.", tg_err_str(r));
        sealed = (tg_token) { .pcr_bank = o.seal.pcr_bank, .pcr_mask = o.seal.pcr_mask, .pin = pin != NULL };
        tg_token_policy_format(&sealed, policy, sizeof policy);
        printf("Migrated %s: tpmguard token %d in keyslot %d (%s) replaces %s token %d", c->args[0], res.token,
               res.keyslot, policy, res.old_type, res.old_token);
        if (!res.old_token_removed)
                printf("; the old token %d and keyslot %d were kept (--keep-old): they stay exposed until "
                       "removed.\n", res.old_token, res.old_keyslot);
        else if (res.old_keyslot_destroyed)
                printf("; removed token %d and keyslot %d.\n", res.old_token, res.old_keyslot);
        else if (res.old_keyslot_unproven)
                printf("; removed token %d, kept keyslot %d: the old token named it, but it could not be proven the "
                       "old token's (labelled; 'tpmguard audit' reports it exposed). If no passphrase or recovery key "
                       "of yours opens it, remove it with 'cryptsetup luksKillSlot %s %d'.\n", res.old_token,
                       res.old_keyslot, c->args[0], res.old_keyslot);
        else
                printf("; removed token %d, kept keyslot %d (a passphrase or another token uses it).\n",
                       res.old_token, res.old_keyslot);
        return 0;
}

static int cmd_seal(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *owner = NULL, *secret = NULL, *eauth = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_free_ char *json = NULL;
        tg_seal_params p;
        tg_pcr_values explicit_values;
        tg_verify_report report;
        tg_token token;
        int r;

        if (!c->secret_file)
                return log_error_rc(-TG_ERR_INVALID, "seal needs --secret-file F (the keyslot secret; '-' = stdin).");
        r = tg_secret_read_file(c->secret_file, 8192, &secret);
        if (r < 0)
                return r;
        r = seal_params_from_cli(c, config, &p, &explicit_values, &pin, &owner);
        if (r < 0)
                return r;
        r = read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        r = tg_verify(config, &(tg_verify_options) { .endorsement_auth = eauth }, &report, &v);
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

/*
 * The human-readable reports quote the LUKS2 header (a peer token's PCR bank or clevis pin, token
 * types): the status and audit models have every string made one line without terminal controls
 * (tg_json_sanitize_strings), and the text of every report is written to memory first and printed
 * with every remaining terminal control replaced (tg_str_sanitize), so that an edited header can
 * neither clear the screen nor forge a line of the report.
 */
static int print_report(void (*print)(void *what, FILE *f), void *what) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);

        if (!f)
                return log_error_rc(-TG_ERR_NOMEM, "Out of memory.");
        print(what, f);
        if (fclose(f) != 0) {
                free(text);
                return log_error_rc(-TG_ERR_NOMEM, "The report could not be written.");
        }
        if (text)
                fputs(tg_str_sanitize(text), stdout);
        free(text);
        return 0;
}

static void print_doctor(void *report, FILE *f) {
        tg_doctor_report_print(report, f);
}

static void print_status(void *status, FILE *f) {
        tg_status_print(status, f);
}

static void print_audit(void *audit, FILE *f) {
        tg_audit_print(audit, f);
}

static int cmd_doctor(const cli *c, tg_config *config) {
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
                r = tg_json_sanitize_strings(j);
                if (r < 0)
                        return r;
                printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
                json_printed = true;
        } else {
                r = print_report(print_doctor, report);
                if (r < 0)
                        return r;
        }
        return tg_doctor_report_worst(report);
}

/* ---- lifecycle commands ---- */

/* The current PIN of the token, read only when the token has one. */
static int read_current_pin(const cli *c, const tg_token *t, tg_secret **ret) {
        int r;

        *ret = NULL;
        if (!t->pin)
                return 0;
        r = tg_pin_read(c->pin_file, "Current TPM PIN: ", false, ret);
        return r < 0 ? log_error_rc(r, "The token needs its current PIN (terminal, or --pin-file F).") : 0;
}

/* The token's current PIN when it has one (change-pin and rotate unseal with it). */
static int token_current_pin(const cli *c, tg_secret **ret_pin) {
        _cleanup_secret_ tg_secret *pin = NULL;
        tg_token t;
        int r;

        r = tg_lifecycle_token_peek(c->args[0], c->token, &t);
        if (r < 0)
                return r;
        r = read_current_pin(c, &t, &pin);
        explicit_bzero(&t, sizeof t);
        if (r < 0)
                return r;
        *ret_pin = TAKE_PTR(pin);
        return 0;
}

/* Ends a result line with the policy the token is now sealed to, read back from the header. */
static void print_sealed_policy(const cli *c, int token) {
        char policy[128];
        tg_token t;

        if (tg_lifecycle_token_peek(c->args[0], token, &t) < 0) {
                printf(".\n");
                return;
        }
        tg_token_policy_format(&t, policy, sizeof policy);
        explicit_bzero(&t, sizeof t);
        printf(": %s.\n", policy);
}

static int cmd_change_pin(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *new_pin = NULL;
        tg_lifecycle_result res;
        int r;

        r = token_current_pin(c, &pin);
        if (r < 0)
                return r;
        r = read_new_pin(config, c->new_pin_file, &new_pin);
        if (r < 0)
                return log_error_rc(r, "No new PIN set (terminal, or --new-pin-file F). Nothing was changed.");
        r = tg_change_pin(config, c->args[0], c->token, pin, new_pin, &res);
        if (r < 0)
                return log_error_rc(r, "Changing the PIN failed: %s.", tg_err_str(r));
        printf("Changed the PIN of token %d (keyslot %d)", res.token, res.keyslot);
        print_sealed_policy(c, res.token);
        return 0;
}

static int cmd_rotate(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL;
        tg_lifecycle_result res;
        int r;

        r = token_current_pin(c, &pin);
        if (r < 0)
                return r;
        r = tg_rotate(config, c->args[0], c->token, pin, &res);
        if (r < 0)
                return log_error_rc(r, "Rotation failed: %s.", tg_err_str(r));
        printf("Rotated token %d: keyslot %d replaces keyslot %d", res.token, res.keyslot, res.old_keyslot);
        print_sealed_policy(c, res.token);
        return 0;
}

/*
 * reseal: the new policy comes from the command line, else tpmguard.conf —
 * never from the old token, whose fields an attacker can edit (issue 14 §2).
 * Authorized by unsealing (the current PIN, which the new seal keeps) or by
 * a passphrase of the volume (then the new PIN is asked, twice).
 */
static int cmd_reseal(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *new_pin = NULL, *unlock = NULL;
        tg_reseal_params p = {};
        tg_pcr_values explicit_values;
        tg_lifecycle_result res;
        tg_token t, sealed = {};
        char policy[128];
        int r;

        p.pcr_bank = config->pcr_bank;
        p.pcr_mask = config->pcr_mask;
        p.allow_unextended = c->allow_unextended || config->allow_unextended_pcrs;
        if (c->pcr_bank && tg_pcr_bank_from_string(c->pcr_bank, &p.pcr_bank) < 0)
                return log_error_rc(-TG_ERR_INVALID, "--pcr-bank: unknown bank \"%s\" (sha1, sha256, sha384, sha512).", c->pcr_bank);
        if (c->pcrs && tg_pcr_list_parse(c->pcrs, &p.pcr_mask) < 0)
                return log_error_rc(-TG_ERR_INVALID, "--pcrs: \"%s\" is not a list like 7 or 0,2,7 (PCRs 0..23).", c->pcrs);
        if (c->n_pcr_values > 0) {
                explicit_values = (tg_pcr_values) { .bank = p.pcr_bank };
                for (int i = 0; i < c->n_pcr_values; i++) {
                        r = tg_pcr_value_parse(c->pcr_values[i], &explicit_values);
                        if (r < 0)
                                return r;
                }
                p.explicit_values = &explicit_values;
        }
        if (c->no_pin) {
                r = check_no_pin_allowed(c, config);
                if (r < 0)
                        return r;
        }

        r = tg_lifecycle_token_peek(c->args[0], c->token, &t);
        if (r < 0)
                return r;
        if (c->unlock_key_file) {
                /* Authorized by a passphrase: the token's PIN is not needed, the new one is asked twice. */
                if (!c->no_pin)
                        r = read_new_pin(config, c->pin_file, &new_pin);
                if (r >= 0)
                        r = tg_secret_read_file(c->unlock_key_file, 8192, &unlock);
        } else {
                r = read_current_pin(c, &t, &pin);
                if (r >= 0 && !c->no_pin) {
                        if (pin)
                                r = tg_secret_new_copy(pin->data, pin->size, &new_pin);
                        else
                                /* The token claims no PIN; the configuration wants one: set it now. */
                                r = read_new_pin(config, NULL, &new_pin);
                }
        }
        explicit_bzero(&t, sizeof t);
        if (r < 0)
                return r;
        p.pin = pin;
        p.new_pin = new_pin;
        p.unlock_passphrase = unlock;
        r = tg_reseal(config, c->args[0], c->token, &p, &res);
        if (r < 0)
                return log_error_rc(r, "Resealing failed: %s.", tg_err_str(r));
        sealed = (tg_token) { .pcr_bank = p.pcr_bank, .pcr_mask = p.pcr_mask, .pin = new_pin != NULL };
        tg_token_policy_format(&sealed, policy, sizeof policy);
        if (res.keyslot != res.old_keyslot)
                printf("Resealed token %d into a new keyslot %d (keyslot %d removed): %s.\n", res.token, res.keyslot,
                       res.old_keyslot, policy);
        else
                printf("Resealed token %d (keyslot %d): %s.\n", res.token, res.keyslot, policy);
        return 0;
}

/* ---- passphrase commands ---- */

/*
 * What authorizes a passphrase change: --unlock-key-file (an existing
 * passphrase or recovery key), else the tpmguard token with its PIN, else
 * (no tpmguard token) a passphrase typed on the terminal.
 */
static int passphrase_auth_from_cli(const cli *c, const char *prompt, tg_passphrase_auth *auth, tg_secret **ret_pin,
                                    tg_secret **ret_passphrase) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_secret_ tg_secret *pin = NULL, *passphrase = NULL;
        bool has_token = false;
        tg_token t;
        int r;

        *auth = (tg_passphrase_auth) { .token = c->token, .pbkdf_time_ms = c->iter_time };
        if (c->unlock_key_file) {
                if (c->pin_file || c->token != CRYPT_ANY_TOKEN)
                        return log_error_rc(-TG_ERR_INVALID, "--unlock-key-file authorizes without the token: "
                                            "--pin-file and --token do not apply.");
                r = tg_secret_read_file(c->unlock_key_file, 8192, &passphrase);
                if (r < 0)
                        return r;
        } else {
                r = tg_luks_open(c->args[0], &cd);
                if (r < 0)
                        return r;
                for (int id = 0; id < tg_luks_tokens_max() && !has_token; id++)
                        has_token = tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE);
                if (has_token || c->token != CRYPT_ANY_TOKEN) {
                        r = tg_lifecycle_token_peek(c->args[0], c->token, &t);
                        if (r < 0)
                                return r;
                        r = read_current_pin(c, &t, &pin);
                        explicit_bzero(&t, sizeof t);
                        if (r < 0)
                                return r;
                } else {
                        r = tg_passphrase_read(NULL, prompt, false, &passphrase);
                        if (r < 0)
                                return log_error_rc(r, "%s has no tpmguard token: authorize with an existing passphrase "
                                                    "(terminal, or --unlock-key-file F).", c->args[0]);
                }
        }
        auth->pin = pin;
        auth->passphrase = passphrase;
        *ret_pin = TAKE_PTR(pin);
        *ret_passphrase = TAKE_PTR(passphrase);
        return 0;
}

static int show_recovery_key(const tg_secret *key, int keyslot, void *userdata) {
        (void) userdata;
        return tg_show_recovery_key(key, keyslot);
}

static int cmd_recovery_key(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *passphrase = NULL;
        tg_passphrase_auth auth;
        tg_passphrase_result res;
        int r;

        r = passphrase_auth_from_cli(c, "Current passphrase or recovery key: ", &auth, &pin, &passphrase);
        if (r < 0)
                return r;
        r = tg_recovery_key_enroll(config, c->args[0], &auth, c->replace, show_recovery_key, NULL, &res);
        if (r < 0)
                return log_error_rc(r, "Adding a recovery key failed: %s.", tg_err_str(r));
        if (res.old_keyslot >= 0)
                printf("Recovery key enrolled in keyslot %d (label token %d); keyslot %d removed.\n", res.new_keyslot,
                       res.label_token, res.old_keyslot);
        else
                printf("Recovery key enrolled in keyslot %d (label token %d).\n", res.new_keyslot, res.label_token);
        return 0;
}

static int cmd_passwd(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *passphrase = NULL, *new_passphrase = NULL;
        tg_passphrase_auth auth;
        tg_passphrase_result res;
        int r;

        r = passphrase_auth_from_cli(c, "Current passphrase: ", &auth, &pin, &passphrase);
        if (r < 0)
                return r;
        r = tg_passphrase_read(c->new_passphrase_file, "New passphrase: ", true, &new_passphrase);
        if (r < 0)
                return log_error_rc(r, "No new passphrase given (terminal, or --new-passphrase-file F).");
        r = tg_passphrase_change(config, c->args[0], &auth, c->keyslot, new_passphrase, &res);
        if (r < 0)
                return log_error_rc(r, "Changing the passphrase failed: %s.", tg_err_str(r));
        printf("Changed the passphrase: keyslot %d replaces keyslot %d.\n", res.new_keyslot, res.old_keyslot);
        return 0;
}

static int cmd_remove(const cli *c, tg_config *config) {
        tg_lifecycle_result res;
        int r;

        r = tg_remove(config, c->args[0], c->token, &res);
        if (r < 0)
                return log_error_rc(r, "Removal failed: %s.", tg_err_str(r));
        if (res.old_keyslot >= 0)
                printf("Removed token %d and keyslot %d.\n", res.token, res.old_keyslot);
        else
                printf("Removed token %d.\n", res.token);
        return 0;
}

static int cmd_cleanup(const cli *c, tg_config *config) {
        unsigned actions = 0;
        int r;

        r = tg_cleanup(config, c->args[0], &actions);
        if (r < 0)
                return log_error_rc(r, "Cleanup failed: %s.", tg_err_str(r));
        printf(actions ? "Cleaned up %s (%u repairs).\n" : "Nothing to clean up on %s.\n", c->args[0], actions);
        return 0;
}

/*
 * tpmguard config get KEY: the effective value of a setting. The boot
 * scripts, the initramfs-tools hook and the dracut module ask this instead
 * of parsing tpmguard.conf with sed, so there is one parser (lib/config.c)
 * and the scripts see exactly what the binary will use.
 */
static int cmd_config(const cli *c, tg_config *config) {
        _cleanup_free_ char *value = NULL;
        int r;

        if (c->n_args != 2 || strcmp(c->args[0], "get") != 0)
                return log_error_rc(-TG_ERR_INVALID, "Usage: tpmguard config get KEY");
        r = tg_config_get(config, c->args[1], &value);
        if (r < 0)
                return r;
        printf("%s\n", value);
        return 0;
}

/*
 * tpmguard bind DEVICE: records the volume's binding (tokens/binding.h) for
 * volumes enrolled with 'cryptsetup token import' or before bindings
 * existed. Authorized by a passphrase of the volume, which proves that the
 * volume key is the one being recorded; the TPM is not involved.
 */
static int cmd_bind(const cli *c, tg_config *config) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_secret_ tg_secret *unlock = NULL;
        int r;

        r = tg_luks_open(c->args[0], &cd);
        if (r < 0)
                return r;
        if (c->unlock_key_file)
                r = tg_secret_read_file(c->unlock_key_file, 8192, &unlock);
        else
                r = tg_pin_read(NULL, "Passphrase of the volume: ", false, &unlock);
        if (r < 0)
                return r;
        r = tg_volume_binding_record(config->state_dir, cd, CRYPT_ANY_SLOT, unlock);
        if (r < 0)
                return log_error_rc(r, "Binding failed: %s. Nothing was recorded.", tg_err_str(r));
        printf("Bound %s (UUID %s) to this machine. Rebuild the initrd so that it carries the binding "
               "(update-initramfs -u, or dracut -f).\n", c->args[0], crypt_get_uuid(cd));
        return 0;
}

static int cmd_status(const cli *c, tg_config *config) {
        _cleanup_(json_object_putp) json_object *status = NULL;
        int r;

        r = tg_status(config, c->args[0], &status);
        if (r < 0)
                return r;
        /* The model quotes the header: one line per field, no terminal control, in both forms. */
        r = tg_json_sanitize_strings(status);
        if (r < 0)
                return r;
        if (c->json) {
                printf("%s\n", json_object_to_json_string_ext(status, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE));
                json_printed = true;
        }
        else {
                r = print_report(print_status, status);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * tpmguard audit [DEVICE...]: every token's verdicts (cli/audit.c). The
 * whole report is printed either way; exposed tokens make the exit status
 * TG_ERR_EXPOSED's (21), so a fleet tool needs no parsing to alert; else a
 * volume that could not be audited gives its error's.
 */
static int cmd_audit(const cli *c, tg_config *config) {
        _cleanup_(json_object_putp) json_object *audit = NULL;
        int r, volume_error = 0;

        r = tg_audit(config, c->args, (size_t) c->n_args, &audit, &volume_error);
        if (r < 0)
                return log_error_rc(r, "The audit could not finish: %s.", tg_err_str(r));
        r = tg_json_sanitize_strings(audit);
        if (r < 0)
                return r;
        if (c->json) {
                printf("%s\n", json_object_to_json_string_ext(audit, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                                       JSON_C_TO_STRING_NOSLASHESCAPE));
                json_printed = true;
        } else {
                r = print_report(print_audit, audit);
                if (r < 0)
                        return r;
        }
        /* Exposed outranks a volume that could not be read: both are in the output. */
        return tg_audit_exposed(audit) ? -TG_ERR_EXPOSED : volume_error;
}

static int cmd_help(const cli *c, tg_config *config);

static const cli_command commands[] = {
        { "provision", "", "Pin the EK signing key after proving it against the EK certificate; take the lockout hierarchy",
          O(EK_CERT) | O(EK_CA) | O(EK_INTERMEDIATES) | O(OUTPUT) | O(EAUTH) | O(OWNER_AUTH) | O(LOCKOUT_AUTH) | O(TOFU) | O(JSON),
          CMD_CONFIG, cmd_provision },
        { "verify", "", "Verify the TPM: kernel null_name, pinned key, certification",
          O(RECORD) | O(EAUTH) | O(NULL_NAME) | O(JSON), CMD_CONFIG, cmd_verify },
        { "enroll", "DEV", "Add a keyslot with a TPM-sealed secret (PIN + PCR policy) and its token",
          OPTS_SEAL | O(UNLOCK_KEY_FILE) | O(KEY_SLOT), CMD_CONFIG, cmd_enroll },
        { "seal", "", "Seal a given keyslot secret; print token JSON for 'cryptsetup token import'",
          OPTS_SEAL | O(SECRET_FILE), CMD_CONFIG, cmd_seal },
        { "doctor", "[DEV...]", "Explain the whole state, with a next step for each problem",
          O(INITRD) | O(CRYPTTAB) | O(EAUTH) | O(NULL_NAME) | O(JSON), CMD_CONFIG, cmd_doctor },
        { "change-pin", "DEV", "Change the PIN of a token (unseal, reseal with the new PIN)",
          O(TOKEN) | O(PIN_FILE) | O(NEW_PIN_FILE) | O(ACCEPT_TOKEN_POLICY), CMD_CONFIG, cmd_change_pin },
        { "rotate", "DEV", "Move a token to a new random secret in a new keyslot",
          O(TOKEN) | O(PIN_FILE) | O(ACCEPT_TOKEN_POLICY), CMD_CONFIG, cmd_rotate },
        { "reseal", "DEV", "Seal to new PCR values (after a firmware or boot chain update)",
          O(TOKEN) | O(PCRS) | O(PCR_BANK) | O(PCR) | O(PIN_FILE) | O(NO_PIN) | O(UNLOCK_KEY_FILE) |
          O(ALLOW_UNEXTENDED), CMD_CONFIG, cmd_reseal },
        { "recovery-key", "DEV", "Add a fresh recovery key (shown once), optionally replacing a keyslot",
          O(TOKEN) | O(PIN_FILE) | O(UNLOCK_KEY_FILE) | O(REPLACE) | O(ITER_TIME), CMD_CONFIG, cmd_recovery_key },
        { "passwd", "DEV", "Change a typed passphrase (authorized by the token's PIN or a passphrase)",
          O(TOKEN) | O(PIN_FILE) | O(UNLOCK_KEY_FILE) | O(KEY_SLOT) | O(NEW_PASSPHRASE_FILE) | O(ITER_TIME), CMD_CONFIG, cmd_passwd },
        { "remove", "DEV", "Remove a token and its keyslot (never the last keyslot)", O(TOKEN), CMD_CONFIG, cmd_remove },
        { "status", "DEV", "Tokens, keyslots, PCR policy state, interrupted operations, TPM state",
          O(JSON), CMD_CONFIG, cmd_status },
        { "cleanup", "DEV", "Finish or undo interrupted operations, remove orphans", 0, CMD_CONFIG, cmd_cleanup },
        { "migrate", "DEV", "Replace a systemd-tpm2 or clevis token by a tpmguard one (recovery passphrase authorizes)",
          OPTS_SEAL | O(UNLOCK_KEY_FILE) | O(TOKEN) | O(KEEP_OLD) | O(OLD_PIN_FILE), CMD_CONFIG, cmd_migrate },
        { "audit", "[DEV...]", "Which TPM-bound tokens an interposer, a TPM reset or a header edit can read",
          O(JSON), CMD_CONFIG, cmd_audit },
        { "bind", "DEV", "Record the volume's key fingerprint, so a decoy volume is refused",
          O(UNLOCK_KEY_FILE), CMD_CONFIG, cmd_bind },
        { "lockout", "setup|export", "Take the lockout hierarchy and set the DA parameters; print its password",
          O(EAUTH) | O(LOCKOUT_AUTH) | O(JSON), CMD_CONFIG, cmd_lockout },
        { "lockout-reset", "", "Reset the TPM's dictionary-attack counter (needs the lockout password)",
          O(EAUTH) | O(LOCKOUT_AUTH) | O(JSON), CMD_CONFIG, cmd_lockout_reset },
        { "config", "get KEY", "Print the effective value of a tpmguard.conf setting", 0, CMD_CONFIG, cmd_config },
        { "help", "[COMMAND]", "Show this help, or one command's", 0, 0, cmd_help },
};

static const cli_command *command_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (strcmp(name, commands[i].name) == 0)
                        return &commands[i];
        return NULL;
}

static int unknown_command(const char *name) {
        const char *best = NULL;
        size_t best_d = SIZE_MAX;

        for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
                size_t d = edit_distance(name, commands[i].name);
                /* A prefix is a good guess too ("prov" → provision). */
                if (strncmp(commands[i].name, name, strlen(name)) == 0 && strlen(name) >= 3)
                        d = 1;
                if (d < best_d) {
                        best_d = d;
                        best = commands[i].name;
                }
        }
        if (best && best_d <= 2)
                return log_error_rc(-TG_ERR_INVALID, "Unknown command \"%s\". Did you mean \"%s\"? See 'tpmguard help'.",
                                    name, best);
        return log_error_rc(-TG_ERR_INVALID, "Unknown command \"%s\". See 'tpmguard help'.", name);
}

static int cmd_help(const cli *c, _unused_ tg_config *config) {
        const cli_command *cmd;

        if (c->n_args == 0) {
                help_general(commands, ELEMENTSOF(commands));
                return 0;
        }
        if (c->n_args > 1)
                return log_error_rc(-TG_ERR_INVALID, "help takes at most one command.");
        cmd = command_find(c->args[0]);
        if (!cmd)
                return unknown_command(c->args[0]);
        help_command(cmd);
        return 0;
}

/*
 * --json promises JSON on standard output whatever happens: a command that
 * failed before printing its own object gets this one, with the error id,
 * message and exit code of tpmguard(8).
 */
static void json_failure(const char *command, int r) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o)
                return;
        json_object_object_add(o, "command", json_object_new_string(command));
        json_object_object_add(o, "error", json_object_new_string(tg_err_id(r)));
        json_object_object_add(o, "message", json_object_new_string(tg_err_str(r)));
        json_object_object_add(o, "exit_code", json_object_new_int(tg_err_exit_code(r)));
        printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                              JSON_C_TO_STRING_NOSLASHESCAPE));
}

static int parse_number(const char *option, const char *s, int max, int *ret) {
        char *end;
        long n;

        errno = 0;
        n = strtol(s, &end, 10);
        if (*s == '\0' || *end != '\0' || errno != 0 || n < 0 || n > max)
                return log_error_rc(-TG_ERR_INVALID, "--%s: \"%s\" is not a number 0..%d.", option, s, max);
        *ret = (int) n;
        return 0;
}

/* What every command needs before it runs, as its table entry says: its
 * arguments (for the fixed synopses) and the configuration. */
static int command_prepare(const cli_command *cmd, const cli *c, tg_config **ret_config) {
        _cleanup_config_ tg_config *config = NULL;
        int r;

        if (cmd->args[0] == '\0' && c->n_args != 0)
                return log_error_rc(-TG_ERR_INVALID, "%s takes no arguments (\"%s\"). See 'tpmguard %s --help'.",
                                    cmd->name, c->args[0], cmd->name);
        if (strcmp(cmd->args, "DEV") == 0 && c->n_args != 1)
                return log_error_rc(-TG_ERR_INVALID, "%s takes one argument: the LUKS2 device. See 'tpmguard %s --help'.",
                                    cmd->name, cmd->name);
        if (cmd->needs & CMD_CONFIG) {
                r = load_config(c, &config);
                if (r < 0)
                        return log_error_rc(r, "Fix the configuration first (tpmguard.conf(5)); %s needs it.", cmd->name);
        }
        *ret_config = TAKE_PTR(config);
        return 0;
}

int main(int argc, char *argv[]) {
        static struct option options[_OPT_MAX + 1];
        char shorts[32] = "";
        uint64_t given = 0;
        const cli_command *cmd;
        _cleanup_config_ tg_config *config = NULL;
        cli c = { .keyslot = CRYPT_ANY_SLOT, .token = CRYPT_ANY_TOKEN, .replace = -1 };
        bool want_help = false;
        int opt, r;

        tg_process_harden();
        /* tpm2-tss logs expected TPM refusals (wrong PIN, absent handle) as
         * errors on stderr; our messages explain them. TSS2_LOG set by the
         * user still wins. This is our own process, never a host's. */
        (void) setenv("TSS2_LOG", "all+none", 0);

        for (int id = 0; id < _OPT_MAX; id++) {
                options[id] = (struct option) { option_docs[id].name,
                                                option_docs[id].arg ? required_argument : no_argument, NULL, 0x100 + id };
                if (option_docs[id].short_name) {
                        size_t l = strlen(shorts);
                        shorts[l] = option_docs[id].short_name;
                        shorts[l + 1] = option_docs[id].arg ? ':' : '\0';
                        shorts[l + 2] = '\0';
                }
        }

        opterr = 0;
        while ((opt = getopt_long(argc, argv, shorts, options, NULL)) >= 0) {
                int id = -1;

                if (opt == '?' || opt == ':') {
                        const char *bad = argv[optind - 1];
                        return tg_err_exit_code(log_error_rc(-TG_ERR_INVALID,
                                                             opt == ':' ? "Option %s needs an argument. See 'tpmguard help'."
                                                                        : "Unknown option %s. See 'tpmguard help'.",
                                                             bad ? bad : "?"));
                }
                if (opt >= 0x100)
                        id = opt - 0x100;
                else
                        for (int k = 0; k < _OPT_MAX; k++)
                                if (option_docs[k].short_name == opt)
                                        id = k;
                assert(id >= 0 && id < _OPT_MAX);
                given |= 1ull << id;
                switch (id) {
                case OPT_CONFIG: c.config_path = optarg; break;
                case OPT_TCTI: c.tcti = optarg; break;
                case OPT_NULL_NAME: c.null_name = optarg; break;
                case OPT_JSON: c.json = true; break;
                case OPT_VERBOSE: tg_log_set_max_level(tg_log_get_max_level() >= LOG_INFO ? LOG_DEBUG : LOG_INFO); break;
                case OPT_QUIET: tg_log_set_max_level(LOG_ERR); break;
                case OPT_HELP: want_help = true; break;
                case OPT_VERSION: printf("tpmguard %s\n", TPMGUARD_VERSION); return 0;
                case OPT_RECORD: c.record = true; break;
                case OPT_TOFU: c.trust_on_first_use = true; break;
                case OPT_EK_CERT: c.ek_cert = optarg; break;
                case OPT_EK_CA: c.ek_ca = optarg; break;
                case OPT_EK_INTERMEDIATES: c.ek_intermediates = optarg; break;
                case OPT_OUTPUT: c.output_dir = optarg; break;
                case OPT_EAUTH: c.endorsement_auth_file = optarg; break;
                case OPT_OWNER_AUTH: c.owner_auth_file = optarg; break;
                case OPT_PIN_FILE: c.pin_file = optarg; break;
                case OPT_NO_PIN: c.no_pin = true; break;
                case OPT_UNLOCK_KEY_FILE: c.unlock_key_file = optarg; break;
                case OPT_SECRET_FILE: c.secret_file = optarg; break;
                case OPT_PCRS: c.pcrs = optarg; break;
                case OPT_PCR_BANK: c.pcr_bank = optarg; break;
                case OPT_PCR:
                        if (c.n_pcr_values >= TG_PCR_COUNT)
                                return tg_err_exit_code(log_error_rc(-TG_ERR_INVALID, "Too many --pcr options."));
                        c.pcr_values[c.n_pcr_values++] = optarg;
                        break;
                case OPT_INITRD: c.initrd = optarg; break;
                case OPT_CRYPTTAB: c.crypttab = optarg; break;
                case OPT_KEY_SLOT:
                        if (parse_number("key-slot", optarg, 31, &c.keyslot) < 0)
                                return tg_err_exit_code(-TG_ERR_INVALID);
                        break;
                case OPT_TOKEN:
                        if (parse_number("token", optarg, 31, &c.token) < 0)
                                return tg_err_exit_code(-TG_ERR_INVALID);
                        break;
                case OPT_NEW_PIN_FILE: c.new_pin_file = optarg; break;
                case OPT_NEW_PASSPHRASE_FILE: c.new_passphrase_file = optarg; break;
                case OPT_REPLACE:
                        if (parse_number("replace", optarg, 31, &c.replace) < 0)
                                return tg_err_exit_code(-TG_ERR_INVALID);
                        break;
                case OPT_ITER_TIME: {
                        int ms;
                        if (parse_number("iter-time", optarg, 60000, &ms) < 0 || ms < 10)
                                return tg_err_exit_code(log_error_rc(-TG_ERR_INVALID, "--iter-time: 10..60000 ms."));
                        c.iter_time = (uint32_t) ms;
                        break;
                }
                case OPT_ACCEPT_TOKEN_POLICY: c.accept_token_policy = true; break;
                case OPT_LOCKOUT_AUTH: c.lockout_auth_file = optarg; break;
                case OPT_ALLOW_UNEXTENDED: c.allow_unextended = true; break;
                case OPT_KEEP_OLD: c.keep_old = true; break;
                case OPT_OLD_PIN_FILE: c.old_pin_file = optarg; break;
                default: assert(false); return tg_err_exit_code(-TG_ERR_INVALID);
                }
        }

        if (optind >= argc) {
                if (want_help) {
                        help_general(commands, ELEMENTSOF(commands));
                        return 0;
                }
                help_general(commands, ELEMENTSOF(commands));
                return tg_err_exit_code(-TG_ERR_INVALID);
        }
        cmd = command_find(argv[optind]);
        if (!cmd)
                return tg_err_exit_code(unknown_command(argv[optind]));
        if (want_help) {
                help_command(cmd);
                return 0;
        }
        c.args = argv + optind + 1;
        c.n_args = argc - optind - 1;

        /* An option the command does not take is an error, not silently ignored. */
        for (int id = 0; id < _OPT_MAX; id++)
                if ((given & (1ull << id)) && !((OPTS_GENERAL | cmd->options) & (1ull << id))) {
                        r = log_error_rc(-TG_ERR_INVALID, "--%s does not apply to %s. See 'tpmguard %s --help'.",
                                         option_docs[id].name, cmd->name, cmd->name);
                        if (c.json && (cmd->options & O(JSON)))
                                json_failure(cmd->name, r);
                        return tg_err_exit_code(r);
                }

        json_printed = false;
        r = command_prepare(cmd, &c, &config);
        if (r >= 0)
                r = cmd->run(&c, config);
        if (r < 0 && c.json && !json_printed)
                json_failure(cmd->name, r);
        return tg_err_exit_code(r);
}
