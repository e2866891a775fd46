/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard update check [DEV...] (docs/design.md §9.2): before a reboot, say for each token
 * whether the next boot opens it with the PIN alone, and when it does not, the one command that
 * makes it so. Run by the kernel, initramfs, dracut and apt hooks with --quiet (only the advice
 * is printed); exit 14 (pcr-mismatch) when a token will not open.
 *
 * Threat model: the prediction comes only from an event log that replays to the PCR values read
 * over the verified session (a forged log is refused, exit 3), and the other inputs are audited
 * reads; no PIN, no unseal. The worst a lie can do here is a wrong "ok" (the recovery passphrase
 * at the next boot) or a needless prepare.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "cmd-pcrs.h"
#include "cmd-update-check.h"
#include "crypttab.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "luks.h"
#include "pcr-log.h"
#include "token.h"
#include "util.h"
#include "verify.h"

int cli_next_boot(const cli *c, const tg_config *config, tg_next_boot *ret, tg_pcr7_prediction *ret_p,
                  json_object **ret_changes, char **ret_capsule) {
        _cleanup_(cmd_pcrs_files_free) cmd_pcrs_files files = {};
        _cleanup_secret_ tg_secret *eauth = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_eventlog_ tg_eventlog *log = NULL;
        _cleanup_json_ json_object *changes = NULL;
        _cleanup_free_ char *capsule = NULL;
        tg_verify_options vo = { .null_name_path = c->null_name };
        tg_pcr7_predict_options o;
        tg_pcr7_prediction p;
        tg_next_boot next = {};
        tg_tpm_counters counters;
        tg_pcr_replay rp;
        int r;

        r = cmd_pcrs_predict_options(c, &files, &o);
        if (r < 0)
                return r;
        r = tg_pcr_log_read(c->event_log, &log);
        if (r < 0)
                return r;
        r = cli_read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        vo.endorsement_auth = eauth;
        r = tg_verify(config, &vo, NULL, &v);
        if (r < 0)
                return log_error_rc(r, "The TPM did not verify (%s): the next boot's PCR values cannot be known "
                                    "without a verified read. 'tpmguard doctor' shows what to do.", tg_err_str(r));
        r = tg_pcr_replay_verify(v, log, config->pcr_bank, &rp);
        if (r < 0)
                return r;
        /* Refuses a log that does not replay (-TG_ERR_INTERPOSER): it would predict what its author wants. */
        r = tg_pcr7_predict(log, &rp, &o, &p, &changes);
        if (r < 0)
                return r;
        r = tg_vtpm_pcr_read(v, p.bank, (UINT32_C(1) << TG_PCR_COUNT) - 1, &next.values);
        if (r < 0)
                return log_error_rc(r, "Cannot read the TPM's PCRs over the verified session.");
        /* The read and the replay are of the same boot; PCR 7 read twice must agree, or it moved in between. */
        if (next.values.value_size != p.size || memcmp(next.values.value[7], p.current, p.size) != 0)
                return log_error_rc(-TG_ERR_TPM, "PCR 7 changed while it was read: run 'tpmguard update check' again.");
        memcpy(next.values.value[7], p.predicted, p.size);
        r = tg_vtpm_counters(v, &counters);
        if (r < 0)
                return r;
        next.reset_count = counters.reset_count;
        r = tg_capsule_pending(o.efivars_dir, &capsule);
        if (r < 0)
                return r;
        next.unpredictable = r > 0;
        *ret = next;
        *ret_p = p;
        if (ret_changes)
                *ret_changes = TAKE_PTR(changes);
        if (ret_capsule)
                *ret_capsule = TAKE_PTR(capsule);
        explicit_bzero(&next, sizeof next);
        return 0;
}

int cli_grace_boots_default(const cli *c, uint32_t *ret) {
        _cleanup_(cmd_pcrs_files_free) cmd_pcrs_files files = {};
        _cleanup_free_ char *capsule = NULL;
        tg_pcr7_predict_options o;
        int r;

        r = cmd_pcrs_predict_options(c, &files, &o);
        if (r < 0)
                return r;
        r = tg_capsule_pending(o.efivars_dir, &capsule);
        if (r < 0)
                return r;
        if (r > 0)
                log_notice("A firmware capsule update is staged (EFI variable %s): the grace lasts %u boots, "
                           "since the capsule's own resets count as boots (--boots N to choose).", capsule,
                           1 + TG_CAPSULE_RESETS);
        *ret = r > 0 ? 1 + TG_CAPSULE_RESETS : 1;
        return 0;
}

int cli_prepare_prediction(const cli *c, const tg_config *config, tg_pcr_values *ret) {
        bool named = c->db_file || c->dbx_file || c->kek_file || c->authority_file;
        _cleanup_free_ char *capsule = NULL, *value = NULL;
        tg_pcr7_prediction p;
        tg_next_boot next;
        tg_pcr_values out;
        int r;

        r = cli_next_boot(c, config, &next, &p, NULL, &capsule);
        explicit_bzero(&next, sizeof next);
        if (r < 0) {
                /* No log, or one whose shape predicts nothing: an unpredictable change, which a grace is for. */
                if (!named && (r == -TG_ERR_NOT_FOUND || r == -TG_ERR_INVALID)) {
                        log_notice("No PCR 7 prediction (see above): a grace instead.");
                        return 0;
                }
                /* A log that does not replay is refused, not bypassed: the user chooses the grace. */
                if (r == -TG_ERR_INTERPOSER)
                        return log_error_rc(r, "Nothing was prepared. Find why the log does not replay ('tpmguard pcrs'); "
                                            "'tpmguard update prepare --boots 1 DEV' gives a grace, which needs no "
                                            "prediction.");
                return r;
        }
        if (capsule) {
                log_notice("A firmware capsule update is staged (EFI variable %s): its PCR values cannot be "
                           "predicted, a grace instead%s.", capsule, named ? " of the prediction from the files" : "");
                return 0;
        }
        if (memcmp(p.predicted, p.current, p.size) == 0) {
                log_notice("No change to PCR 7 is known%s: a grace, for an update whose values cannot be predicted.",
                           named ? " (the update files change nothing it measures)" : "");
                return 0;
        }
        out = (tg_pcr_values) { .bank = p.bank, .mask = UINT32_C(1) << 7, .given_mask = UINT32_C(1) << 7,
                                .value_size = p.size };
        memcpy(out.value[7], p.predicted, p.size);
        if (tg_hex_encode(p.predicted, p.size, &value) < 0)
                return -TG_ERR_NOMEM;
        log_notice("PCR 7 of the next boot predicted (%s, from a verified event log): %s:%s, no grace needed.",
                   named ? "the update files named" : "a change written to efivarfs since this boot",
                   tg_pcr_bank_to_string(p.bank) ?: "?", value);
        *ret = out;
        return 1;
}

typedef struct check_state {
        const tg_next_boot *next;
        const char *pcr_arg;        /* "7=BANK:HEX" when PCR 7 changes predictably, else NULL */
        json_object *volumes;
        unsigned n_bad;
} check_state;

/* The one command that makes token id of device open after the next boot. */
static int advice(const check_state *s, const tg_token *t, const char *device, int id, bool several, char **ret) {
        _cleanup_free_ char *token = NULL;

        if (several && tg_asprintf(&token, " --token %d", id) < 0)
                return -TG_ERR_NOMEM;
        /* PCR 7 unchanged and the seal still refused: it does not open now either. */
        if (!s->next->unpredictable && !s->pcr_arg && t->pcr_bank == s->next->values.bank)
                return tg_asprintf(ret, "tpmguard reseal%s %s", token ?: "", device);
        /* A capsule, or a token in a bank nothing was predicted in: only a grace is certain. */
        if (s->next->unpredictable || !s->pcr_arg || t->pcr_bank != s->next->values.bank)
                return tg_asprintf(ret, "tpmguard update prepare%s %s", token ?: "", device);
        return tg_asprintf(ret, "tpmguard update prepare%s --pcr %s %s", token ?: "", s->pcr_arg, device);
}

/* 1 when device is a LUKS2 volume with a tpmguard token; 0 (said) for a crypttab entry without; an error for a named one. */
static int has_tokens(const char *device, bool named) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        int r;

        r = tg_luks_open(device, &cd);
        if (r < 0) {
                if (named)
                        return log_error_rc(r, "%s: not a LUKS2 volume tpmguard can read.", device);
                log_info("%s (crypttab): not a LUKS2 volume, skipped.", device);
                return 0;
        }
        for (int id = 0; id < tg_luks_tokens_max(); id++)
                if (tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE))
                        return 1;
        if (named)
                return log_error_rc(-TG_ERR_NOT_FOUND, "%s has no tpmguard token.", device);
        log_info("%s (crypttab): no tpmguard token, skipped.", device);
        return 0;
}

static int check_device(check_state *s, const char *device) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        json_object *vol, *tokens;
        unsigned n_tokens = 0;
        int r;

        r = tg_luks_open(device, &cd);
        if (r < 0)
                return log_error_rc(r, "%s: not a LUKS2 volume tpmguard can read.", device);
        for (int id = 0; id < tg_luks_tokens_max(); id++)
                if (tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE))
                        n_tokens++;
        vol = json_object_new_object();
        tokens = json_object_new_array();
        if (!vol || !tokens || json_object_array_add(s->volumes, vol) < 0) {
                json_object_put(vol);
                json_object_put(tokens);
                return -TG_ERR_NOMEM;
        }
        json_object_object_add(vol, "device", json_object_new_string(device));
        json_object_object_add(vol, "tokens", tokens);
        for (int id = 0; id < tg_luks_tokens_max(); id++) {
                _cleanup_free_ char *cmd = NULL;
                tg_next_verdict verdict = TG_NEXT_WILL_NOT_OPEN;
                json_object *j;
                tg_token t;

                if (!tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE))
                        continue;
                j = json_object_new_object();
                if (!j || json_object_array_add(tokens, j) < 0) {
                        json_object_put(j);
                        return -TG_ERR_NOMEM;
                }
                json_object_object_add(j, "token", json_object_new_int(id));
                r = tg_luks_token_load(cd, id, &t);
                if (r >= 0) {
                        r = tg_next_boot_verdict(s->next, &t, &verdict);
                        if (r >= 0 && verdict == TG_NEXT_WILL_NOT_OPEN)
                                r = advice(s, &t, device, id, n_tokens > 1, &cmd);
                        explicit_bzero(&t, sizeof t);
                        if (r < 0)
                                return r;
                } else if (tg_asprintf(&cmd, "tpmguard doctor %s", device) < 0)
                        return -TG_ERR_NOMEM;
                json_object_object_add(j, "opens", verdict == TG_NEXT_WILL_NOT_OPEN ? NULL :
                                       json_object_new_string(tg_next_verdict_to_string(verdict)));
                json_object_object_add(j, "command", cmd ? json_object_new_string(cmd) : NULL);
                json_object_object_add(j, "malformed", json_object_new_boolean(r < 0));
                if (verdict == TG_NEXT_WILL_NOT_OPEN)
                        s->n_bad++;
        }
        return 0;
}

int cli_update_check_run(const cli *c, const tg_config *config, json_object **ret) {
        _cleanup_json_ json_object *changes = NULL, *out = json_object_new_object(), *volumes = json_object_new_array();
        _cleanup_free_ char *capsule = NULL, *pcr_arg = NULL, *predicted = NULL;
        _cleanup_free_ const char **todo = NULL;
        char **devices = NULL;
        size_t n = 0, n_todo = 0;
        tg_pcr7_prediction p;
        tg_next_boot next;
        check_state s;
        int r = 0;

        if (!out || !volumes)
                return -TG_ERR_NOMEM;
        if (c->n_args <= 1) {
                const char *crypttab = c->crypttab ?: "/etc/crypttab";

                r = tg_crypttab_devices(crypttab, &devices, &n);
                if (r < 0)
                        return log_error_rc(r, "Cannot list the volumes of %s: name them, e.g. 'tpmguard update "
                                            "check /dev/sda3'.", crypttab);
        }
        todo = calloc((c->n_args > 1 ? (size_t) c->n_args : n) + 1, sizeof *todo);
        if (!todo) {
                tg_strv_free(devices, n);
                return -TG_ERR_NOMEM;
        }
        /* The volumes first: a machine without a tpmguard token has nothing to check, and no TPM to ask
         * (the hooks run in image builds and on machines never provisioned). */
        for (size_t i = 0; i < (c->n_args > 1 ? (size_t) c->n_args - 1 : n); i++) {
                const char *device = c->n_args > 1 ? c->args[i + 1] : devices[i];
                int k = has_tokens(device, c->n_args > 1);
                if (k < 0 && r == 0)
                        r = k;
                if (k > 0)
                        todo[n_todo++] = device;
        }
        if (n_todo == 0) {
                tg_strv_free(devices, n);
                if (r < 0)
                        return r;
                log_info("No volume with a tpmguard token: nothing to check.");
                json_object_object_add(out, "volumes", TAKE_PTR(volumes));
                json_object_object_add(out, "ok", json_object_new_boolean(true));
                *ret = TAKE_PTR(out);
                return 0;
        }
        r = cli_next_boot(c, config, &next, &p, &changes, &capsule);
        if (r >= 0 && tg_hex_encode(p.predicted, p.size, &predicted) < 0)
                r = -TG_ERR_NOMEM;
        if (r >= 0 && memcmp(p.predicted, p.current, p.size) != 0 &&
            tg_asprintf(&pcr_arg, "7=%s:%s", tg_pcr_bank_to_string(p.bank) ?: "?", predicted) < 0)
                r = -TG_ERR_NOMEM;
        if (r < 0) {
                tg_strv_free(devices, n);
                return r;
        }
        if (capsule)
                log_warning("A firmware capsule update is staged for the next boot (EFI variable %s): it changes "
                            "PCR values no one can predict.", capsule);
        for (size_t i = 0; i < json_object_array_length(changes); i++) {
                json_object *ch = json_object_array_get_idx(changes, i);
                log_info("Pending: %s from %s (%s).", json_object_get_string(json_object_object_get(ch, "variable")),
                         json_object_get_string(json_object_object_get(ch, "source")),
                         json_object_get_string(json_object_object_get(ch, "write")));
        }
        s = (check_state) { .next = &next, .pcr_arg = pcr_arg, .volumes = volumes };
        for (size_t i = 0; i < n_todo; i++) {
                int k = check_device(&s, todo[i]);
                if (k < 0 && r == 0)
                        r = k;
        }
        tg_strv_free(devices, n);
        explicit_bzero(&next, sizeof next);
        if (r < 0)
                return r;
        {
                _cleanup_free_ char *current = NULL;
                if (tg_hex_encode(p.current, p.size, &current) < 0)
                        return -TG_ERR_NOMEM;
                json_object_object_add(out, "bank", json_object_new_string(tg_pcr_bank_to_string(p.bank) ?: "?"));
                json_object_object_add(out, "pcr7_current", json_object_new_string(current));
                json_object_object_add(out, "pcr7_predicted", json_object_new_string(predicted));
                json_object_object_add(out, "changes", TAKE_PTR(changes));
                json_object_object_add(out, "capsule_pending", capsule ? json_object_new_string(capsule) : NULL);
                json_object_object_add(out, "volumes", TAKE_PTR(volumes));
                json_object_object_add(out, "ok", json_object_new_boolean(s.n_bad == 0));
        }
        *ret = TAKE_PTR(out);
        return 0;
}

int cmd_update_check(const cli *c, tg_config *config) {
        _cleanup_json_ json_object *out = NULL;
        bool verbose = tg_log_get_max_level() >= LOG_INFO;
        json_object *volumes;
        int r;

        r = cli_update_check_run(c, config, &out);
        if (r < 0)
                return r;
        volumes = json_object_object_get(out, "volumes");
        for (size_t i = 0; !c->json && i < json_object_array_length(volumes); i++) {
                json_object *vol = json_object_array_get_idx(volumes, i), *tokens = json_object_object_get(vol, "tokens");
                const char *device = json_object_get_string(json_object_object_get(vol, "device"));

                for (size_t k = 0; k < json_object_array_length(tokens); k++) {
                        json_object *t = json_object_array_get_idx(tokens, k), *opens = json_object_object_get(t, "opens");
                        int id = json_object_get_int(json_object_object_get(t, "token"));

                        if (opens && verbose)
                                printf("%s: token %d: ok (the next boot opens its %s seal with the PIN).\n", device, id,
                                       json_object_get_string(opens));
                        else if (!opens)
                                printf("%s: token %d %s after the next boot: run '%s'.\n", device, id,
                                       json_object_get_boolean(json_object_object_get(t, "malformed")) ?
                                       "is malformed and will not open" : "will not open with the PIN alone",
                                       json_object_get_string(json_object_object_get(t, "command")));
                }
        }
        if (c->json)
                cli_json_print(out);
        /* The hooks' contract: 14 says "run the command printed", other codes "could not tell". */
        return json_object_get_boolean(json_object_object_get(out, "ok")) ? 0 : -TG_ERR_PCR_MISMATCH;
}
