/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* At most this much of a child's standard output is kept. */
#define TG_SPAWN_OUTPUT_MAX (32u * 1024u * 1024u)

/* Looks name up in $PATH (or a default path); the full path in buf. */
bool tg_find_program(const char *name, char *buf, size_t size);

/*
 * Runs argv (no shell; stdin and stderr on /dev/null) and returns its
 * standard output (at most TG_SPAWN_OUTPUT_MAX bytes, NUL-terminated) and
 * its wait status.
 */
int tg_run_capture(char *const argv[], char **ret_out, int *ret_status);
