/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The parsed command line's shared helpers (see cmdline.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "error.h"
#include "json-util.h"
#include "lifecycle.h"
#include "log.h"
#include "prompt.h"

/* Set by a command that printed its own JSON object (--json), success or not. */
static bool json_printed;

/* --json: the error lines that went to standard error, for main's failure object (bounded). */
static char diagnostic[4096];

static void diagnostic_sink(int level, const char *message, _unused_ void *userdata) {
        size_t used = strlen(diagnostic);

        fprintf(stderr, "tpmguard: %s\n", message);
        /* Warnings and notices stay on stderr only: the object carries what failed. */
        if (level > LOG_ERR || used + 2 >= sizeof diagnostic)
                return;
        snprintf(diagnostic + used, sizeof diagnostic - used, "%s%s", used ? "\n" : "", message);
}

void cli_diagnostics_capture(void) {
        tg_log_set_sink(diagnostic_sink, NULL);
}

const char *cli_diagnostics(void) {
        return diagnostic[0] ? diagnostic : NULL;
}

void cli_json_printed_set(void) {
        json_printed = true;
}

void cli_json_print(json_object *o) {
        tg_json_print(stdout, o);
        json_printed = true;
}

bool cli_json_printed(void) {
        return json_printed;
}

int cli_read_optional_secret(const char *file, const char *prompt, tg_secret **ret) {
        if (!file) {
                *ret = NULL;
                return 0;
        }
        return tg_pin_read(file, prompt, false, ret);
}

/* The current PIN of the token, read only when the token has one. */
int cli_read_current_pin(const cli *c, const tg_token *t, tg_secret **ret) {
        int r;

        *ret = NULL;
        if (!t->pin)
                return 0;
        r = tg_pin_read(c->pin_file, "Current TPM PIN: ", false, ret);
        return r < 0 ? log_error_rc(r, "The token needs its current PIN (terminal, or --pin-file F).") : 0;
}

int cli_read_token_pin(const cli *c, const char *device, tg_secret **ret_pin) {
        _cleanup_secret_ tg_secret *pin = NULL;
        tg_token t;
        int r;

        r = tg_lifecycle_token_peek(device, c->token, &t);
        if (r < 0)
                return r;
        r = cli_read_current_pin(c, &t, &pin);
        explicit_bzero(&t, sizeof t);
        if (r < 0)
                return r;
        *ret_pin = TAKE_PTR(pin);
        return 0;
}

int cli_ask_current_pin(const tg_token *t, void *userdata, tg_secret **ret) {
        return cli_read_current_pin(userdata, t, ret);
}

const char *cli_crypttab_path(const cli *c) {
        /* TPMGUARD_CRYPTTAB: for tests, like TPMGUARD_CONFIG (ignored in set-user-ID programs). */
        return c->crypttab ?: secure_getenv("TPMGUARD_CRYPTTAB") ?: "/etc/crypttab";
}
