/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stdio.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "log.h"
#include "sanitize.h"

/* 7c1b2e0a-6f3d-4c1e-9a57-3b8f1d2c4e90: a TPM verification failed */
#define TPMGUARD_ALERT_MESSAGE_ID "7c1b2e0a6f3d4c1e9a573b8f1d2c4e90"

static tg_log_sink_t log_sink;
static bool progress_shown;
static void *log_sink_userdata;
static int log_max_level = LOG_INFO;
static bool log_journal = true;

void tg_log_set_sink(tg_log_sink_t sink, void *userdata) {
        log_sink = sink;
        log_sink_userdata = userdata;
}

void tg_log_set_max_level(int level) {
        log_max_level = level;
}

void tg_log_set_journal(bool enabled) {
        log_journal = enabled;
}

int tg_log_get_max_level(void) {
        return log_max_level;
}

static void log_dispatch(int level, const char *func, const char *message) {
        if (log_sink) {
                log_sink(level, message, log_sink_userdata);
                return;
        }
        if (progress_shown) {
                /* A message replaces the progress line rather than running into it. */
                fputs("\r\033[K", stderr);
                progress_shown = false;
        }
        if (log_max_level >= LOG_DEBUG)
                fprintf(stderr, "tpmguard: %s: %s\n", func, message);
        else
                fprintf(stderr, "tpmguard: %s\n", message);
}

int tg_log_internal(int level, int rc, const char *func, const char *format, ...) {
        char buf[1024];
        va_list ap;

        if (level > log_max_level)
                return rc;

        va_start(ap, format);
        vsnprintf(buf, sizeof buf, format, ap);
        va_end(ap);
        /* Messages quote header fields and TPM answers: no terminal control, no line of their own. */
        tg_str_sanitize_line(buf);
        log_dispatch(level, func, buf);
        return rc;
}

int tg_log_alert_internal(int rc, const char *func, const char *format, ...) {
        char buf[1024];
        va_list ap;

        va_start(ap, format);
        vsnprintf(buf, sizeof buf, format, ap);
        va_end(ap);
        tg_str_sanitize_line(buf);

        log_dispatch(LOG_ALERT, func, buf);
        if (!log_journal)
                return rc;
        /* Best effort: in an initrd without journald this simply fails. */
        (void) sd_journal_send("MESSAGE=tpmguard: %s", buf,
                               "MESSAGE_ID=" TPMGUARD_ALERT_MESSAGE_ID,
                               "PRIORITY=%i", LOG_ALERT,
                               "SYSLOG_IDENTIFIER=tpmguard",
                               NULL);
        return rc;
}

static bool progress_wanted(void) {
        return !log_sink && log_max_level >= LOG_INFO && isatty(STDERR_FILENO);
}

void tg_progress(const char *format, ...) {
        va_list ap;

        if (!progress_wanted())
                return;
        fputs("\r\033[K", stderr);
        va_start(ap, format);
        vfprintf(stderr, format, ap);
        va_end(ap);
        fflush(stderr);
        progress_shown = true;
}

void tg_progress_done(void) {
        if (!progress_shown)
                return;
        fputs("\r\033[K", stderr);
        fflush(stderr);
        progress_shown = false;
}
