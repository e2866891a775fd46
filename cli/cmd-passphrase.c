/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The passphrase commands: passwd and recovery-key.
 */
#include <string.h>

#include "cmd-passphrase.h"
#include "cmdline.h"
#include "error.h"
#include "lifecycle.h"
#include "passphrase.h"
#include "log.h"
#include "luks.h"
#include "prompt.h"
#include "qr.h"
#include "token.h"

/*
 * What authorizes a passphrase change: --unlock-key-file (an existing
 * passphrase or recovery key), else the tpmguard token with its PIN, else
 * (no tpmguard token) a passphrase typed on the terminal.
 */
static int passphrase_auth_from_cli(const cli *c, const tg_config *config, const char *prompt, tg_passphrase_auth *auth,
                                    tg_secret **ret_pin, tg_secret **ret_passphrase) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_secret_ tg_secret *pin = NULL, *passphrase = NULL;
        bool has_token = false;
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
                        /* The TPM, the PCRs and the PIN (proven by an unseal) before a new secret is asked. */
                        r = tg_lifecycle_check(config, c->args[0], c->token, NULL, cli_ask_current_pin, (void *) c, &pin);
                        if (r < 0)
                                return r;
                } else {
                        r = tg_luks_check_writable(c->args[0]);
                        if (r < 0)
                                return r;
                        r = tg_passphrase_read(NULL, prompt, false, &passphrase);
                        if (r < 0)
                                return log_error_rc(r, "%s has no tpmguard token: authorize with an existing passphrase "
                                                    "(terminal, or --unlock-key-file F).", c->args[0]);
                        r = tg_luks_passphrase_check(cd, c->args[0], passphrase);
                        if (r < 0)
                                return r;
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

int cmd_recovery_key(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *passphrase = NULL;
        tg_passphrase_auth auth;
        tg_passphrase_result res;
        int r;

        r = passphrase_auth_from_cli(c, config, "Current passphrase or recovery key: ", &auth, &pin, &passphrase);
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

int cmd_passwd(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *passphrase = NULL, *new_passphrase = NULL;
        tg_passphrase_auth auth;
        tg_passphrase_result res;
        int r;

        r = passphrase_auth_from_cli(c, config, "Current passphrase: ", &auth, &pin, &passphrase);
        if (r < 0)
                return r;
        r = tg_passphrase_read_new(c->new_passphrase_file, "New passphrase: ", 1, NULL, &new_passphrase);
        if (r == -TG_ERR_CANCELLED)
                return log_error_rc(r, "No new passphrase given (terminal, or --new-passphrase-file F). Nothing was "
                                    "changed.");
        if (r < 0)
                return r;
        r = tg_passphrase_change(config, c->args[0], &auth, c->keyslot, new_passphrase, &res);
        if (r < 0)
                return log_error_rc(r, "Changing the passphrase failed: %s.", tg_err_str(r));
        printf("Changed the passphrase: keyslot %d replaces keyslot %d.\n", res.new_keyslot, res.old_keyslot);
        return 0;
}
