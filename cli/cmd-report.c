/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The reports: doctor, status and audit, as JSON (--json) or as text for
 * people (print_report).
 */
#include <stdio.h>
#include <stdlib.h>

#include "cmd-report.h"
#include "cmdline.h"
#include "audit.h"
#include "doctor-update.h"
#include "doctor.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "sanitize.h"
#include "status.h"
#include "volumes.h"
#include "util.h"

/*
 * The human-readable reports quote the LUKS2 header (a peer token's PCR bank or clevis pin, token
 * types): the status and audit models have every string made one line without terminal controls
 * (tg_json_sanitize_strings), and the text of every report is written to memory first and printed
 * with every remaining terminal control replaced (tg_str_sanitize), so that an edited header can
 * neither clear the screen nor forge a line of the report.
 */
static int print_report(void (*print)(void *what, FILE *f), void *what) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);

        if (!f)
                return log_error_rc(-TG_ERR_NOMEM, "Out of memory.");
        print(what, f);
        if (fclose(f) != 0) {
                free(text);
                return log_error_rc(-TG_ERR_NOMEM, "The report could not be written.");
        }
        if (text)
                fputs(tg_str_sanitize(text), stdout);
        free(text);
        return 0;
}

static void print_doctor(void *report, FILE *f) {
        tg_doctor_report_print(report, f);
}

static void print_status(void *status, FILE *f) {
        tg_status_print(status, f);
}

static void print_audit(void *audit, FILE *f) {
        tg_audit_print(audit, f);
}

int cmd_doctor(const cli *c, tg_config *config) {
        _cleanup_secret_ tg_secret *eauth = NULL;
        _cleanup_doctor_report_ tg_doctor_report *report = NULL;
        tg_doctor_options o = {
                .null_name_path = c->null_name,
                .devices = c->args,
                .n_devices = (size_t) c->n_args,
                .crypttab = c->crypttab,
                .initrd = c->initrd,
                .update_check = tg_doctor_update_check,
                .event_log = c->event_log,
                .efivars_dir = c->efivars_dir,
        };
        int r;

        r = cli_read_optional_secret(c->endorsement_auth_file, "Endorsement hierarchy password: ", &eauth);
        if (r < 0)
                return r;
        o.endorsement_auth = eauth;

        r = tg_doctor_run(config, &o, &report);
        if (r < 0)
                return log_error_rc(r, "doctor could not finish: %s.", tg_err_str(r));
        if (c->json) {
                _cleanup_(json_object_putp) json_object *j = NULL;
                r = tg_doctor_report_to_json(report, &j);
                if (r < 0)
                        return r;
                r = tg_json_sanitize_strings(j);
                if (r < 0)
                        return r;
                cli_json_print(j);
        } else {
                r = print_report(print_doctor, report);
                if (r < 0)
                        return r;
        }
        return tg_doctor_report_worst(report);
}

int cmd_status(const cli *c, tg_config *config) {
        _cleanup_(json_object_putp) json_object *status = NULL;
        int r;

        if (c->n_args > 1)
                return log_error_rc(-TG_ERR_INVALID, "status takes at most one device. See 'tpmguard status --help'.");
        /* No device: the machine's tpmguard volumes, and the crypttab lines that name one. */
        if (c->n_args == 0) {
                r = tg_volumes_list(cli_crypttab_path(c), &status);
                if (r >= 0)
                        r = tg_json_sanitize_strings(status);
                if (r < 0)
                        return r;
                if (c->json)
                        cli_json_print(status);
                else
                        tg_volumes_print(status, stdout);
                return 0;
        }
        r = tg_status(config, c->args[0], &status);
        if (r < 0)
                return r;
        /* The model quotes the header: one line per field, no terminal control, in both forms. */
        r = tg_json_sanitize_strings(status);
        if (r < 0)
                return r;
        if (c->json) {
                cli_json_print(status);
        }
        else {
                r = print_report(print_status, status);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * tpmguard audit [DEVICE...]: every token's verdicts (cli/audit.c). The
 * whole report is printed either way; exposed tokens make the exit status
 * TG_ERR_EXPOSED's (21), so a fleet tool needs no parsing to alert; else a
 * volume that could not be audited gives its error's.
 */
int cmd_audit(const cli *c, tg_config *config) {
        _cleanup_(json_object_putp) json_object *audit = NULL;
        int r, volume_error = 0;

        r = tg_audit(config, c->args, (size_t) c->n_args, &audit, &volume_error);
        if (r < 0)
                return log_error_rc(r, "The audit could not finish: %s.", tg_err_str(r));
        r = tg_json_sanitize_strings(audit);
        if (r < 0)
                return r;
        if (c->json) {
                cli_json_print(audit);
        } else {
                r = print_report(print_audit, audit);
                if (r < 0)
                        return r;
        }
        /* Exposed outranks a volume that could not be read: both are in the output. */
        return tg_audit_exposed(audit) ? -TG_ERR_EXPOSED : volume_error;
}
