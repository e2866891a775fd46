/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The test-only fault-injection hook; see fault.h. This file compiles to
 * nothing unless the build was configured with -Dfault_injection=true.
 */
#include "fault.h"

#if TPMGUARD_FAULT_INJECTION
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t fault_points_passed;
static uint64_t fault_inject_at;      /* 0: never */
static uint64_t fault_signal_at;      /* 0: never */
static int fault_trace = -1;          /* -1: environment not read yet */

static void fault_read_environment(void) {
        const char *at, *trace, *sig;

        if (fault_trace >= 0)
                return;
        at = secure_getenv("TPMGUARD_FAULT_INJECT_AT");
        trace = secure_getenv("TPMGUARD_FAULT_TRACE");
        sig = secure_getenv("TPMGUARD_FAULT_SIGNAL_AT");
        fault_inject_at = at ? strtoull(at, NULL, 10) : 0;
        fault_signal_at = sig ? strtoull(sig, NULL, 10) : 0;
        fault_trace = trace && strcmp(trace, "1") == 0;
}

void tg_fault_point(const char *name) {
        char line[160];
        int n;

        fault_read_environment();
        fault_points_passed++;
        if (fault_trace) {
                n = snprintf(line, sizeof line, "fault-injection: point %" PRIu64 " (%s)\n", fault_points_passed, name);
                if (n > 0)
                        (void) !write(STDERR_FILENO, line, (size_t) n);
        }
        if (fault_signal_at != 0 && fault_points_passed == fault_signal_at) {
                /* Like ^C at this moment: the process goes on only if it handles SIGINT. */
                n = snprintf(line, sizeof line, "fault-injection: SIGINT at point %" PRIu64 " (%s)\n",
                             fault_points_passed, name);
                if (n > 0)
                        (void) !write(STDERR_FILENO, line, (size_t) n);
                (void) raise(SIGINT);
        }
        if (fault_inject_at == 0 || fault_points_passed != fault_inject_at)
                return;
        n = snprintf(line, sizeof line, "fault-injection: exit at point %" PRIu64 " (%s)\n", fault_points_passed, name);
        if (n > 0)
                (void) !write(STDERR_FILENO, line, (size_t) n);
        /* Like a crash or power loss: no atexit handlers, no flushing, no TPM cleanup. */
        _exit(TG_FAULT_EXIT_CODE);
}
#endif
