/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "seal.h"
#include "secret.h"
#include "token.h"

/*
 * The parsed command line: cli/tpmguard.c fills it from the options of its
 * table, the commands (cli/cmd-*.c) read it. What the commands share to
 * read secrets from it and to print their --json object is here too.
 */
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
        const char *lockout_auth_copy;  /* provision, lockout setup: where else the new lockout password goes */
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
        const char *wipe_slot;          /* enroll: "tpmguard" or a keyslot number */
        int replace;
        uint32_t iter_time;
        bool accept_token_policy;
        bool allow_unextended;
        bool keep_old;
        const char *event_log;          /* pcrs: the TCG event log to read instead of the kernel's */
        bool predict;                   /* pcrs: PCR 7 of the next boot */
        const char *db_file;            /* pcrs --predict: update files of db, dbx, KEK */
        const char *dbx_file;
        const char *kek_file;
        const char *authority_file;     /* pcrs --predict: the boot chain's new signing certificate (DER) */
        bool replace_variables;         /* pcrs --predict: update files replace the variable, not append */
        const char *efivars_dir;        /* pcrs --predict: where the variables' current values are */
        unsigned boots;                 /* update prepare --boots; 0: not given */
        bool from_marker;               /* update finish --from-marker */
        const char *changing;           /* update prepare --changing LIST */
        bool accept_change;             /* update finish --accept-change */
        bool console;           /* totp show: also on the console and through plymouth */
        bool dry_run;                   /* enroll, remove, rotate, reseal: say what would change, change nothing */
        char **args;
        int n_args;
} cli;

/* The secret in FILE ('-' = stdin); none (NULL, 0) without a file. */
int cli_read_optional_secret(const char *file, const char *prompt, tg_secret **ret);

/* The current PIN of the token, read only when the token has one. */
int cli_read_current_pin(const cli *c, const tg_token *t, tg_secret **ret);
/* The same for the token of DEVICE the command names (c->token), peeked without changing anything. */
int cli_read_token_pin(const cli *c, const char *device, tg_secret **ret_pin);
/* cli_read_current_pin() as tg_lifecycle_check()'s ask_pin; userdata: the const cli. */
int cli_ask_current_pin(const tg_token *t, void *userdata, tg_secret **ret);

/*
 * Prints a command's own --json object (tg_json_print) and remembers it:
 * --json promises one object on standard output whatever happens, so a
 * command that fails without having printed one gets main's failure object.
 */
void cli_json_print(json_object *o);
/* Whether the command printed its own JSON object (success or not). */
bool cli_json_printed(void);
/* A command that printed its JSON object itself (no json_object, e.g. a secret wiped after printing). */
void cli_json_printed_set(void);

/*
 * --json: error messages still go to standard error, and are also kept
 * (bounded) so that main's failure object carries the same diagnostic text.
 */
void cli_diagnostics_capture(void);
/* The error lines printed so far, joined by newlines; NULL when none. */
const char *cli_diagnostics(void);
/* The crypttab that names volumes: --crypttab, else $TPMGUARD_CRYPTTAB (tests), else /etc/crypttab. */
const char *cli_crypttab_path(const cli *c);
