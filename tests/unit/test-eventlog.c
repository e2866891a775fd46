/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The TCG event log parser (lib/eventlog.c) and the EFI signature lists
 * (lib/efi-siglist.c) on hand-built logs: a well-formed crypto-agile and a
 * legacy log replay to values computed here independently, and every bounds
 * check has a case that only it refuses. Then PCR 7's prediction
 * (lifecycle/pcr-predict.c) refusing what it cannot predict.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "efi-siglist.h"
#include "error.h"
#include "eventlog.h"
#include "log.h"
#include "pcr-predict.h"

/* ---- a log builder ---- */

typedef struct buf {
        uint8_t *p;
        size_t n;
        size_t allocated;
} buf;

/* Grows geometrically: test_event_count builds a 32769-event log, and a
 * realloc per byte was quadratic under ASan (whose realloc always copies). */
static void put(buf *b, const void *data, size_t n) {
        if (b->n + n + 1 > b->allocated) {
                size_t want = b->allocated ? b->allocated : 256;
                while (want < b->n + n + 1)
                        want *= 2;
                b->p = realloc(b->p, want);
                assert_non_null(b->p);
                b->allocated = want;
        }
        if (n)
                memcpy(b->p + b->n, data, n);
        b->n += n;
}

static void put_u8(buf *b, uint8_t v) {
        put(b, &v, 1);
}

static void put_u16(buf *b, uint16_t v) {
        uint8_t x[2] = { (uint8_t) v, (uint8_t) (v >> 8) };
        put(b, x, 2);
}

static void put_u32(buf *b, uint32_t v) {
        uint8_t x[4] = { (uint8_t) v, (uint8_t) (v >> 8), (uint8_t) (v >> 16), (uint8_t) (v >> 24) };
        put(b, x, 4);
}

static void put_u64(buf *b, uint64_t v) {
        put_u32(b, (uint32_t) v);
        put_u32(b, (uint32_t) (v >> 32));
}

static void sha(const EVP_MD *md, const void *data, size_t n, uint8_t *out) {
        unsigned len;
        assert_int_equal(EVP_Digest(data, n, out, &len, md, NULL), 1);
}

/* The SpecID header: SHA-1 and SHA-256, or the algorithm table given. */
static void spec_id(buf *b, uint32_t n_algs, const uint16_t *algs, const uint16_t *sizes) {
        buf ev = {};
        static const uint8_t zero[20] = {};

        put(&ev, "Spec ID Event03", 16);
        put_u32(&ev, 0);           /* platformClass */
        put_u8(&ev, 0);            /* minor */
        put_u8(&ev, 2);            /* major */
        put_u8(&ev, 0);            /* errata */
        put_u8(&ev, 2);            /* uintnSize */
        put_u32(&ev, n_algs);
        for (uint32_t i = 0; i < n_algs; i++) {
                put_u16(&ev, algs[i]);
                put_u16(&ev, sizes[i]);
        }
        put_u8(&ev, 0);            /* vendorInfoSize */
        put_u32(b, 0);
        put_u32(b, TG_EV_NO_ACTION);
        put(b, zero, 20);
        put_u32(b, (uint32_t) ev.n);
        put(b, ev.p, ev.n);
        free(ev.p);
}

static const uint16_t two_algs[] = { 0x0004, 0x000b };
static const uint16_t two_sizes[] = { 20, 32 };

static void header(buf *b) {
        spec_id(b, 2, two_algs, two_sizes);
}

/* A TCG_PCR_EVENT2 with SHA-1 and SHA-256 digests of data (or of hashed, when given). */
static void event2(buf *b, uint32_t pcr, uint32_t type, const void *data, size_t n) {
        uint8_t d1[20], d256[32];

        sha(EVP_sha1(), data, n, d1);
        sha(EVP_sha256(), data, n, d256);
        put_u32(b, pcr);
        put_u32(b, type);
        put_u32(b, 2);
        put_u16(b, 0x0004);
        put(b, d1, 20);
        put_u16(b, 0x000b);
        put(b, d256, 32);
        put_u32(b, (uint32_t) n);
        put(b, data, n);
}

/* The last error message, so that each case proves which check refused it. */
static char last_error[512];

static void log_capture(int level, const char *message, void *userdata) {
        (void) userdata;
        if (level <= LOG_ERR)
                snprintf(last_error, sizeof last_error, "%s", message);
}

#define assert_refused(call, why)                                                       \
        do {                                                                            \
                last_error[0] = '\0';                                                  \
                assert_int_equal((call), -TG_ERR_INVALID);                              \
                if (!strstr(last_error, (why)))                                         \
                        fail_msg("refused for \"%s\", not \"%s\"", last_error, (why)); \
        } while (0)

static int parse(const buf *b, tg_eventlog **ret) {
        return tg_eventlog_parse(b->p, b->n, ret);
}

static int parse_only(const buf *b) {
        _cleanup_eventlog_ tg_eventlog *log = NULL;
        return parse(b, &log);
}

/* PCR := H(PCR || H(data)), by hand. */
static void extend(const EVP_MD *md, uint8_t *pcr, size_t n, const void *data, size_t size) {
        uint8_t d[64], both[128];
        sha(md, data, size, d);
        memcpy(both, pcr, n);
        memcpy(both + n, d, n);
        sha(md, both, 2 * n, pcr);
}

static const uint32_t separator = 0;

static void test_agile_replays(void **state) {
        _cleanup_eventlog_ tg_eventlog *log = NULL;
        uint8_t values[TG_EVENTLOG_PCRS][TG_EVENTLOG_MAX_DIGEST], want7[32] = {}, want0[32] = {};
        uint8_t locality[17] = "StartupLocality";
        uint32_t mask;
        buf b = {};

        (void) state;
        locality[16] = 3;
        header(&b);
        event2(&b, 0, TG_EV_NO_ACTION, locality, sizeof locality);
        event2(&b, 0, TG_EV_S_CRTM_VERSION, "1.0", 4);
        event2(&b, 7, TG_EV_EFI_ACTION, "hello", 5);
        event2(&b, 7, TG_EV_SEPARATOR, &separator, 4);
        assert_int_equal(parse(&b, &log), 0);
        assert_true(log->crypto_agile);
        assert_int_equal(log->n_banks, 2);
        assert_int_equal(log->n_events, 4);
        assert_true(log->has_startup_locality);
        assert_int_equal(tg_eventlog_replay(log, 0x000b, NULL, values, &mask), 0);
        assert_int_equal(mask, (1u << 0) | (1u << 7));
        /* StartupLocality 3: PCR 0 starts at 00..03, and the EV_NO_ACTION is not extended. */
        want0[31] = 3;
        extend(EVP_sha256(), want0, 32, "1.0", 4);
        extend(EVP_sha256(), want7, 32, "hello", 5);
        extend(EVP_sha256(), want7, 32, &separator, 4);
        assert_memory_equal(values[0], want0, 32);
        assert_memory_equal(values[7], want7, 32);
        assert_int_equal(tg_event_data_matches(log, &log->events[2]), 1);
        free(b.p);
}

/* An unknown event type is kept raw and replayed, not refused; data edited behind its digest is told. */
static void test_unknown_type_and_edited_data(void **state) {
        _cleanup_eventlog_ tg_eventlog *log = NULL;
        _cleanup_free_ char *text = NULL;
        uint8_t values[TG_EVENTLOG_PCRS][TG_EVENTLOG_MAX_DIGEST], want[32] = {};
        uint32_t mask;
        buf b = {};

        (void) state;
        header(&b);
        event2(&b, 2, 0x1234abcd, "vendor", 6);
        event2(&b, 7, TG_EV_EFI_ACTION, "hello", 5);
        b.p[b.n - 1] = 'O'; /* "hellO": the digest is still of "hello" */
        assert_int_equal(parse(&b, &log), 0);
        assert_null(tg_event_type_to_string(log->events[0].type));
        assert_int_equal(tg_event_describe(&log->events[0], &text), 0);
        assert_string_equal(text, "6 bytes");
        assert_int_equal(tg_eventlog_replay(log, 0x000b, NULL, values, &mask), 0);
        extend(EVP_sha256(), want, 32, "vendor", 6);
        assert_memory_equal(values[2], want, 32);
        assert_int_equal(tg_event_data_matches(log, &log->events[1]), 0);
        assert_int_equal(tg_event_data_matches(log, &log->events[0]), -1);
        {
                /* A UTF-16 string (EV_S_CRTM_VERSION) reads as text. */
                static const uint8_t version[] = { '1', 0, '.', 0, '0', 0, 0, 0 };
                tg_event e = { .type = TG_EV_S_CRTM_VERSION, .data = version, .data_size = sizeof version };
                free(text);
                text = NULL;
                assert_int_equal(tg_event_describe(&e, &text), 0);
                assert_string_equal(text, "\"1.0\"");
        }
        free(b.p);
}

/* A log without the SpecID event is a SHA-1-only TCG_PCR_EVENT log. */
static void test_legacy(void **state) {
        _cleanup_eventlog_ tg_eventlog *log = NULL;
        uint8_t values[TG_EVENTLOG_PCRS][TG_EVENTLOG_MAX_DIGEST], want[20] = {}, d[20];
        uint32_t mask;
        buf b = {};

        (void) state;
        sha(EVP_sha1(), &separator, 4, d);
        put_u32(&b, 4);
        put_u32(&b, TG_EV_SEPARATOR);
        put(&b, d, 20);
        put_u32(&b, 4);
        put(&b, &separator, 4);
        assert_int_equal(parse(&b, &log), 0);
        assert_false(log->crypto_agile);
        assert_int_equal(tg_eventlog_replay(log, 0x0004, NULL, values, &mask), 0);
        extend(EVP_sha1(), want, 20, &separator, 4);
        assert_memory_equal(values[4], want, 20);
        assert_int_equal(tg_eventlog_replay(log, 0x000b, NULL, values, &mask), -TG_ERR_INVALID);
        free(b.p);
}

/* An event's size past the end, or past the bound. */
static void test_event_size(void **state) {
        buf b = {};

        (void) state;
        header(&b);
        event2(&b, 7, TG_EV_EFI_ACTION, "hello", 5);
        b.p[b.n - 5 - 4] = 6; /* claims 6 bytes, 5 are left */
        assert_refused(parse_only(&b), "claims 6 bytes, 5 are left");
        free(b.p);
        b = (buf) {};
        header(&b);
        {
                uint8_t *big = calloc(1, TG_EVENTLOG_MAX_EVENT_SIZE + 1);
                assert_non_null(big);
                event2(&b, 7, TG_EV_EFI_ACTION, big, TG_EVENTLOG_MAX_EVENT_SIZE + 1);
                free(big);
        }
        assert_refused(parse_only(&b), "an event of 1048577 bytes");
        free(b.p);
}

/* Digest lists: a count that is not the SpecID table's, an unknown algorithm, one twice, one cut short. */
static void test_digest_list(void **state) {
        static const uint8_t d1[20] = { 1 }, d256[32] = { 2 };
        struct {
                uint32_t count;
                uint16_t a, b;
                const char *why;
        } cases[] = { { 1, 0x0004, 0x000b, "with 1 digests" },
                      { 2, 0x0004, 0x000c, "which the SpecID event does not list" },
                      { 2, 0x0004, 0x0004, "two digests of algorithm 0x0004" } };

        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                buf b = {};
                header(&b);
                put_u32(&b, 7);
                put_u32(&b, TG_EV_EFI_ACTION);
                put_u32(&b, cases[i].count);
                put_u16(&b, cases[i].a);
                put(&b, d1, 20);
                if (cases[i].count == 2) {
                        put_u16(&b, cases[i].b);
                        put(&b, d256, cases[i].b == 0x0004 ? 20 : 32);
                }
                put_u32(&b, 0);
                assert_refused(parse_only(&b), cases[i].why);
                free(b.p);
        }
        /* Cut inside the SHA-256 digest. */
        {
                buf b = {};
                header(&b);
                put_u32(&b, 7);
                put_u32(&b, TG_EV_EFI_ACTION);
                put_u32(&b, 2);
                put_u16(&b, 0x0004);
                put(&b, d1, 20);
                put_u16(&b, 0x000b);
                put(&b, d256, 10);
                assert_refused(parse_only(&b), "a truncated digest of algorithm 0x000b");
                free(b.p);
        }
}

/* The SpecID table: a known algorithm with another size, none, too many, one twice. */
static void test_spec_id_table(void **state) {
        static const uint16_t bad_sizes[] = { 20, 20 };
        static const uint16_t six_algs[] = { 0x0004, 0x000b, 0x000c, 0x000d, 0x0012, 0x0013 };
        static const uint16_t six_sizes[] = { 20, 32, 48, 64, 32, 32 };
        static const uint16_t twice[] = { 0x000b, 0x000b };
        static const uint16_t twice_sizes[] = { 32, 32 };
        static const uint16_t unknown[] = { 0x000b, 0x0099 };
        static const uint16_t unknown_big[] = { 32, 65 };
        buf b = {};

        (void) state;
        spec_id(&b, 2, two_algs, bad_sizes);
        assert_refused(parse_only(&b), "algorithm 0x000b a digest size of 20");
        free(b.p);
        b = (buf) {};
        spec_id(&b, 0, two_algs, two_sizes);
        assert_refused(parse_only(&b), "lists 0 digest algorithms");
        free(b.p);
        b = (buf) {};
        spec_id(&b, 6, six_algs, six_sizes);
        assert_refused(parse_only(&b), "lists 6 digest algorithms");
        free(b.p);
        b = (buf) {};
        spec_id(&b, 2, twice, twice_sizes);
        assert_refused(parse_only(&b), "lists algorithm 0x000b twice");
        free(b.p);
        b = (buf) {};
        spec_id(&b, 2, unknown, unknown_big);
        assert_refused(parse_only(&b), "algorithm 0x0099 a digest size of 65");
        free(b.p);
        /* The table claims more algorithms than its event holds. */
        b = (buf) {};
        header(&b);
        b.p[32 + 24] = 3;
        assert_refused(parse_only(&b), "algorithm table is truncated");
        free(b.p);
}

/* Only an erased tail (all 0x00 or all 0xff) may follow the last event. */
static void test_trailing(void **state) {
        static const uint8_t zeros[64] = {}, garbage[5] = { 0, 0, 1, 0, 0 };
        uint8_t ff[64];
        buf b = {};

        (void) state;
        memset(ff, 0xff, sizeof ff);
        header(&b);
        event2(&b, 7, TG_EV_SEPARATOR, &separator, 4);
        put(&b, zeros, sizeof zeros);
        assert_int_equal(parse_only(&b), 0);
        b.n -= sizeof zeros;
        put(&b, ff, sizeof ff);
        assert_int_equal(parse_only(&b), 0);
        b.n -= sizeof ff;
        put(&b, garbage, sizeof garbage);
        assert_refused(parse_only(&b), "a truncated event header");
        /* Uniform, but not erased. */
        b.n -= sizeof garbage;
        memset(ff, 0x01, sizeof ff);
        put(&b, ff, 8);
        assert_refused(parse_only(&b), "a truncated event header");
        free(b.p);
}

static void test_pcr_index(void **state) {
        buf b = {};

        (void) state;
        header(&b);
        event2(&b, 24, TG_EV_SEPARATOR, &separator, 4);
        assert_refused(parse_only(&b), "an event for PCR 24");
        free(b.p);
}

static void test_event_count(void **state) {
        buf b = {};

        (void) state;
        header(&b);
        for (unsigned i = 0; i <= TG_EVENTLOG_MAX_EVENTS; i++)
                event2(&b, 8, TG_EV_IPL, "", 0);
        assert_refused(parse_only(&b), "more than 32768 events");
        free(b.p);
}

static void test_startup_locality(void **state) {
        uint8_t locality[17] = "StartupLocality";
        buf b = {};

        (void) state;
        locality[16] = 2; /* not a locality the PFP allows */
        header(&b);
        event2(&b, 0, TG_EV_NO_ACTION, locality, sizeof locality);
        assert_refused(parse_only(&b), "StartupLocality 2");
        free(b.p);
}

/* UEFI_VARIABLE_DATA: a name longer than the data, data that is not the rest. */
static void test_variable(void **state) {
        static const tg_efi_guid g = { { 1 } };
        _cleanup_free_ uint8_t *v = NULL;
        tg_efi_variable var;
        size_t n;

        (void) state;
        assert_int_equal(tg_efi_variable_build(&g, "db", (const uint8_t *) "abc", 3, &v, &n), 0);
        assert_int_equal(n, 32 + 4 + 3);
        assert_int_equal(tg_efi_variable_parse(v, n, &var), 0);
        assert_string_equal(var.name, "db");
        assert_int_equal(var.data_size, 3);
        v[16] = 0xff; /* UnicodeNameLength past the end */
        assert_refused(tg_efi_variable_parse(v, n, &var), "UnicodeNameLength 255");
        v[16] = 2;
        v[31] = 0x80; /* VariableDataLength: 2^63 + 3 */
        assert_refused(tg_efi_variable_parse(v, n, &var), "VariableDataLength 9223372036854775811");
        v[31] = 0;
        v[24] = 2; /* one byte left over */
        assert_refused(tg_efi_variable_parse(v, n, &var), "VariableDataLength 2 is not the 3 bytes left");
        {
                /* A name longer than the bound that still fits in the event. */
                _cleanup_free_ uint8_t *big = NULL, *w = NULL;
                size_t m;
                big = calloc(1, 600);
                assert_non_null(big);
                assert_int_equal(tg_efi_variable_build(&g, "db", big, 600, &w, &m), 0);
                w[16] = 129;
                assert_refused(tg_efi_variable_parse(w, m, &var), "UnicodeNameLength 129");
        }
}

/* UEFI_IMAGE_LOAD_EVENT: the device path is decoded only when its length is what is left. */
static void test_image_load_describe(void **state) {
        static const uint8_t path[] = { 4, 4, 12, 0, 'a', 0, '.', 0, 'e', 0, 0, 0, 0x7f, 0xff, 4, 0 };
        _cleanup_free_ char *text = NULL;
        tg_event e = { .pcr = 4, .type = TG_EV_EFI_BOOT_SERVICES_APPLICATION };
        buf b = {};

        (void) state;
        put_u64(&b, 0x1000);
        put_u64(&b, 4096);
        put_u64(&b, 0);
        put_u64(&b, sizeof path);
        put(&b, path, sizeof path);
        e.data = b.p;
        e.data_size = (uint32_t) b.n;
        assert_int_equal(tg_event_describe(&e, &text), 0);
        assert_string_equal(text, "image of 4096 bytes path a.e");
        free(text);
        text = NULL;
        b.p[24] = sizeof path + 1; /* LengthOfDevicePath past the end */
        assert_int_equal(tg_event_describe(&e, &text), 0);
        assert_string_equal(text, "48 bytes");
        free(text);
        text = NULL;
        b.p[24] = sizeof path - 4; /* short of the end: bytes nobody would show */
        assert_int_equal(tg_event_describe(&e, &text), 0);
        assert_string_equal(text, "48 bytes");
        free(b.p);
}

/* ---- EFI_SIGNATURE_LISTs ---- */

static void esl(buf *b, const tg_efi_guid *type, uint32_t sig_size, unsigned count, uint8_t fill) {
        put(b, type->b, 16);
        put_u32(b, 28 + sig_size * count);
        put_u32(b, 0);
        put_u32(b, sig_size);
        for (unsigned i = 0; i < count; i++)
                for (uint32_t j = 0; j < sig_size; j++)
                        put_u8(b, (uint8_t) (fill + i + (j >= 16 ? 1 : 0)));
}

static void test_esl_bounds(void **state) {
        buf b = {};
        size_t n;

        (void) state;
        esl(&b, &tg_efi_cert_sha256_guid, 48, 2, 0x10);
        assert_int_equal(tg_esl_parse(b.p, b.n, NULL, &n), 0);
        assert_int_equal(n, 2);
        b.p[16] = 28 + 96 + 48; /* SignatureListSize past the end (a whole signature more) */
        assert_refused(tg_esl_parse(b.p, b.n, NULL, &n), "SignatureListSize 172, 124 bytes left");
        b.p[16] = 28 + 96;
        b.p[20] = 97; /* SignatureHeaderSize past the list */
        assert_refused(tg_esl_parse(b.p, b.n, NULL, &n), "SignatureHeaderSize 97");
        b.p[20] = 0;
        b.p[24] = 47; /* SignatureSize that does not divide the list */
        assert_refused(tg_esl_parse(b.p, b.n, NULL, &n), "SignatureSize 47");
        b.p[24] = 16; /* an EFI_SIGNATURE_DATA without data */
        assert_refused(tg_esl_parse(b.p, b.n, NULL, &n), "SignatureSize 16");
        b.p[24] = 48;
        put_u8(&b, 0); /* a truncated second header */
        assert_refused(tg_esl_parse(b.p, b.n, NULL, &n), "offset 124: truncated header");
        free(b.p);
}

/* An append drops what the variable holds already, and lists left empty. */
static void test_esl_append(void **state) {
        _cleanup_free_ uint8_t *out = NULL;
        buf old = {}, add = {}, want = {};
        size_t n;

        (void) state;
        esl(&old, &tg_efi_cert_sha256_guid, 48, 2, 0x10);          /* entries 0x10, 0x11 */
        esl(&add, &tg_efi_cert_sha256_guid, 48, 3, 0x11);          /* 0x11 (held), 0x12, 0x13 */
        esl(&add, &tg_efi_cert_sha256_guid, 48, 1, 0x10);          /* 0x10 (held): list dropped */
        assert_int_equal(tg_esl_append(old.p, old.n, add.p, add.n, &out, &n), 0);
        put(&want, old.p, old.n);
        esl(&want, &tg_efi_cert_sha256_guid, 48, 2, 0x12);
        assert_int_equal(n, want.n);
        assert_memory_equal(out, want.p, n);
        free(old.p);
        free(add.p);
        free(want.p);
}

/* An authenticated variable's header is skipped, its length bounded. */
static void test_auth_file(void **state) {
        static const uint8_t pkcs7[16] = { 0x9d, 0xd2, 0xaf, 0x4a, 0xdf, 0x68, 0xee, 0x49,
                                           0x8a, 0xa9, 0x34, 0x7d, 0x37, 0x56, 0x65, 0xa7 };
        static const uint8_t time[16] = {};
        const uint8_t *lists;
        bool authenticated;
        size_t n;
        buf b = {};

        (void) state;
        put(&b, time, 16);
        put_u32(&b, 24 + 3);
        put_u16(&b, 0x0200);
        put_u16(&b, 0x0ef1);
        put(&b, pkcs7, 16);
        put(&b, "sig", 3);
        esl(&b, &tg_efi_cert_sha256_guid, 48, 1, 0x20);
        assert_int_equal(tg_esl_from_update_file(b.p, b.n, &lists, &n, &authenticated), 0);
        assert_true(authenticated);
        assert_int_equal(n, 28 + 48);
        b.p[16] = 0xff; /* dwLength past the end */
        b.p[17] = 0xff;
        assert_refused(tg_esl_from_update_file(b.p, b.n, &lists, &n, &authenticated), "claims 65535 bytes");
        free(b.p);
}

/* ---- the prediction's refusals ---- */

/* A log with PCR 7's dbx (one SHA-256 entry of 0x50 bytes) and db authorities, and the replay of it a
 * verified read would give. */
static void predict_log(buf *b, tg_eventlog **ret_log, tg_pcr_replay *ret_replay, unsigned db_authorities) {
        static const uint8_t sig[48] = { 0x11 };
        _cleanup_free_ uint8_t *v = NULL;
        tg_pcr_replay rp = { .policy_bank = 0x000b, .n_banks = 1, .n_compared = 1, .verified = true };
        buf dbx = {};
        size_t n;

        header(b);
        esl(&dbx, &tg_efi_cert_sha256_guid, 48, 1, 0x50);
        assert_int_equal(tg_efi_variable_build(&tg_efi_image_security_database_guid, "dbx", dbx.p, dbx.n, &v, &n), 0);
        event2(b, 7, TG_EV_EFI_VARIABLE_DRIVER_CONFIG, v, n);
        event2(b, 7, TG_EV_SEPARATOR, &separator, 4);
        free(v);
        free(dbx.p);
        v = NULL;
        assert_int_equal(tg_efi_variable_build(&tg_efi_image_security_database_guid, "db", sig, sizeof sig, &v, &n), 0);
        for (unsigned i = 0; i < db_authorities; i++)
                event2(b, 7, TG_EV_EFI_VARIABLE_AUTHORITY, v, n);
        assert_int_equal(parse(b, ret_log), 0);
        rp.banks[0].alg = 0x000b;
        rp.banks[0].size = 32;
        rp.banks[0].replayed_ok = rp.banks[0].tpm_read = true;
        assert_int_equal(tg_eventlog_replay(*ret_log, 0x000b, NULL, rp.banks[0].replayed, &rp.banks[0].log_mask), 0);
        memcpy(rp.banks[0].tpm, rp.banks[0].replayed, sizeof rp.banks[0].tpm);
        rp.banks[0].match_mask = UINT32_C(0xffffff);
        *ret_replay = rp;
}

static void test_predict_refusals(void **state) {
        _cleanup_eventlog_ tg_eventlog *log = NULL;
        tg_pcr7_predict_options o = {};
        tg_pcr7_prediction p;
        tg_pcr_replay rp;
        buf b = {}, add = {};

        (void) state;
        predict_log(&b, &log, &rp, 2);
        esl(&add, &tg_efi_cert_sha256_guid, 48, 2, 0x30);
        o.updates[0] = (tg_pcr7_update) { .variable = "dbx", .lists = add.p, .size = add.n, .append = true,
                                          .source = "test" };
        o.n_updates = 1;
        /* Appending to dbx is predicted, and changes PCR 7. */
        assert_int_equal(tg_pcr7_predict(log, &rp, &o, &p, NULL), 0);
        assert_memory_not_equal(p.predicted, p.current, 32);
        /* A log that did not replay predicts nothing. */
        rp.verified = false;
        assert_int_equal(tg_pcr7_predict(log, &rp, &o, &p, NULL), -TG_ERR_INTERPOSER);
        rp.verified = true;
        /* A variable the log never measured. */
        o.updates[0].variable = "KEK";
        assert_refused(tg_pcr7_predict(log, &rp, &o, &p, NULL), "no EV_EFI_VARIABLE_DRIVER_CONFIG event for KEK");
        o.n_updates = 0;
        /* A signer that is in no db (this log measured none). */
        o.authority = (const uint8_t *) "der";
        o.authority_size = 3;
        assert_refused(tg_pcr7_predict(log, &rp, &o, &p, NULL), "not in db");
        free(b.p);
        free(add.p);
}

/* The dbx event's data edited behind its digest: shown, never predicted from. */
static void test_predict_edited_event(void **state) {
        _cleanup_eventlog_ tg_eventlog *log = NULL;
        tg_pcr7_predict_options o = {};
        tg_pcr7_prediction p;
        tg_pcr_replay rp;
        buf b = {}, add = {};
        uint8_t *hit;

        (void) state;
        predict_log(&b, &log, &rp, 1);
        tg_eventlog_free(log);
        log = NULL;
        {
                /* The dbx entry: its owner GUID (16 bytes of 0x50), then its data (0x51). */
                uint8_t owner[17];
                memset(owner, 0x50, 16);
                owner[16] = 0x51;
                hit = memmem(b.p, b.n, owner, sizeof owner);
                assert_non_null(hit);
                hit[16] = 0x52;
        }
        assert_int_equal(parse(&b, &log), 0);
        esl(&add, &tg_efi_cert_sha256_guid, 48, 1, 0x40);
        o.updates[0] = (tg_pcr7_update) { .variable = "dbx", .lists = add.p, .size = add.n, .append = true,
                                          .source = "test" };
        o.n_updates = 1;
        assert_refused(tg_pcr7_predict(log, &rp, &o, &p, NULL), "does not hash to its digest");
        free(b.p);
        free(add.p);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_agile_replays),
                cmocka_unit_test(test_legacy),
                cmocka_unit_test(test_unknown_type_and_edited_data),
                cmocka_unit_test(test_event_size),
                cmocka_unit_test(test_digest_list),
                cmocka_unit_test(test_spec_id_table),
                cmocka_unit_test(test_trailing),
                cmocka_unit_test(test_pcr_index),
                cmocka_unit_test(test_event_count),
                cmocka_unit_test(test_startup_locality),
                cmocka_unit_test(test_variable),
                cmocka_unit_test(test_image_load_describe),
                cmocka_unit_test(test_esl_bounds),
                cmocka_unit_test(test_esl_append),
                cmocka_unit_test(test_auth_file),
                cmocka_unit_test(test_predict_refusals),
                cmocka_unit_test(test_predict_edited_event),
        };

        tg_log_set_sink(log_capture, NULL);
        tg_log_set_journal(false);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
