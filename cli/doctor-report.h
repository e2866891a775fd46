/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <json-c/json.h>

#include "macro.h"

/*
 * The doctor's report (doctor.h runs the checks): one entry per check with what
 * was found, why and the next step, its exit code (the most severe problem)
 * and its two renderings, for people and for machines.
 */

typedef enum tg_doctor_status {
        TG_DOCTOR_OK,
        TG_DOCTOR_SKIPPED,  /* not checked; summary says why */
        TG_DOCTOR_WARNING,  /* works, with a weakness worth knowing; not a failure */
        TG_DOCTOR_PROBLEM,  /* something is broken or unsafe; error says which class */
} tg_doctor_status;

typedef struct tg_doctor_check {
        const char *id;          /* "kernel", "tpm", ...: static */
        char *subject;           /* a device, file or token; NULL when the check is global */
        tg_doctor_status status;
        int error;               /* -TG_ERR_* for a problem, 0 otherwise */
        char *summary;           /* what was found, one sentence */
        char *detail;            /* what the core logged while checking, or NULL */
        char *next_step;         /* what to do; NULL when nothing is to be done */
} tg_doctor_check;

struct tg_doctor_report {
        char *config_path;
        tg_doctor_check *checks;
        size_t n_checks;
};

typedef struct tg_doctor_report tg_doctor_report;

void tg_doctor_report_free(tg_doctor_report *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(tg_doctor_report *, tg_doctor_report_free);
#define _cleanup_doctor_report_ _cleanup_(tg_doctor_report_freep)

/* The most severe problem's -TG_ERR_* (see tg_err_more_severe), or 0 when there is none. */
int tg_doctor_report_worst(const tg_doctor_report *r);
/* The report for machines: { "config", "verdict", "exit_code", "most_severe", "checks": [...] }. */
int tg_doctor_report_to_json(const tg_doctor_report *r, json_object **ret);
/* The report for people. */
void tg_doctor_report_print(const tg_doctor_report *r, FILE *f);

/* True when error class a is more severe than b (for the exit code of several problems). */
bool tg_err_more_severe(int a, int b);
const char *tg_doctor_status_to_string(tg_doctor_status s);
