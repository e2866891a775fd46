/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <termios.h>

#include "error.h"
#include "log.h"
#include "prompt.h"

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
static int pin_read_line(int fd, const char *origin, tg_secret **ret) {
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
                        r = log_error_rc(-TG_ERR_IO, "Cannot read the PIN from %s: %m", origin);
                        break;
                }
                if (k == 0 || c == '\n')
                        break;
                if (n == TG_PIN_MAX + 1) {
                        r = log_error_rc(-TG_ERR_INVALID, "The PIN from %s is longer than %d bytes.", origin, TG_PIN_MAX);
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
                return log_error_rc(-TG_ERR_INVALID, "The PIN from %s is longer than %d bytes.", origin, TG_PIN_MAX);
        if (n == 0)
                return log_error_rc(-TG_ERR_CANCELLED, "No PIN given on %s: cancelled.", origin);
        if (memchr(s->data, '\0', n))
                return log_error_rc(-TG_ERR_INVALID, "The PIN from %s contains a NUL byte.", origin);
        s->size = n;
        *ret = TAKE_PTR(s);
        return 0;
}

static int write_all(int fd, const char *text) {
        size_t left = strlen(text);

        while (left > 0) {
                ssize_t k = write(fd, text, left);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_rc(-TG_ERR_IO, "Cannot write the PIN prompt to the terminal: %m");
                }
                text += k;
                left -= (size_t) k;
        }
        return 0;
}

/* Runs with echo off: asks once, or twice and compares. */
static int tty_ask(int fd, const char *prompt, bool confirm, tg_secret **ret) {
        _cleanup_secret_ tg_secret *first = NULL, *second = NULL;
        int r;

        r = write_all(fd, prompt);
        if (r < 0)
                return r;
        r = pin_read_line(fd, "the terminal", &first);
        if (r < 0 || !confirm) {
                if (r >= 0)
                        *ret = TAKE_PTR(first);
                return r;
        }

        r = write_all(fd, "Repeat the PIN: ");
        if (r < 0)
                return r;
        r = pin_read_line(fd, "the terminal", &second);
        if (r < 0)
                return r;
        if (first->size != second->size || !memeq_const(first->data, second->data, first->size))
                return log_error_rc(-TG_ERR_INVALID, "The two PINs differ. Nothing was changed; try again.");
        *ret = TAKE_PTR(first);
        return 0;
}

static int pin_read_tty(const char *prompt, bool confirm, tg_secret **ret) {
        _cleanup_close_ int fd = -1;
        struct termios saved, quiet;
        int r;

        fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (fd < 0 || tcgetattr(fd, &saved) < 0)
                return log_error_rc(-TG_ERR_PIN_NEEDED,
                                    "No terminal to ask for the PIN on (%m). Give the PIN in a file, or \"-\" for standard input.");

        quiet = saved;
        quiet.c_lflag &= ~(tcflag_t) (ECHO | ECHOE | ECHOK);
        quiet.c_lflag |= ICANON | ECHONL;
        if (tcsetattr(fd, TCSAFLUSH, &quiet) < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot switch off terminal echo for the PIN: %m");

        r = tty_ask(fd, prompt, confirm, ret);

        /* Restore on every path; flush whatever was typed ahead while echo was off. */
        if (tcsetattr(fd, TCSAFLUSH, &saved) < 0)
                log_warning("Cannot restore the terminal settings: %m");
        return r;
}

int tg_pin_read(const char *file, const char *prompt, bool confirm, tg_secret **ret) {
        _cleanup_close_ int fd = -1;

        if (!file)
                return pin_read_tty(prompt ? prompt : "PIN: ", confirm, ret);
        if (strcmp(file, "-") == 0)
                return pin_read_line(STDIN_FILENO, "standard input", ret);

        fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return log_error_rc(errno == ENOENT ? -TG_ERR_NOT_FOUND : -TG_ERR_IO,
                                    "Cannot open the PIN file %s: %m", file);
        return pin_read_line(fd, file, ret);
}
