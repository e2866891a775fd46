/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <syslog.h>

#include "macro.h"

/*
 * Logging. The CLI logs to stderr; the plugin installs a sink that forwards
 * to libcryptsetup's log. Security alerts (interposer, reset) additionally go
 * to the journal with a stable MESSAGE_ID so an administrator sees them even
 * when the unlock happened in an initrd with nobody watching the console.
 *
 * Nothing secret is ever passed to these functions: no PIN, no unsealed
 * data, no session key.
 */
typedef void (*tg_log_sink_t)(int level, const char *message, void *userdata);

void tg_log_set_sink(tg_log_sink_t sink, void *userdata);
void tg_log_set_max_level(int level);
/* Whether alerts also go to the journal (default true). Unit tests and fuzzers
 * turn it off so that test alerts never reach the host's journal. */
void tg_log_set_journal(bool enabled);
int tg_log_get_max_level(void);

/* Returns rc, so that "return log_error_rc(r, ...)" logs and fails in one expression. */
int tg_log_internal(int level, int rc, const char *func, const char *format, ...) _printf_(4, 5);
/* An alert: logged like LOG_ALERT and also sent to the journal, whatever the sink. */
int tg_log_alert_internal(int rc, const char *func, const char *format, ...) _printf_(3, 4);

#define log_debug(...)          tg_log_internal(LOG_DEBUG, 0, __func__, __VA_ARGS__)
#define log_info(...)           tg_log_internal(LOG_INFO, 0, __func__, __VA_ARGS__)
#define log_notice(...)         tg_log_internal(LOG_NOTICE, 0, __func__, __VA_ARGS__)
#define log_warning(...)        tg_log_internal(LOG_WARNING, 0, __func__, __VA_ARGS__)
#define log_error(...)          tg_log_internal(LOG_ERR, 0, __func__, __VA_ARGS__)
/*
 * The _rc forms evaluate to rc itself, visibly to the compiler and to static
 * analyzers (which cannot see that the out-of-line functions return their
 * rc argument, and would otherwise assume an error path may return >= 0).
 */
#define log_debug_rc(rc, ...)   ({ int _tg_log_rc_ = (rc); (void) tg_log_internal(LOG_DEBUG, _tg_log_rc_, __func__, __VA_ARGS__); _tg_log_rc_; })
#define log_error_rc(rc, ...)   ({ int _tg_log_rc_ = (rc); (void) tg_log_internal(LOG_ERR, _tg_log_rc_, __func__, __VA_ARGS__); _tg_log_rc_; })
#define log_warning_rc(rc, ...) ({ int _tg_log_rc_ = (rc); (void) tg_log_internal(LOG_WARNING, _tg_log_rc_, __func__, __VA_ARGS__); _tg_log_rc_; })
#define log_notice_rc(rc, ...)  ({ int _tg_log_rc_ = (rc); (void) tg_log_internal(LOG_NOTICE, _tg_log_rc_, __func__, __VA_ARGS__); _tg_log_rc_; })
#define log_alert_rc(rc, ...)   ({ int _tg_log_rc_ = (rc); (void) tg_log_alert_internal(_tg_log_rc_, __func__, __VA_ARGS__); _tg_log_rc_; })

/*
 * Progress for steps that take a while (over a second on a real TPM): a
 * single line on stderr, overwritten by the next and erased by
 * tg_progress_done(). Only when stderr is a terminal and the log level
 * admits LOG_INFO, so logs, pipes and the plugin never see it.
 */
void tg_progress(const char *format, ...) _printf_(1, 2);
void tg_progress_done(void);
