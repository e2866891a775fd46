/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Replaces, in place, every byte a terminal acts on by '?': C0 controls other
 * than tab and newline, DEL, and the C1 controls in their UTF-8 form (U+0080
 * to U+009F, which some terminals take as CSI and the like). Text read from a
 * LUKS2 header or the TPM goes through it before a log line or a report is
 * written, so that an edited token cannot clear the operator's screen or
 * print a "verified" of its own. Returns s.
 */
char *tg_str_sanitize(char *s);
/* The same for text that must stay one line (a log message, a field of a report): newlines too. */
char *tg_str_sanitize_line(char *s);
