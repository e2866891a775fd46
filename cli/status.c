/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard status: the state of a volume and of the TPM, read without
 * changing anything and without unsealing. The header is attacker-editable,
 * so what it says is reported, never acted on; the PCR policy state is the
 * policy digest recomputed from PCR values read over the verified TPM.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "da.h"
#include "error.h"
#include "keyslot-report.h"
#include "label.h"
#include "lifecycle.h"
#include "log.h"
#include "lockout.h"
#include "luks.h"
#include "marker-auth.h"
#include "marker-resolve.h"
#include "nullname.h"
#include "pending-marker.h"
#include "pinned.h"
#include "policy.h"
#include "status.h"
#include "token.h"
#include "tpm.h"
#include "util.h"
#include "verify.h"

/* "satisfied", "not-satisfied", or an error id: the policy digest recomputed from the current PCR values. */
static const char *policy_state(tg_verified_tpm *v, const tg_token *t) {
        bool satisfied;

        if (!v || tg_token_policy_satisfied(v, t, &satisfied) < 0)
                return "unknown";
        return satisfied ? "satisfied" : "not-satisfied";
}

static json_object *json_pcr_list(uint32_t mask) {
        json_object *a = json_object_new_array();

        for (int i = 0; a && i < TG_PCR_COUNT; i++)
                if (mask & (UINT32_C(1) << i))
                        json_object_array_add(a, json_object_new_int(i));
        return a;
}

void tg_status_tpm(const tg_config *config, tg_tpm_status *ret, tg_verified_tpm **ret_v) {
        _cleanup_tpm_ tg_tpm *tpm = NULL;
        _cleanup_secret_ tg_secret *held = NULL;
        tg_tpm_status st = { .kernel_null_name_policy = config->kernel_null_name };
        tg_verify_report report = {};
        tg_pinned_key pinned;
        TPM2B_NAME kernel_name;
        int da_r = -TG_ERR_TPM_UNREACHABLE;

        st.provisioned = tg_pinned_key_load(config->state_dir, &pinned) >= 0;
        /* How the pin was made: a TOFU pin is named every time (docs/design.md §2.1). */
        st.ek_tofu = st.provisioned && pinned.tofu;
        st.kernel_null_name_present = tg_null_name_read(config->null_name_path, config->tcti, &kernel_name) >= 0;
        st.verification = tg_verify(config, NULL, &report, ret_v);
        if (st.verification > 0)
                st.verification = 0;
        st.anchor = report.anchor;

        /* The DA state is no secret: read it over the verified TPM, or else directly (one GetCapability). */
        if (*ret_v)
                da_r = tg_da_read(tg_vtpm_esys(*ret_v), ESYS_TR_NONE, &st.da);
        else if (tg_tpm_open_config(config, &tpm) >= 0)
                da_r = tg_da_read(tpm->esys, ESYS_TR_NONE, &st.da);
        if (da_r >= 0) {
                st.da_known = true;
                st.da_weaker_than_configured = tg_lockout_params_weaker(&st.da, config);
                st.lockout_auth_held = tg_lockout_auth_load(config->state_dir, &held) >= 0;
        }
        *ret = st;
}

json_object *tg_tpm_status_to_json(const tg_tpm_status *s) {
        json_object *o = json_object_new_object(), *da_json = NULL;

        if (!o)
                return NULL;
        json_object_object_add(o, "provisioned", json_object_new_boolean(s->provisioned));
        if (s->provisioned)
                json_object_object_add(o, "ek_trust", json_object_new_string(s->ek_tofu ? TG_PINNED_TRUST_TOFU
                                                                                        : TG_PINNED_TRUST_CERT));
        json_object_object_add(o, "kernel_null_name",
                               json_object_new_string(s->kernel_null_name_present ? "present" : "absent"));
        json_object_object_add(o, "kernel_null_name_policy",
                               json_object_new_string(tg_null_name_policy_to_string(s->kernel_null_name_policy)));
        json_object_object_add(o, "verification",
                               json_object_new_string(s->verification >= 0 ? "verified" : tg_err_id(s->verification)));
        if (s->verification < 0)
                json_object_object_add(o, "verification_message", json_object_new_string(tg_err_str(s->verification)));
        json_object_object_add(o, "anchor", json_object_new_string(tg_anchor_kind_to_string(s->anchor)));
        json_object_object_add(o, "anchor_detects", json_object_new_string(tg_anchor_detects(s->anchor)));

        if (s->da_known && (da_json = json_object_new_object())) {
                json_object_object_add(da_json, "in_lockout", json_object_new_boolean(s->da.in_lockout));
                json_object_object_add(da_json, "failures", json_object_new_int64(s->da.failures));
                json_object_object_add(da_json, "max_failures", json_object_new_int64(s->da.max_failures));
                json_object_object_add(da_json, "recovery_seconds", json_object_new_int64(s->da.recovery_seconds));
                json_object_object_add(da_json, "lockout_recovery_seconds",
                                       json_object_new_int64(s->da.lockout_recovery_seconds));
                /* Who can reset the counter: nobody without the password, unless it is empty. */
                json_object_object_add(da_json, "lockout_auth_set", json_object_new_boolean(s->da.lockout_auth_set));
                json_object_object_add(da_json, "weaker_than_configured",
                                       json_object_new_boolean(s->da_weaker_than_configured));
                json_object_object_add(da_json, "lockout_auth_held", json_object_new_boolean(s->lockout_auth_held));
        }
        json_object_object_add(o, "dictionary_attack", da_json);
        return o;
}

int tg_status(const tg_config *config, const char *device, json_object **ret) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_free_ char *cleanup_cmd = NULL;
        tg_tpm_status tpm_status;
        json_object *tokens = json_object_new_array(), *keyslots = json_object_new_array(),
                    *pending = json_object_new_array(), *orphans = json_object_new_array(), *tpm;
        int r;

        if (!o || !tokens || !keyslots || !pending || !orphans) {
                json_object_put(tokens);
                json_object_put(keyslots);
                json_object_put(pending);
                json_object_put(orphans);
                return -TG_ERR_NOMEM;
        }
        json_object_object_add(o, "device", json_object_new_string(device));
        json_object_object_add(o, "tokens", tokens);
        json_object_object_add(o, "keyslots", keyslots);
        json_object_object_add(o, "pending", pending);
        json_object_object_add(o, "orphans", orphans);

        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        r = tg_asprintf(&cleanup_cmd, "tpmguard cleanup %s", device);
        if (r < 0)
                return r;

        tg_status_tpm(config, &tpm_status, &v);
        tpm = tg_tpm_status_to_json(&tpm_status);
        if (!tpm)
                return -TG_ERR_NOMEM;
        json_object_object_add(o, "tpm", tpm);

        for (int id = 0; id < tg_luks_tokens_max(); id++) {
                json_object *e;
                tg_token t;

                if (tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE)) {
                        e = json_object_new_object();
                        if (!e)
                                return -TG_ERR_NOMEM;
                        json_object_array_add(tokens, e);
                        json_object_object_add(e, "token", json_object_new_int(id));
                        if (tg_luks_token_load(cd, id, &t) < 0) {
                                json_object_object_add(e, "valid", json_object_new_boolean(false));
                                continue;
                        }
                        json_object_object_add(e, "valid", json_object_new_boolean(true));
                        json_object_object_add(e, "keyslot", t.keyslot >= 0 ? json_object_new_int(t.keyslot) : NULL);
                        json_object_object_add(e, "pcr_bank", json_object_new_string(tg_pcr_bank_to_string(t.pcr_bank)));
                        json_object_object_add(e, "pcrs", json_pcr_list(t.pcr_mask));
                        json_object_object_add(e, "pin", json_object_new_boolean(t.pin));
                        json_object_object_add(e, "format", json_object_new_int((int) t.version));
                        if (t.pin && t.version >= 2) {
                                json_object *kdf = json_object_new_object();
                                if (!kdf)
                                        return -TG_ERR_NOMEM;
                                json_object_object_add(e, "pin_kdf", kdf);
                                json_object_object_add(kdf, "type", json_object_new_string(TG_PIN_KDF_TYPE_V2));
                                json_object_object_add(kdf, "time", json_object_new_int64(t.argon2.time_cost));
                                json_object_object_add(kdf, "memory_kib", json_object_new_int64(t.argon2.memory_kib));
                                json_object_object_add(kdf, "parallel", json_object_new_int64(t.argon2.parallel));
                        } else if (t.pin)
                                json_object_object_add(e, "pin_kdf_iterations", json_object_new_int64(t.pin_kdf_iterations));
                        /* What a TPM that leaks its secrets (firmware flaw, fault attack, decapped chip) gives. */
                        json_object_object_add(e, "leaking_tpm", json_object_new_string(
                                !t.pin ? "no PIN: a leaking TPM opens the volume; format 2 gives a no-PIN token nothing" :
                                t.version < 2 ? "exposed: format 1, the TPM holds the keyslot passphrase itself; "
                                                "'tpmguard change-pin' or 'tpmguard rotate' upgrades it to format 2" :
                                "protected: format 2, the PIN's Argon2id is mixed into the keyslot passphrase"));
                        json_object_object_add(e, "pcr_policy", json_object_new_string(policy_state(v, &t)));
                        if (t.n_alt > 0) {
                                /* Update seals (docs/design.md §9.2): each one's policy against this boot. */
                                json_object *alts = json_object_new_array();
                                if (!alts)
                                        return -TG_ERR_NOMEM;
                                json_object_object_add(e, "update_seals", alts);
                                for (unsigned k = 0; k < t.n_alt; k++) {
                                        json_object *a = json_object_new_object();
                                        tg_token view;

                                        if (!a || json_object_array_add(alts, a) < 0) {
                                                json_object_put(a);
                                                return -TG_ERR_NOMEM;
                                        }
                                        tg_token_alt_view(&t, &t.alt[k], &view);
                                        json_object_object_add(a, "kind", json_object_new_string(
                                                tg_alt_kind_to_string(t.alt[k].kind)));
                                        if (t.alt[k].kind == TG_ALT_GRACE) {
                                                json_object *kept = json_object_new_array();

                                                json_object_object_add(a, "reset_count_max",
                                                                       json_object_new_int64(t.alt[k].reset_count_max));
                                                /* The PCRs the grace still checks (those the update does not change). */
                                                for (unsigned p = 0; kept && p < TG_PCR_COUNT; p++)
                                                        if (t.alt[k].pcr_mask & (UINT32_C(1) << p))
                                                                json_object_array_add(kept, json_object_new_int((int) p));
                                                json_object_object_add(a, "kept_pcrs", kept);
                                        }
                                        json_object_object_add(a, "policy", json_object_new_string(policy_state(v, &view)));
                                        explicit_bzero(&view, sizeof view);
                                }
                        }
                        {
                                /* The header is attacker-writable: a token weaker than
                                 * tpmguard.conf may have been edited (docs/design.md §9.1). */
                                char why[256];
                                bool weaker = tg_token_policy_weaker(&t, config, why, sizeof why);
                                json_object_object_add(e, "weaker_than_config", json_object_new_boolean(weaker));
                                if (weaker)
                                        json_object_object_add(e, "weaker_reason", json_object_new_string(why));
                        }
                        if (!tg_luks_keyslot_active(cd, t.keyslot)) {
                                json_object *orphan = json_object_new_object();
                                if (!orphan)
                                        return -TG_ERR_NOMEM;
                                json_object_object_add(orphan, "token", json_object_new_int(id));
                                json_object_object_add(orphan, "reason", json_object_new_string("token without a keyslot"));
                                json_object_object_add(orphan, "cleanup", json_object_new_string(cleanup_cmd));
                                json_object_array_add(orphans, orphan);
                        }
                        explicit_bzero(&t, sizeof t);
                } else if (tg_luks_token_is_label(cd, id)) {
                        if (tg_luks_token_active_keyslot(cd, id) < 0) {
                                json_object *orphan = json_object_new_object();
                                if (!orphan)
                                        return -TG_ERR_NOMEM;
                                json_object_object_add(orphan, "token", json_object_new_int(id));
                                json_object_object_add(orphan, "reason", json_object_new_string(
                                        tg_luks_token_has_type(cd, id, TG_KEPT_TOKEN_TYPE)
                                                ? "kept-keyslot label without a keyslot"
                                                : "recovery-key label without a keyslot"));
                                json_object_object_add(orphan, "cleanup", json_object_new_string(cleanup_cmd));
                                json_object_array_add(orphans, orphan);
                        }
                } else if (tg_luks_token_has_type(cd, id, TG_PENDING_TOKEN_TYPE)) {
                        const char *json = NULL;
                        tg_pending_marker m;
                        tg_marker_plan p;

                        e = json_object_new_object();
                        if (!e)
                                return -TG_ERR_NOMEM;
                        json_object_array_add(pending, e);
                        json_object_object_add(e, "marker_token", json_object_new_int(id));
                        json_object_object_add(e, "cleanup", json_object_new_string(cleanup_cmd));
                        if (crypt_token_json_get(cd, id, &json) < 0 || tg_pending_marker_from_string(json, &m) < 0) {
                                json_object_object_add(e, "valid", json_object_new_boolean(false));
                                continue;
                        }
                        /* An unsigned or wrongly signed marker (planted, edited, older tpmguard) directs nothing. */
                        r = tg_pending_marker_authenticate(config->state_dir, cd, &m);
                        tg_pending_marker_plan(config->state_dir, cd, id, &m, -1, &p);
                        json_object_object_add(e, "valid", json_object_new_boolean(true));
                        json_object_object_add(e, "authenticated", json_object_new_boolean(m.authenticated));
                        json_object_object_add(e, "operation", json_object_new_string(m.operation));
                        json_object_object_add(e, "token", m.token >= 0 ? json_object_new_int(m.token) : NULL);
                        json_object_object_add(e, "old_keyslot", m.old_keyslot >= 0 ? json_object_new_int(m.old_keyslot) : NULL);
                        if (tg_pending_marker_is_passphrase_op(&m))
                                json_object_object_add(e, "committed", json_object_new_boolean(m.committed));
                        json_object_object_add(e, "new_keyslot", json_object_new_int(m.new_keyslot));
                        json_object_object_add(e, "resolution", json_object_new_string(
                                r < 0 ? "none (the marker key is refused; see the error above)" :
                                p.unauthenticated ? "remove the marker only (unauthenticated: no keyslot is destroyed)" :
                                p.roll_forward ? "complete" : "undo"));
                        if (p.leftover_keyslot >= 0) {
                                json_object *orphan = json_object_new_object();
                                if (!orphan)
                                        return -TG_ERR_NOMEM;
                                json_object_object_add(orphan, "keyslot", json_object_new_int(p.leftover_keyslot));
                                json_object_object_add(orphan, "reason", json_object_new_string(
                                        p.roll_forward ? "old keyslot of an interrupted operation"
                                                       : "new keyslot of an interrupted operation"));
                                json_object_object_add(orphan, "cleanup", json_object_new_string(cleanup_cmd));
                                json_object_array_add(orphans, orphan);
                        }
                        if (p.leftover_token >= 0) {
                                json_object *orphan = json_object_new_object();
                                if (!orphan)
                                        return -TG_ERR_NOMEM;
                                json_object_object_add(orphan, "token", json_object_new_int(p.leftover_token));
                                json_object_object_add(orphan, "reason", json_object_new_string(
                                        "old token of an interrupted migrate"));
                                json_object_object_add(orphan, "cleanup", json_object_new_string(cleanup_cmd));
                                json_object_array_add(orphans, orphan);
                        }
                }
        }

        r = tg_luks_keyslots_describe(cd, true, keyslots);
        if (r < 0)
                return r;

        json_object_object_add(o, "cleanup_needed", json_object_new_boolean(
                json_object_array_length(pending) > 0 || json_object_array_length(orphans) > 0));
        *ret = TAKE_PTR(o);
        return 0;
}

void tg_status_print(json_object *s, FILE *f) {
        json_object *v, *tokens, *keyslots, *pending, *orphans, *tpm, *da;

        json_object_object_get_ex(s, "device", &v);
        fprintf(f, "Volume %s\n", json_object_get_string(v));
        json_object_object_get_ex(s, "tokens", &tokens);
        if (json_object_array_length(tokens) == 0)
                fprintf(f, "  no tpmguard token\n");
        for (size_t i = 0; i < json_object_array_length(tokens); i++) {
                json_object *t = json_object_array_get_idx(tokens, i), *x, *pcrs;
                json_object_object_get_ex(t, "token", &x);
                fprintf(f, "  token %d:", json_object_get_int(x));
                if (json_object_object_get_ex(t, "valid", &x) && !json_object_get_boolean(x)) {
                        fprintf(f, " malformed\n");
                        continue;
                }
                if (json_object_object_get_ex(t, "keyslot", &x) && x)
                        fprintf(f, " keyslot %d,", json_object_get_int(x));
                else
                        fprintf(f, " no keyslot,");
                json_object_object_get_ex(t, "pcr_bank", &x);
                fprintf(f, " %s PCRs", json_object_get_string(x));
                json_object_object_get_ex(t, "pcrs", &pcrs);
                for (size_t k = 0; k < json_object_array_length(pcrs); k++)
                        fprintf(f, "%s%d", k ? "," : " ", json_object_get_int(json_object_array_get_idx(pcrs, k)));
                json_object_object_get_ex(t, "pin", &x);
                fprintf(f, ", %s", json_object_get_boolean(x) ? "PIN" : "no PIN");
                json_object_object_get_ex(t, "pcr_policy", &x);
                fprintf(f, ", current PCR values: %s\n", json_object_get_string(x));
                json_object_object_get_ex(t, "format", &x);
                fprintf(f, "    format %d", json_object_get_int(x));
                if (json_object_object_get_ex(t, "pin_kdf", &x)) {
                        json_object *tc, *mem, *par;
                        json_object_object_get_ex(x, "time", &tc);
                        json_object_object_get_ex(x, "memory_kib", &mem);
                        json_object_object_get_ex(x, "parallel", &par);
                        fprintf(f, ", PIN key argon2id: %d MiB, %d pass%s, %d lane%s", json_object_get_int(mem) / 1024,
                                json_object_get_int(tc), json_object_get_int(tc) == 1 ? "" : "es",
                                json_object_get_int(par), json_object_get_int(par) == 1 ? "" : "s");
                }
                if (json_object_object_get_ex(t, "leaking_tpm", &x))
                        fprintf(f, "; leaking TPM: %s", json_object_get_string(x));
                fprintf(f, "\n");
                if (json_object_object_get_ex(t, "update_seals", &x))
                        for (size_t k = 0; k < json_object_array_length(x); k++) {
                                json_object *a = json_object_array_get_idx(x, k), *kind, *bound, *state, *kept = NULL;
                                json_object_object_get_ex(a, "kind", &kind);
                                json_object_object_get_ex(a, "policy", &state);
                                json_object_object_get_ex(a, "kept_pcrs", &kept);
                                if (json_object_object_get_ex(a, "reset_count_max", &bound)) {
                                        uint32_t mask = 0;
                                        char kept_list[96] = "";

                                        for (size_t p = 0; kept && p < json_object_array_length(kept); p++) {
                                                int n = json_object_get_int(json_object_array_get_idx(kept, p));
                                                if (n >= 0 && n < TG_PCR_COUNT)
                                                        mask |= UINT32_C(1) << n;
                                        }
                                        if (mask)
                                                tg_pcr_list_format(mask, kept_list, sizeof kept_list);
                                        fprintf(f, "    update seal: grace while the TPM's resetCount <= %" PRId64
                                                ", in a boot without a TPM Restart%s%s%s (now: %s); 'tpmguard update "
                                                "finish' ends it\n", json_object_get_int64(bound),
                                                mask ? ", and PCR " : "", kept_list, mask ? " as prepared" : "",
                                                json_object_get_string(state));
                                } else
                                        fprintf(f, "    update seal: %s PCR values (now: %s); 'tpmguard update finish' "
                                                "ends it\n", json_object_get_string(kind), json_object_get_string(state));
                        }
                if (json_object_object_get_ex(t, "weaker_reason", &x))
                        fprintf(f, "    WEAKER than the configuration: %s (possibly edited in the header)\n",
                                json_object_get_string(x));
        }
        json_object_object_get_ex(s, "keyslots", &keyslots);
        fprintf(f, "  keyslots:");
        for (size_t i = 0; i < json_object_array_length(keyslots); i++) {
                json_object *k = json_object_array_get_idx(keyslots, i), *x, *kind;
                json_object_object_get_ex(k, "keyslot", &x);
                json_object_object_get_ex(k, "kind", &kind);
                fprintf(f, " %d(%s)", json_object_get_int(x), json_object_get_string(kind));
        }
        fprintf(f, "\n");
        json_object_object_get_ex(s, "pending", &pending);
        for (size_t i = 0; i < json_object_array_length(pending); i++) {
                json_object *p = json_object_array_get_idx(pending, i), *x, *y, *a;
                json_object_object_get_ex(p, "marker_token", &x);
                if (json_object_object_get_ex(p, "operation", &y) && json_object_object_get_ex(p, "authenticated", &a) &&
                    !json_object_get_boolean(a))
                        fprintf(f, "  UNAUTHENTICATED pending %s marker (token %d): no valid MAC, so it may be planted; "
                                "cleanup removes it and destroys no keyslot\n", json_object_get_string(y),
                                json_object_get_int(x));
                else if (json_object_object_get_ex(p, "operation", &y))
                        fprintf(f, "  interrupted %s (marker token %d)\n", json_object_get_string(y), json_object_get_int(x));
                else
                        fprintf(f, "  malformed pending marker (token %d)\n", json_object_get_int(x));
        }
        json_object_object_get_ex(s, "orphans", &orphans);
        for (size_t i = 0; i < json_object_array_length(orphans); i++) {
                json_object *p = json_object_array_get_idx(orphans, i), *x, *why;
                json_object_object_get_ex(p, "reason", &why);
                if (json_object_object_get_ex(p, "keyslot", &x))
                        fprintf(f, "  orphan keyslot %d (%s)\n", json_object_get_int(x), json_object_get_string(why));
                else if (json_object_object_get_ex(p, "token", &x))
                        fprintf(f, "  orphan token %d (%s)\n", json_object_get_int(x), json_object_get_string(why));
        }
        if (json_object_object_get_ex(s, "cleanup_needed", &v) && json_object_get_boolean(v)) {
                json_object_object_get_ex(s, "device", &v);
                fprintf(f, "  clean up with: tpmguard cleanup %s\n", json_object_get_string(v));
        }
        json_object_object_get_ex(s, "tpm", &tpm);
        json_object_object_get_ex(tpm, "provisioned", &v);
        fprintf(f, "TPM: %s", json_object_get_boolean(v) ? "provisioned" : "not provisioned");
        if (json_object_object_get_ex(tpm, "ek_trust", &v) && strcmp(json_object_get_string(v), TG_PINNED_TRUST_TOFU) == 0)
                fprintf(f, " ON TRUST (EK signing key pinned on first use, unproven: no EK certificate)");
        json_object_object_get_ex(tpm, "verification", &v);
        fprintf(f, ", verification: %s", json_object_get_string(v));
        json_object_object_get_ex(tpm, "kernel_null_name", &v);
        fprintf(f, ", kernel null_name: %s", json_object_get_string(v));
        json_object_object_get_ex(tpm, "kernel_null_name_policy", &v);
        fprintf(f, " (policy: %s)\n", json_object_get_string(v));
        json_object_object_get_ex(tpm, "kernel_null_name", &v);
        if (strcmp(json_object_get_string(v), "absent") == 0)
                fprintf(f, "  The kernel exports no TPM null_name (it needs Linux >= 6.10 built with "
                        "CONFIG_TCG_TPM2_HMAC=y): a TPM reset is detected from this boot's first verification on "
                        "(the boot anchor), not before it.\n");
        if (json_object_object_get_ex(tpm, "anchor", &v)) {
                fprintf(f, "Reset anchor: %s", json_object_get_string(v));
                json_object_object_get_ex(tpm, "anchor_detects", &v);
                fprintf(f, ": %s\n", json_object_get_string(v));
        }
        if (json_object_object_get_ex(tpm, "dictionary_attack", &da) && da) {
                json_object *lock, *fails, *max, *rec;
                json_object_object_get_ex(da, "in_lockout", &lock);
                json_object_object_get_ex(da, "failures", &fails);
                json_object_object_get_ex(da, "max_failures", &max);
                json_object_object_get_ex(da, "recovery_seconds", &rec);
                json_object *set = NULL, *held = NULL, *weaker = NULL;
                fprintf(f, "DA: %s, %d of %d failures, one forgiven every %d s\n",
                        json_object_get_boolean(lock) ? "IN LOCKOUT" : "not locked out",
                        json_object_get_int(fails), json_object_get_int(max), json_object_get_int(rec));
                if (json_object_object_get_ex(da, "lockout_auth_set", &set)) {
                        json_object_object_get_ex(da, "lockout_auth_held", &held);
                        json_object_object_get_ex(da, "weaker_than_configured", &weaker);
                        fprintf(f, "Lockout password: %s%s\n",
                                !json_object_get_boolean(set) ? "NONE: anyone can reset the DA counter "
                                                                "(run 'tpmguard lockout setup')"
                                : json_object_get_boolean(held) ? "set, held by tpmguard"
                                                                : "set by another owner",
                                json_object_get_boolean(weaker) ? "; DA parameters weaker than tpmguard.conf's" : "");
                }
        } else
                fprintf(f, "DA: unknown (TPM unreachable)\n");
}
