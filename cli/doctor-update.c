/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* doctor: a pending change, and the tokens it leaves unopenable after the next boot (doctor-update.h). */
#include <stdlib.h>
#include <string.h>

#include "cmd-update-check.h"
#include "doctor-update.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "util.h"

/* Appends a check; subject, summary and next_step are taken (freed on failure). */
static int add(tg_doctor_report *r, char *subject, tg_doctor_status status, int error, char *summary, char *next_step) {
        tg_doctor_check *checks = summary ? reallocarray(r->checks, r->n_checks + 1, sizeof *checks) : NULL;

        if (!checks) {
                free(subject);
                free(summary);
                free(next_step);
                return -TG_ERR_NOMEM;
        }
        r->checks = checks;
        r->checks[r->n_checks++] = (tg_doctor_check) { .id = "update", .subject = subject, .status = status,
                                                      .error = error, .summary = summary, .next_step = next_step };
        return 0;
}

/* "A dbx update is pending", "A db and dbx update is pending", "A firmware capsule update (...) is staged", or NULL. */
static int pending_text(json_object *out, char **ret) {
        json_object *changes = json_object_object_get(out, "changes"), *capsule = json_object_object_get(out, "capsule_pending");
        _cleanup_free_ char *vars = NULL;

        for (size_t i = 0; json_object_is_type(changes, json_type_array) && i < json_object_array_length(changes); i++) {
                const char *v = json_object_get_string(json_object_object_get(json_object_array_get_idx(changes, i),
                                                                               "variable"));
                char *next = NULL;
                if (tg_asprintf(&next, "%s%s%s", vars ?: "", vars ? " and " : "", v ?: "?") < 0)
                        return -TG_ERR_NOMEM;
                free(vars);
                vars = next;
        }
        if (capsule)
                return tg_asprintf(ret, "A firmware capsule update (%s) is staged%s%s%s", json_object_get_string(capsule),
                                   vars ? " and a " : "", vars ?: "", vars ? " update is pending" : "");
        if (vars)
                return tg_asprintf(ret, "A %s update is pending", vars);
        *ret = NULL;
        return 0;
}

int tg_doctor_update_check(const tg_config *config, const tg_doctor_options *o, tg_doctor_report *report) {
        _cleanup_json_ json_object *out = NULL;
        _cleanup_free_ const char **args = calloc(o->n_devices + 1, sizeof *args);
        _cleanup_free_ char *pending = NULL;
        json_object *volumes;
        cli c = { .event_log = o->event_log, .efivars_dir = o->efivars_dir, .null_name = o->null_name_path,
                  .crypttab = o->crypttab, .token = -1, .keyslot = -1, .replace = -1 };
        int r, level = tg_log_get_max_level();

        if (!args)
                return -TG_ERR_NOMEM;
        args[0] = "check";
        for (size_t i = 0; i < o->n_devices; i++)
                args[i + 1] = o->devices[i];
        c.args = (char **) args;
        c.n_args = (int) o->n_devices + 1;
        /* The volume checks have said what is wrong with a volume; here only the next boot matters. */
        tg_log_set_max_level(LOG_CRIT);
        r = cli_update_check_run(&c, config, &out);
        tg_log_set_max_level(level);
        if (r == -TG_ERR_NOMEM)
                return r;
        if (r < 0)
                return add(report, NULL, TG_DOCTOR_SKIPPED, 0,
                           strdup(r == -TG_ERR_INTERPOSER ?
                                  "Not checked: the event log does not replay to the verified PCR values, so nothing "
                                  "predicts the next boot ('tpmguard pcrs' shows where)." :
                                  "Not checked: the next boot's PCR values cannot be computed here (no event log, no "
                                  "verified TPM, or a volume that cannot be read; 'tpmguard update check' says which)."),
                           NULL);
        volumes = json_object_object_get(out, "volumes");
        if (!json_object_is_type(volumes, json_type_array) || json_object_array_length(volumes) == 0)
                return 0; /* no tpmguard token: the volume checks say so */
        r = pending_text(out, &pending);
        if (r < 0)
                return r;
        /* Nothing pending: one check (a token that does not open now is the volume check's). */
        if (!pending)
                return add(report, NULL, TG_DOCTOR_OK, 0,
                           strdup("No db, dbx or KEK change and no firmware capsule is pending for the next boot."), NULL);
        for (size_t i = 0; i < json_object_array_length(volumes); i++) {
                json_object *vol = json_object_array_get_idx(volumes, i), *tokens = json_object_object_get(vol, "tokens");
                const char *device = json_object_get_string(json_object_object_get(vol, "device"));

                for (size_t k = 0; k < json_object_array_length(tokens); k++) {
                        json_object *t = json_object_array_get_idx(tokens, k), *opens = json_object_object_get(t, "opens");
                        int id = json_object_get_int(json_object_object_get(t, "token"));
                        char *subject = NULL, *summary = NULL, *next = NULL;

                        if (tg_asprintf(&subject, "%s token %d", device, id) < 0 ||
                            (opens ? tg_asprintf(&summary, "%s; token %d of %s opens after the next boot (its %s seal).",
                                                 pending, id, device, json_object_get_string(opens)) :
                                     tg_asprintf(&summary, "%s and token %d of %s will not open with the PIN alone after "
                                                 "the next boot.", pending, id, device)) < 0 ||
                            (!opens && tg_asprintf(&next, "Before rebooting, run '%s'.",
                                                   json_object_get_string(json_object_object_get(t, "command"))) < 0))
                                r = -TG_ERR_NOMEM;
                        r = r < 0 ? r : add(report, subject, opens ? TG_DOCTOR_OK : TG_DOCTOR_PROBLEM,
                                            opens ? 0 : -TG_ERR_PCR_MISMATCH, summary, next);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}
