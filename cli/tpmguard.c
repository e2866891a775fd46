/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard: the command line. Thin: parses arguments, reads secrets from
 * files or the terminal (never argv or the environment), calls the core and
 * turns its error space into the exit codes documented in tpmguard(8).
 * Here: the options, the table of commands, help and main; the commands
 * themselves by verb group in cmd-tpm.c, cmd-token.c, cmd-passphrase.c and
 * cmd-report.c.
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <libcryptsetup.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cmd-passphrase.h"
#include "cmd-pcrs.h"
#include "cmd-report.h"
#include "cmd-token.h"
#include "cmd-update.h"
#include "cmd-totp.h"
#include "cmd-tpm.h"
#include "cmdline.h"
#include "config.h"
#include "device.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "secret.h"
#include "tpmguard-config.h"
#include "util.h"

/* ---- options and commands: one table each, so help, per-command usage and
 * the check that an option applies to the command all come from one place ---- */

enum {
        OPT_CONFIG, OPT_TCTI, OPT_NULL_NAME, OPT_JSON, OPT_VERBOSE, OPT_QUIET, OPT_HELP, OPT_VERSION,
        OPT_RECORD, OPT_EK_CERT, OPT_EK_CA, OPT_EK_INTERMEDIATES, OPT_OUTPUT, OPT_EAUTH, OPT_OWNER_AUTH,
        OPT_PIN_FILE, OPT_NO_PIN, OPT_UNLOCK_KEY_FILE, OPT_SECRET_FILE, OPT_PCRS, OPT_PCR_BANK, OPT_PCR,
        OPT_KEY_SLOT, OPT_INITRD, OPT_CRYPTTAB, OPT_TOKEN, OPT_NEW_PIN_FILE, OPT_ACCEPT_TOKEN_POLICY,
        OPT_ALLOW_UNEXTENDED, OPT_REPLACE, OPT_NEW_PASSPHRASE_FILE, OPT_ITER_TIME, OPT_LOCKOUT_AUTH,
        OPT_KEEP_OLD, OPT_OLD_PIN_FILE,
        OPT_TOFU, OPT_LOCKOUT_AUTH_COPY,
        OPT_EVENT_LOG, OPT_PREDICT, OPT_DB, OPT_DBX, OPT_KEK, OPT_AUTHORITY, OPT_REPLACE_VARIABLES, OPT_EFIVARS,
        OPT_BOOTS, OPT_FROM_MARKER, OPT_CHANGING, OPT_ACCEPT_CHANGE,
        OPT_CONSOLE,
        OPT_WIPE_SLOT, OPT_DRY_RUN,
        _OPT_MAX,
};

/*
 * How an option is stored: most set their field of struct cli (a flag, a
 * string, a keyslot or token number 0..31), so a new option is one row
 * here and its field; the few that do something else are main's switch.
 */
typedef enum option_kind {
        OPTION_SPECIAL,     /* main's switch */
        OPTION_FLAG,        /* bool field = true */
        OPTION_STRING,      /* const char * field = the argument */
        OPTION_SLOT,        /* int field = the argument, a number 0..31 */
} option_kind;

/* offsetof(cli, f), refused at build time unless f has the type T. */
#define CLI_FIELD(f, T) __builtin_choose_expr(__builtin_types_compatible_p(__typeof__(((cli *) 0)->f), T), \
                                              offsetof(cli, f), (void) 0)
/* The row's last three fields: field, kind and short name (0: none; the _SHORT forms give one). */
#define FLAG(f) CLI_FIELD(f, bool), OPTION_FLAG, 0
#define STRING(f) STRING_SHORT(f, 0)
#define STRING_SHORT(f, c) CLI_FIELD(f, const char *), OPTION_STRING, c
#define SLOT(f) CLI_FIELD(f, int), OPTION_SLOT, 0
#define SPECIAL SPECIAL_SHORT(0)
#define SPECIAL_SHORT(c) 0, OPTION_SPECIAL, c

static const struct option_doc {
        const char *name;   /* long name */
        const char *arg;    /* NULL: a flag */
        const char *text;
        size_t field;       /* offsetof(cli, ...) unless OPTION_SPECIAL */
        option_kind kind;
        char short_name;    /* or 0 */
} option_docs[_OPT_MAX] = {
        [OPT_CONFIG]           = { "config", "FILE", "Configuration file (default " TPMGUARD_CONFIG_PATH ")", STRING_SHORT(config_path, 'c') },
        [OPT_TCTI]             = { "tcti", "TCTI", "TPM transport, overrides the configuration", STRING(tcti) },
        [OPT_NULL_NAME]        = { "null-name", "FILE", "Read the kernel's null_name from FILE", STRING(null_name) },
        [OPT_JSON]             = { "json", NULL, "Machine-readable output (also on failure)", FLAG(json) },
        [OPT_VERBOSE]          = { "verbose", NULL, "More messages (repeat for debug)", SPECIAL_SHORT('v') },
        [OPT_QUIET]            = { "quiet", NULL, "Errors only", SPECIAL_SHORT('q') },
        [OPT_HELP]             = { "help", NULL, "This help, or the command's", SPECIAL_SHORT('h') },
        [OPT_VERSION]          = { "version", NULL, "Version", SPECIAL_SHORT('V') },
        [OPT_RECORD]           = { "record", NULL, "Also write the result to cache_dir/boot-verify.json", FLAG(record) },
        [OPT_EK_CERT]          = { "ek-cert", "FILE", "EK certificate (default: read from TPM NV)", STRING(ek_cert) },
        [OPT_EK_CA]            = { "ek-ca", "FILE|DIR", "Manufacturer CA store (default: ek_ca setting)", STRING(ek_ca) },
        [OPT_EK_INTERMEDIATES] = { "ek-intermediates", "FILE", "Extra untrusted intermediate certificates", STRING(ek_intermediates) },
        [OPT_OUTPUT]           = { "output", "DIR", "Where to pin the key (default: state_dir)", STRING(output_dir) },
        [OPT_EAUTH]            = { "endorsement-auth-file", "F", "Endorsement hierarchy password ('-' = stdin)", STRING(endorsement_auth_file) },
        [OPT_OWNER_AUTH]       = { "owner-auth-file", "F", "Owner hierarchy password ('-' = stdin)", STRING(owner_auth_file) },
        [OPT_PIN_FILE]         = { "pin-file", "F", "Read the PIN from F ('-' = stdin) instead of the terminal", STRING(pin_file) },
        [OPT_NO_PIN]           = { "no-pin", NULL, "No PIN: anyone who boots this machine unlocks the volume", FLAG(no_pin) },
        [OPT_UNLOCK_KEY_FILE]  = { "unlock-key-file", "F", "An existing passphrase or key file of the volume", STRING(unlock_key_file) },
        [OPT_SECRET_FILE]      = { "secret-file", "F", "The keyslot secret to seal, byte for byte ('-' = stdin)", STRING(secret_file) },
        [OPT_PCRS]             = { "pcrs", "LIST", "PCRs to seal to, e.g. 7 or 0,2,7 (default: pcrs setting)", STRING(pcrs) },
        [OPT_PCR_BANK]         = { "pcr-bank", "BANK", "sha256 (default: pcr_bank setting), sha1, sha384, sha512", STRING(pcr_bank) },
        [OPT_PCR]              = { "pcr", "N=BANK:HEX", "Seal to this value instead of the current one (repeatable)", SPECIAL },
        [OPT_KEY_SLOT]         = { "key-slot", "N", "enroll: keyslot for the new secret (default: first free); "
                                                       "passwd: the passphrase keyslot to change", SLOT(keyslot) },
        [OPT_INITRD]           = { "initrd", "FILE", "The initrd to inspect (default /boot/initrd.img-$(uname -r))", STRING(initrd) },
        [OPT_CRYPTTAB]         = { "crypttab", "FILE", "Where to find volumes when none is given (default /etc/crypttab)", STRING(crypttab) },
        [OPT_TOKEN]            = { "token", "N", "The tpmguard token (needed when there are several)", SLOT(token) },
        [OPT_NEW_PIN_FILE]     = { "new-pin-file", "F", "Read the new PIN from F ('-' = stdin)", STRING(new_pin_file) },
        [OPT_ALLOW_UNEXTENDED] = { "allow-unextended-pcrs", NULL,
                                   "Seal to PCRs that were never extended (all zeros or ones)", FLAG(allow_unextended) },
        [OPT_REPLACE]          = { "replace", "SLOT", "Destroy this keyslot once the new key is proven and shown", SLOT(replace) },
        [OPT_NEW_PASSPHRASE_FILE] = { "new-passphrase-file", "F", "Read the new passphrase from F's first line ('-' = stdin)", STRING(new_passphrase_file) },
        [OPT_ITER_TIME]        = { "iter-time", "MS", "argon2id time for the new keyslot (default 2000, cryptsetup's)", SPECIAL },
        [OPT_ACCEPT_TOKEN_POLICY] = { "accept-token-policy", NULL,
                                      "Carry over a token policy weaker than tpmguard.conf (no PIN, fewer PCRs)", FLAG(accept_token_policy) },
        [OPT_LOCKOUT_AUTH]     = { "lockout-auth-file", "F", "Lockout hierarchy password set by another owner ('-' = stdin)", STRING(lockout_auth_file) },
        [OPT_KEEP_OLD]         = { "keep-old", NULL, "Keep the old token and its keyslot (they stay exposed)", FLAG(keep_old) },
        [OPT_OLD_PIN_FILE]     = { "old-pin-file", "F", "The old token's PIN, to prove its keyslot ('-' = stdin)", STRING(old_pin_file) },
        [OPT_TOFU]             = { "trust-on-first-use", NULL,
                                   "No EK certificate in NV: pin the EK signing key unproven (firmware TPMs)", FLAG(trust_on_first_use) },
        [OPT_LOCKOUT_AUTH_COPY] = { "lockout-auth-copy", "F", "Also write a new lockout password to F (new file, 0600)",
                                    STRING(lockout_auth_copy) },
        [OPT_EVENT_LOG]        = { "event-log", "FILE", "TCG event log (default " "/sys/kernel/security/tpm0/binary_bios_measurements)",
                                   STRING(event_log) },
        [OPT_PREDICT]          = { "predict", NULL, "Print PCR 7 of the next boot as --pcr 7=BANK:HEX", FLAG(predict) },
        [OPT_DB]               = { "db", "FILE", "--predict with this db update (.esl or .auth)", STRING(db_file) },
        [OPT_DBX]              = { "dbx", "FILE", "--predict with this dbx update (.esl or .auth)", STRING(dbx_file) },
        [OPT_KEK]              = { "kek", "FILE", "--predict with this KEK update (.esl or .auth)", STRING(kek_file) },
        [OPT_AUTHORITY]        = { "authority", "CERT", "--predict a boot chain signed by this db certificate (DER)",
                                   STRING(authority_file) },
        [OPT_REPLACE_VARIABLES] = { "replace-variables", NULL, "Update files replace the variable (default: appended)",
                                    FLAG(replace_variables) },
        [OPT_EFIVARS]          = { "efivars", "DIR", "The variables' current values (default /sys/firmware/efi/efivars)",
                                   STRING(efivars_dir) },
        [OPT_BOOTS]            = { "boots", "N", "update prepare: the grace lasts this boot and the next N (1..16, default 1)", SPECIAL },
        [OPT_FROM_MARKER]      = { "from-marker", NULL, "update finish: the volumes an unlock through an update seal "
                                                        "marked this boot (with DEV: remove its marker)", FLAG(from_marker) },
        [OPT_CHANGING]         = { "changing", "LIST", "update prepare: the PCRs the update changes; the grace keeps the "
                                   "token's others (default: all of them)", STRING(changing) },
        [OPT_ACCEPT_CHANGE]    = { "accept-change", NULL, "update finish, at a terminal: bind to a change 'update "
                                   "prepare' did not prepare for (shown first)", FLAG(accept_change) },
        [OPT_CONSOLE]          = { "console", NULL, "totp show: on the console and through plymouth instead of standard output (the initrd)",
                                   FLAG(console) },
        [OPT_WIPE_SLOT]        = { "wipe-slot", "tpmguard|N", "Replace the volume's tpmguard token(s), or destroy keyslot N, "
                                   "once the new token is proven", STRING(wipe_slot) },
        [OPT_DRY_RUN]          = { "dry-run", NULL, "Say what would change (keyslots, tokens, PCRs); change nothing, ask "
                                   "nothing", FLAG(dry_run) },
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

static void strv_freep(char ***v) {
        for (char **p = *v; p && *p; p++)
                free(*p);
        free(*v);
}

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

/*
 * What a bare 'tpmguard' prints: the first-run path in a screenful (the
 * full list is 'tpmguard help'), so that a newcomer sees where to start.
 */
static void help_short(void) {
        printf("Usage: tpmguard [OPTIONS] COMMAND [ARGS]\n"
               "\n"
               "Unlock LUKS2 volumes with a TPM, safely against TPM bus interposers.\n"
               "\n"
               "First steps:\n"
               "  provision          Pin this TPM's EK signing key (once per machine)\n"
               "  enroll DEV         Add a TPM + PIN keyslot to a LUKS2 volume\n"
               "  status [DEV]       What is enrolled, and whether it will unlock (no DEV: all volumes)\n"
               "  doctor [DEV...]    Explain the whole state, with a next step for each problem\n"
               "  reseal DEV         Seal again after a firmware or boot chain update\n"
               "\n"
               "DEV: a path, UUID=..., PARTUUID=..., a /dev/disk/by-* link or a crypttab name.\n"
               "\n"
               "Example:\n"
               "  tpmguard provision\n"
               "  tpmguard enroll /dev/nvme0n1p3\n"
               "\n"
               "More: 'tpmguard help' lists every command and option, 'tpmguard COMMAND --help'\n"
               "shows one; tpmguard(8), tpmguard.conf(5) and /usr/share/doc/tpmguard/README.md.\n");
}

/* One or two examples per command, the end of its --help (a row for each command of the table). */
static const struct command_example {
        const char *command;
        const char *examples;
} command_examples[] = {
        { "provision", "tpmguard provision\ntpmguard provision --ek-ca /root/vendor-ek-root.pem" },
        { "verify", "tpmguard verify\ntpmguard verify --json" },
        { "enroll", "tpmguard enroll /dev/nvme0n1p3\ntpmguard enroll --wipe-slot tpmguard --pcrs 7 cryptroot" },
        { "seal", "tpmguard seal --secret-file slot.key --pcrs 7 > token.json" },
        { "doctor", "tpmguard doctor\ntpmguard doctor --json /dev/nvme0n1p3" },
        { "change-pin", "tpmguard change-pin /dev/nvme0n1p3" },
        { "rotate", "tpmguard rotate /dev/nvme0n1p3" },
        { "reseal", "tpmguard reseal /dev/nvme0n1p3\ntpmguard reseal --pcrs 7 --unlock-key-file - /dev/nvme0n1p3" },
        { "recovery-key", "tpmguard recovery-key /dev/nvme0n1p3\ntpmguard recovery-key --replace 0 /dev/nvme0n1p3" },
        { "passwd", "tpmguard passwd --key-slot 0 /dev/nvme0n1p3" },
        { "update", "tpmguard update check\ntpmguard update prepare /dev/nvme0n1p3" },
        { "remove", "tpmguard remove --dry-run /dev/nvme0n1p3\ntpmguard remove --token 1 /dev/nvme0n1p3" },
        { "status", "tpmguard status\ntpmguard status --json UUID=0b3e6c1a-5f2d-4e8b-9a71-2c4d6e8f0a1b" },
        { "pcrs", "tpmguard pcrs\ntpmguard pcrs --predict --dbx dbxupdate_x64.bin" },
        { "totp", "tpmguard totp enroll --pcrs 7\ntpmguard totp show" },
        { "cleanup", "tpmguard cleanup /dev/nvme0n1p3" },
        { "migrate", "tpmguard migrate --token 1 /dev/nvme0n1p3" },
        { "audit", "tpmguard audit\ntpmguard audit --json /dev/nvme0n1p3" },
        { "bind", "tpmguard bind /dev/nvme0n1p3" },
        { "lockout", "tpmguard lockout setup\ntpmguard lockout export --json" },
        { "lockout-reset", "tpmguard lockout-reset" },
        { "sleep", "tpmguard sleep pre suspend" },
        { "config", "tpmguard config get kernel_null_name" },
        { "help", "tpmguard help enroll" },
};

static void help_command(const cli_command *cmd) {
        printf("Usage: tpmguard [OPTIONS] %s%s%s\n\n%s.\n\nOptions:\n", cmd->name, cmd->args[0] ? " " : "", cmd->args,
               cmd->summary);
        for (int id = 0; id < _OPT_MAX; id++)
                if (cmd->options & (1ull << id))
                        option_print(id);
        for (int id = 0; id < _OPT_MAX; id++)
                if (OPTS_GENERAL & (1ull << id))
                        option_print(id);
        for (size_t i = 0; i < ELEMENTSOF(command_examples); i++)
                if (strcmp(command_examples[i].command, cmd->name) == 0) {
                        const char *e = command_examples[i].examples;
                        printf("\nExamples:\n");
                        while (*e) {
                                size_t n = strcspn(e, "\n");
                                printf("  %.*s\n", (int) n, e);
                                e += n + (e[n] == '\n');
                        }
                }
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

static int cmd_help(const cli *c, tg_config *config);

static const cli_command commands[] = {
        { "provision", "", "Pin the EK signing key after proving it against the EK certificate; take the lockout hierarchy",
          O(EK_CERT) | O(EK_CA) | O(EK_INTERMEDIATES) | O(OUTPUT) | O(EAUTH) | O(OWNER_AUTH) | O(LOCKOUT_AUTH) | O(TOFU) | O(LOCKOUT_AUTH_COPY) | O(JSON),
          CMD_CONFIG, cmd_provision },
        { "verify", "", "Verify the TPM: kernel null_name, pinned key, certification",
          O(RECORD) | O(EAUTH) | O(NULL_NAME) | O(JSON), CMD_CONFIG, cmd_verify },
        { "enroll", "DEV", "Add a keyslot with a TPM-sealed secret (PIN + PCR policy) and its token",
          OPTS_SEAL | O(UNLOCK_KEY_FILE) | O(KEY_SLOT) | O(WIPE_SLOT) | O(DRY_RUN), CMD_CONFIG, cmd_enroll },
        { "seal", "", "Seal a given keyslot secret; print token JSON for 'cryptsetup token import'",
          OPTS_SEAL | O(SECRET_FILE), CMD_CONFIG, cmd_seal },
        { "doctor", "[DEV...]", "Explain the whole state, with a next step for each problem",
          O(INITRD) | O(CRYPTTAB) | O(EAUTH) | O(NULL_NAME) | O(EVENT_LOG) | O(EFIVARS) | O(JSON), CMD_CONFIG, cmd_doctor },
        { "change-pin", "DEV", "Change the PIN of a token (a new secret in a new keyslot, sealed with the new PIN)",
          O(TOKEN) | O(PIN_FILE) | O(NEW_PIN_FILE) | O(ACCEPT_TOKEN_POLICY), CMD_CONFIG, cmd_change_pin },
        { "rotate", "DEV", "Move a token to a new random secret in a new keyslot",
          O(TOKEN) | O(PIN_FILE) | O(ACCEPT_TOKEN_POLICY) | O(DRY_RUN), CMD_CONFIG, cmd_rotate },
        { "reseal", "DEV", "Seal to new PCR values (after a firmware or boot chain update)",
          O(TOKEN) | O(PCRS) | O(PCR_BANK) | O(PCR) | O(PIN_FILE) | O(NO_PIN) | O(UNLOCK_KEY_FILE) |
          O(ALLOW_UNEXTENDED) | O(DRY_RUN), CMD_CONFIG, cmd_reseal },
        { "recovery-key", "DEV", "Add a fresh recovery key (shown once), optionally replacing a keyslot",
          O(TOKEN) | O(PIN_FILE) | O(UNLOCK_KEY_FILE) | O(REPLACE) | O(ITER_TIME), CMD_CONFIG, cmd_recovery_key },
        { "passwd", "DEV", "Change a typed passphrase (authorized by the token's PIN or a passphrase)",
          O(TOKEN) | O(PIN_FILE) | O(UNLOCK_KEY_FILE) | O(KEY_SLOT) | O(NEW_PASSPHRASE_FILE) | O(ITER_TIME), CMD_CONFIG, cmd_passwd },
        { "update", "check|prepare|finish DEV...", "Before a firmware or boot chain update: will the next boot open "
          "every token (check); let the next boots unlock with the PIN (prepare); after it: bind the token to the new "
          "PCR values (finish)",
          O(TOKEN) | O(PIN_FILE) | O(PCR) | O(BOOTS) | O(FROM_MARKER) | O(CHANGING) | O(ACCEPT_CHANGE) | O(CRYPTTAB) |
          O(EVENT_LOG) | O(DB) | O(DBX) |
          O(KEK) | O(AUTHORITY) | O(REPLACE_VARIABLES) | O(EFIVARS) | O(EAUTH) | O(NULL_NAME) | O(JSON), CMD_CONFIG,
          cmd_update },
        { "remove", "DEV", "Remove a token and its keyslot (never the last keyslot)", O(TOKEN) | O(DRY_RUN), CMD_CONFIG,
          cmd_remove },
        { "status", "[DEV]", "Tokens, keyslots, PCR policy state, interrupted operations, TPM state; "
          "no DEV: the machine's tpmguard volumes", O(JSON) | O(CRYPTTAB), CMD_CONFIG, cmd_status },
        { "pcrs", "", "Replay the firmware's event log against the verified PCRs; --predict PCR 7 of the next boot",
          O(EVENT_LOG) | O(PREDICT) | O(DB) | O(DBX) | O(KEK) | O(AUTHORITY) | O(REPLACE_VARIABLES) | O(EFIVARS) |
          O(EAUTH) | O(NULL_NAME) | O(JSON), CMD_CONFIG, cmd_pcrs },
        { "cleanup", "DEV", "Finish or undo interrupted operations, remove orphans", 0, CMD_CONFIG, cmd_cleanup },
        { "migrate", "DEV", "Replace a systemd-tpm2 or clevis token by a tpmguard one (recovery passphrase authorizes)",
          OPTS_SEAL | O(UNLOCK_KEY_FILE) | O(TOKEN) | O(KEEP_OLD) | O(OLD_PIN_FILE), CMD_CONFIG, cmd_migrate },
        { "audit", "[DEV...]", "Which TPM-bound tokens an interposer, a TPM reset or a header edit can read",
          O(JSON), CMD_CONFIG, cmd_audit },
        { "bind", "DEV", "Record the volume's key fingerprint, so a decoy volume is refused",
          O(UNLOCK_KEY_FILE), CMD_CONFIG, cmd_bind },
        { "lockout", "setup|export", "Take the lockout hierarchy and set the DA parameters; print its password",
          O(EAUTH) | O(LOCKOUT_AUTH) | O(LOCKOUT_AUTH_COPY) | O(JSON), CMD_CONFIG, cmd_lockout },
        { "lockout-reset", "", "Reset the TPM's dictionary-attack counter (needs the lockout password)",
          O(EAUTH) | O(LOCKOUT_AUTH) | O(JSON), CMD_CONFIG, cmd_lockout_reset },
        { "sleep", "pre|post KIND", "Announce a suspend or hibernate to the boot anchor, re-anchor after it "
          "(the system-sleep hook)", 0, CMD_CONFIG, cmd_sleep },
        { "totp", "enroll|show|reseal|remove", "A code that proves this machine genuine before the PIN prompt (RFC 6238)",
          O(PCRS) | O(PCR_BANK) | O(PCR) | O(ALLOW_UNEXTENDED) | O(EAUTH) | O(OWNER_AUTH) | O(JSON) | O(CONSOLE), CMD_CONFIG,
          cmd_totp },
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
 * the diagnostic that went to standard error (cli_diagnostics; the error
 * class when nothing was printed) and the exit code of tpmguard(8).
 */
static void json_failure(const char *command, int r) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();

        if (!o)
                return;
        json_object_object_add(o, "command", json_object_new_string(command));
        json_object_object_add(o, "error", json_object_new_string(tg_err_id(r)));
        json_object_object_add(o, "message", json_object_new_string(cli_diagnostics() ?: tg_err_str(r)));
        json_object_object_add(o, "exit_code", json_object_new_int(tg_err_exit_code(r)));
        tg_json_print(stdout, o);
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
        _cleanup_(strv_freep) char **resolved = NULL;
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
                char *field;
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
                field = (char *) &c + option_docs[id].field;
                switch (option_docs[id].kind) {
                case OPTION_FLAG: *(bool *) field = true; continue;
                case OPTION_STRING: *(const char **) field = optarg; continue;
                case OPTION_SLOT:
                        if (parse_number(option_docs[id].name, optarg, 31, (int *) field) < 0)
                                return tg_err_exit_code(-TG_ERR_INVALID);
                        continue;
                case OPTION_SPECIAL: break;
                }
                switch (id) {
                case OPT_VERBOSE: tg_log_set_max_level(tg_log_get_max_level() >= LOG_INFO ? LOG_DEBUG : LOG_INFO); break;
                case OPT_QUIET: tg_log_set_max_level(LOG_ERR); break;
                case OPT_HELP: want_help = true; break;
                case OPT_VERSION: printf("tpmguard %s\n", TPMGUARD_VERSION); return 0;
                case OPT_PCR:
                        if (c.n_pcr_values >= TG_PCR_COUNT)
                                return tg_err_exit_code(log_error_rc(-TG_ERR_INVALID, "Too many --pcr options."));
                        c.pcr_values[c.n_pcr_values++] = optarg;
                        break;
                case OPT_BOOTS: {
                        int n;
                        if (parse_number("boots", optarg, TG_GRACE_BOOTS_MAX, &n) < 0 || n < 1)
                                return tg_err_exit_code(log_error_rc(-TG_ERR_INVALID, "--boots: 1..%u.",
                                                                     TG_GRACE_BOOTS_MAX));
                        c.boots = (unsigned) n;
                        break;
                }
                case OPT_ITER_TIME: {
                        int ms;
                        if (parse_number("iter-time", optarg, 60000, &ms) < 0 || ms < 10)
                                return tg_err_exit_code(log_error_rc(-TG_ERR_INVALID, "--iter-time: 10..60000 ms."));
                        c.iter_time = (uint32_t) ms;
                        break;
                }
                default: assert(false); return tg_err_exit_code(-TG_ERR_INVALID);
                }
        }

        if (optind >= argc) {
                if (want_help) {
                        help_general(commands, ELEMENTSOF(commands));
                        return 0;
                }
                help_short();
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
        /* What users type for a device (UUID=, PARTUUID=, a crypttab name) becomes a path first. */
        if (strstr(cmd->args, "DEV")) {
                resolved = calloc((size_t) c.n_args + 1, sizeof *resolved);
                if (!resolved)
                        return tg_err_exit_code(-TG_ERR_NOMEM);
                for (int i = 0; i < c.n_args; i++) {
                        r = tg_device_resolve(cli_crypttab_path(&c), c.args[i], &resolved[i]);
                        if (r < 0) {
                                if (c.json && (cmd->options & O(JSON)))
                                        json_failure(cmd->name, r);
                                return tg_err_exit_code(r);
                        }
                        c.args[i] = resolved[i];
                }
        }

        if (c.json)
                cli_diagnostics_capture();
        /* An option the command does not take is an error, not silently ignored. */
        for (int id = 0; id < _OPT_MAX; id++)
                if ((given & (1ull << id)) && !((OPTS_GENERAL | cmd->options) & (1ull << id))) {
                        r = log_error_rc(-TG_ERR_INVALID, "--%s does not apply to %s. See 'tpmguard %s --help'.",
                                         option_docs[id].name, cmd->name, cmd->name);
                        if (c.json && (cmd->options & O(JSON)))
                                json_failure(cmd->name, r);
                        return tg_err_exit_code(r);
                }

        r = command_prepare(cmd, &c, &config);
        if (r >= 0)
                r = cmd->run(&c, config);
        if (r < 0 && c.json && !cli_json_printed())
                json_failure(cmd->name, r);
        return tg_err_exit_code(r);
}
