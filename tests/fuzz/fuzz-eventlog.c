/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The firmware's TCG event log (lib/eventlog.c) and the EFI signature lists
 * its Secure Boot events carry (lib/efi-siglist.c): an accepted log replays
 * in every bank and every event describes itself; the same bytes as an
 * update file (.esl, .auth) and as an append to themselves.
 */
#include <stdlib.h>

#include "efi-siglist.h"
#include "eventlog.h"
#include "fuzz.h"
#include "json-util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_silence_logs();
        return 0;
}

static void siglists(const uint8_t *data, size_t size) {
        _cleanup_json_ json_object *summary = NULL;
        _cleanup_free_ uint8_t *appended = NULL;
        const uint8_t *lists;
        size_t n, m;
        bool authenticated;

        if (tg_esl_summary(data, size, &summary) == 0 && !summary)
                abort();
        if (tg_esl_from_update_file(data, size, &lists, &n, &authenticated) == 0) {
                if (lists < data || lists + n != data + size)
                        abort();
                /* Appending the lists to themselves adds nothing (every entry is held already). */
                if (tg_esl_append(lists, n, lists, n, &appended, &m) == 0 && m != n)
                        abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_eventlog_ tg_eventlog *log = NULL;
        uint8_t values[TG_EVENTLOG_PCRS][TG_EVENTLOG_MAX_DIGEST];
        uint32_t mask;

        siglists(data, size);
        if (tg_eventlog_parse(data, size, &log) != 0)
                return 0;
        if (log->n_banks == 0 || log->n_banks > TG_EVENTLOG_MAX_BANKS)
                abort();
        for (unsigned k = 0; k < log->n_banks; k++)
                (void) tg_eventlog_replay(log, log->bank_alg[k], NULL, values, &mask);
        for (size_t i = 0; i < log->n_events; i++) {
                const tg_event *e = &log->events[i];
                _cleanup_free_ char *text = NULL;
                tg_efi_variable v;

                if (e->pcr >= TG_EVENTLOG_PCRS || (e->data_size && e->data < log->buf) ||
                    (size_t) (e->data - log->buf) + e->data_size > log->size)
                        abort();
                if (tg_event_describe(e, &text) != 0 || !text)
                        abort();
                (void) tg_event_data_matches(log, e);
                if (tg_efi_variable_parse(e->data, e->data_size, &v) == 0)
                        siglists(v.data, v.data_size);
        }
        return 0;
}
