/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard migrate (migrate.h): a systemd-tpm2 or clevis token replaced by
 * a tpmguard one, through an enrollment whose pending marker also names
 * the old token and, once proven, its keyslot.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "enroll.h"
#include "error.h"
#include "json-util.h"
#include "label.h"
#include "log.h"
#include "luks.h"
#include "marker-resolve.h"
#include "migrate.h"
#include "tpm.h"
#include "token.h"

int tg_migrate_token_wants_pin(const char *device, int token) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_json_ json_object *o = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        const char *json = NULL;
        json_object *v;
        int r;

        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        if (!tg_luks_token_has_type(cd, token, "systemd-tpm2") || crypt_token_json_get(cd, token, &json) < 0 || !json ||
            tg_json_parse_object(json, strlen(json), &o, problem, sizeof problem) < 0)
                return 0;
        return json_object_object_get_ex(o, "tpm2-pin", &v) && json_object_is_type(v, json_type_boolean) &&
               json_object_get_boolean(v);
}

typedef struct migrate_proof {
        const tg_config *config;
        const char *device;
        int token;              /* the old token */
        const char *type;       /* its type */
        int keyslot;            /* the keyslot it names */
        const tg_secret *pin;   /* its PIN, NULL if none given */
        bool unproven;          /* out: kept */
} migrate_proof;

/*
 * Is the keyslot the old token names its own, shown in this run? 1 only when
 * the token's own secret opens exactly that keyslot: a test activation (no
 * dm device) through systemd's token plugin, which libcryptsetup loads from
 * its token directory, on the TPM tpmguard is configured for. The keyslot
 * number alone is the header's word: an edited systemd-tpm2 token naming the
 * keyslot of a systemd-cryptenroll recovery key (the same PBKDF2 at 1000
 * iterations) must not make migrate destroy it, and that token's secret does
 * not open the recovery key's keyslot. clevis has no libcryptsetup plugin,
 * so nothing proves its keyslot here. On any doubt (no plugin, PIN missing
 * or wrong, PCRs changed): 0, and the keyslot is kept, with the command to
 * remove it.
 *
 * tg_enroll calls it once tpmguard's own seal passed its checks on this TPM
 * (tg_verify, the test unseal): an interposer tpmguard detects stops migrate
 * before the old token is used. The test activation unseals the old secret
 * as every boot does; the keyslot it opens is destroyed in this run.
 */
static int migrate_prove(struct crypt_device *cd, void *userdata) {
        migrate_proof *p = userdata;
        /* systemd's struct systemd_tpm2_plugin_params (src/shared/tpm2-util.h, v252..v254: these three
         * fields; later versions append fields): zero-padded, so that an appended one reads NULL. */
        struct {
                uint32_t search_pcr_mask;
                const char *device;
                const char *signature_path;
                const void *appended[13];
        } params = { .search_pcr_mask = UINT32_MAX };
        const char *why;
        int r;

        if (strcmp(p->type, "systemd-tpm2") != 0)
                why = "tpmguard cannot run the clevis pin to check which keyslot its secret opens";
        else {
                /* The TPM tpmguard verified, always named: left unnamed, the plugin would take
                 * $SYSTEMD_TPM2_DEVICE from the environment first (a test's swtpm is named too). */
                if (p->config->tcti)
                        params.device = p->config->tcti;
                r = crypt_activate_by_token_pin(cd, NULL, p->type, p->token,
                                                p->pin ? (const char *) p->pin->data : NULL, p->pin ? p->pin->size : 0,
                                                params.device ? &params : NULL, 0);
                if (!tg_config_resource_manager(p->config)) {
                        /* Whatever the plugin left loaded (it may fail half-way) stays in a TPM without
                         * a resource manager, in its few slots. */
                        _cleanup_tpm_ tg_tpm *t = NULL;

                        if (tg_tpm_open_config(p->config, &t) >= 0)
                                (void) tg_tpm_flush_left_over(t);
                        else
                                log_notice("Could not reopen the TPM to flush what systemd's plugin left loaded; "
                                           "a reboot frees its slots.");
                }
                if (r == p->keyslot)
                        return 1;
                log_debug("%s: test activation through token %d: %d.", p->device, p->token, r);
                why = r >= 0 ? "the token's secret opens another keyslot" :
                      r == -ENOANO ? "the token has a PIN and none was given (--old-pin-file F, or a terminal)" :
                      r == -ENOENT || r == -EAGAIN || r == -EINVAL ? "systemd's token plugin could not be used" :
                      "the token's secret did not open it (wrong PIN, changed PCRs, not its keyslot, or an "
                      "interposer on the TPM bus that made systemd's unseal fail)";
        }
        log_warning("Keeping keyslot %d: the %s token %d names it, but nothing shows it is the old token's (%s); "
                    "an edited token can name a passphrase's or a recovery key's keyslot. If no passphrase or "
                    "recovery key of yours opens it, remove it with 'cryptsetup luksKillSlot %s %d'.", p->keyslot,
                    p->type, p->token, why, p->device, p->keyslot);
        /* Labelled before the old token goes: without a label the keyslot looks like a passphrase's, and
         * tpmguard audit would call the volume safe while the secret that crossed the bus opens it. */
        r = tg_luks_kept_label_write(cd, p->keyslot, p->type);
        if (r < 0)
                return r;
        p->unproven = true;
        return 0;
}

int tg_migrate(const tg_config *config, const char *device, int old_token, const tg_secret *unlock_passphrase,
               const tg_secret *old_pin, const tg_enroll_options *options, bool keep_old, tg_migrate_result *ret) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        tg_enroll_options o = *options;
        tg_migrate_result res = { .old_token = old_token, .old_keyslot = -1 };
        const char *type = NULL;
        crypt_token_info info;
        migrate_proof proof = {};
        int opened, n_keyslots = 0, keyslot, token, r;

        assert(unlock_passphrase);
        r = tg_luks_open_writable(device, &cd);
        if (r < 0)
                return r;
        r = tg_pending_markers_resolve_all(config->state_dir, cd, device, NULL);
        if (r < 0)
                return r;
        if (old_token < 0 || old_token >= tg_luks_tokens_max())
                return log_error_rc(-TG_ERR_INVALID, "migrate needs the token to replace: --token N "
                                    "('tpmguard audit %s' lists them).", device);
        info = crypt_token_status(cd, old_token, &type);
        if (info == CRYPT_TOKEN_INACTIVE || info == CRYPT_TOKEN_INVALID || !type)
                return log_error_rc(-TG_ERR_NOT_FOUND, "%s has no token %d. Nothing was changed.", device, old_token);
        if (!tg_migratable_token_type(type))
                return log_error_rc(-TG_ERR_INVALID, "Token %d of %s is a %s token: migrate replaces systemd-tpm2 and "
                                    "clevis tokens%s. Nothing was changed.", old_token, device, type,
                                    strcmp(type, TG_TOKEN_TYPE) == 0 ? " (this one is tpmguard's already)" : "");
        snprintf(res.old_type, sizeof res.old_type, "%s", type);
        for (int k = 0; k < tg_luks_keyslots_max(); k++)
                if (tg_luks_token_references(cd, old_token, k) && tg_luks_keyslot_active(cd, k)) {
                        res.old_keyslot = k;
                        n_keyslots++;
                }
        if (n_keyslots != 1)
                return log_error_rc(-TG_ERR_TOKEN, "Token %d of %s uses %d keyslots; migrate replaces a token with "
                                    "exactly one. Nothing was changed.", old_token, device, n_keyslots);

        /* Authorized by the passphrase alone: the old token authorizes nothing (unlocking through it is
         * what an interposer reads, tpmguard audit); it only proves, in tg_enroll once tpmguard's own
         * seal has passed its checks, which keyslot is its own (migrate_prove). */
        opened = crypt_activate_by_passphrase(cd, NULL, CRYPT_ANY_SLOT, (const char *) unlock_passphrase->data,
                                              unlock_passphrase->size, 0);
        if (opened < 0)
                return log_error_rc(-TG_ERR_BAD_PIN, "No keyslot of %s opens with the given passphrase: nothing was "
                                    "changed.", device);

        o.migrate = !keep_old;
        o.migrate_token = old_token;
        o.migrate_keyslot = res.old_keyslot;
        o.keyslot = CRYPT_ANY_SLOT;
        if (opened == res.old_keyslot) {
                /* A secret someone knows opens it: it is theirs as much as the token's. */
                log_notice("The given passphrase opens keyslot %d, the old token's: it is kept.", res.old_keyslot);
                o.migrate_keyslot = -1;
        } else if (tg_luks_keyslot_used_by_token(cd, res.old_keyslot, old_token)) {
                log_notice("Keyslot %d is also used by another token: it is kept.", res.old_keyslot);
                o.migrate_keyslot = -1;
        } else if (!keep_old) {
                proof = (migrate_proof) { .config = config, .device = device, .token = old_token,
                                          .type = res.old_type, .keyslot = res.old_keyslot, .pin = old_pin };
                o.migrate_prove = migrate_prove;
                o.migrate_prove_userdata = &proof;
        }
        crypt_free(TAKE_PTR(cd));

        r = tg_enroll(config, device, unlock_passphrase, &o, &keyslot, &token);
        if (r < 0)
                return r;
        res.old_keyslot_unproven = proof.unproven;
        res.token = token;
        res.keyslot = keyslot;
        /* What the header says now: the resolution inside tg_enroll may have stopped short (then cleanup). */
        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        info = crypt_token_status(cd, old_token, &type);
        res.old_token_removed = info == CRYPT_TOKEN_INACTIVE || !type || strcmp(type, res.old_type) != 0;
        res.old_keyslot_destroyed = !tg_luks_keyslot_active(cd, res.old_keyslot);
        if (!keep_old && !res.old_token_removed)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "The tpmguard token %d is in place, but the old token %d is "
                                    "left over: run 'tpmguard cleanup %s'.", token, old_token, device);
        if (ret)
                *ret = res;
        return 0;
}
