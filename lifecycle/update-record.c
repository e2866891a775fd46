/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What an update grace was prepared for, and whether this boot is within it (update-record.h). */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "eventlog.h"
#include "json-util.h"
#include "log.h"
#include "pcr-log.h"
#include "update-record.h"
#include "util.h"

#define RECORD_DIR "update-prepared"
#define RECORD_VERSION 1
#define RECORD_MAX_SIZE (16u << 10)

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

/*
 * The Secure Boot configuration events of PCR 7 (EV_EFI_VARIABLE_DRIVER_CONFIG), in bank. An
 * event present twice (which no firmware writes) is recorded as absent: both records then lack
 * it, and compare() refuses a PCR 7 change it cannot explain rather than pick one.
 */
static void sb_events(const tg_eventlog *log, uint16_t bank, tg_update_record *r) {
        unsigned b;

        for (b = 0; b < log->n_banks; b++)
                if (log->bank_alg[b] == bank && log->bank_size[b] == r->values.value_size)
                        break;
        if (b == log->n_banks)
                return;
        r->have_sb = true;
        for (unsigned s = 0; s < TG_SB_N; s++) {
                unsigned found = 0;

                for (size_t i = 0; i < log->n_events; i++) {
                        const tg_event *e = &log->events[i];
                        tg_efi_variable v;

                        if (e->pcr != 7 || e->type != TG_EV_EFI_VARIABLE_DRIVER_CONFIG ||
                            tg_efi_variable_parse(e->data, e->data_size, &v) < 0 ||
                            !tg_efi_guid_equal(&v.guid, sb_variables[s].guid) || strcmp(v.name, sb_variables[s].name) != 0)
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
        if (tg_pcr_log_read(event_log, &log) >= 0 && tg_pcr_replay_verify(v, log, bank, &rp) >= 0 && rp.verified)
                sb_events(log, bank, &r);
        else
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
        if (json_object_object_add(o, "version", json_object_new_int(RECORD_VERSION)) < 0 ||
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

int tg_update_record_read(const char *state_dir, const char *uuid, tg_update_record *ret) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        _cleanup_(json_object_putp) json_object *o = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        tg_update_record r = { .secure_boot = -1 };
        json_object *v, *values, *sb;
        bool present;
        int64_t n;
        int k;

        k = record_path(state_dir, uuid, &dir, &path);
        if (k < 0)
                return k;
        k = tg_json_read_object(path, RECORD_MAX_SIZE, &o, problem, sizeof problem);
        if (k == -TG_ERR_NOT_FOUND)
                return k;
        if (k < 0)
                return log_error_rc(k, "%s: %s.", path, problem);
        if (tg_json_get_int(o, "version", RECORD_VERSION, RECORD_VERSION, true, &n, &present, problem, sizeof problem) < 0)
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
        }
        *ret = r;
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

int tg_update_record_compare(const tg_update_record *prepared, const tg_update_record *now, char **ret_diff) {
        _cleanup_free_ char *diff = NULL;
        uint32_t changed = 0, undeclared;
        size_t size = prepared->values.value_size;
        char line[256], pcrs[96];

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
                        for (unsigned s = 0; s < TG_SB_N; s++) {
                                bool same = prepared->sb_present[s] == now->sb_present[s] &&
                                            (!now->sb_present[s] ||
                                             memcmp(prepared->sb_digest[s], now->sb_digest[s], size) == 0);

                                /* dbx may change in an update that declares PCR 7: revocations only. */
                                if (same || (s == TG_SB_DBX && (prepared->changing & (UINT32_C(1) << 7))))
                                        continue;
                                (void) snprintf(line, sizeof line, "the Secure Boot variable %s changed%s",
                                                sb_variables[s].name, s == TG_SB_DBX ? " (dbx: PCR 7 was not "
                                                "declared as changing)" : "");
                                if (diff_add(&diff, line) < 0)
                                        return -TG_ERR_NOMEM;
                        }
                }
        }
        if (!diff)
                return 0;
        *ret_diff = TAKE_PTR(diff);
        return -TG_ERR_PCR_MISMATCH;
}
