/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What an update grace was prepared for, and whether this boot is within it (update-record.h). */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "efi-siglist.h"
#include "error.h"
#include "eventlog.h"
#include "json-util.h"
#include "log.h"
#include "pcr-log.h"
#include "sanitize.h"
#include "update-record.h"
#include "util.h"

#define RECORD_DIR "update-prepared"
/* Version 2 added "pcr7_events" and "dbx_entries"; version 1 records are still read (compare()). */
#define RECORD_VERSION 2
/* Up to TG_ESL_MAX_ENTRIES dbx entries of 64 hex digits, and TG_UPDATE_PCR7_EVENTS_MAX events. */
#define RECORD_MAX_SIZE (8u << 20)

static const struct {
        const char *name;
        const tg_efi_guid *guid;
} sb_variables[TG_SB_N] = {
        [TG_SB_SECURE_BOOT] = { "SecureBoot", &tg_efi_global_variable_guid },
        [TG_SB_PK] = { "PK", &tg_efi_global_variable_guid },
        [TG_SB_KEK] = { "KEK", &tg_efi_global_variable_guid },
        [TG_SB_DB] = { "db", &tg_efi_image_security_database_guid },
        [TG_SB_DBX] = { "dbx", &tg_efi_image_security_database_guid },
};

/* The log's index of bank (of size bytes), or log->n_banks when it has none. */
static unsigned log_bank(const tg_eventlog *log, uint16_t bank, size_t size) {
        unsigned b;

        for (b = 0; b < log->n_banks; b++)
                if (log->bank_alg[b] == bank && log->bank_size[b] == size)
                        break;
        return b;
}

/* Whether e is PCR 7's configuration event of the Secure Boot variable s; its parsed data in *ret. */
static bool sb_variable_event(const tg_event *e, unsigned s, tg_efi_variable *ret) {
        return e->pcr == 7 && e->type == TG_EV_EFI_VARIABLE_DRIVER_CONFIG &&
               tg_efi_variable_parse(e->data, e->data_size, ret) >= 0 &&
               tg_efi_guid_equal(&ret->guid, sb_variables[s].guid) && strcmp(ret->name, sb_variables[s].name) == 0;
}

/*
 * The Secure Boot configuration events of PCR 7 (EV_EFI_VARIABLE_DRIVER_CONFIG), in bank. An
 * event present twice (which no firmware writes) is recorded as absent: both records then lack
 * it, and compare() refuses a PCR 7 change it cannot explain rather than pick one.
 */
static void sb_events(const tg_eventlog *log, uint16_t bank, tg_update_record *r) {
        unsigned b = log_bank(log, bank, r->values.value_size);

        if (b == log->n_banks)
                return;
        r->have_sb = true;
        for (unsigned s = 0; s < TG_SB_N; s++) {
                unsigned found = 0;

                for (size_t i = 0; i < log->n_events; i++) {
                        const tg_event *e = &log->events[i];
                        tg_efi_variable v;

                        if (!sb_variable_event(e, s, &v))
                                continue;
                        if (++found > 1)
                                break;
                        memcpy(r->sb_digest[s], e->digest[b], r->values.value_size);
                        /* The value shown to the user; the digest is what is compared. */
                        if (s == TG_SB_SECURE_BOOT)
                                r->secure_boot = v.data_size == 1 && v.data[0] <= 1 ? v.data[0] : -1;
                }
                r->sb_present[s] = found == 1;
                if (found != 1 && s == TG_SB_SECURE_BOOT)
                        r->secure_boot = -1;
        }
}

void tg_update_record_done(tg_update_record *r) {
        if (!r)
                return;
        for (size_t i = 0; i < r->n_events; i++)
                free(r->events[i].what);
        free(r->events);
        free(r->dbx_entries);
        r->events = NULL;
        r->dbx_entries = NULL;
        r->n_events = r->n_dbx_entries = 0;
        r->have_events = r->have_dbx = false;
}

static int entry_cmp(const void *a, const void *b) {
        return memcmp(a, b, 32);
}

/*
 * The entries of dbx's data (EFI_SIGNATURE_LISTs, hostile: tg_esl_parse() checks every size),
 * each as SHA-256 of its list's type GUID and its data without the owner GUID: what revokes is
 * the hash or certificate, the owner is bookkeeping a dbx update may rewrite. Sorted.
 */
static int dbx_entries(const uint8_t *data, size_t size, uint8_t (**ret)[32], size_t *ret_n) {
        _cleanup_free_ tg_esl_entry *entries = NULL;
        _cleanup_free_ uint8_t (*hashes)[32] = NULL;
        size_t n = 0;
        int r;

        r = tg_esl_parse(data, size, &entries, &n);
        if (r < 0)
                return r;
        hashes = calloc(n ?: 1, sizeof *hashes);
        if (!hashes)
                return -TG_ERR_NOMEM;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ uint8_t *buf = malloc(entries[i].signature_size);
                unsigned hn;

                if (!buf)
                        return -TG_ERR_NOMEM;
                memcpy(buf, entries[i].type.b, 16);
                memcpy(buf + 16, entries[i].signature + 16, entries[i].signature_size - 16);
                r = tg_eventlog_hash(TPM2_ALG_SHA256, buf, entries[i].signature_size, hashes[i], &hn);
                if (r < 0 || hn != 32)
                        return r < 0 ? r : -TG_ERR_INVALID;
        }
        qsort(hashes, n, sizeof *hashes, entry_cmp);
        *ret = TAKE_PTR(hashes);
        *ret_n = n;
        return 0;
}

/* What an event is, for a message: a variable's name (an authority's certificate subject too), an action's text. */
static char *event_what(const tg_event *e) {
        _cleanup_free_ char *text = NULL, *subject = NULL;
        tg_efi_variable v;

        if ((e->type == TG_EV_EFI_VARIABLE_DRIVER_CONFIG || e->type == TG_EV_EFI_VARIABLE_AUTHORITY) &&
            tg_efi_variable_parse(e->data, e->data_size, &v) >= 0) {
                /* db's authority is an EFI_SIGNATURE_DATA (owner GUID, certificate); shim measures its
                 * vendor certificate ("Shim") bare. */
                if (e->type == TG_EV_EFI_VARIABLE_AUTHORITY)
                        subject = tg_x509_der_subject(v.data, v.data_size) ?:
                                  (v.data_size > 16 ? tg_x509_der_subject(v.data + 16, v.data_size - 16) : NULL);
                if (tg_asprintf(&text, "%s%s%s%s", v.name, subject ? " (" : "", subject ?: "", subject ? ")" : "") < 0)
                        return NULL;
        } else if (e->type == TG_EV_EFI_ACTION || e->type == TG_EV_ACTION) {
                /* The text itself ("DMA Protection Disabled"; a NUL some firmware ends it with dropped),
                 * each byte that is not printable ASCII a '?', at most TG_UPDATE_EVENT_WHAT_MAX. */
                size_t n = e->data_size;

                while (n > 0 && e->data[n - 1] == 0)
                        n--;
                if (n > TG_UPDATE_EVENT_WHAT_MAX)
                        n = TG_UPDATE_EVENT_WHAT_MAX;
                text = malloc(n + 1);
                if (!text)
                        return NULL;
                for (size_t i = 0; i < n; i++)
                        text[i] = e->data[i] >= 0x20 && e->data[i] < 0x7f ? (char) e->data[i] : '?';
                text[n] = '\0';
        } else if (tg_event_describe(e, &text) < 0)
                return NULL;
        if (strlen(text) > TG_UPDATE_EVENT_WHAT_MAX)
                text[TG_UPDATE_EVENT_WHAT_MAX] = '\0';
        for (char *p = text; *p; p++)
                if (*p == '"')
                        *p = '\'';
        return tg_str_sanitize_line(TAKE_PTR(text));
}

/*
 * Every PCR 7 event of the bank, in order (EV_NO_ACTION extends nothing and is left out), and
 * the entries of dbx when there is one dbx event and its data hashes to its digest: data that
 * does not is not what was measured, so it cannot show that a new dbx only adds revocations.
 */
static int pcr7_events(const tg_eventlog *log, uint16_t bank, tg_update_record *r) {
        unsigned b = log_bank(log, bank, r->values.value_size);
        const tg_event *dbx = NULL;
        tg_efi_variable dbx_var;
        size_t n_dbx = 0, n = 0;
        int k;

        if (b == log->n_banks)
                return 0;
        for (size_t i = 0; i < log->n_events; i++)
                if (log->events[i].pcr == 7 && log->events[i].type != TG_EV_NO_ACTION)
                        n++;
        if (n > TG_UPDATE_PCR7_EVENTS_MAX) {
                log_debug("%zu PCR 7 events in the log: none recorded.", n);
                r->have_sb = false;
                return 0;
        }
        r->events = calloc(n ?: 1, sizeof *r->events);
        if (!r->events)
                return -TG_ERR_NOMEM;
        r->have_events = true;
        for (size_t i = 0; i < log->n_events; i++) {
                const tg_event *e = &log->events[i];
                tg_update_event *u = &r->events[r->n_events];
                tg_efi_variable v;

                if (e->pcr != 7 || e->type == TG_EV_NO_ACTION)
                        continue;
                u->type = e->type;
                memcpy(u->digest, e->digest[b], r->values.value_size);
                u->dbx = sb_variable_event(e, TG_SB_DBX, &v);
                u->what = event_what(e);
                if (!u->what)
                        return -TG_ERR_NOMEM;
                r->n_events++;
                if (u->dbx) {
                        dbx = e;
                        n_dbx++;
                }
        }
        if (n_dbx != 1 || tg_event_data_matches(log, dbx) != 1 ||
            tg_efi_variable_parse(dbx->data, dbx->data_size, &dbx_var) < 0)
                return 0;
        k = dbx_entries(dbx_var.data, dbx_var.data_size, &r->dbx_entries, &r->n_dbx_entries);
        if (k == -TG_ERR_NOMEM)
                return k;
        if (k < 0)
                log_debug("The dbx event's data is not a list of signatures: its entries are not recorded.");
        r->have_dbx = k >= 0;
        return 0;
}

int tg_update_record_take(tg_verified_tpm *v, const char *event_log, uint16_t bank, uint32_t pcr_mask,
                          uint32_t changing, tg_update_record *ret) {
        _cleanup_eventlog_ tg_eventlog *log = NULL;
        tg_update_record r = { .bank = bank, .pcr_mask = pcr_mask, .changing = changing & pcr_mask,
                               .secure_boot = -1 };
        tg_pcr_replay rp;
        int k;

        k = tg_vtpm_pcr_read(v, bank, pcr_mask, &r.values);
        if (k < 0)
                return log_error_rc(k, "Cannot read the token's PCRs over the verified session.");
        /*
         * The log is evidence only once it replays to the values just read over the audited
         * session: a forged one (root can write any file handed to --event-log) cannot make a
         * changed Secure Boot configuration look unchanged.
         */
        if (tg_pcr_log_read(event_log, &log) >= 0 && tg_pcr_replay_verify(v, log, bank, &rp) >= 0 && rp.verified) {
                sb_events(log, bank, &r);
                k = r.have_sb ? pcr7_events(log, bank, &r) : 0;
                if (k < 0) {
                        tg_update_record_done(&r);
                        return k;
                }
        } else
                log_debug("No event log that replays to the verified PCR values: no Secure Boot events recorded.");
        *ret = r;
        return 0;
}

static int record_path(const char *state_dir, const char *uuid, char **ret_dir, char **ret) {
        size_t n = uuid ? strlen(uuid) : 0;

        /* The UUID comes from the LUKS header: a file name only if it is hex digits and dashes. */
        if (!state_dir || n == 0 || n > 36 || strspn(uuid, "0123456789abcdefABCDEF-") != n)
                return log_error_rc(-TG_ERR_INVALID, "The volume has no LUKS UUID fit for a file name.");
        if (tg_asprintf(ret_dir, "%s/" RECORD_DIR, state_dir) < 0 ||
            tg_asprintf(ret, "%s/" RECORD_DIR "/%s.json", state_dir, uuid) < 0)
                return -TG_ERR_NOMEM;
        return 0;
}

static json_object *pcr_list_json(uint32_t mask) {
        json_object *a = json_object_new_array();

        for (unsigned i = 0; a && i < TG_PCR_COUNT; i++)
                if (mask & (UINT32_C(1) << i))
                        (void) json_object_array_add(a, json_object_new_int(i));
        return a;
}

static int add_hex(json_object *o, const char *key, const uint8_t *data, size_t size) {
        _cleanup_free_ char *hex = NULL;

        if (tg_hex_encode(data, size, &hex) < 0 || json_object_object_add(o, key, json_object_new_string(hex)) < 0)
                return -TG_ERR_NOMEM;
        return 0;
}

static int events_json(json_object *o, const tg_update_record *r) {
        json_object *a = json_object_new_array();

        if (!a || json_object_object_add(o, "pcr7_events", a) < 0) {
                json_object_put(a);
                return -TG_ERR_NOMEM;
        }
        for (size_t i = 0; i < r->n_events; i++) {
                const tg_update_event *e = &r->events[i];
                json_object *j = json_object_new_object();

                if (!j || json_object_array_add(a, j) < 0) {
                        json_object_put(j);
                        return -TG_ERR_NOMEM;
                }
                if (json_object_object_add(j, "type", json_object_new_int64(e->type)) < 0 ||
                    add_hex(j, "digest", e->digest, r->values.value_size) < 0 ||
                    json_object_object_add(j, "what", json_object_new_string(e->what ?: "")) < 0 ||
                    (e->dbx && json_object_object_add(j, "dbx", json_object_new_boolean(true)) < 0))
                        return -TG_ERR_NOMEM;
        }
        /* Hashes, not the entries: what finish needs is whether each is still there. */
        if (r->have_dbx && add_hex(o, "dbx_entries", r->n_dbx_entries ? r->dbx_entries[0] : (const uint8_t *) "",
                                   r->n_dbx_entries * 32) < 0)
                return -TG_ERR_NOMEM;
        return 0;
}

int tg_update_record_write(const char *state_dir, const char *uuid, const tg_update_record *r) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *values = json_object_new_object(), *sb = NULL;
        const char *text;
        char key[8];
        int k;

        if (!o || !values || json_object_object_add(o, "values", values) < 0) {
                json_object_put(values);
                return -TG_ERR_NOMEM;
        }
        k = record_path(state_dir, uuid, &dir, &path);
        if (k < 0)
                return k;
        /* A record without PCR 7's events (only a test makes one with the Secure Boot events) is what version 1 held. */
        if (json_object_object_add(o, "version", json_object_new_int(r->have_sb && !r->have_events ? 1 :
                                                                      RECORD_VERSION)) < 0 ||
            json_object_object_add(o, "bank", json_object_new_string(tg_pcr_bank_to_string(r->bank) ?: "?")) < 0 ||
            json_object_object_add(o, "pcrs", pcr_list_json(r->pcr_mask)) < 0 ||
            json_object_object_add(o, "changing", pcr_list_json(r->changing)) < 0)
                return -TG_ERR_NOMEM;
        for (unsigned i = 0; i < TG_PCR_COUNT; i++) {
                if (!(r->pcr_mask & (UINT32_C(1) << i)))
                        continue;
                (void) snprintf(key, sizeof key, "%u", i);
                if (add_hex(values, key, r->values.value[i], r->values.value_size) < 0)
                        return -TG_ERR_NOMEM;
        }
        if (r->have_sb) {
                sb = json_object_new_object();
                if (!sb || json_object_object_add(o, "secure_boot_events", sb) < 0) {
                        json_object_put(sb);
                        return -TG_ERR_NOMEM;
                }
                for (unsigned s = 0; s < TG_SB_N; s++)
                        if (r->sb_present[s] && add_hex(sb, sb_variables[s].name, r->sb_digest[s], r->values.value_size) < 0)
                                return -TG_ERR_NOMEM;
                if (json_object_object_add(o, "secure_boot", json_object_new_int(r->secure_boot)) < 0)
                        return -TG_ERR_NOMEM;
        }
        if (r->have_sb && r->have_events) {
                k = events_json(o, r);
                if (k < 0)
                        return k;
        }
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        if (!text)
                return -TG_ERR_NOMEM;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return log_error_rc(-TG_ERR_IO, "Cannot create %s: %m", dir);
        k = tg_write_file_atomic(path, text, strlen(text), 0600);
        if (k < 0)
                return log_error_rc(k, "Cannot write %s, the record of what this update may change.", path);
        return 0;
}

void tg_update_record_remove(const char *state_dir, const char *uuid) {
        _cleanup_free_ char *dir = NULL, *path = NULL;

        if (record_path(state_dir, uuid, &dir, &path) >= 0 && unlink(path) < 0 && errno != ENOENT)
                log_warning("Cannot remove %s: %m", path);
}

static int record_error(const char *path, const char *field, const char *problem) {
        return log_error_rc(-TG_ERR_INVALID, "%s: field \"%s\": %s. Run 'tpmguard update prepare' again (or, "
                            "for a change you made yourself, 'tpmguard update finish --accept-change' at a "
                            "terminal).", path, field, problem);
}

static int pcr_list_read(json_object *o, const char *key, const char *path, uint32_t *ret) {
        char problem[TG_JSON_PROBLEM_MAX];
        json_object *a;
        uint32_t mask = 0;
        size_t n;

        if (tg_json_get(o, key, json_type_array, true, &a, problem, sizeof problem) < 0)
                return record_error(path, key, problem);
        n = json_object_array_length(a);
        if (n > TG_PCR_COUNT)
                return record_error(path, key, "more than 24 PCRs");
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(a, i);
                int64_t p;

                if (!json_object_is_type(e, json_type_int) || (p = json_object_get_int64(e)) < 0 || p >= TG_PCR_COUNT)
                        return record_error(path, key, "not a list of PCR numbers 0..23");
                mask |= UINT32_C(1) << p;
        }
        *ret = mask;
        return 0;
}

static int hex_read(json_object *o, const char *key, const char *path, size_t size, uint8_t *ret) {
        char problem[TG_JSON_PROBLEM_MAX];
        _cleanup_free_ uint8_t *data = NULL;
        size_t n = 0;

        if (tg_json_get_hex(o, key, size, size, true, &data, &n, problem, sizeof problem) < 0)
                return record_error(path, key, problem);
        memcpy(ret, data, size);
        return 0;
}

/* "pcr7_events" and "dbx_entries" of a version 2 record (hostile: every field checked, and bounded). */
static int events_read(json_object *o, const char *path, tg_update_record *r) {
        char problem[TG_JSON_PROBLEM_MAX];
        _cleanup_free_ uint8_t *entries = NULL;
        json_object *a;
        size_t n, size = 0;

        if (tg_json_get(o, "pcr7_events", json_type_array, true, &a, problem, sizeof problem) < 0)
                return record_error(path, "pcr7_events", problem);
        n = json_object_array_length(a);
        if (n > TG_UPDATE_PCR7_EVENTS_MAX)
                return record_error(path, "pcr7_events", "too many events");
        r->events = calloc(n ?: 1, sizeof *r->events);
        if (!r->events)
                return -TG_ERR_NOMEM;
        r->have_events = true;
        for (size_t i = 0; i < n; i++) {
                json_object *j = json_object_array_get_idx(a, i), *what, *dbx;
                tg_update_event *e = &r->events[i];
                int64_t type;
                bool present;
                int k;

                if (!json_object_is_type(j, json_type_object))
                        return record_error(path, "pcr7_events", "not a list of objects");
                if (tg_json_get_int(j, "type", 0, UINT32_MAX, true, &type, &present, problem, sizeof problem) < 0)
                        return record_error(path, "pcr7_events: type", problem);
                k = hex_read(j, "digest", path, r->values.value_size, e->digest);
                if (k < 0)
                        return k;
                if (tg_json_get(j, "what", json_type_string, true, &what, problem, sizeof problem) < 0)
                        return record_error(path, "pcr7_events: what", problem);
                if (json_object_get_string_len(what) > TG_UPDATE_EVENT_WHAT_MAX)
                        return record_error(path, "pcr7_events: what", "too long");
                if (tg_json_get(j, "dbx", json_type_boolean, false, &dbx, problem, sizeof problem) < 0)
                        return record_error(path, "pcr7_events: dbx", problem);
                e->type = (uint32_t) type;
                e->dbx = dbx && json_object_get_boolean(dbx);
                e->what = strdup(json_object_get_string(what));
                if (!e->what)
                        return -TG_ERR_NOMEM;
                tg_str_sanitize_line(e->what);
                r->n_events++;
        }
        if (tg_json_get_hex(o, "dbx_entries", 0, (size_t) TG_ESL_MAX_ENTRIES * 32, false, &entries, &size, problem,
                            sizeof problem) < 0)
                return record_error(path, "dbx_entries", problem);
        if (size % 32 != 0)
                return record_error(path, "dbx_entries", "not a list of SHA-256 hashes");
        if (entries) {
                r->have_dbx = true;
                r->n_dbx_entries = size / 32;
                r->dbx_entries = (uint8_t (*)[32]) TAKE_PTR(entries);
                /* Sorted again: compare() searches it, and the file is not trusted to be. */
                qsort(r->dbx_entries, r->n_dbx_entries, 32, entry_cmp);
        }
        return 0;
}

int tg_update_record_read(const char *state_dir, const char *uuid, tg_update_record *ret) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        _cleanup_(tg_update_record_done) tg_update_record r = { .secure_boot = -1 };
        char problem[TG_JSON_PROBLEM_MAX];
        json_object *v, *values, *sb;
        bool present;
        int64_t n, version;
        int k;

        k = record_path(state_dir, uuid, &dir, &path);
        if (k < 0)
                return k;
        k = tg_json_read_object(path, RECORD_MAX_SIZE, &o, problem, sizeof problem);
        if (k == -TG_ERR_NOT_FOUND)
                return k;
        if (k < 0)
                return log_error_rc(k, "%s: %s.", path, problem);
        if (tg_json_get_int(o, "version", 1, RECORD_VERSION, true, &version, &present, problem, sizeof problem) < 0)
                return record_error(path, "version", problem);
        if (tg_json_get(o, "bank", json_type_string, true, &v, problem, sizeof problem) < 0)
                return record_error(path, "bank", problem);
        if (tg_pcr_bank_from_string(json_object_get_string(v), &r.bank) < 0)
                return record_error(path, "bank", "not a PCR bank");
        r.values.bank = r.bank;
        r.values.value_size = r.bank == TPM2_ALG_SHA1 ? 20 : r.bank == TPM2_ALG_SHA256 ? 32 :
                              r.bank == TPM2_ALG_SHA384 ? 48 : 64;
        k = pcr_list_read(o, "pcrs", path, &r.pcr_mask);
        if (k >= 0)
                k = pcr_list_read(o, "changing", path, &r.changing);
        if (k < 0)
                return k;
        if (r.pcr_mask == 0 || (r.changing & ~r.pcr_mask))
                return record_error(path, "changing", "not a subset of a non-empty \"pcrs\"");
        r.values.mask = r.pcr_mask;
        if (tg_json_get(o, "values", json_type_object, true, &values, problem, sizeof problem) < 0)
                return record_error(path, "values", problem);
        for (unsigned i = 0; i < TG_PCR_COUNT; i++) {
                char key[8];

                if (!(r.pcr_mask & (UINT32_C(1) << i)))
                        continue;
                (void) snprintf(key, sizeof key, "%u", i);
                k = hex_read(values, key, path, r.values.value_size, r.values.value[i]);
                if (k < 0)
                        return k;
        }
        if (tg_json_get(o, "secure_boot_events", json_type_object, false, &sb, problem, sizeof problem) < 0)
                return record_error(path, "secure_boot_events", problem);
        if (sb) {
                r.have_sb = true;
                for (unsigned s = 0; s < TG_SB_N; s++) {
                        r.sb_present[s] = json_object_object_get_ex(sb, sb_variables[s].name, NULL);
                        if (r.sb_present[s]) {
                                k = hex_read(sb, sb_variables[s].name, path, r.values.value_size, r.sb_digest[s]);
                                if (k < 0)
                                        return k;
                        }
                }
                if (tg_json_get_int(o, "secure_boot", -1, 1, true, &n, &present, problem, sizeof problem) < 0)
                        return record_error(path, "secure_boot", problem);
                r.secure_boot = (int) n;
                /* Version 1 (an earlier tpmguard's prepare) has no events: compare() falls back for it. */
                if (version >= 2) {
                        k = events_read(o, path, &r);
                        if (k < 0)
                                return k;
                }
        }
        *ret = r;
        r = (tg_update_record) {};
        return 0;
}

static int diff_add(char **diff, const char *what) {
        char *next = NULL;

        if (tg_asprintf(&next, "%s%s%s", *diff ?: "", *diff ? "; " : "", what) < 0)
                return -TG_ERR_NOMEM;
        free(*diff);
        *diff = next;
        return 0;
}

static bool is_sb_variable(const tg_update_event *e) {
        if (e->type != TG_EV_EFI_VARIABLE_DRIVER_CONFIG)
                return false;
        for (unsigned s = 0; s < TG_SB_N; s++)
                if (strcmp(e->what, sb_variables[s].name) == 0)
                        return true;
        return false;
}

static int event_diff(char **diff, const tg_update_event *e, const char *how) {
        char line[TG_UPDATE_EVENT_WHAT_MAX + 160];

        if (is_sb_variable(e))
                (void) snprintf(line, sizeof line, "the Secure Boot variable %s %s", e->what, how);
        else
                (void) snprintf(line, sizeof line, "PCR 7 event \"%s\" (%s) %s", e->what,
                                tg_event_type_to_string(e->type) ?: "of an unknown type", how);
        return diff_add(diff, line);
}

static bool event_equal(const tg_update_event *a, const tg_update_event *b, size_t size) {
        return a->type == b->type && memcmp(a->digest, b->digest, size) == 0;
}

/*
 * A dbx that changed in place: allowed only when PCR 7 was declared changing, this boot's
 * dbx hashes to its digest, and it still holds every entry recorded at prepare. Threat: an
 * evil maid's "restore factory keys" in firmware setup during the grace, which rolls dbx
 * back to fewer revocations (a revoked boot loader boots again); finish would bind to it.
 */
static int dbx_diff(const tg_update_record *prepared, const tg_update_record *now, char **diff) {
        char line[256];
        size_t lost = 0;

        if (!(prepared->changing & (UINT32_C(1) << 7)))
                return diff_add(diff, "the Secure Boot variable dbx changed (dbx: PCR 7 was not declared as changing)");
        if (!prepared->have_dbx)
                return diff_add(diff, "the Secure Boot variable dbx changed, and 'update prepare' recorded no "
                                "entries of it to check that the update only adds revocations");
        if (!now->have_dbx)
                return diff_add(diff, "the Secure Boot variable dbx changed, and this boot's dbx event is not a list "
                                "of signatures whose hash is what PCR 7 measured");
        for (size_t i = 0; i < prepared->n_dbx_entries; i++)
                if (!bsearch(prepared->dbx_entries[i], now->dbx_entries, now->n_dbx_entries, 32, entry_cmp))
                        lost++;
        if (lost == 0)
                return 0;
        (void) snprintf(line, sizeof line, "the Secure Boot variable dbx lost %zu of the %zu revocations it held at "
                        "'update prepare' (rolled back, as firmware setup's \"restore factory keys\" does)", lost,
                        prepared->n_dbx_entries);
        return diff_add(diff, line);
}

/*
 * PCR 7's events now against the recorded ones, in order: an allow-list. Every event that is
 * new, gone or changed is named (the one exception: dbx_diff()). Threat: a change of PCR 7
 * other than the Secure Boot variables that finish would otherwise bind to for good: pre-boot
 * DMA protection or a debug mode turned off (EV_EFI_ACTION), a boot loader verified by
 * another authority (EV_EFI_VARIABLE_AUTHORITY: shim's vendor certificate or a MOK entry,
 * which the firmware's db does not vet), an SbatLevel rolled back.
 */
static int events_compare(const tg_update_record *prepared, const tg_update_record *now, char **diff) {
        const tg_update_event *p = prepared->events, *n = now->events;
        size_t np = prepared->n_events, nn = now->n_events, size = prepared->values.value_size, i = 0, j = 0;
        int k = 0;

        while (k >= 0 && (i < np || j < nn)) {
                bool later = false;

                if (i == np) {
                        k = event_diff(diff, &n[j++], "is new since 'update prepare'");
                        continue;
                }
                if (j == nn) {
                        k = event_diff(diff, &p[i++], "is gone since 'update prepare'");
                        continue;
                }
                if (event_equal(&p[i], &n[j], size)) {
                        i++, j++;
                        continue;
                }
                if (p[i].dbx && n[j].dbx) {
                        k = dbx_diff(prepared, now, diff);
                        i++, j++;
                        continue;
                }
                /* The same event measured with other contents (a variable's, a certificate's). */
                if (p[i].type == n[j].type && strcmp(p[i].what, n[j].what) == 0) {
                        k = event_diff(diff, &n[j], "changed since 'update prepare'");
                        i++, j++;
                        continue;
                }
                /* This boot's event comes later in the record: the recorded one is gone; else it is new. */
                for (size_t l = i + 1; l < np && !later; l++)
                        later = event_equal(&p[l], &n[j], size);
                if (later)
                        k = event_diff(diff, &p[i++], "is gone since 'update prepare'");
                else
                        k = event_diff(diff, &n[j++], "is new since 'update prepare'");
        }
        return k;
}

/* Version 1's comparison: the digests of SecureBoot, PK, KEK, db and dbx (dbx free when PCR 7 is declared). */
static int legacy_compare(const tg_update_record *prepared, const tg_update_record *now, char **diff) {
        size_t size = prepared->values.value_size;
        char line[256];

        for (unsigned s = 0; s < TG_SB_N; s++) {
                bool same = prepared->sb_present[s] == now->sb_present[s] &&
                            (!now->sb_present[s] || memcmp(prepared->sb_digest[s], now->sb_digest[s], size) == 0);

                /* Version 1 let dbx change freely in an update that declares PCR 7. */
                if (same || (s == TG_SB_DBX && (prepared->changing & (UINT32_C(1) << 7))))
                        continue;
                (void) snprintf(line, sizeof line, "the Secure Boot variable %s changed%s", sb_variables[s].name,
                                s == TG_SB_DBX ? " (dbx: PCR 7 was not declared as changing)" : "");
                if (diff_add(diff, line) < 0)
                        return -TG_ERR_NOMEM;
        }
        return 0;
}

int tg_update_record_compare(const tg_update_record *prepared, const tg_update_record *now, char **ret_diff) {
        _cleanup_free_ char *diff = NULL;
        uint32_t changed = 0, undeclared;
        size_t size = prepared->values.value_size;
        char line[256], pcrs[96];
        int k;

        if (prepared->bank != now->bank || prepared->pcr_mask != now->pcr_mask || size != now->values.value_size) {
                if (diff_add(&diff, "the record of 'update prepare' is for other PCRs than the token's") < 0)
                        return -TG_ERR_NOMEM;
                *ret_diff = TAKE_PTR(diff);
                return -TG_ERR_PCR_MISMATCH;
        }
        for (unsigned i = 0; i < TG_PCR_COUNT; i++)
                if ((prepared->pcr_mask & (UINT32_C(1) << i)) &&
                    memcmp(prepared->values.value[i], now->values.value[i], size) != 0)
                        changed |= UINT32_C(1) << i;
        undeclared = changed & ~prepared->changing;
        if (undeclared) {
                tg_pcr_list_format(undeclared, pcrs, sizeof pcrs);
                (void) snprintf(line, sizeof line, "PCR %s changed, which 'update prepare' did not declare as changing "
                                "(--changing)", pcrs);
                if (diff_add(&diff, line) < 0)
                        return -TG_ERR_NOMEM;
        }
        if (changed & (UINT32_C(1) << 7)) {
                /* What changed in PCR 7: the Secure Boot configuration may never change in a grace. */
                if (!now->have_sb || !prepared->have_sb) {
                        if (diff_add(&diff, now->have_sb ? "PCR 7 changed, and 'update prepare' had no verified event "
                                     "log to compare its Secure Boot configuration with" :
                                     "PCR 7 changed, and no event log that replays to this boot's verified PCR values "
                                     "says why") < 0)
                                return -TG_ERR_NOMEM;
                } else {
                        if (prepared->secure_boot == 1 && now->secure_boot != 1 &&
                            diff_add(&diff, "Secure Boot is no longer enabled (the SecureBoot variable is not 1)") < 0)
                                return -TG_ERR_NOMEM;
                        if (prepared->have_events && now->have_events) {
                                if (events_compare(prepared, now, &diff) < 0)
                                        return -TG_ERR_NOMEM;
                        } else {
                                /*
                                 * A version 1 record, from the tpmguard before this one: the grace was
                                 * prepared, and its boots may be spent, before the package upgrade. Refusing
                                 * would leave its owner --accept-change (which checks nothing) or the recovery
                                 * passphrase, as a dm-crypt volume set up by an older cryptsetup keeps opening
                                 * with a newer one; so the checks it was prepared with apply, once, said.
                                 */
                                log_warning("The record of 'update prepare' is from an earlier tpmguard: only the "
                                            "Secure Boot variables of PCR 7 are compared, not its other events. "
                                            "The next 'update prepare' records them all.");
                                k = legacy_compare(prepared, now, &diff);
                                if (k < 0)
                                        return k;
                        }
                }
        }
        if (!diff)
                return 0;
        *ret_diff = TAKE_PTR(diff);
        return -TG_ERR_PCR_MISMATCH;
}
