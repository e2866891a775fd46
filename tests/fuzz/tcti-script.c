/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A TCTI module for the response fuzzer (issue 22), loaded by tss2-tctildr
 * by its path like any TCTI ("tcti = /path/libtgfuzz-tcti.so" in
 * tpmguard.conf), so that tpmguard's own tg_tpm_open() and everything above
 * it run unchanged. Test-only: it is never installed.
 *
 * replay  every command is answered with the next response of a script the
 *         driver handed over (tgfuzz_tcti_replay); the command itself is
 *         ignored. When the script ends the transport fails (IO error), as a
 *         TPM that stops answering.
 * record  every command goes to a real TPM (tgfuzz_tcti_record names its
 *         TCTI), and every response is appended to a buffer as
 *         u16 length (big endian) ‖ response: the script format of replay.
 *
 * The driver dlopen()s this module by the same path first and sets the mode
 * through the exported functions; tctildr's dlopen() then returns the same
 * module, with the same globals.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_tcti.h>
#include <tss2/tss2_tctildr.h>

#define TGFUZZ_TCTI_MAGIC UINT64_C(0x7467667a7a746369)
#define MAX_RESPONSE 4096

typedef struct script_tcti {
        TSS2_TCTI_CONTEXT_COMMON_V2 common;
        bool pending;               /* a command was transmitted, its response not yet received */
        uint8_t response[MAX_RESPONSE];
        size_t response_size;
} script_tcti;

/* Replay state. */
static const uint8_t *script;
static size_t script_size, script_off;
/* Record state. */
static char *record_conf;
static TSS2_TCTI_CONTEXT *record_inner;
static uint8_t *record_buf;
static size_t record_len;

void tgfuzz_tcti_replay(const uint8_t *data, size_t size);
int tgfuzz_tcti_record(const char *inner_conf);
const uint8_t *tgfuzz_tcti_recorded(size_t *ret_size);
size_t tgfuzz_tcti_responses_left(void);

void tgfuzz_tcti_replay(const uint8_t *data, size_t size) {
        script = data;
        script_size = size;
        script_off = 0;
        free(record_conf);
        record_conf = NULL;
}

int tgfuzz_tcti_record(const char *inner_conf) {
        free(record_conf);
        record_conf = strdup(inner_conf);
        free(record_buf);
        record_buf = NULL;
        record_len = 0;
        return record_conf ? 0 : -1;
}

const uint8_t *tgfuzz_tcti_recorded(size_t *ret_size) {
        *ret_size = record_len;
        return record_buf;
}

size_t tgfuzz_tcti_responses_left(void) {
        return script_size - script_off;
}

static TSS2_RC next_response(script_tcti *t, const uint8_t *command, size_t command_size) {
        if (record_conf) {
                size_t size = MAX_RESPONSE;
                uint8_t *grown;
                TSS2_RC rc;

                if (!record_inner && Tss2_TctiLdr_Initialize(record_conf, &record_inner) != TSS2_RC_SUCCESS)
                        return TSS2_TCTI_RC_IO_ERROR;
                rc = Tss2_Tcti_Transmit(record_inner, command_size, command);
                if (rc == TSS2_RC_SUCCESS)
                        rc = Tss2_Tcti_Receive(record_inner, &size, t->response, TSS2_TCTI_TIMEOUT_BLOCK);
                if (rc != TSS2_RC_SUCCESS)
                        return rc;
                grown = realloc(record_buf, record_len + 2 + size);
                if (!grown)
                        return TSS2_TCTI_RC_MEMORY;
                record_buf = grown;
                record_buf[record_len] = (uint8_t) (size >> 8);
                record_buf[record_len + 1] = (uint8_t) size;
                memcpy(record_buf + record_len + 2, t->response, size);
                record_len += 2 + size;
                t->response_size = size;
                return TSS2_RC_SUCCESS;
        }
        if (script_size - script_off < 2)
                return TSS2_TCTI_RC_IO_ERROR;
        t->response_size = (size_t) script[script_off] << 8 | script[script_off + 1];
        script_off += 2;
        if (t->response_size > script_size - script_off)
                t->response_size = script_size - script_off; /* a cut script: what is left */
        if (t->response_size > MAX_RESPONSE)
                t->response_size = MAX_RESPONSE;
        memcpy(t->response, script + script_off, t->response_size);
        script_off += t->response_size;
        return TSS2_RC_SUCCESS;
}

static TSS2_RC script_transmit(TSS2_TCTI_CONTEXT *tcti, size_t size, const uint8_t *command) {
        script_tcti *t = (script_tcti *) tcti;
        TSS2_RC rc;

        if (t->pending)
                return TSS2_TCTI_RC_BAD_SEQUENCE;
        rc = next_response(t, command, size);
        if (rc != TSS2_RC_SUCCESS)
                return rc;
        t->pending = true;
        return TSS2_RC_SUCCESS;
}

static TSS2_RC script_receive(TSS2_TCTI_CONTEXT *tcti, size_t *size, uint8_t *response, int32_t timeout) {
        script_tcti *t = (script_tcti *) tcti;

        (void) timeout;
        if (!size)
                return TSS2_TCTI_RC_BAD_REFERENCE;
        if (!t->pending)
                return TSS2_TCTI_RC_BAD_SEQUENCE;
        if (!response) {
                *size = t->response_size;
                return TSS2_RC_SUCCESS;
        }
        /* Like the device TCTI: a buffer too small for the response is the caller's error. */
        if (*size < t->response_size)
                return TSS2_TCTI_RC_INSUFFICIENT_BUFFER;
        memcpy(response, t->response, t->response_size);
        *size = t->response_size;
        t->pending = false;
        return TSS2_RC_SUCCESS;
}

static void script_finalize(TSS2_TCTI_CONTEXT *tcti) {
        (void) tcti;
        if (record_inner)
                Tss2_TctiLdr_Finalize(&record_inner);
}

static TSS2_RC script_cancel(TSS2_TCTI_CONTEXT *tcti) {
        (void) tcti;
        return TSS2_TCTI_RC_NOT_IMPLEMENTED;
}

static TSS2_RC script_get_poll_handles(TSS2_TCTI_CONTEXT *tcti, TSS2_TCTI_POLL_HANDLE *handles, size_t *num) {
        (void) tcti;
        (void) handles;
        (void) num;
        return TSS2_TCTI_RC_NOT_IMPLEMENTED;
}

static TSS2_RC script_set_locality(TSS2_TCTI_CONTEXT *tcti, uint8_t locality) {
        (void) tcti;
        (void) locality;
        return TSS2_TCTI_RC_NOT_IMPLEMENTED;
}

static TSS2_RC script_init(TSS2_TCTI_CONTEXT *tcti, size_t *size, const char *conf) {
        script_tcti *t = (script_tcti *) tcti;

        (void) conf;
        if (!size)
                return TSS2_TCTI_RC_BAD_VALUE;
        if (!tcti) {
                *size = sizeof(script_tcti);
                return TSS2_RC_SUCCESS;
        }
        memset(t, 0, sizeof *t);
        t->common.v1.magic = TGFUZZ_TCTI_MAGIC;
        t->common.v1.version = 1;
        t->common.v1.transmit = script_transmit;
        t->common.v1.receive = script_receive;
        t->common.v1.finalize = script_finalize;
        t->common.v1.cancel = script_cancel;
        t->common.v1.getPollHandles = script_get_poll_handles;
        t->common.v1.setLocality = script_set_locality;
        return TSS2_RC_SUCCESS;
}

static const TSS2_TCTI_INFO info = {
        .version = 2,
        .name = "tgfuzz-script",
        .description = "tpmguard response fuzzer: replays or records TPM responses (test-only)",
        .config_help = "(none: set by the fuzz driver)",
        .init = script_init,
};

const TSS2_TCTI_INFO *Tss2_Tcti_Info(void);
const TSS2_TCTI_INFO *Tss2_Tcti_Info(void) {
        return &info;
}
