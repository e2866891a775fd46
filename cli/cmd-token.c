/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The token commands: enroll, seal, migrate, change-pin, rotate, reseal,
 * remove, cleanup, bind.
 */
#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "cmd-token.h"
#include "cmd-totp.h"
#include "cmdline.h"
#include "binding.h"
#include "error.h"
#include "cleanup.h"
#include "enroll.h"
#include "keyslot-owner.h"
#include "lifecycle.h"
#include "migrate.h"
#include "pending-marker.h"
#include "token-ops.h"
#include "log.h"
#include "luks.h"
#include "pin.h"
#include "prompt.h"
#include "seal.h"
#include "secureboot.h"
#include "token.h"
#include "util.h"
#include "verify.h"

/*
 * A token without a PIN is refused unless tpmguard.conf allows it
 * (allow_no_pin = yes) as well as --no-pin: against an active interposer it
 * protects nothing, since the interposer can run Load, PolicyPCR and Unseal
 * in a session of its own on any normal boot (docs/design.md §9.1).
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

/* A new PIN, asked twice on a terminal (again when mistyped) or read from a file, at least pin_min_length bytes. */
static int read_new_pin(const tg_config *config, const char *file, tg_secret **ret) {
        _cleanup_secret_ tg_secret *pin = NULL;
        char rule[PATH_MAX + 32];
        int r;

        snprintf(rule, sizeof rule, "pin_min_length in %s", config->path ?: "tpmguard.conf");
        r = tg_pin_read_new(file, "New TPM PIN: ", config->pin_min_length, rule, &pin);
        if (r == -TG_ERR_CANCELLED)
                return log_error_rc(r, "No PIN given (an empty PIN is no PIN).%s",
                                    config->allow_no_pin ? " Use --no-pin to seal without one." : "");
        if (r < 0)
                return r;
        *ret = TAKE_PTR(pin);
        return 0;
}

/* The new seal's policy from the command line and tpmguard.conf: no secret is read here. */
static int seal_policy_from_cli(const cli *c, const tg_config *config, tg_seal_params *p, tg_pcr_values *explicit_values) {
        int r;

        *p = (tg_seal_params) { .pcr_bank = config->pcr_bank, .pcr_mask = config->pcr_mask,
                                .allow_unextended = c->allow_unextended || config->allow_unextended_pcrs,
                                .argon2 = { .memory_kib = config->pin_kdf_memory * 1024u },
                                .argon2_target_ms = config->pin_kdf_time_ms };
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
        return c->no_pin ? check_no_pin_allowed(c, config) : 0;
}

/* The new seal's secrets: the new PIN (unless --no-pin) and the owner password when a file names it. */
static int seal_secrets_from_cli(const cli *c, const tg_config *config, tg_seal_params *p, tg_secret **ret_pin,
                                 tg_secret **ret_owner_auth) {
        _cleanup_secret_ tg_secret *pin = NULL, *owner = NULL;
        int r;

        if (!c->no_pin) {
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
 * The checks enroll and enroll --dry-run make before any secret but the
 * endorsement password (read from a file only): the new seal's policy, then
 * the volume, the TPM and the PCRs. *ret_eauth takes the password, which
 * O->endorsement_auth points at; the caller's cleanup wipes it.
 */
static int enroll_checks_from_cli(const cli *c, const tg_config *config, tg_enroll_options *o,
                                  tg_pcr_values *explicit_values, tg_secret **ret_eauth) {
        _cleanup_secret_ tg_secret *eauth = NULL;
        int r;

        r = seal_policy_from_cli(c, config, &o->seal, explicit_values);
        if (r < 0)
                return r;
        r = cli_read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o->endorsement_auth = eauth;
        r = tg_enroll_check(config, c->args[0], o);
        if (r < 0) {
                o->endorsement_auth = NULL;
                return r;
        }
        *ret_eauth = TAKE_PTR(eauth);
        return 0;
}

/*
 * What enroll and migrate read before they touch the volume, cheap checks
 * first: the new seal's policy (command line, tpmguard.conf) and the
 * endorsement password if a file names it; then the volume, the TPM and
 * the PCRs (tg_enroll_check), so that a missing device, a LUKS1 or read-only
 * volume or an absent TPM is named before any secret is typed; then the
 * volume's passphrase (a key file or the terminal), proven on the volume
 * before the new PIN is asked; last the new PIN. O points at the secrets,
 * which the caller's cleanup wipes.
 */
static int enroll_inputs_from_cli(const cli *c, const tg_config *config, const char *prompt, tg_enroll_options *o,
                                  tg_pcr_values *explicit_values, tg_secret **ret_unlock, tg_secret **ret_pin,
                                  tg_secret **ret_owner_auth, tg_secret **ret_endorsement_auth) {
        _cleanup_secret_ tg_secret *unlock = NULL, *pin = NULL, *owner = NULL, *eauth = NULL;
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        int r;

        r = enroll_checks_from_cli(c, config, o, explicit_values, &eauth);
        if (r < 0)
                return r;
        if ((o->seal.pcr_mask & (1u << 7)) && tg_secure_boot_weakness())
                log_warning("Sealing to PCR 7, but %s: PCR 7 then binds almost nothing (any boot loader and kernel "
                            "give the same value), and only the PIN protects the volume. Turn Secure Boot on, then "
                            "'tpmguard reseal %s' (docs/hardware.md, \"Which PCRs to seal to\").",
                            tg_secure_boot_weakness(), c->args[0]);

        if (c->unlock_key_file)
                r = tg_secret_read_file(c->unlock_key_file, 8192, &unlock);
        else
                r = tg_passphrase_read(NULL, prompt, false, &unlock);
        if (r < 0)
                return r;
        /* A mistyped passphrase is named now, not after the new PIN was typed twice. */
        r = tg_luks_open(c->args[0], &cd);
        if (r >= 0)
                r = tg_luks_passphrase_check(cd, c->args[0], unlock);
        if (r < 0)
                return r;

        r = seal_secrets_from_cli(c, config, &o->seal, &pin, &owner);
        if (r < 0)
                return r;
        *ret_unlock = TAKE_PTR(unlock);
        *ret_pin = TAKE_PTR(pin);
        *ret_owner_auth = TAKE_PTR(owner);
        *ret_endorsement_auth = TAKE_PTR(eauth);
        return 0;
}

/* Whether the PCR policy of t holds now (this boot's verification cache when warm); -1 when unknown. */
static int token_pcrs_hold(const tg_config *config, const tg_token *t) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        bool satisfied = true;

        if (t->pcr_mask == 0)
                return 1;
        if (tg_verify(config, &(tg_verify_options) { .use_cache = true }, NULL, &v) < 0 ||
            tg_token_policy_satisfied(v, t, &satisfied) < 0)
                return -1;
        return satisfied;
}

/*
 * --dry-run: what enroll would change, after the same checks it makes before
 * any secret (the volume, the TPM, the PCRs, --wipe-slot); nothing is asked,
 * nothing is written.
 */
static int enroll_dry_run(const cli *c, const tg_config *config, tg_enroll_options *o) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_secret_ tg_secret *eauth = NULL;
        tg_pcr_values explicit_values;
        char pcrs[96];
        int keyslot, r;

        r = enroll_checks_from_cli(c, config, o, &explicit_values, &eauth);
        if (r < 0)
                return r;
        r = tg_luks_open(c->args[0], &cd);
        if (r < 0)
                return r;
        keyslot = o->keyslot >= 0 ? o->keyslot : tg_luks_keyslot_free(cd, c->args[0]);
        if (keyslot < 0)
                return keyslot;
        tg_pcr_list_format(o->seal.pcr_mask, pcrs, sizeof pcrs);
        printf("Dry run: nothing was asked or changed. enroll %s would:\n", c->args[0]);
        printf("  add keyslot %d with a new random secret, sealed to %s PCRs %s (%s) and %s\n", keyslot,
               tg_pcr_bank_to_string(o->seal.pcr_bank), pcrs[0] ? pcrs : "(none)",
               o->seal.explicit_values ? "the given values" : "their current values",
               c->no_pin ? "no PIN" : "a new PIN");
        if (o->wipe.replace)
                printf("  write its token over tpmguard token %d, then destroy that token's keyslot %d\n",
                       o->wipe.replace_token, o->wipe.replace_keyslot);
        else
                printf("  add a tpmguard token for it\n");
        for (int id = 0; id < 32; id++)
                if (o->wipe.remove_tokens & (1u << id))
                        printf("  remove tpmguard token %d (and its keyslot, if tpmguard recorded it as its own)\n", id);
        if (o->wipe.destroy)
                printf("  destroy keyslot %d\n", o->wipe.destroy_keyslot);
        return 0;
}

int cmd_enroll(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *owner = NULL, *unlock = NULL, *eauth = NULL;
        tg_enroll_options o = { .keyslot = c->keyslot };
        tg_pcr_values explicit_values;
        char pcrs[96];
        int keyslot, token, r;

        /* A second tpmguard token is refused unless --wipe-slot replaces the first: before any secret. */
        r = tg_enroll_plan_wipe(c->args[0], c->wipe_slot, &o);
        if (r < 0)
                return r;
        if (c->dry_run)
                return enroll_dry_run(c, config, &o);
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
        printf("Enrolled %s: keyslot %d, token %d, %s PCRs %s, %s", c->args[0], keyslot, token,
               tg_pcr_bank_to_string(o.seal.pcr_bank), pcrs[0] ? pcrs : "(none)", pin ? "PIN" : "no PIN");
        if (o.wipe.replace)
                printf("; it replaces the old token %d (keyslot %d)", o.wipe.replace_token, o.wipe.replace_keyslot);
        if (o.wipe.remove_tokens)
                printf("; the other old tpmguard tokens were removed");
        if (o.wipe.destroy)
                printf("; keyslot %d was destroyed", o.wipe.destroy_keyslot);
        printf(".\n");
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
 * only (lifecycle/migrate.h: tg_migrate). The new policy is the command
 * line's or tpmguard.conf's, never the old token's.
 */
int cmd_migrate(const cli *c, tg_config *config) {
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

int cmd_seal(const cli *c, tg_config *config) {
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
        r = seal_policy_from_cli(c, config, &p, &explicit_values);
        if (r < 0)
                return r;
        r = seal_secrets_from_cli(c, config, &p, &pin, &owner);
        if (r < 0)
                return r;
        r = cli_read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
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

int cmd_change_pin(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *new_pin = NULL;
        tg_lifecycle_result res;
        int r;

        /* The volume, the TPM, the PCRs and the current PIN (proven by an unseal) before the new PIN. */
        r = tg_lifecycle_check(config, c->args[0], c->token, "change-pin", cli_ask_current_pin, (void *) c, &pin);
        if (r < 0)
                return r;
        r = read_new_pin(config, c->new_pin_file, &new_pin);
        if (r == -TG_ERR_CANCELLED)
                return log_error_rc(r, "No new PIN set (terminal, or --new-pin-file F). Nothing was changed.");
        if (r < 0)
                return r;
        r = tg_change_pin(config, c->args[0], c->token, pin, new_pin, &res);
        if (r < 0)
                return log_error_rc(r, "Changing the PIN failed: %s.", tg_err_str(r));
        /* The secret is new (tg_change_pin): a copy of the old token, old PIN and all, opens nothing. */
        printf("Changed the PIN of token %d: a new secret in keyslot %d replaces keyslot %d, so copies of the old "
               "token no longer open the volume", res.token, res.keyslot, res.old_keyslot);
        print_sealed_policy(c, res.token);
        return 0;
}

/*
 * --dry-run of rotate, reseal and remove: the token they would act on and
 * what would happen to it and its keyslot, read from the header without
 * resolving interrupted operations (a real run resolves them first) and
 * without any secret; nothing is written.
 */
static int token_dry_run(const cli *c, const tg_config *config, const char *operation) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        char policy[128], pcrs[96];
        tg_token t, sealed;
        bool valid;
        int id, free_slot, holds, r;

        r = tg_luks_open(c->args[0], &cd);
        if (r < 0)
                return r;
        r = tg_lifecycle_select_token(cd, c->args[0], c->token, strcmp(operation, "remove") == 0, &id, &t, &valid);
        if (r < 0)
                return r;
        tg_token_policy_format(&t, policy, sizeof policy);
        printf("Dry run: nothing was asked or changed. %s %s would:\n", operation, c->args[0]);
        for (int m = 0; m < tg_luks_tokens_max(); m++)
                if (tg_luks_token_has_type(cd, m, TG_PENDING_TOKEN_TYPE))
                        printf("  first resolve the interrupted operation in token %d ('tpmguard status' shows it)\n", m);
        if (strcmp(operation, "remove") == 0) {
                if (!tg_luks_keyslot_active(cd, t.keyslot))
                        printf("  remove token %d (it has no keyslot)\n", id);
                else if (tg_luks_keyslot_referenced(cd, t.keyslot, id))
                        printf("  remove token %d, keep keyslot %d (another token uses it)\n", id, t.keyslot);
                else if (!tg_keyslot_owned(config->state_dir, cd, t.keyslot))
                        printf("  remove token %d, keep keyslot %d (not one tpmguard recorded as its own)\n", id,
                               t.keyslot);
                else if (crypt_keyslot_status(cd, t.keyslot) == CRYPT_SLOT_ACTIVE_LAST)
                        printf("  refuse: keyslot %d of token %d is the volume's last keyslot\n", t.keyslot, id);
                else
                        printf("  destroy keyslot %d, then remove token %d (%s)\n", t.keyslot, id, policy);
                explicit_bzero(&t, sizeof t);
                return 0;
        }
        free_slot = tg_luks_keyslot_free(cd, c->args[0]);
        holds = token_pcrs_hold(config, &t);
        if (strcmp(operation, "rotate") == 0) {
                if (holds == 0)
                        printf("  refuse: the PCR values no longer satisfy token %d's policy (reseal it first)\n", id);
                else
                        printf("  move token %d (%s) from keyslot %d to a new keyslot %d with a new random secret, "
                               "then destroy keyslot %d%s\n", id, policy, t.keyslot, free_slot, t.keyslot,
                               t.pin ? "; it asks for the current PIN" : "");
                explicit_bzero(&t, sizeof t);
                return 0;
        }
        /* reseal: the new policy from the command line or tpmguard.conf, never from the token. */
        sealed = (tg_token) { .pcr_bank = config->pcr_bank, .pcr_mask = config->pcr_mask, .pin = !c->no_pin };
        if (c->pcr_bank && tg_pcr_bank_from_string(c->pcr_bank, &sealed.pcr_bank) < 0)
                return log_error_rc(-TG_ERR_INVALID, "--pcr-bank: unknown bank \"%s\".", c->pcr_bank);
        if (c->pcrs && tg_pcr_list_parse(c->pcrs, &sealed.pcr_mask) < 0)
                return log_error_rc(-TG_ERR_INVALID, "--pcrs: \"%s\" is not a list like 7 or 0,2,7.", c->pcrs);
        tg_pcr_list_format(sealed.pcr_mask, pcrs, sizeof pcrs);
        tg_token_policy_format(&sealed, policy, sizeof policy);
        if (c->unlock_key_file || holds == 0)
                printf("  seal token %d to %s (PCRs %s at %s), authorized by %s, in a new keyslot %d; then destroy "
                       "keyslot %d\n", id, policy, pcrs[0] ? pcrs : "(none)",
                       c->n_pcr_values ? "the given values" : "their current values",
                       c->unlock_key_file ? "--unlock-key-file" : "the recovery passphrase (the PCRs changed, no PIN "
                       "can unseal it)", free_slot, t.keyslot);
        else
                printf("  seal token %d to %s (PCRs %s at %s), authorized by its current PIN, with a new random "
                       "secret in a new keyslot %d; then destroy keyslot %d\n", id, policy, pcrs[0] ? pcrs : "(none)",
                       c->n_pcr_values ? "the given values" : "their current values", free_slot, t.keyslot);
        explicit_bzero(&t, sizeof t);
        return 0;
}

int cmd_rotate(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL;
        tg_lifecycle_result res;
        int r;

        if (c->dry_run)
                return token_dry_run(c, config, "rotate");
        /* The volume, the TPM and the PCRs before the PIN is asked. */
        r = tg_lifecycle_check(config, c->args[0], c->token, "rotate", NULL, NULL, NULL);
        if (r < 0)
                return r;
        r = cli_read_token_pin(c, c->args[0], &pin);
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
 * Whether the token's PCR policy holds for the PCR values now (read over a verified session):
 * whether its PIN could authorize a reseal at all. A failed check says nothing (ret true):
 * the unseal then names the cause.
 */
static bool reseal_pin_can_work(const tg_config *config, const tg_token *t) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        bool satisfied = true;

        /* This boot's verification cache when warm: the check only picks what to ask for. */
        if (t->pcr_mask == 0 || tg_verify(config, &(tg_verify_options) { .use_cache = true }, NULL, &v) < 0 ||
            tg_token_policy_satisfied(v, t, &satisfied) < 0)
                return true;
        return satisfied;
}

/* A mistyped recovery passphrase is named before the new PIN is asked. */
static int reseal_passphrase_check(const char *device, const tg_secret *passphrase) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        int r;

        r = tg_luks_open(device, &cd);
        if (r >= 0)
                r = tg_luks_passphrase_check(cd, device, passphrase);
        return r < 0 ? r : 0;
}

/*
 * reseal: the new policy comes from the command line, else tpmguard.conf —
 * never from the old token, whose fields an attacker can edit (docs/design.md §9.1).
 * Authorized by unsealing (the current PIN, which the new seal keeps) or by
 * a passphrase of the volume (then the new PIN is asked, twice).
 */
int cmd_reseal(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *pin = NULL, *new_pin = NULL, *unlock = NULL;
        tg_reseal_params p = {};
        tg_pcr_values explicit_values;
        tg_lifecycle_result res;
        tg_token t, sealed = {};
        char policy[128];
        int r;

        if (c->dry_run)
                return token_dry_run(c, config, "reseal");
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
                /* Authorized by a passphrase, proven on the volume before the new PIN is asked (twice). */
                r = tg_secret_read_file(c->unlock_key_file, 8192, &unlock);
                if (r >= 0)
                        r = reseal_passphrase_check(c->args[0], unlock);
                if (r >= 0 && !c->no_pin)
                        r = read_new_pin(config, c->pin_file, &new_pin);
        } else if (!reseal_pin_can_work(config, &t)) {
                /*
                 * The PCRs changed since the seal (the usual reason to reseal): no PIN can unseal
                 * the token, so none is asked for. The recovery passphrase authorizes instead,
                 * from the terminal, proven on the volume first; then the new PIN (--pin-file, or
                 * asked twice) seals the new token.
                 */
                log_notice("The PCR values no longer match the token's sealed policy, so its PIN cannot authorize "
                           "the reseal: authorize it with the recovery passphrase (or --unlock-key-file F).%s",
                           t.n_alt > 0 ? " The token holds an update seal of 'tpmguard update prepare': "
                           "'tpmguard update finish' binds it to these values with the PIN alone." : "");
                r = tg_passphrase_read(NULL, "Recovery passphrase: ", false, &unlock);
                if (r < 0)
                        r = log_error_rc(-TG_ERR_PCR_MISMATCH, "No recovery passphrase given: give it on "
                                         "the terminal or with --unlock-key-file F.");
                if (r >= 0)
                        r = reseal_passphrase_check(c->args[0], unlock);
                if (r >= 0 && !c->no_pin)
                        r = read_new_pin(config, c->pin_file, &new_pin);
        } else {
                r = cli_read_current_pin(c, &t, &pin);
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
        /* Always a new secret (tg_reseal): a copy of the old token, sealed to the old PCR values, opens nothing. */
        printf("Resealed token %d into a new keyslot %d with a new secret, replacing keyslot %d (copies of the old "
               "token no longer open the volume): %s.\n", res.token, res.keyslot, res.old_keyslot, policy);
        /* The TOTP follows the token to the same values (cmd-totp.h), or says why it cannot. */
        return cmd_totp_follow(config, p.explicit_values, true);
}

int cmd_remove(const cli *c, tg_config *config) {
        tg_lifecycle_result res;
        int r;

        if (c->dry_run)
                return token_dry_run(c, config, "remove");
        r = tg_remove(config, c->args[0], c->token, &res);
        if (r < 0)
                return log_error_rc(r, "Removal failed: %s.", tg_err_str(r));
        if (res.old_keyslot >= 0)
                printf("Removed token %d and keyslot %d.\n", res.token, res.old_keyslot);
        else
                printf("Removed token %d.\n", res.token);
        return 0;
}

int cmd_cleanup(const cli *c, tg_config *config) {
        unsigned actions = 0;
        int r;

        r = tg_cleanup(config, c->args[0], &actions);
        if (r < 0)
                return log_error_rc(r, "Cleanup failed: %s.", tg_err_str(r));
        printf(actions ? "Cleaned up %s (%u repairs).\n" : "Nothing to clean up on %s.\n", c->args[0], actions);
        return 0;
}

/*
 * tpmguard bind DEVICE: records the volume's binding (tokens/binding.h) for
 * volumes enrolled with 'cryptsetup token import' or before bindings
 * existed. Authorized by a passphrase of the volume, which proves that the
 * volume key is the one being recorded; the TPM is not involved.
 */
int cmd_bind(const cli *c, tg_config *config) {
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
