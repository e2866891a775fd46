/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Shared by the libFuzzer targets: logging silenced (a no-op sink, and no
 * alert ever reaches the journal: a fuzzer produces thousands of "interposer
 * suspected" alerts a second), and a NUL-terminated copy of the input for the
 * parsers that take C strings.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static inline void fuzz_log_discard(int level, const char *message, void *userdata) {
        (void) level;
        (void) message;
        (void) userdata;
}

static inline void fuzz_silence_logs(void) {
        tg_log_set_sink(fuzz_log_discard, NULL);
        tg_log_set_journal(false);
        /* Still format every message (LOG_DEBUG): format bugs are bugs too. */
        tg_log_set_max_level(LOG_DEBUG);
}

/* The input as a C string; NULL if it holds a NUL byte (a C string cannot). */
static inline char *fuzz_strndup(const uint8_t *data, size_t size) {
        char *s;

        if (memchr(data, '\0', size))
                return NULL;
        s = malloc(size + 1);
        if (!s)
                abort();
        memcpy(s, data, size);
        s[size] = '\0';
        return s;
}
