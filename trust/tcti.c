/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <tss2/tss2_tpm2_types.h>

#include "fault.h"
#include "log.h"
#include "tcti.h"
#include "tpmguard-config.h"

/* "tgTCTI\0\1": tells our wrapper from any other TCTI context. */
#define TG_TCTI_MAGIC UINT64_C(0x7467544354490001)
#define TPM_HEADER_SIZE 10
/* Resends of an Unseal answered "retry" that ESAPI may send (unseal_retry_budget()). */
#define TG_UNSEAL_RESENDS 1U

typedef struct tg_tcti {
        TSS2_TCTI_CONTEXT_COMMON_V2 common; /* first: the context ESAPI sees */
        TSS2_TCTI_CONTEXT *inner;
        uint32_t last_cc;                   /* command code of the last command transmitted */
        uint16_t last_tag;                  /* and its tag */
        uint8_t *last_response;             /* the buffer the last response was received into */
        size_t last_response_size;          /* bytes the transport wrote there (never more than that buffer holds) */
        bool unseal_retry;                  /* the last command was an Unseal answered "retry" */
        unsigned unseal_resends;            /* resends of that Unseal sent so far */
        bool unseal_resend_refused;         /* a "retry" after that resend reached ESAPI as not to be resent */
} tg_tcti;

static uint32_t be32(const uint8_t *p) {
        return (uint32_t) p[0] << 24 | (uint32_t) p[1] << 16 | (uint32_t) p[2] << 8 | p[3];
}

unsigned tg_tpm_response_handle_count(uint32_t cc) {
        /* TPM 2.0 Part 3: the only commands whose response has a handle area (one handle each). */
        switch (cc) {
        case TPM2_CC_CreatePrimary:
        case TPM2_CC_Load:
        case TPM2_CC_LoadExternal:
        case TPM2_CC_StartAuthSession:
        case TPM2_CC_ContextLoad:
        case TPM2_CC_CreateLoaded:
        case TPM2_CC_HMAC_Start:
        case TPM2_CC_HashSequenceStart:
        case 0x195: /* TPM2_CC_MAC_Start (not in every tss2 header) */
                return 1;
        default:
                return 0;
        }
}

int tg_tpm_response_framing_check(uint32_t cc, const uint8_t *response, size_t size) {
        uint32_t size_field, rc, param_size;
        uint16_t tag;
        size_t handles_end;

        if (size < TPM_HEADER_SIZE)
                return log_error_rc(-TG_ERR_INTERPOSER, "TPM response of %zu bytes is shorter than its header.", size);
        tag = (uint16_t) (response[0] << 8 | response[1]);
        size_field = be32(response + 2);
        rc = be32(response + 6);
        if (size_field != size)
                return log_error_rc(-TG_ERR_INTERPOSER,
                                      "TPM response says it has %" PRIu32 " bytes, the transport delivered %zu.",
                                      size_field, size);
        if (tag != TPM2_ST_SESSIONS && tag != TPM2_ST_NO_SESSIONS)
                return log_error_rc(-TG_ERR_INTERPOSER, "TPM response has tag 0x%04x.", tag);
        if (rc != TPM2_RC_SUCCESS) {
                /* Part 1 §18: an error response is the header alone. */
                if (size != TPM_HEADER_SIZE || tag != TPM2_ST_NO_SESSIONS)
                        return log_error_rc(-TG_ERR_INTERPOSER,
                                              "TPM error response 0x%08" PRIx32 " carries %zu bytes after its header.",
                                              rc, size - TPM_HEADER_SIZE);
                return 0;
        }
        handles_end = TPM_HEADER_SIZE + 4 * (size_t) tg_tpm_response_handle_count(cc);
        if (size < handles_end)
                return log_error_rc(-TG_ERR_INTERPOSER,
                                      "TPM response to command 0x%" PRIx32 " ends inside its handle area.", cc);
        if (tag == TPM2_ST_NO_SESSIONS)
                return 0;
        if (size - handles_end < 4)
                return log_error_rc(-TG_ERR_INTERPOSER,
                                      "TPM response to command 0x%" PRIx32 " has no parameterSize field.", cc);
        param_size = be32(response + handles_end);
        /* The parameters must end inside the response, and leave room for at least one authorization. */
        if (param_size > size - handles_end - 4)
                return log_error_rc(-TG_ERR_INTERPOSER,
                                      "TPM response to command 0x%" PRIx32 " announces %" PRIu32
                                      " parameter bytes, only %zu follow.", cc, param_size, size - handles_end - 4);
        return 0;
}

int tg_tpm_response_tag_check(uint16_t command_tag, const uint8_t *response, size_t size) {
        uint16_t tag;

        assert(size >= TPM_HEADER_SIZE); /* after tg_tpm_response_framing_check() */
        tag = (uint16_t) (response[0] << 8 | response[1]);
        if (be32(response + 6) != TPM2_RC_SUCCESS || tag == command_tag)
                return 0;
        return log_error_rc(-TG_ERR_INTERPOSER,
                            "TPM response has tag 0x%04x to a command with tag 0x%04x: its session area was %s.", tag,
                            command_tag, tag == TPM2_ST_NO_SESSIONS ? "removed" : "added");
}

static bool rc_asks_resend(uint32_t rc) {
        /* What ESAPI resubmits the same command bytes for (up to 5 times, Esys_*_Finish()). */
        return rc == TPM2_RC_RETRY || rc == TPM2_RC_YIELDED || rc == TPM2_RC_TESTING;
}

static TSS2_RC wrap_transmit(TSS2_TCTI_CONTEXT *tcti, size_t size, const uint8_t *command) {
        tg_tcti *t = (tg_tcti *) tcti;
        uint32_t cc = size >= TPM_HEADER_SIZE ? be32(command + 6) : 0;

        /* ESAPI's resend of an Unseal answered "retry" (counted: wrap_receive() allows one). */
        if (cc == TPM2_CC_Unseal && t->unseal_retry)
                t->unseal_resends++;
        else
                t->unseal_resends = 0;
        t->unseal_retry = false;
        t->last_cc = cc;
        t->last_tag = size >= TPM_HEADER_SIZE ? (uint16_t) (command[0] << 8 | command[1]) : 0;
        return Tss2_Tcti_Transmit(t->inner, size, command);
}

/*
 * Threat: an interposer forwards the PIN-bearing Unseal, lets the TPM check it (a wrong PIN costs a
 * dictionary-attack try), and answers "retry" (an error response: no HMAC). ESAPI sends the same
 * bytes again, with the same nonce and HMAC, which the TPM checks again: up to five tries for one
 * PIN typed, reported as a TPM not ready. A genuine TPM does answer "retry" to the first
 * dictionary-attack-protected authorization after its Startup, once, before it has executed
 * anything (it first records in NV that it is no longer in an orderly state: swtpm does so for
 * every first PIN Unseal here; the Linux kernel resends such answers itself before they reach us).
 * So ESAPI may resend once; a "retry" after that is handed to ESAPI as TPM_RC_NV_UNAVAILABLE, which
 * it does not resend (the code is unauthenticated either way, so nothing is lost by the rewrite),
 * with the flag set that the caller reads (tg_tcti_unseal_resend_refused()): ESAPI stays usable for
 * the check that follows (was the Unseal executed?, tokens/seal.c).
 */
static void unseal_retry_budget(tg_tcti *t, uint8_t *response) {
        if (t->last_cc != TPM2_CC_Unseal || !rc_asks_resend(be32(response + 6)))
                return;
        if (t->unseal_resends < TG_UNSEAL_RESENDS) {
                t->unseal_retry = true;
                return;
        }
        t->unseal_resend_refused = true;
        response[6] = (uint8_t) (TPM2_RC_NV_UNAVAILABLE >> 24);
        response[7] = (uint8_t) (TPM2_RC_NV_UNAVAILABLE >> 16);
        response[8] = (uint8_t) (TPM2_RC_NV_UNAVAILABLE >> 8);
        response[9] = (uint8_t) TPM2_RC_NV_UNAVAILABLE;
}

static TSS2_RC wrap_receive(TSS2_TCTI_CONTEXT *tcti, size_t *size, uint8_t *response, int32_t timeout) {
        tg_tcti *t = (tg_tcti *) tcti;
        size_t capacity;
        TSS2_RC rc;

        if (!size)
                return TSS2_TCTI_RC_BAD_REFERENCE;
        capacity = *size;
        rc = Tss2_Tcti_Receive(t->inner, size, response, timeout);
        /* A call with response == NULL only asks for the size. */
        if (!response)
                return rc;
        if (rc != TSS2_RC_SUCCESS) {
                /* Whatever a failed receive left behind (up to the buffer's size) goes in the next wipe too. */
                t->last_response = response;
                t->last_response_size = capacity;
                return rc;
        }
        if (*size > capacity) {
                /* The transport claims more than it could have written: never trust that length. */
                t->last_response = response;
                t->last_response_size = capacity;
                explicit_bzero(response, capacity);
                return TSS2_TCTI_RC_MALFORMED_RESPONSE;
        }
        t->last_response = response;
        t->last_response_size = *size;
        if (tg_tpm_response_framing_check(t->last_cc, response, *size) < 0 ||
            tg_tpm_response_tag_check(t->last_tag, response, *size) < 0) {
                explicit_bzero(response, *size);
                return TSS2_TCTI_RC_MALFORMED_RESPONSE;
        }
        unseal_retry_budget(t, response);
        return TSS2_RC_SUCCESS;
}

static void wrap_finalize(TSS2_TCTI_CONTEXT *tcti) {
        tg_tcti *t = (tg_tcti *) tcti;

        /* The inner transport belongs to the caller (tss2-tctildr contexts have their own finalizer). */
        t->inner = NULL;
        t->last_response = NULL;
}

static TSS2_RC wrap_cancel(TSS2_TCTI_CONTEXT *tcti) {
        return Tss2_Tcti_Cancel(((tg_tcti *) tcti)->inner);
}

static TSS2_RC wrap_get_poll_handles(TSS2_TCTI_CONTEXT *tcti, TSS2_TCTI_POLL_HANDLE *handles, size_t *num_handles) {
        return Tss2_Tcti_GetPollHandles(((tg_tcti *) tcti)->inner, handles, num_handles);
}

static TSS2_RC wrap_set_locality(TSS2_TCTI_CONTEXT *tcti, uint8_t locality) {
        return Tss2_Tcti_SetLocality(((tg_tcti *) tcti)->inner, locality);
}

static TSS2_RC wrap_make_sticky(TSS2_TCTI_CONTEXT *tcti, TPM2_HANDLE *handle, uint8_t sticky) {
        return Tss2_Tcti_MakeSticky(((tg_tcti *) tcti)->inner, handle, sticky);
}

int tg_tcti_wrap(TSS2_TCTI_CONTEXT *inner, TSS2_TCTI_CONTEXT **ret) {
        tg_tcti *t;

        assert(inner);
        t = calloc(1, sizeof *t);
        if (!t)
                return -TG_ERR_NOMEM;
        t->common = (TSS2_TCTI_CONTEXT_COMMON_V2) {
                .v1 = {
                        .magic = TG_TCTI_MAGIC,
                        .version = 2,
                        .transmit = wrap_transmit,
                        .receive = wrap_receive,
                        .finalize = wrap_finalize,
                        .cancel = wrap_cancel,
                        .getPollHandles = wrap_get_poll_handles,
                        .setLocality = wrap_set_locality,
                },
                .makeSticky = wrap_make_sticky,
        };
        t->inner = inner;
        *ret = (TSS2_TCTI_CONTEXT *) t;
        return 0;
}

void tg_tcti_free(TSS2_TCTI_CONTEXT *tcti) {
        if (!tcti)
                return;
        Tss2_Tcti_Finalize(tcti);
        free(tcti);
}

bool tg_tcti_unseal_resend_refused(TSS2_TCTI_CONTEXT *tcti) {
        tg_tcti *t = (tg_tcti *) tcti;
        bool refused;

        if (!tcti || TSS2_TCTI_MAGIC(tcti) != TG_TCTI_MAGIC)
                return false;
        refused = t->unseal_resend_refused;
        t->unseal_resend_refused = false;
        return refused;
}

void tg_tcti_wipe_last_response(TSS2_TCTI_CONTEXT *tcti) {
        tg_tcti *t = (tg_tcti *) tcti;

        if (!tcti || TSS2_TCTI_MAGIC(tcti) != TG_TCTI_MAGIC || !t->last_response)
                return;
        /*
         * The length is the one the transport returned for this very buffer (at most the
         * capacity ESAPI offered), never a field of the response: a forged parameterSize
         * (docs/design.md §2.7) cannot make this write leave the buffer.
         */
        explicit_bzero(t->last_response, t->last_response_size);
}

#if TPMGUARD_FAULT_INJECTION
/* Test builds only (lib/fault.h): every TPM response is a fault point. */
static TSS2_TCTI_RECEIVE_FCN tcti_receive_original;

static TSS2_RC fault_tcti_receive(TSS2_TCTI_CONTEXT *tcti, size_t *size, uint8_t *response, int32_t timeout) {
        TSS2_RC rc = tcti_receive_original(tcti, size, response, timeout);

        /* A call with response == NULL only asks for the size; the command completes on the second call. */
        if (rc == TSS2_RC_SUCCESS && response)
                tg_fault_point("tpm-command");
        return rc;
}

void tg_fault_tcti_hook(TSS2_TCTI_CONTEXT *tcti) {
        TSS2_TCTI_CONTEXT_COMMON_V1 *common = (TSS2_TCTI_CONTEXT_COMMON_V1 *) tcti;

        if (!tcti || common->receive == fault_tcti_receive)
                return;
        /* Every context from Tss2_TctiLdr_Initialize has the same loader receive function. */
        tcti_receive_original = common->receive;
        common->receive = fault_tcti_receive;
}
#endif
