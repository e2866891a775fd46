/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard update prepare|finish (docs/design.md "Updates"): before an update of the boot
 * chain, an update seal in the token (a grace for the next boots, or the predicted PCR
 * values); after the boot that used it, a new secret sealed to this boot's values.
 *
 * The update-pending markers (tokens/unlock.h) only say which volumes to finish: each finish
 * checks everything again over verified sessions, so an edited or planted marker makes
 * tpmguard ask for a PIN at most.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "cmd-totp.h"
#include "cmd-update-check.h"
#include "cmd-update.h"
#include "cmdline.h"
#include "error.h"
#include "lifecycle.h"
#include "log.h"
#include "luks.h"
#include "seal.h"
#include "token-ops.h"
#include "token.h"
#include "unlock.h"
#include "util.h"

static int prepare_one(const cli *c, const tg_config *config, const char *device, const tg_pcr_values *predicted,
                       uint32_t changing, uint32_t boots) {
        _cleanup_secret_ tg_secret *pin = NULL;
        tg_update_result res;
        char pcrs[96];
        int r;

        r = cli_read_token_pin(c, device, &pin);
        if (r < 0)
                return r;
        r = tg_update_prepare(config, device, c->token, &(tg_update_params) {
                                      .boots = boots, .predicted = predicted, .pin = pin,
                                      .changing = changing, .event_log = c->event_log }, &res);
        if (r < 0)
                return log_error_rc(r, "update prepare %s failed: %s.", device, tg_err_str(r));
        if (res.kind == TG_ALT_GRACE) {
                tg_pcr_list_format(res.changing, pcrs, sizeof pcrs);
                printf("%s: token %d opens with the PIN alone while PCR %s change, for the next %" PRIu32 " boot(s) "
                       "(the TPM's resetCount %" PRIu32 " now, at most %" PRIu32 "). After the update, 'tpmguard "
                       "update finish %s' binds it to the new values (tpmguard-update-finish.service runs it after a "
                       "boot that used the grace); it refuses a change outside PCR %s, and a PCR 7 whose events are not "
                       "this boot's (a dbx update that only adds revocations excepted).\n",
                       device, res.token, pcrs, res.reset_count_max - res.reset_count, res.reset_count,
                       res.reset_count_max, device, pcrs);
                if (!c->changing)
                        printf("%s: every PCR the token is sealed to may change (no --changing): until 'update finish', "
                               "a boot chain nobody prepared opens the token with the PIN. Name the PCRs the update "
                               "changes (e.g. --changing 4,9 for a kernel or boot loader update) to keep the others.\n",
                               device);
                if (!res.secure_boot_recorded)
                        printf("%s: no event log that replays to the verified PCR values, so the Secure Boot "
                               "configuration was not recorded: 'update finish' will refuse any change of PCR 7.\n",
                               device);
        } else
                printf("%s: token %d also opens with the predicted PCR values. After the update, 'tpmguard update "
                       "finish %s' drops the old values (tpmguard-update-finish.service runs it after a boot that "
                       "used the predicted seal).\n", device, res.token, device);
        return 0;
}

/* The marker of a volume (cache_dir/update-pending/<UUID>), NULL when the device has no LUKS UUID fit for one. */
static int marker_path(const tg_config *config, const char *uuid, char **ret) {
        for (const char *p = uuid; *p; p++)
                if (!strchr("0123456789abcdefABCDEF-", *p))
                        return -TG_ERR_INVALID;
        if (uuid[0] == '\0' || strlen(uuid) > 36)
                return -TG_ERR_INVALID;
        return tg_asprintf(ret, "%s/" TG_UPDATE_PENDING_DIR "/%s", config->cache_dir, uuid);
}

static int finish_one(const cli *c, const tg_config *config, const char *device, const char *marker) {
        const tg_update_finish_options o = { .event_log = c->event_log, .accept_change = c->accept_change };
        _cleanup_secret_ tg_secret *pin = NULL;
        tg_lifecycle_result res;
        bool nothing = false;
        int r;

        r = cli_read_token_pin(c, device, &pin);
        if (r < 0)
                return r;
        r = tg_update_finish(config, device, c->token, pin, &o, &nothing, &res);
        if (r < 0)
                return log_error_rc(r, "update finish %s failed: %s.", device, tg_err_str(r));
        if (marker && unlink(marker) < 0 && errno != ENOENT)
                log_warning("Cannot remove %s: %m", marker);
        if (nothing)
                printf("%s: nothing to finish (no update seal, and this boot's PCR values open the token).\n", device);
        else
                printf("%s: token %d is bound to this boot's PCR values: keyslot %d replaces keyslot %d, the update "
                       "seals are gone, and the old values no longer unlock.\n", device, res.token, res.keyslot,
                       res.old_keyslot);
        return 0;
}

/* --from-marker without a device: every volume an unlock through an update seal marked. */
static int finish_markers(const cli *c, const tg_config *config) {
        _cleanup_free_ char *dir = NULL;
        DIR *d;
        struct dirent *de;
        int r = 0, n = 0;

        if (tg_asprintf(&dir, "%s/" TG_UPDATE_PENDING_DIR, config->cache_dir) < 0)
                return -TG_ERR_NOMEM;
        d = opendir(dir);
        if (!d && errno != ENOENT)
                return log_error_rc(-TG_ERR_IO, "Cannot read %s: %m", dir);
        while (d && (de = readdir(d))) {
                _cleanup_free_ char *marker = NULL, *device = NULL;
                int k;

                if (de->d_name[0] == '.')
                        continue;
                if (marker_path(config, de->d_name, &marker) < 0 ||
                    tg_asprintf(&device, "/dev/disk/by-uuid/%s", de->d_name) < 0) {
                        log_warning("Ignoring %s/%s: not a LUKS UUID.", dir, de->d_name);
                        continue;
                }
                n++;
                k = finish_one(c, config, device, marker);
                if (k < 0 && r == 0)
                        r = k;
        }
        if (d)
                closedir(d);
        if (n == 0)
                printf("No volume unlocked through an update seal in this boot: nothing to finish.\n");
        return r;
}

int cmd_update(const cli *c, tg_config *config) {
        tg_pcr_values predicted;
        bool prepare, have_prediction = false;
        uint32_t grace_boots = 1;
        uint32_t changing = 0;
        int r = 0, k;

        if (c->n_args >= 1 && strcmp(c->args[0], "check") == 0) {
                if (c->boots || c->n_pcr_values > 0 || c->from_marker || c->pin_file || c->token >= 0)
                        return log_error_rc(-TG_ERR_INVALID, "update check asks for no PIN and changes nothing: "
                                            "--boots, --pcr, --from-marker, --pin-file and --token do not apply.");
                return cmd_update_check(c, config);
        }
        if (c->n_args < 1 || (strcmp(c->args[0], "prepare") != 0 && strcmp(c->args[0], "finish") != 0))
                return log_error_rc(-TG_ERR_INVALID, "Usage: tpmguard update check [DEV...] | tpmguard update prepare "
                                    "[--boots N] [--changing LIST] [--pcr N=BANK:HEX...] DEV... | tpmguard update finish [--from-marker] "
                                    "[--accept-change] DEV...");
        prepare = strcmp(c->args[0], "prepare") == 0;
        if (c->crypttab || c->json)
                return log_error_rc(-TG_ERR_INVALID, "--crypttab and --json apply to 'update check' only.");
        if ((!prepare || c->boots || c->n_pcr_values > 0 || c->changing) &&
            (c->db_file || c->dbx_file || c->kek_file || c->authority_file || c->replace_variables ||
             c->efivars_dir || c->endorsement_auth_file || c->null_name))
                return log_error_rc(-TG_ERR_INVALID, "--db, --dbx, --kek, --authority, --replace-variables, "
                                    "--efivars, --endorsement-auth-file and --null-name predict PCR 7: for 'update "
                                    "check', and 'update prepare' without --boots, --changing or --pcr.");
        if (c->changing && (!prepare || c->n_pcr_values > 0))
                return log_error_rc(-TG_ERR_INVALID, "--changing applies to the grace of 'update prepare' (not with --pcr).");
        if (c->changing) {
                r = tg_pcr_list_parse(c->changing, &changing);
                if (r < 0)
                        return log_error_rc(r, "--changing %s: a list of PCRs, e.g. 4,9.", c->changing);
                if (changing == 0)
                        return log_error_rc(-TG_ERR_INVALID, "--changing names no PCR.");
        }
        /* The unit runs finish --from-marker with no one to show the change to: it never overrides. */
        if (c->accept_change && (prepare || c->from_marker || !isatty(STDIN_FILENO)))
                return log_error_rc(-TG_ERR_INVALID, "--accept-change applies to 'update finish' run by hand at a "
                                    "terminal, without --from-marker: it binds the token to a change 'update prepare' "
                                    "did not prepare for, which only the person who made it can accept.");
        if (c->n_args < 2 && !(c->from_marker && !prepare))
                return log_error_rc(-TG_ERR_INVALID, "update %s: name the volume(s), e.g. /dev/sda3.", c->args[0]);
        if (prepare && c->from_marker)
                return log_error_rc(-TG_ERR_INVALID, "--from-marker applies to 'update finish' only.");
        if (!prepare && (c->boots || c->n_pcr_values > 0))
                return log_error_rc(-TG_ERR_INVALID, "--boots and --pcr apply to 'update prepare' only.");
        if (c->boots && c->n_pcr_values > 0)
                return log_error_rc(-TG_ERR_INVALID, "--boots makes a grace, --pcr a predicted seal: give one of them.");

        if (prepare && c->n_pcr_values > 0) {
                /* The bank is the token's, checked against it in tg_update_prepare(). */
                predicted = (tg_pcr_values) { .bank = config->pcr_bank };
                for (int i = 0; i < c->n_pcr_values; i++) {
                        r = tg_pcr_value_parse(c->pcr_values[i], &predicted);
                        if (r < 0)
                                return r;
                }
        }
        /* A grace's boots: --boots, else 1, or more with a capsule staged (cmd-update-check.h). */
        if (prepare && !c->boots && c->n_pcr_values == 0) {
                r = cli_grace_boots_default(c, &grace_boots);
                if (r < 0)
                        return r;
        }
        /* Neither given: the prediction when a change is known, else a grace (cmd-update-check.h). */
        if (prepare && !c->boots && c->n_pcr_values == 0 && !c->changing) {
                r = cli_prepare_prediction(c, config, &predicted);
                if (r < 0)
                        return r;
                have_prediction = r > 0;
                r = 0;
        }
        if (!prepare && c->from_marker && c->n_args < 2) {
                r = finish_markers(c, config);
                /* The TOTP follows the tokens (cmd-totp.h): nothing to do, and no TPM, unless an update left a note. */
                k = cmd_totp_follow(config, NULL, false);
                return r < 0 ? r : k;
        }

        for (int i = 1; i < c->n_args; i++) {
                _cleanup_free_ char *marker = NULL;
                const char *device = c->args[i];

                if (prepare)
                        k = prepare_one(c, config, device, c->n_pcr_values > 0 || have_prediction ? &predicted : NULL,
                                        changing, c->boots ?: grace_boots);
                else {
                        if (c->from_marker) {
                                _cleanup_crypt_ struct crypt_device *cd = NULL;
                                const char *uuid;

                                if (tg_luks_open(device, &cd) >= 0 && (uuid = crypt_get_uuid(cd)))
                                        (void) marker_path(config, uuid, &marker);
                        }
                        k = finish_one(c, config, device, marker);
                }
                if (k < 0 && r == 0)
                        r = k;
        }
        /* The TOTP is the machine's, not a volume's: once, after the volumes all went through (cmd-totp.h). */
        if (r < 0)
                return r;
        if (prepare)
                k = cmd_totp_update_prepare(config, c->n_pcr_values > 0 || have_prediction ? &predicted : NULL);
        else
                k = cmd_totp_follow(config, NULL, false);
        return k;
}
