/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

#include "pin.h"
#include "secret.h"

/*
 * Reads a PIN: from a file or "-" (stdin) — the first line, its newline
 * ("\n" or "\r\n") stripped, nothing read past it — or, when file is NULL,
 * from the controlling terminal without echo (prompt on /dev/tty; with
 * confirm, asked twice and both must be equal). Never from argv or the
 * environment. prompt and confirm apply to the terminal only. An empty PIN is -TG_ERR_CANCELLED; a PIN longer than
 * TG_PIN_MAX bytes, or containing a NUL byte, is -TG_ERR_INVALID.
 */
int tg_pin_read(const char *file, const char *prompt, bool confirm, tg_secret **ret);

/* The same for a passphrase a person types (tpmguard passwd): the same rules
 * and limits (TG_PIN_MAX bytes), messages that say "passphrase". */
int tg_passphrase_read(const char *file, const char *prompt, bool confirm, tg_secret **ret);

/*
 * A new PIN or passphrase. From a file or "-": read once, and one shorter
 * than min_length bytes fails at once (scripts get no retries). On the
 * terminal: asked twice; too short (the message states min_length and rule,
 * e.g. "pin_min_length in tpmguard.conf") or two that differ are asked again,
 * up to 3 times. An empty answer is -TG_ERR_CANCELLED.
 */
int tg_pin_read_new(const char *file, const char *prompt, size_t min_length, const char *rule, tg_secret **ret);
int tg_passphrase_read_new(const char *file, const char *prompt, size_t min_length, const char *rule, tg_secret **ret);
