/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <termios.h>

#include "error.h"
#include "log.h"
#include "prompt.h"
#include "util.h"

/*
 * Threat model for this file: PINs and passphrases are the secrets a user
 * types. It is
 * read byte by byte with read(2) straight into tg_secret memory (no stdio
 * buffer keeps a copy, nothing past the first line is consumed), never taken
 * from argv or the environment, never logged, and every byte of it that
 * touches other memory is wiped. Terminal echo is switched off while it is
 * typed and restored on every return path (signals are not handled).
 */

/*
 * One line of at most TG_PIN_MAX bytes (plus an optional '\r' before the
 * '\n'), read one byte at a time so that nothing after the newline is taken
 * from a shared stdin.
 */
static int pin_read_line(int fd, const char *origin, const char *what, tg_secret **ret) {
        _cleanup_secret_ tg_secret *s = NULL;
        size_t n = 0;
        char c = 0;
        int r;

        r = tg_secret_new(TG_PIN_MAX + 1, &s);
        if (r < 0)
                return r;
        for (;;) {
                ssize_t k = read(fd, &c, 1);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        r = log_error_rc(-TG_ERR_IO, "Cannot read the %s from %s: %m", what, origin);
                        break;
                }
                if (k == 0 || c == '\n')
                        break;
                if (n == TG_PIN_MAX + 1) {
                        r = log_error_rc(-TG_ERR_INVALID, "The %s from %s is longer than %d bytes.", what, origin, TG_PIN_MAX);
                        break;
                }
                s->data[n++] = (uint8_t) c;
        }
        explicit_bzero(&c, sizeof c);
        if (r < 0)
                return r;

        if (n > 0 && s->data[n - 1] == '\r')
                n--;
        if (n > TG_PIN_MAX)
                return log_error_rc(-TG_ERR_INVALID, "The %s from %s is longer than %d bytes.", what, origin, TG_PIN_MAX);
        if (n == 0)
                return log_error_rc(-TG_ERR_CANCELLED, "No %s given on %s: cancelled.", what, origin);
        if (memchr(s->data, '\0', n))
                return log_error_rc(-TG_ERR_INVALID, "The %s from %s contains a NUL byte.", what, origin);
        s->size = n;
        *ret = TAKE_PTR(s);
        return 0;
}

static int write_text(int fd, const char *text) {
        return tg_write_all(fd, text, strlen(text)) < 0
                ? log_error_rc(-TG_ERR_IO, "Cannot write the prompt to the terminal: %m") : 0;
}

/* What a new secret must be: at least min_length bytes (rule says why), typed twice alike. */
typedef struct new_secret_rule {
        size_t min_length;
        const char *rule;       /* e.g. "pin_min_length in /etc/tpmguard/tpmguard.conf" */
} new_secret_rule;

#define NEW_SECRET_TRIES 3

static int too_short(const char *what, const char *origin, size_t size, const new_secret_rule *rule) {
        return log_error_rc(-TG_ERR_INVALID, "The %s%s%s has %zu characters; at least %zu are required%s%s%s.", what,
                            origin ? " from " : "", origin ?: "", size, rule->min_length, rule->rule ? " (" : "",
                            rule->rule ?: "", rule->rule ? ")" : "");
}

/*
 * Runs with echo off: asks once, or (rule: a new secret) twice and compares.
 * A person at the terminal who mistyped is asked again, with the rule
 * stated, up to NEW_SECRET_TRIES times; an empty answer still cancels.
 */
static int tty_ask(int fd, const char *prompt, const char *what, const new_secret_rule *rule, tg_secret **ret) {
        char repeat[64];
        int r;

        for (int attempt = 1;; attempt++) {
                _cleanup_secret_ tg_secret *first = NULL, *second = NULL;

                r = write_text(fd, prompt);
                if (r < 0)
                        return r;
                r = pin_read_line(fd, "the terminal", what, &first);
                if (r < 0 || !rule) {
                        if (r >= 0)
                                *ret = TAKE_PTR(first);
                        return r;
                }
                if (first->size < rule->min_length)
                        r = too_short(what, NULL, first->size, rule);
                else {
                        snprintf(repeat, sizeof repeat, "Repeat the %s: ", what);
                        r = write_text(fd, repeat);
                        if (r < 0)
                                return r;
                        r = pin_read_line(fd, "the terminal", what, &second);
                        if (r == -TG_ERR_CANCELLED)
                                return r;
                        if (r >= 0 && (first->size != second->size ||
                                       !memeq_const(first->data, second->data, first->size)))
                                r = log_error_rc(-TG_ERR_INVALID, "The two %ss differ.", what);
                        if (r >= 0) {
                                *ret = TAKE_PTR(first);
                                return 0;
                        }
                }
                if (attempt == NEW_SECRET_TRIES)
                        return log_error_rc(r, "No new %s after %d tries. Nothing was changed.", what, NEW_SECRET_TRIES);
                log_notice("Try again (%d of %d).", attempt + 1, NEW_SECRET_TRIES);
        }
}

static int pin_read_tty(const char *prompt, const char *what, const new_secret_rule *rule, tg_secret **ret) {
        _cleanup_close_ int fd = -1;
        struct termios saved, quiet;
        int r;

        fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 || tcgetattr(fd, &saved) < 0)
                return log_error_rc(-TG_ERR_PIN_NEEDED,
                                    "No terminal to ask for the %s on (%m). Give the %s in a file, or \"-\" for standard "
                                    "input.", what, what);

        quiet = saved;
        quiet.c_lflag &= ~(tcflag_t) (ECHO | ECHOE | ECHOK);
        quiet.c_lflag |= ICANON | ECHONL;
        if (tcsetattr(fd, TCSAFLUSH, &quiet) < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot switch off terminal echo for the %s: %m", what);

        r = tty_ask(fd, prompt, what, rule, ret);

        /* Restore on every path; flush whatever was typed ahead while echo was off. */
        if (tcsetattr(fd, TCSAFLUSH, &saved) < 0)
                log_warning("Cannot restore the terminal settings: %m");
        return r;
}

/* A file or '-' is read once and a mistake fails at once (for scripts); the terminal forgives (tty_ask). */
static int secret_read(const char *file, const char *prompt, const char *what, const new_secret_rule *rule,
                       tg_secret **ret) {
        _cleanup_secret_ tg_secret *s = NULL;
        _cleanup_close_ int fd = -1;
        const char *origin = file;
        int r;

        if (!file)
                return pin_read_tty(prompt, what, rule, ret);
        if (strcmp(file, "-") == 0) {
                origin = "standard input";
                r = pin_read_line(STDIN_FILENO, origin, what, &s);
        } else {
                fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (fd < 0)
                        return log_error_rc(errno == ENOENT ? -TG_ERR_NOT_FOUND : -TG_ERR_IO,
                                            "Cannot open the %s file %s: %m", what, file);
                r = pin_read_line(fd, file, what, &s);
        }
        if (r < 0)
                return r;
        if (rule && s->size < rule->min_length)
                return too_short(what, origin, s->size, rule);
        *ret = TAKE_PTR(s);
        return 0;
}

static const new_secret_rule confirm_only = { .min_length = 0 };

int tg_pin_read(const char *file, const char *prompt, bool confirm, tg_secret **ret) {
        return secret_read(file, prompt ? prompt : "PIN: ", "PIN", confirm ? &confirm_only : NULL, ret);
}

int tg_passphrase_read(const char *file, const char *prompt, bool confirm, tg_secret **ret) {
        return secret_read(file, prompt ? prompt : "Passphrase: ", "passphrase", confirm ? &confirm_only : NULL, ret);
}

int tg_pin_read_new(const char *file, const char *prompt, size_t min_length, const char *rule, tg_secret **ret) {
        return secret_read(file, prompt ? prompt : "New PIN: ", "PIN",
                           &(new_secret_rule) { .min_length = min_length, .rule = rule }, ret);
}

int tg_passphrase_read_new(const char *file, const char *prompt, size_t min_length, const char *rule, tg_secret **ret) {
        return secret_read(file, prompt ? prompt : "New passphrase: ", "passphrase",
                           &(new_secret_rule) { .min_length = min_length, .rule = rule }, ret);
}
