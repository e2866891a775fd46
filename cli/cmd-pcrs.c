/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tpmguard pcrs [--predict]: the firmware's event log replayed against the
 * PCR values read over the verified session, what PCR 7 measured (the
 * Secure Boot variables and the authorities that verified the boot chain),
 * and the PCR 7 value the next boot will produce after a db, dbx or KEK
 * update or a new signing authority. Threat model: a forged log (root, a
 * firmware bug) is caught by the verified read, and a log that does not
 * replay feeds no prediction (lifecycle/pcr-log.h, pcr-predict.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd-pcrs.h"
#include "config.h"
#include "efi-siglist.h"
#include "error.h"
#include "eventlog.h"
#include "json-util.h"
#include "log.h"
#include "pcr-log.h"
#include "pcr-predict.h"
#include "util.h"
#include "verify.h"

static char *hex(const uint8_t *p, size_t n) {
        char *s = NULL;
        return tg_hex_encode(p, n, &s) < 0 ? NULL : s;
}

static void json_add_hex(json_object *o, const char *key, const uint8_t *p, size_t n) {
        _cleanup_free_ char *s = hex(p, n);
        json_object_object_add(o, key, json_object_new_string(s ?: ""));
}

/* What a PCR's replay says, for people and for --json. */
static const char *pcr_verdict(const tg_pcr_bank_replay *b, unsigned i) {
        bool match = b->match_mask & (UINT32_C(1) << i);

        if (i < 8)
                return match ? "replays" : "DOES NOT REPLAY";
        if (match)
                return b->log_mask & (UINT32_C(1) << i) ? "replays" : "not extended";
        return "extended after the firmware's log (boot loader or OS): not checked";
}

/* The Secure Boot variables and authorities of PCR 7, as JSON (what the text is printed from too). */
static int pcr7_json(const tg_eventlog *log, json_object **ret) {
        _cleanup_json_ json_object *vars = json_object_new_array(), *auths = json_object_new_array();
        _cleanup_json_ json_object *o = json_object_new_object();

        if (!vars || !auths || !o)
                return -TG_ERR_NOMEM;
        for (size_t i = 0; i < log->n_events; i++) {
                const tg_event *e = &log->events[i];
                json_object *j;
                tg_efi_variable v;
                char g[TG_EFI_GUID_STRING_MAX];

                if (e->pcr != 7 || (e->type != TG_EV_EFI_VARIABLE_DRIVER_CONFIG && e->type != TG_EV_EFI_VARIABLE_AUTHORITY))
                        continue;
                if (tg_efi_variable_parse(e->data, e->data_size, &v) < 0)
                        continue;
                j = json_object_new_object();
                if (!j || json_object_array_add(e->type == TG_EV_EFI_VARIABLE_AUTHORITY ? auths : vars, j) < 0) {
                        json_object_put(j);
                        return -TG_ERR_NOMEM;
                }
                json_object_object_add(j, "name", json_object_new_string(v.name));
                json_object_object_add(j, "guid", json_object_new_string(tg_efi_guid_to_string(&v.guid, g)));
                json_object_object_add(j, "bytes", json_object_new_uint64(v.data_size));
                /* Data that does not hash to the digest is not what was measured: said, not shown as fact. */
                json_object_object_add(j, "data_matches_digest", json_object_new_boolean(tg_event_data_matches(log, e) == 1));
                if (e->type == TG_EV_EFI_VARIABLE_AUTHORITY) {
                        _cleanup_free_ char *subject = v.data_size > 16 ? tg_x509_der_subject(v.data + 16, v.data_size - 16) : NULL;
                        if (subject) {
                                tg_efi_guid owner;
                                memcpy(owner.b, v.data, 16);
                                json_object_object_add(j, "subject", json_object_new_string(subject));
                                json_object_object_add(j, "owner", json_object_new_string(tg_efi_guid_to_string(&owner, g)));
                        }
                } else if (strcmp(v.name, "SecureBoot") == 0) {
                        json_object_object_add(j, "enabled", json_object_new_boolean(v.data_size == 1 && v.data[0] == 1));
                } else {
                        json_object *summary = NULL;
                        if (tg_esl_summary(v.data, v.data_size, &summary) >= 0)
                                json_object_object_add(j, "signatures", summary);
                }
        }
        json_object_object_add(o, "variables", TAKE_PTR(vars));
        json_object_object_add(o, "authorities", TAKE_PTR(auths));
        *ret = TAKE_PTR(o);
        return 0;
}

static int report_json(const char *path, const tg_eventlog *log, const tg_pcr_replay *rp, json_object **ret) {
        _cleanup_json_ json_object *o = json_object_new_object(), *banks = json_object_new_array(),
                                   *events = json_object_new_array();
        json_object *pcr7 = NULL;
        int r;

        if (!o || !banks || !events)
                return -TG_ERR_NOMEM;
        json_object_object_add(o, "event_log", json_object_new_string(path));
        json_object_object_add(o, "format", json_object_new_string(log->crypto_agile ? "crypto-agile" : "sha1-only"));
        json_object_object_add(o, "replays", json_object_new_boolean(rp->verified));
        json_object_object_add(o, "policy_bank", json_object_new_string(tg_pcr_bank_to_string(rp->policy_bank) ?: "?"));
        for (unsigned k = 0; k < rp->n_banks; k++) {
                const tg_pcr_bank_replay *b = &rp->banks[k];
                json_object *jb = json_object_new_object(), *pcrs = json_object_new_array();
                if (!jb || !pcrs || json_object_array_add(banks, jb) < 0) {
                        json_object_put(jb);
                        json_object_put(pcrs);
                        return -TG_ERR_NOMEM;
                }
                json_object_object_add(jb, "bank", json_object_new_string(tg_eventlog_alg_name(b->alg)));
                json_object_object_add(jb, "tpm_active", json_object_new_boolean(b->tpm_read));
                json_object_object_add(jb, "pcrs", pcrs);
                if (!b->replayed_ok || !b->tpm_read)
                        continue;
                for (unsigned i = 0; i < TG_EVENTLOG_PCRS; i++) {
                        json_object *p = json_object_new_object();
                        if (!p || json_object_array_add(pcrs, p) < 0) {
                                json_object_put(p);
                                return -TG_ERR_NOMEM;
                        }
                        json_object_object_add(p, "pcr", json_object_new_int((int) i));
                        json_add_hex(p, "replayed", b->replayed[i], b->size);
                        json_add_hex(p, "tpm", b->tpm[i], b->size);
                        json_object_object_add(p, "match", json_object_new_boolean(b->match_mask & (UINT32_C(1) << i)));
                        json_object_object_add(p, "firmware", json_object_new_boolean(i < 8));
                }
        }
        json_object_object_add(o, "banks", TAKE_PTR(banks));
        for (size_t i = 0; i < log->n_events; i++) {
                const tg_event *e = &log->events[i];
                _cleanup_free_ char *text = NULL;
                json_object *j = json_object_new_object();
                const char *type = tg_event_type_to_string(e->type);
                if (!j || json_object_array_add(events, j) < 0 || tg_event_describe(e, &text) < 0) {
                        json_object_put(j);
                        return -TG_ERR_NOMEM;
                }
                json_object_object_add(j, "pcr", json_object_new_int((int) e->pcr));
                json_object_object_add(j, "type", type ? json_object_new_string(type) : json_object_new_int64(e->type));
                json_object_object_add(j, "description", json_object_new_string(text));
        }
        json_object_object_add(o, "events", TAKE_PTR(events));
        r = pcr7_json(log, &pcr7);
        if (r < 0)
                return r;
        json_object_object_add(o, "pcr7", pcr7);
        *ret = TAKE_PTR(o);
        return 0;
}

static void print_signatures(json_object *s) {
        json_object *x509 = json_object_object_get(s, "x509");
        size_t n = json_object_array_length(x509);

        printf("%zu X.509, %" PRIu64 " SHA-256 hashes", n,
               (uint64_t) json_object_get_uint64(json_object_object_get(s, "sha256")));
        if (json_object_get_uint64(json_object_object_get(s, "other")))
                printf(", %" PRIu64 " other", (uint64_t) json_object_get_uint64(json_object_object_get(s, "other")));
        for (size_t i = 0; i < n; i++)
                printf("\n        %s", json_object_get_string(json_object_object_get(json_object_array_get_idx(x509, i), "subject")));
}

static void report_print(const char *path, const tg_eventlog *log, const tg_pcr_replay *rp, json_object *j) {
        const tg_pcr_bank_replay *pb = tg_pcr_replay_bank(rp, rp->policy_bank);
        json_object *pcr7 = json_object_object_get(j, "pcr7");

        printf("Event log %s: %s, %zu events, banks", path, log->crypto_agile ? "crypto-agile" : "SHA-1 only",
               log->n_events);
        for (unsigned k = 0; k < log->n_banks; k++)
                printf(" %s", tg_eventlog_alg_name(log->bank_alg[k]));
        printf(".\n");
        for (unsigned k = 0; k < rp->n_banks; k++) {
                const tg_pcr_bank_replay *b = &rp->banks[k];
                if (b->alg == rp->policy_bank && b->tpm_read)
                        continue;
                printf("%s: %s\n", tg_eventlog_alg_name(b->alg),
                       !b->replayed_ok ? "not replayed (no hash for it)" :
                       !b->tpm_read ? "not active in the TPM" :
                       (b->match_mask & TG_FIRMWARE_PCR_MASK) == TG_FIRMWARE_PCR_MASK ? "PCRs 0-7 replay" :
                       "PCRs 0-7 DO NOT REPLAY");
        }
        if (!pb || !pb->tpm_read)
                pb = NULL;
        for (unsigned k = 0; !pb && k < rp->n_banks; k++)
                if (rp->banks[k].tpm_read)
                        pb = &rp->banks[k];
        if (pb) {
                printf("\n%s PCRs, replayed from the log and read from the TPM over the verified session:\n",
                       tg_eventlog_alg_name(pb->alg));
                for (unsigned i = 0; i < TG_EVENTLOG_PCRS; i++) {
                        _cleanup_free_ char *tpm = hex(pb->tpm[i], pb->size), *log_value = hex(pb->replayed[i], pb->size);
                        bool match = pb->match_mask & (UINT32_C(1) << i);
                        if (i >= 8 && !(pb->log_mask & (UINT32_C(1) << i)) && match)
                                continue;
                        printf("PCR %2u  %s  %s\n", i, tpm ?: "?", pcr_verdict(pb, i));
                        if (!match)
                                printf("        the log replays to %s\n", log_value ?: "?");
                        for (size_t e = 0; e < log->n_events; e++) {
                                _cleanup_free_ char *text = NULL;
                                const char *type = tg_event_type_to_string(log->events[e].type);
                                if (log->events[e].pcr != i || log->events[e].type == TG_EV_NO_ACTION ||
                                    tg_event_describe(&log->events[e], &text) < 0)
                                        continue;
                                if (type)
                                        printf("        %-34s %s\n", type, text);
                                else
                                        printf("        0x%08x %25s %s\n", log->events[e].type, "", text);
                        }
                }
        }
        printf("\nSecure Boot (PCR 7):\n");
        for (int a = 0; a < 2; a++) {
                json_object *list = json_object_object_get(pcr7, a ? "authorities" : "variables");
                for (size_t i = 0; i < json_object_array_length(list); i++) {
                        json_object *v = json_object_array_get_idx(list, i), *x;
                        printf("  %s%s: ", a ? "authority " : "", json_object_get_string(json_object_object_get(v, "name")));
                        if ((x = json_object_object_get(v, "enabled")))
                                printf("%s", json_object_get_boolean(x) ? "enabled" : "disabled");
                        else if ((x = json_object_object_get(v, "signatures")))
                                print_signatures(x);
                        else if ((x = json_object_object_get(v, "subject")))
                                printf("%s", json_object_get_string(x));
                        else
                                printf("%" PRIu64 " bytes", (uint64_t) json_object_get_uint64(json_object_object_get(v, "bytes")));
                        if (!json_object_get_boolean(json_object_object_get(v, "data_matches_digest")))
                                printf(" (its digest is not the hash of this data: the firmware hashed something else, or the log was "
                                       "edited; not used for a prediction)");
                        printf("\n");
                }
        }
        printf("\n%s\n", rp->verified ? "The firmware's PCRs 0-7 replay to the TPM's values: the log is what the firmware "
                                        "measured." : "The log does NOT replay to the TPM's values (see above).");
}

/* An update file's signature lists (its authentication header skipped), kept in *ret_file. */
static int read_update(const char *path, const char *variable, bool append, uint8_t **ret_file, tg_pcr7_update *ret) {
        _cleanup_free_ uint8_t *data = NULL;
        const uint8_t *lists;
        size_t size = 0, n;
        bool authenticated;
        int r;

        r = tg_read_file(path, TG_EVENTLOG_MAX_EVENT_SIZE, &data, &size);
        if (r < 0)
                return log_error_rc(r, "Cannot read the %s update %s.", variable, path);
        r = tg_esl_from_update_file(data, size, &lists, &n, &authenticated);
        if (r < 0)
                return log_error_rc(r, "%s: not an update of %s.", path, variable);
        log_info("%s: %s, %s to %s.", path, authenticated ? "an authenticated variable" : "EFI signature lists",
                 append ? "appended" : "replacing", variable);
        *ret = (tg_pcr7_update) { .variable = variable, .lists = lists, .size = n, .append = append, .source = path };
        *ret_file = TAKE_PTR(data);
        return 0;
}

void cmd_pcrs_files_free(cmd_pcrs_files *f) {
        for (unsigned i = 0; i < ELEMENTSOF(f->data); i++) {
                free(f->data[i]);
                f->data[i] = NULL;
        }
}

int cmd_pcrs_predict_options(const cli *c, cmd_pcrs_files *files, tg_pcr7_predict_options *ret) {
        const char *paths[3] = { c->kek_file, c->db_file, c->dbx_file }, *names[3] = { "KEK", "db", "dbx" };
        tg_pcr7_predict_options o = { .efivars_dir = c->efivars_dir ?: TG_EFIVARS_PATH };
        int r;

        for (unsigned i = 0; i < 3; i++)
                if (paths[i]) {
                        r = read_update(paths[i], names[i], !c->replace_variables, &files->data[i], &o.updates[o.n_updates]);
                        if (r < 0)
                                return r;
                        o.n_updates++;
                }
        if (c->authority_file) {
                r = tg_read_file(c->authority_file, TG_EVENTLOG_MAX_EVENT_SIZE, &files->data[3], &o.authority_size);
                if (r < 0)
                        return log_error_rc(r, "Cannot read the certificate %s.", c->authority_file);
                _cleanup_free_ char *subject = tg_x509_der_subject(files->data[3], o.authority_size);
                if (!subject)
                        return log_error_rc(-TG_ERR_INVALID, "%s is no DER X.509 certificate.", c->authority_file);
                o.authority = files->data[3];
        }
        *ret = o;
        return 0;
}

static int predict(const cli *c, const tg_eventlog *log, const tg_pcr_replay *rp) {
        _cleanup_(cmd_pcrs_files_free) cmd_pcrs_files files = {};
        _cleanup_json_ json_object *changes = NULL;
        _cleanup_free_ char *value = NULL, *current = NULL;
        tg_pcr7_predict_options o;
        tg_pcr7_prediction p;
        const char *bank;
        int r;

        r = cmd_pcrs_predict_options(c, &files, &o);
        if (r < 0)
                return r;
        r = tg_pcr7_predict(log, rp, &o, &p, &changes);
        if (r < 0)
                return r;
        bank = tg_pcr_bank_to_string(p.bank);
        value = hex(p.predicted, p.size);
        current = hex(p.current, p.size);
        if (!value || !current || !bank)
                return -TG_ERR_NOMEM;
        if (c->json) {
                _cleanup_json_ json_object *o2 = json_object_new_object();
                _cleanup_free_ char *arg = NULL;
                if (!o2 || tg_asprintf(&arg, "7=%s:%s", bank, value) < 0)
                        return -TG_ERR_NOMEM;
                json_object_object_add(o2, "pcr", json_object_new_int(7));
                json_object_object_add(o2, "bank", json_object_new_string(bank));
                json_object_object_add(o2, "current", json_object_new_string(current));
                json_object_object_add(o2, "predicted", json_object_new_string(value));
                json_object_object_add(o2, "changes", json_object_get(changes));
                json_object_object_add(o2, "argument", json_object_new_string(arg));
                cli_json_print(o2);
                return 0;
        }
        if (json_object_array_length(changes) == 0)
                log_info("No change known: PCR 7 of the next boot is this boot's.");
        for (size_t i = 0; i < json_object_array_length(changes); i++) {
                json_object *ch = json_object_array_get_idx(changes, i);
                log_info("PCR 7 prediction: %s from %s (%s).", json_object_get_string(json_object_object_get(ch, "variable")),
                         json_object_get_string(json_object_object_get(ch, "source")),
                         json_object_get_string(json_object_object_get(ch, "write")));
        }
        /* Exactly what 'tpmguard update prepare --pcr' and 'reseal --pcr' take. */
        printf("--pcr 7=%s:%s\n", bank, value);
        return 0;
}

int cmd_pcrs(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *eauth = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_eventlog_ tg_eventlog *log = NULL;
        _cleanup_json_ json_object *j = NULL;
        tg_verify_options o = { .null_name_path = c->null_name };
        const char *path = c->event_log ?: TG_EVENTLOG_PATH;
        tg_pcr_replay rp;
        int r;

        if (!c->predict && (c->db_file || c->dbx_file || c->kek_file || c->authority_file || c->replace_variables ||
                            c->efivars_dir))
                return log_error_rc(-TG_ERR_INVALID, "--db, --dbx, --kek, --authority, --replace-variables and "
                                    "--efivars describe a change to predict: add --predict.");
        r = tg_pcr_log_read(path, &log);
        if (r < 0)
                return r;
        r = cli_read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o.endorsement_auth = eauth;
        r = tg_verify(config, &o, NULL, &v);
        if (r < 0)
                return log_error_rc(r, "The TPM did not verify (%s): without a verified read of the PCRs the log "
                                    "proves nothing. 'tpmguard doctor' shows what to do.", tg_err_str(r));
        r = tg_pcr_replay_verify(v, log, config->pcr_bank, &rp);
        if (r < 0)
                return r;
        if (c->predict)
                return predict(c, log, &rp);
        r = report_json(path, log, &rp, &j);
        if (r < 0)
                return r;
        if (c->json)
                cli_json_print(j);
        else
                report_print(path, log, &rp, j);
        if (!rp.verified)
                for (unsigned i = 0; i < 8; i++)
                        if (rp.firmware_mismatch & (UINT32_C(1) << i))
                                return log_error_rc(-TG_ERR_INTERPOSER, "The event log does not replay to PCR %u read "
                                                    "over the verified session: it was altered, or is not this "
                                                    "boot's. Nothing it says is evidence, and no prediction is made "
                                                    "from it.", i);
        return 0;
}
