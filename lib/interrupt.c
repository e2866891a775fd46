/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <signal.h>
#include <string.h>

#include "error.h"
#include "interrupt.h"
#include "log.h"

static volatile sig_atomic_t caught;
static unsigned depth;
static const int signals[] = { SIGINT, SIGTERM, SIGHUP };
static struct sigaction saved[3];

static void note_signal(int sig) {
        caught = sig;
}

void tg_interrupt_begin(void) {
        struct sigaction sa = { .sa_handler = note_signal, .sa_flags = SA_RESTART };

        if (depth++ > 0)
                return;
        caught = 0;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(signals); i++)
                (void) sigaction(signals[i], &sa, &saved[i]);
}

int tg_interrupt_end(void) {
        if (depth == 0 || --depth > 0)
                return caught;
        for (size_t i = 0; i < ELEMENTSOF(signals); i++)
                (void) sigaction(signals[i], &saved[i], NULL);
        return caught;
}

int tg_interrupt_pending(void) {
        return caught;
}

int tg_interrupt_check(const char *step) {
        int sig = caught;

        if (sig == 0)
                return 0;
        /* "Interrupted (^C)", not strsignal()'s "Interrupted by Interrupt". */
        if (sig == SIGINT)
                return log_error_rc(-TG_ERR_CANCELLED, "Interrupted (^C) %s: undoing what was added.", step);
        return log_error_rc(-TG_ERR_CANCELLED, "Interrupted by %s %s: undoing what was added.",
                            sig == SIGTERM ? "SIGTERM" : "SIGHUP", step);
}
