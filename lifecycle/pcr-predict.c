/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* PCR 7 of the next boot (pcr-predict.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "efi-siglist.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "pcr-predict.h"
#include "util.h"

/* The Secure Boot variables PCR 7 measures before the separator (PFP §3.3.4.8). */
static const struct {
        const char *name;
        const tg_efi_guid *guid;
} sb_variables[] = {
        { "PK", &tg_efi_global_variable_guid },
        { "KEK", &tg_efi_global_variable_guid },
        { "db", &tg_efi_image_security_database_guid },
        { "dbx", &tg_efi_image_security_database_guid },
};

/* The one PCR 7 event of type measuring (guid, name); -TG_ERR_INVALID when there is none or several. */
static int find_event(const tg_eventlog *log, uint32_t type, const tg_efi_guid *guid, const char *name,
                      size_t *ret_index, tg_efi_variable *ret_var) {
        size_t found = 0, index = 0;
        tg_efi_variable var = {};

        for (size_t i = 0; i < log->n_events; i++) {
                const tg_event *e = &log->events[i];
                tg_efi_variable v;
                if (e->pcr != 7 || e->type != type || tg_efi_variable_parse(e->data, e->data_size, &v) < 0)
                        continue;
                if (!tg_efi_guid_equal(&v.guid, guid) || strcmp(v.name, name) != 0)
                        continue;
                found++;
                index = i;
                var = v;
        }
        if (found != 1)
                return log_error_rc(-TG_ERR_INVALID, "The event log has %s %s event for %s in PCR 7: the change "
                                    "cannot be predicted. 'tpmguard update prepare' without a prediction gives a "
                                    "grace instead.", found ? "more than one" : "no", tg_event_type_to_string(type),
                                    name);
        *ret_index = index;
        *ret_var = var;
        return 0;
}

/*
 * The digest of the event with its variable data replaced: the original
 * UEFI_VARIABLE_DATA's GUID and name bytes kept as the firmware wrote them,
 * VariableDataLength and the data new. Only for an event whose digests are
 * the hash of its data (else the firmware hashed something else: unpredictable).
 */
static int replaced_digest(const tg_eventlog *log, const tg_event *e, const tg_efi_variable *v, uint16_t bank,
                           const uint8_t *data, size_t size, uint8_t *ret) {
        size_t prefix = e->data_size - v->data_size;
        _cleanup_free_ uint8_t *buf = NULL;
        unsigned n;

        if (tg_event_data_matches(log, e) != 1)
                return log_error_rc(-TG_ERR_INVALID, "The event log's %s event for %s does not hash to its digest: "
                                    "this firmware measures something else, the change cannot be predicted.",
                                    tg_event_type_to_string(e->type), v->name);
        if (size > TG_EVENTLOG_MAX_EVENT_SIZE)
                return log_error_rc(-TG_ERR_INVALID, "%s would hold %zu bytes (at most %u).", v->name, size,
                                    TG_EVENTLOG_MAX_EVENT_SIZE);
        buf = malloc(prefix + size + 1);
        if (!buf)
                return -TG_ERR_NOMEM;
        memcpy(buf, e->data, prefix);
        for (unsigned i = 0; i < 8; i++)
                buf[24 + i] = (uint8_t) ((uint64_t) size >> (8 * i));
        if (size)
                memcpy(buf + prefix, data, size);
        return tg_eventlog_hash(bank, buf, prefix + size, ret, &n);
}

/* The variable's current value from efivarfs (4 bytes of attributes, then the data); 0 without one. */
static int efivar_read(const char *dir, const char *name, const tg_efi_guid *guid, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ uint8_t *data = NULL;
        char g[TG_EFI_GUID_STRING_MAX];
        size_t size = 0;
        int r;

        if (tg_asprintf(&path, "%s/%s-%s", dir, name, tg_efi_guid_to_string(guid, g)) < 0)
                return -TG_ERR_NOMEM;
        r = tg_read_file(path, TG_EVENTLOG_MAX_EVENT_SIZE, &data, &size);
        if (r == -TG_ERR_NOT_FOUND)
                return 0;
        if (r < 0 || size < 4)
                return log_error_rc(r < 0 ? r : -TG_ERR_INVALID, "Cannot read %s.", path);
        memmove(data, data + 4, size - 4);
        *ret = TAKE_PTR(data);
        *ret_size = size - 4;
        return 1;
}

static int change_add(json_object *changes, const char *variable, const char *source, const char *write, size_t bytes) {
        json_object *c = json_object_new_object();

        if (!c || json_object_array_add(changes, c) < 0) {
                json_object_put(c);
                return -TG_ERR_NOMEM;
        }
        json_object_object_add(c, "variable", json_object_new_string(variable));
        json_object_object_add(c, "source", json_object_new_string(source));
        json_object_object_add(c, "write", json_object_new_string(write));
        json_object_object_add(c, "bytes", json_object_new_uint64(bytes));
        return 0;
}

int tg_pcr7_predict(const tg_eventlog *log, const tg_pcr_replay *replay, const tg_pcr7_predict_options *o,
                    tg_pcr7_prediction *ret, json_object **ret_changes) {
        _cleanup_json_ json_object *changes = json_object_new_array();
        _cleanup_free_ const uint8_t **replace = NULL;
        _cleanup_free_ uint8_t *digests = NULL, *db = NULL;
        uint8_t values[TG_EVENTLOG_PCRS][TG_EVENTLOG_MAX_DIGEST];
        const tg_pcr_bank_replay *b = tg_pcr_replay_bank(replay, replay->policy_bank);
        tg_pcr7_prediction out = { .bank = replay->policy_bank };
        size_t db_size = 0;
        uint32_t mask;
        int r;

        /* A forged log predicts what its author wants a token to accept. */
        if (!replay->verified)
                return log_error_rc(-TG_ERR_INTERPOSER, "The event log does not replay to the PCR values read over "
                                    "the verified session: no prediction is made from it ('tpmguard pcrs' shows "
                                    "where it differs).");
        if (!b || !b->tpm_read)
                return log_error_rc(-TG_ERR_INVALID, "The event log has no %s digests (a %s log): it cannot predict "
                                    "the %s PCR 7 tokens seal to.", tg_pcr_bank_to_string(replay->policy_bank) ?: "?",
                                    log->crypto_agile ? "crypto-agile" : "SHA-1-only",
                                    tg_pcr_bank_to_string(replay->policy_bank) ?: "?");
        if (!changes)
                return -TG_ERR_NOMEM;
        out.size = b->size;
        memcpy(out.current, b->tpm[7], b->size);
        replace = calloc(log->n_events ?: 1, sizeof *replace);
        digests = calloc(log->n_events ?: 1, TG_EVENTLOG_MAX_DIGEST);
        if (!replace || !digests)
                return -TG_ERR_NOMEM;

        for (size_t s = 0; s < ELEMENTSOF(sb_variables); s++) {
                const char *name = sb_variables[s].name;
                const tg_pcr7_update *u = NULL;
                _cleanup_free_ uint8_t *current = NULL, *next = NULL;
                const uint8_t *base;
                size_t base_size, current_size = 0, next_size = 0, index;
                tg_efi_variable var;
                bool changed = false;

                for (unsigned i = 0; i < o->n_updates; i++)
                        if (strcmp(o->updates[i].variable, name) == 0)
                                u = &o->updates[i];
                r = find_event(log, TG_EV_EFI_VARIABLE_DRIVER_CONFIG, sb_variables[s].guid, name, &index, &var);
                if (r < 0) {
                        if (u)
                                return r;
                        continue; /* not measured, not changed: nothing to predict */
                }
                base = var.data;
                base_size = var.data_size;
                if (o->efivars_dir) {
                        r = efivar_read(o->efivars_dir, name, sb_variables[s].guid, &current, &current_size);
                        if (r < 0)
                                return r;
                        /* Written since this boot measured it: the next boot measures the new value. */
                        if (r > 0 && (current_size != base_size || memcmp(current, base, base_size) != 0)) {
                                if (tg_esl_parse(current, current_size, NULL, NULL) < 0)
                                        return log_error_rc(-TG_ERR_INVALID, "efivarfs's %s is no list of EFI "
                                                            "signature lists.", name);
                                base = current;
                                base_size = current_size;
                                changed = true;
                                r = change_add(changes, name, "efivarfs (written since this boot)", "pending",
                                               current_size);
                                if (r < 0)
                                        return r;
                        }
                }
                if (u) {
                        if (u->append)
                                r = tg_esl_append(base, base_size, u->lists, u->size, &next, &next_size);
                        else {
                                r = tg_esl_parse(u->lists, u->size, NULL, NULL);
                                next = r < 0 ? NULL : malloc(u->size + 1);
                                if (r >= 0 && !next)
                                        r = -TG_ERR_NOMEM;
                                if (r >= 0) {
                                        memcpy(next, u->lists, u->size);
                                        next_size = u->size;
                                }
                        }
                        if (r < 0)
                                return log_error_rc(r, "Cannot apply %s to %s.", u->source, name);
                        base = next;
                        base_size = next_size;
                        changed = true;
                        r = change_add(changes, name, u->source, u->append ? "append" : "replace", next_size);
                        if (r < 0)
                                return r;
                }
                if (changed) {
                        r = replaced_digest(log, &log->events[index], &var, out.bank, base, base_size,
                                            digests + index * TG_EVENTLOG_MAX_DIGEST);
                        if (r < 0)
                                return r;
                        replace[index] = digests + index * TG_EVENTLOG_MAX_DIGEST;
                }
                if (strcmp(name, "db") == 0) {
                        db = malloc(base_size + 1);
                        if (!db)
                                return -TG_ERR_NOMEM;
                        if (base_size)
                                memcpy(db, base, base_size);
                        db_size = base_size;
                }
        }

        if (o->authority) {
                _cleanup_free_ uint8_t *sig = NULL;
                tg_efi_guid owner;
                tg_efi_variable var;
                size_t index;

                /* The firmware measures the db entry that verified the image: owner GUID and certificate. */
                if (!db || !tg_esl_find_x509(db, db_size, o->authority, o->authority_size, &owner))
                        return log_error_rc(-TG_ERR_INVALID, "The new signing certificate is not in db%s: the "
                                            "firmware would refuse a boot chain signed by it. Add it to db first "
                                            "(--db FILE predicts both).", o->n_updates ? " (nor in the update)" : "");
                r = find_event(log, TG_EV_EFI_VARIABLE_AUTHORITY, &tg_efi_image_security_database_guid, "db", &index,
                               &var);
                if (r < 0)
                        return r;
                /*
                 * The firmware measures an authority once, before the first image it verified. If that
                 * image was a driver (an option ROM), the same authority still verifies it at the next
                 * boot and the new signer's entry comes in addition, later: a replacement would predict
                 * a value no boot produces.
                 */
                for (size_t i = index + 1; i < log->n_events; i++) {
                        uint32_t t = log->events[i].type;
                        if (t != TG_EV_EFI_BOOT_SERVICES_APPLICATION && t != TG_EV_EFI_BOOT_SERVICES_DRIVER &&
                            t != TG_EV_EFI_RUNTIME_SERVICES_DRIVER)
                                continue;
                        if (t != TG_EV_EFI_BOOT_SERVICES_APPLICATION)
                                return log_error_rc(-TG_ERR_INVALID, "db's authority entry in the event log first "
                                                    "verified a driver (an option ROM), which it will still verify "
                                                    "at the next boot: a new boot chain signer is measured in "
                                                    "addition, which cannot be predicted. 'tpmguard update prepare' "
                                                    "without a prediction gives a grace instead.");
                        break;
                }
                sig = malloc(16 + o->authority_size);
                if (!sig)
                        return -TG_ERR_NOMEM;
                memcpy(sig, owner.b, 16);
                memcpy(sig + 16, o->authority, o->authority_size);
                r = replaced_digest(log, &log->events[index], &var, out.bank, sig, 16 + o->authority_size,
                                    digests + index * TG_EVENTLOG_MAX_DIGEST);
                if (r < 0)
                        return r;
                replace[index] = digests + index * TG_EVENTLOG_MAX_DIGEST;
                r = change_add(changes, "authority", "the new signing certificate", "replace", 16 + o->authority_size);
                if (r < 0)
                        return r;
        }

        r = tg_eventlog_replay(log, out.bank, replace, values, &mask);
        if (r < 0)
                return r;
        memcpy(out.predicted, values[7], out.size);
        *ret = out;
        if (ret_changes)
                *ret_changes = TAKE_PTR(changes);
        return 0;
}
