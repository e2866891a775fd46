/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The doctor's report (see doctor-report.h): severity, freeing, JSON and text. */
#include <stdlib.h>

#include "doctor-report.h"
#include "error.h"
#include "json-util.h"
#include "util.h"

/* ---- Error severity: which problem's exit code the whole run returns. ---- */

/* Most severe first. An unsafe TPM outranks a broken one, which outranks a broken volume. */
static const tg_err severity_order[] = {
        TG_ERR_INTERPOSER,
        TG_ERR_EK_PROOF,
        TG_ERR_EK_CERT,
        TG_ERR_TPM_UNREACHABLE,   /* before the rest: nothing else can be fixed without a TPM */
        TG_ERR_NO_NULL_NAME,
        TG_ERR_NOT_PROVISIONED,
        TG_ERR_LOCKOUT,
        TG_ERR_AUTH_NEEDED,
        TG_ERR_TPM,
        TG_ERR_PCR_MISMATCH,
        TG_ERR_VOLUME_BINDING,
        TG_ERR_TOKEN,
        TG_ERR_CONFIG,
        TG_ERR_INVALID,
        TG_ERR_CRYPTSETUP,
        TG_ERR_NOT_FOUND,
        TG_ERR_PIN_NEEDED,
        TG_ERR_BAD_PIN,
        TG_ERR_PIN_RETRY,
        TG_ERR_EXPOSED,           /* audit's finding, never doctor's */
        TG_ERR_CANCELLED,
        TG_ERR_IO,
        TG_ERR_NOMEM,
};

static size_t severity_rank(int r) {
        for (size_t i = 0; i < ELEMENTSOF(severity_order); i++)
                if ((int) severity_order[i] == -r)
                        return i;
        return ELEMENTSOF(severity_order);
}

bool tg_err_more_severe(int a, int b) {
        if (a >= 0)
                return false;
        if (b >= 0)
                return true;
        return severity_rank(a) < severity_rank(b);
}

const char *tg_doctor_status_to_string(tg_doctor_status s) {
        switch (s) {
        case TG_DOCTOR_OK: return "ok";
        case TG_DOCTOR_SKIPPED: return "skipped";
        case TG_DOCTOR_WARNING: return "warning";
        case TG_DOCTOR_PROBLEM: return "problem";
        }
        return "unknown";
}

/* ---- The report. ---- */

static void check_done(tg_doctor_check *c) {
        free(c->subject);
        free(c->summary);
        free(c->detail);
        free(c->next_step);
}

void tg_doctor_report_free(tg_doctor_report *r) {
        if (!r)
                return;
        for (size_t i = 0; i < r->n_checks; i++)
                check_done(&r->checks[i]);
        free(r->checks);
        free(r->config_path);
        free(r);
}

int tg_doctor_report_worst(const tg_doctor_report *r) {
        int worst = 0;

        for (size_t i = 0; i < r->n_checks; i++)
                if (r->checks[i].status == TG_DOCTOR_PROBLEM && tg_err_more_severe(r->checks[i].error, worst))
                        worst = r->checks[i].error;
        return worst;
}

static json_object *json_string_or_null(const char *s) {
        return s ? json_object_new_string(s) : NULL;
}

int tg_doctor_report_to_json(const tg_doctor_report *r, json_object **ret) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *checks;
        int worst = tg_doctor_report_worst(r);

        if (!o)
                return -TG_ERR_NOMEM;
        checks = json_object_new_array();
        if (!checks)
                return -TG_ERR_NOMEM;
        json_object_object_add(o, "config", json_object_new_string(r->config_path));
        json_object_object_add(o, "verdict", json_object_new_string(worst < 0 ? "problems" : "ok"));
        json_object_object_add(o, "exit_code", json_object_new_int(tg_err_exit_code(worst)));
        json_object_object_add(o, "most_severe", worst < 0 ? json_object_new_string(tg_err_id(worst)) : NULL);
        json_object_object_add(o, "checks", checks);
        for (size_t i = 0; i < r->n_checks; i++) {
                const tg_doctor_check *c = &r->checks[i];
                json_object *j = json_object_new_object();
                if (!j)
                        return -TG_ERR_NOMEM;
                json_object_array_add(checks, j);
                json_object_object_add(j, "check", json_object_new_string(c->id));
                json_object_object_add(j, "subject", json_string_or_null(c->subject));
                json_object_object_add(j, "status", json_object_new_string(tg_doctor_status_to_string(c->status)));
                json_object_object_add(j, "error", c->error < 0 ? json_object_new_string(tg_err_id(c->error)) : NULL);
                json_object_object_add(j, "summary", json_string_or_null(c->summary));
                json_object_object_add(j, "detail", json_string_or_null(c->detail));
                json_object_object_add(j, "next_step", json_string_or_null(c->next_step));
        }
        *ret = TAKE_PTR(o);
        return 0;
}

void tg_doctor_report_print(const tg_doctor_report *r, FILE *f) {
        static const char *const label[] = {
                [TG_DOCTOR_OK] = " ok ",
                [TG_DOCTOR_SKIPPED] = "skip",
                [TG_DOCTOR_WARNING] = "WARN",
                [TG_DOCTOR_PROBLEM] = "FAIL",
        };
        unsigned problems = 0, warnings = 0;
        int worst = tg_doctor_report_worst(r);

        fprintf(f, "tpmguard doctor (configuration: %s)\n\n", r->config_path);
        for (size_t i = 0; i < r->n_checks; i++) {
                const tg_doctor_check *c = &r->checks[i];
                fprintf(f, "[%s] %s%s%s: %s\n", label[c->status], c->id, c->subject ? " " : "",
                        c->subject ?: "", c->summary ?: "");
                if (c->detail && c->status != TG_DOCTOR_OK)
                        fprintf(f, "       why: %s\n", c->detail);
                if (c->next_step)
                        fprintf(f, "       next: %s\n", c->next_step);
                problems += c->status == TG_DOCTOR_PROBLEM;
                warnings += c->status == TG_DOCTOR_WARNING;
        }
        fputc('\n', f);
        if (worst < 0)
                fprintf(f, "%u problem%s, %u warning%s. Most severe: %s (exit code %d).\n", problems,
                        problems == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s", tg_err_str(worst),
                        tg_err_exit_code(worst));
        else if (warnings > 0)
                fprintf(f, "No problems; %u warning%s.\n", warnings, warnings == 1 ? "" : "s");
        else
                fprintf(f, "Everything is fine.\n");
}
