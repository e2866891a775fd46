/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The TCG event log parser and its replay (eventlog.h). Hostile input: see
 * the threat model in the header. Every read goes through the cursor below,
 * which checks the length against what is left first; sizes from the input
 * are 32- or 64-bit and never added to an offset before that check.
 */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "eventlog.h"
#include "log.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free);

#define ALG_SHA1   UINT16_C(0x0004)
#define ALG_SHA256 UINT16_C(0x000b)
#define ALG_SHA384 UINT16_C(0x000c)
#define ALG_SHA512 UINT16_C(0x000d)
#define ALG_SM3    UINT16_C(0x0012)

const tg_efi_guid tg_efi_global_variable_guid = { { 0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11,
                                                    0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c } };
const tg_efi_guid tg_efi_image_security_database_guid = { { 0xcb, 0xb2, 0x19, 0xd7, 0x3a, 0x3d, 0x96, 0x45,
                                                            0xa3, 0xbc, 0xda, 0xd0, 0x0e, 0x67, 0x65, 0x6f } };

bool tg_efi_guid_equal(const tg_efi_guid *a, const tg_efi_guid *b) {
        return memcmp(a->b, b->b, sizeof a->b) == 0;
}

const char *tg_efi_guid_to_string(const tg_efi_guid *g, char buf[static TG_EFI_GUID_STRING_MAX]) {
        const uint8_t *b = g->b;

        snprintf(buf, TG_EFI_GUID_STRING_MAX, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
        return buf;
}

/* ---- a bounds-checked little-endian cursor ---- */

typedef struct cursor {
        const uint8_t *p;
        size_t size;
        size_t off;
} cursor;

static size_t left(const cursor *c) {
        return c->size - c->off;
}

static bool take(cursor *c, size_t n, const uint8_t **ret) {
        if (n > left(c))
                return false;
        *ret = c->p + c->off;
        c->off += n;
        return true;
}

static bool u8(cursor *c, uint8_t *ret) {
        const uint8_t *p;
        if (!take(c, 1, &p))
                return false;
        *ret = p[0];
        return true;
}

static bool u16(cursor *c, uint16_t *ret) {
        const uint8_t *p;
        if (!take(c, 2, &p))
                return false;
        *ret = (uint16_t) (p[0] | p[1] << 8);
        return true;
}

static bool u32(cursor *c, uint32_t *ret) {
        const uint8_t *p;
        if (!take(c, 4, &p))
                return false;
        *ret = (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
        return true;
}

static bool u64(cursor *c, uint64_t *ret) {
        uint32_t lo, hi;
        if (!u32(c, &lo) || !u32(c, &hi))
                return false;
        *ret = (uint64_t) hi << 32 | lo;
        return true;
}

/* ---- algorithms ---- */

static uint16_t known_digest_size(uint16_t alg) {
        switch (alg) {
        case ALG_SHA1: return 20;
        case ALG_SHA256:
        case ALG_SM3: return 32;
        case ALG_SHA384: return 48;
        case ALG_SHA512: return 64;
        default: return 0;
        }
}

static const EVP_MD *alg_md(uint16_t alg) {
        switch (alg) {
        case ALG_SHA1: return EVP_sha1();
        case ALG_SHA256: return EVP_sha256();
        case ALG_SHA384: return EVP_sha384();
        case ALG_SHA512: return EVP_sha512();
        default: return NULL; /* SM3: OpenSSL may lack it; such a bank is shown, not replayed */
        }
}

int tg_eventlog_hash(uint16_t alg, const uint8_t *data, size_t size, uint8_t *ret, unsigned *ret_size) {
        const EVP_MD *md = alg_md(alg);
        unsigned n = 0;

        if (!md)
                return -TG_ERR_INVALID;
        if (EVP_Digest(data, size, ret, &n, md, NULL) != 1)
                return -TG_ERR_NOMEM;
        *ret_size = n;
        return 0;
}

/* ---- the parser ---- */

#define fail(...) log_error_rc(-TG_ERR_INVALID, "Event log at offset %zu: " __VA_ARGS__)

static const char spec_id_signature[16] = "Spec ID Event03";

/* The SpecID event's data (PFP §10.4.5.1, TCG_EfiSpecIDEvent): the table of digest algorithms. */
static int spec_id_parse(tg_eventlog *log, const uint8_t *data, uint32_t size, size_t at) {
        cursor c = { .p = data, .size = size };
        const uint8_t *sig, *vendor;
        uint32_t platform_class, n;
        uint8_t minor, major, errata, uintn, vendor_size;

        if (!take(&c, 16, &sig) || !u32(&c, &platform_class) || !u8(&c, &minor) || !u8(&c, &major) ||
            !u8(&c, &errata) || !u8(&c, &uintn) || !u32(&c, &n))
                return fail("the SpecID event is truncated.", at);
        if (major != 2)
                return fail("the SpecID event names spec version %u.%u; only 2.x is crypto-agile.", at, major, minor);
        /* UINTN is 32-bit (1) or 64-bit (2). */
        if (uintn != 1 && uintn != 2)
                return fail("the SpecID event's uintnSize %u is neither 1 nor 2.", at, uintn);
        if (n == 0 || n > TG_EVENTLOG_MAX_BANKS)
                return fail("the SpecID event lists %u digest algorithms (1..%u).", at, n, TG_EVENTLOG_MAX_BANKS);
        for (uint32_t i = 0; i < n; i++) {
                uint16_t alg, dsize, known;
                if (!u16(&c, &alg) || !u16(&c, &dsize))
                        return fail("the SpecID event's algorithm table is truncated.", at);
                for (uint32_t j = 0; j < i; j++)
                        if (log->bank_alg[j] == alg)
                                return fail("the SpecID event lists algorithm 0x%04x twice.", at, alg);
                known = known_digest_size(alg);
                /* A known algorithm has exactly its size (a forged size would shift every later
                 * field); an unknown one is kept with a bounded size and never replayed. */
                if (known ? dsize != known : dsize == 0 || dsize > TG_EVENTLOG_MAX_DIGEST)
                        return fail("the SpecID event gives algorithm 0x%04x a digest size of %u.", at, alg, dsize);
                log->bank_alg[i] = alg;
                log->bank_size[i] = dsize;
        }
        log->n_banks = n;
        if (!u8(&c, &vendor_size) || !take(&c, vendor_size, &vendor))
                return fail("the SpecID event's vendor information is truncated.", at);
        if (left(&c) != 0)
                return fail("the SpecID event has %zu bytes after its vendor information.", at, left(&c));
        return 0;
}

static int events_push(tg_eventlog *log, size_t *allocated, const tg_event *e) {
        if (log->n_events >= TG_EVENTLOG_MAX_EVENTS)
                return log_error_rc(-TG_ERR_INVALID, "Event log: more than %u events.", TG_EVENTLOG_MAX_EVENTS);
        if (log->n_events == *allocated) {
                size_t n = *allocated ? *allocated * 2 : 64;
                tg_event *p = reallocarray(log->events, n, sizeof *p);
                if (!p)
                        return -TG_ERR_NOMEM;
                log->events = p;
                *allocated = n;
        }
        log->events[log->n_events++] = *e;
        return 0;
}

static const char startup_locality_signature[16] = "StartupLocality";

/* A StartupLocality EV_NO_ACTION event (PFP §10.4.5.3): PCR 0 starts at the locality, not at 0. */
static int no_action_check(tg_eventlog *log, const tg_event *e, size_t at) {
        if (e->data_size < 16 || memcmp(e->data, startup_locality_signature, 16) != 0)
                return 0;
        if (e->pcr != 0 || e->data_size != 17)
                return log_error_rc(-TG_ERR_INVALID, "Event log at offset %zu: a malformed StartupLocality event.", at);
        if (log->has_startup_locality)
                return log_error_rc(-TG_ERR_INVALID, "Event log at offset %zu: a second StartupLocality event.", at);
        if (e->data[16] != 0 && e->data[16] != 3 && e->data[16] != 4)
                return log_error_rc(-TG_ERR_INVALID, "Event log at offset %zu: StartupLocality %u (0, 3 or 4).", at,
                                    e->data[16]);
        log->has_startup_locality = true;
        log->startup_locality = e->data[16];
        return 0;
}

/* The event data, the same in both formats: size, then bytes, bounded. */
static int event_data(cursor *c, tg_event *e, size_t at) {
        const uint8_t *p;

        if (!u32(c, &e->data_size))
                return fail("the event's size is truncated.", at);
        if (e->data_size > TG_EVENTLOG_MAX_EVENT_SIZE)
                return fail("an event of %u bytes (at most %u).", at, e->data_size, TG_EVENTLOG_MAX_EVENT_SIZE);
        if (!take(c, e->data_size, &p))
                return fail("the event claims %u bytes, %zu are left.", at, e->data_size, left(c));
        e->data = p;
        if (e->pcr >= TG_EVENTLOG_PCRS)
                return fail("an event for PCR %u (0..%u).", at, e->pcr, TG_EVENTLOG_PCRS - 1);
        return 0;
}

/*
 * Firmware that hands the log over in a fixed-size area (the ACPI TPM2
 * table's log area, LAML bytes long) leaves the unused tail erased: all
 * zeros, or all 0xFF (flash erased). Only such a tail is accepted after the
 * last event; anything else is refused as trailing garbage (an event the
 * parser would otherwise silently skip).
 */
static bool erased_tail(const cursor *c) {
        const uint8_t *p = c->p + c->off;
        size_t n = left(c);

        for (size_t i = 1; i < n; i++)
                if (p[i] != p[0])
                        return false;
        return n == 0 || p[0] == 0x00 || p[0] == 0xff;
}

/* A TCG_PCR_EVENT2 header starting with a zero PCR and type and no digests is where the
 * erased area begins (the kernel's iterator stops there too). */
static bool at_end(const cursor *c) {
        return left(c) == 0 || erased_tail(c);
}

static int parse_legacy(tg_eventlog *log, cursor *c, size_t *allocated) {
        log->crypto_agile = false;
        log->n_banks = 1;
        log->bank_alg[0] = ALG_SHA1;
        log->bank_size[0] = 20;
        while (!at_end(c)) {
                tg_event e = {};
                size_t at = c->off;
                int r;

                if (!u32(c, &e.pcr) || !u32(c, &e.type) || !take(c, 20, &e.digest[0]))
                        return fail("a truncated event header.", at);
                r = event_data(c, &e, at);
                if (r < 0)
                        return r;
                if (e.type == TG_EV_NO_ACTION && (r = no_action_check(log, &e, at)) < 0)
                        return r;
                r = events_push(log, allocated, &e);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_agile(tg_eventlog *log, cursor *c, size_t *allocated) {
        while (!at_end(c)) {
                tg_event e = {};
                size_t at = c->off;
                uint32_t count;
                int r;

                if (!u32(c, &e.pcr) || !u32(c, &e.type) || !u32(c, &count))
                        return fail("a truncated event header.", at);
                /* TPML_DIGEST_VALUES: one digest per algorithm of the SpecID table, each once. */
                if (count != log->n_banks)
                        return fail("an event with %u digests; the SpecID event lists %u algorithms.", at, count,
                                    log->n_banks);
                for (uint32_t i = 0; i < count; i++) {
                        uint16_t alg;
                        int k;
                        if (!u16(c, &alg))
                                return fail("a truncated digest list.", at);
                        k = tg_eventlog_bank_index(log, alg);
                        if (k < 0)
                                return fail("a digest of algorithm 0x%04x, which the SpecID event does not list.", at,
                                            alg);
                        if (e.digest[k])
                                return fail("two digests of algorithm 0x%04x in one event.", at, alg);
                        if (!take(c, log->bank_size[k], &e.digest[k]))
                                return fail("a truncated digest of algorithm 0x%04x.", at, alg);
                }
                r = event_data(c, &e, at);
                if (r < 0)
                        return r;
                if (e.type == TG_EV_NO_ACTION && (r = no_action_check(log, &e, at)) < 0)
                        return r;
                r = events_push(log, allocated, &e);
                if (r < 0)
                        return r;
        }
        return 0;
}

int tg_eventlog_parse(const uint8_t *data, size_t size, tg_eventlog **ret) {
        _cleanup_eventlog_ tg_eventlog *log = NULL;
        const uint8_t *digest;
        size_t allocated = 0;
        tg_event first = {};
        cursor c;
        int r;

        if (size == 0)
                return log_error_rc(-TG_ERR_INVALID, "The event log is empty: the firmware measured nothing or "
                                    "the kernel did not receive its log.");
        if (size > TG_EVENTLOG_MAX_SIZE)
                return log_error_rc(-TG_ERR_INVALID, "The event log has %zu bytes (at most %u).", size,
                                    TG_EVENTLOG_MAX_SIZE);
        log = calloc(1, sizeof *log);
        if (!log)
                return -TG_ERR_NOMEM;
        log->buf = malloc(size);
        if (!log->buf)
                return -TG_ERR_NOMEM;
        memcpy(log->buf, data, size);
        log->size = size;
        c = (cursor) { .p = log->buf, .size = size };

        /* The first record is always a TCG_PCR_EVENT (SHA-1 format). */
        if (!u32(&c, &first.pcr) || !u32(&c, &first.type) || !take(&c, 20, &digest))
                return fail("the first event's header is truncated.", (size_t) 0);
        r = event_data(&c, &first, 0);
        if (r < 0)
                return r;
        if (first.type == TG_EV_NO_ACTION && first.pcr == 0 && first.data_size >= 16 &&
            memcmp(first.data, spec_id_signature, 16) == 0) {
                static const uint8_t zero[20] = {};
                if (memcmp(digest, zero, 20) != 0)
                        return fail("the SpecID event's digest is not zero.", (size_t) 0);
                r = spec_id_parse(log, first.data, first.data_size, 0);
                if (r < 0)
                        return r;
                log->crypto_agile = true;
                r = parse_agile(log, &c, &allocated);
        } else {
                c.off = 0;
                r = parse_legacy(log, &c, &allocated);
        }
        if (r < 0)
                return r;
        log->padding = left(&c);
        *ret = TAKE_PTR(log);
        return 0;
}

void tg_eventlog_free(tg_eventlog *log) {
        if (!log)
                return;
        free(log->events);
        free(log->buf);
        free(log);
}

int tg_eventlog_bank_index(const tg_eventlog *log, uint16_t alg) {
        for (unsigned i = 0; i < log->n_banks; i++)
                if (log->bank_alg[i] == alg)
                        return (int) i;
        return -1;
}

int tg_eventlog_replay(const tg_eventlog *log, uint16_t alg, const uint8_t *const *replace,
                       uint8_t ret_values[TG_EVENTLOG_PCRS][TG_EVENTLOG_MAX_DIGEST], uint32_t *ret_mask) {
        uint8_t values[TG_EVENTLOG_PCRS][TG_EVENTLOG_MAX_DIGEST] = {};
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        int k = tg_eventlog_bank_index(log, alg);
        const EVP_MD *type = alg_md(alg);
        uint32_t mask = 0;
        size_t n;

        if (k < 0 || !type)
                return log_error_rc(-TG_ERR_INVALID, "The event log has no %s digests to replay.",
                                    tg_eventlog_alg_name(alg));
        if (!md)
                return -TG_ERR_NOMEM;
        n = log->bank_size[k];
        /* The reset values (PC Client PTP): PCRs 17-22 (DRTM) all ones until a DRTM launch, every other
         * 0, PCR 0's last byte the StartupLocality. */
        for (unsigned i = 17; i <= 22; i++)
                memset(values[i], 0xff, n);
        if (log->has_startup_locality)
                values[0][n - 1] = log->startup_locality;
        for (size_t i = 0; i < log->n_events; i++) {
                const tg_event *e = &log->events[i];
                const uint8_t *d = replace && replace[i] ? replace[i] : e->digest[k];
                unsigned out = 0;

                /* EV_NO_ACTION events are logged, never extended (PFP §10.4.1). */
                if (e->type == TG_EV_NO_ACTION)
                        continue;
                if (EVP_DigestInit_ex(md, type, NULL) != 1 || EVP_DigestUpdate(md, values[e->pcr], n) != 1 ||
                    EVP_DigestUpdate(md, d, n) != 1 || EVP_DigestFinal_ex(md, values[e->pcr], &out) != 1 || out != n)
                        return log_error_rc(-TG_ERR_NOMEM, "Cannot hash the event log's %s digests.",
                                            tg_eventlog_alg_name(alg));
                mask |= UINT32_C(1) << e->pcr;
        }
        memcpy(ret_values, values, sizeof values);
        *ret_mask = mask;
        return 0;
}

const char *tg_eventlog_alg_name(uint16_t alg) {
        switch (alg) {
        case ALG_SHA1: return "sha1";
        case ALG_SHA256: return "sha256";
        case ALG_SHA384: return "sha384";
        case ALG_SHA512: return "sha512";
        case ALG_SM3: return "sm3_256";
        default: return "unknown";
        }
}

/* ---- event data ---- */

int tg_efi_variable_parse(const uint8_t *data, size_t size, tg_efi_variable *ret) {
        cursor c = { .p = data, .size = size };
        tg_efi_variable v = {};
        const uint8_t *guid, *name, *vdata;
        uint64_t name_len, data_len;

        if (!take(&c, 16, &guid) || !u64(&c, &name_len) || !u64(&c, &data_len))
                return log_error_rc(-TG_ERR_INVALID, "A UEFI_VARIABLE_DATA is truncated.");
        /* Both lengths checked against what is left before any multiplication or read. */
        if (name_len == 0 || name_len > TG_EFI_VARIABLE_NAME_MAX || !take(&c, (size_t) name_len * 2, &name))
                return log_error_rc(-TG_ERR_INVALID, "A UEFI_VARIABLE_DATA's UnicodeNameLength %llu does not fit.",
                                    (unsigned long long) name_len);
        if (data_len != left(&c) || !take(&c, (size_t) data_len, &vdata))
                return log_error_rc(-TG_ERR_INVALID, "A UEFI_VARIABLE_DATA's VariableDataLength %llu is not the %zu "
                                    "bytes left.", (unsigned long long) data_len, left(&c));
        memcpy(v.guid.b, guid, 16);
        for (size_t i = 0; i < name_len; i++) {
                uint16_t ch = (uint16_t) (name[2 * i] | name[2 * i + 1] << 8);
                /* Some firmware counts the terminating NUL in the length. */
                if (ch == 0 && i + 1 == name_len)
                        break;
                v.name[i] = ch >= 0x20 && ch < 0x7f ? (char) ch : '?';
        }
        v.data = vdata;
        v.data_size = (size_t) data_len;
        *ret = v;
        return 0;
}

int tg_efi_variable_build(const tg_efi_guid *guid, const char *name, const uint8_t *data, size_t size,
                          uint8_t **ret, size_t *ret_size) {
        size_t name_len = strlen(name), total;
        uint8_t *p;

        if (name_len == 0 || name_len > TG_EFI_VARIABLE_NAME_MAX || size > TG_EVENTLOG_MAX_EVENT_SIZE)
                return -TG_ERR_INVALID;
        total = 32 + name_len * 2 + size;
        p = malloc(total);
        if (!p)
                return -TG_ERR_NOMEM;
        memcpy(p, guid->b, 16);
        for (unsigned i = 0; i < 8; i++) {
                p[16 + i] = (uint8_t) ((uint64_t) name_len >> (8 * i));
                p[24 + i] = (uint8_t) ((uint64_t) size >> (8 * i));
        }
        for (size_t i = 0; i < name_len; i++) {
                p[32 + 2 * i] = (uint8_t) name[i];
                p[32 + 2 * i + 1] = 0;
        }
        if (size)
                memcpy(p + 32 + name_len * 2, data, size);
        *ret = p;
        *ret_size = total;
        return 0;
}

int tg_event_data_matches(const tg_eventlog *log, const tg_event *e) {
        switch (e->type) {
        case TG_EV_SEPARATOR:
        case TG_EV_EFI_ACTION:
        case TG_EV_EFI_VARIABLE_DRIVER_CONFIG:
        case TG_EV_EFI_VARIABLE_AUTHORITY:
                break;
        default:
                return -1;
        }
        for (unsigned k = 0; k < log->n_banks; k++) {
                uint8_t d[TG_EVENTLOG_MAX_DIGEST];
                unsigned n;
                if (tg_eventlog_hash(log->bank_alg[k], e->data, e->data_size, d, &n) < 0)
                        continue; /* a bank OpenSSL cannot hash says nothing */
                if (n != log->bank_size[k] || memcmp(d, e->digest[k], n) != 0)
                        return 0;
        }
        return 1;
}

const char *tg_event_type_to_string(uint32_t type) {
        static const struct {
                uint32_t type;
                const char *name;
        } names[] = {
                { TG_EV_PREBOOT_CERT, "EV_PREBOOT_CERT" },
                { TG_EV_POST_CODE, "EV_POST_CODE" },
                { TG_EV_NO_ACTION, "EV_NO_ACTION" },
                { TG_EV_SEPARATOR, "EV_SEPARATOR" },
                { TG_EV_ACTION, "EV_ACTION" },
                { TG_EV_EVENT_TAG, "EV_EVENT_TAG" },
                { TG_EV_S_CRTM_CONTENTS, "EV_S_CRTM_CONTENTS" },
                { TG_EV_S_CRTM_VERSION, "EV_S_CRTM_VERSION" },
                { TG_EV_CPU_MICROCODE, "EV_CPU_MICROCODE" },
                { TG_EV_PLATFORM_CONFIG_FLAGS, "EV_PLATFORM_CONFIG_FLAGS" },
                { TG_EV_TABLE_OF_DEVICES, "EV_TABLE_OF_DEVICES" },
                { TG_EV_COMPACT_HASH, "EV_COMPACT_HASH" },
                { TG_EV_IPL, "EV_IPL" },
                { TG_EV_IPL_PARTITION_DATA, "EV_IPL_PARTITION_DATA" },
                { TG_EV_NONHOST_CODE, "EV_NONHOST_CODE" },
                { TG_EV_NONHOST_CONFIG, "EV_NONHOST_CONFIG" },
                { TG_EV_NONHOST_INFO, "EV_NONHOST_INFO" },
                { TG_EV_OMIT_BOOT_DEVICE_EVENTS, "EV_OMIT_BOOT_DEVICE_EVENTS" },
                { TG_EV_EFI_VARIABLE_DRIVER_CONFIG, "EV_EFI_VARIABLE_DRIVER_CONFIG" },
                { TG_EV_EFI_VARIABLE_BOOT, "EV_EFI_VARIABLE_BOOT" },
                { TG_EV_EFI_BOOT_SERVICES_APPLICATION, "EV_EFI_BOOT_SERVICES_APPLICATION" },
                { TG_EV_EFI_BOOT_SERVICES_DRIVER, "EV_EFI_BOOT_SERVICES_DRIVER" },
                { TG_EV_EFI_RUNTIME_SERVICES_DRIVER, "EV_EFI_RUNTIME_SERVICES_DRIVER" },
                { TG_EV_EFI_GPT_EVENT, "EV_EFI_GPT_EVENT" },
                { TG_EV_EFI_ACTION, "EV_EFI_ACTION" },
                { TG_EV_EFI_PLATFORM_FIRMWARE_BLOB, "EV_EFI_PLATFORM_FIRMWARE_BLOB" },
                { TG_EV_EFI_HANDOFF_TABLES, "EV_EFI_HANDOFF_TABLES" },
                { TG_EV_EFI_PLATFORM_FIRMWARE_BLOB2, "EV_EFI_PLATFORM_FIRMWARE_BLOB2" },
                { TG_EV_EFI_HANDOFF_TABLES2, "EV_EFI_HANDOFF_TABLES2" },
                { TG_EV_EFI_VARIABLE_BOOT2, "EV_EFI_VARIABLE_BOOT2" },
                { TG_EV_EFI_HCRTM_EVENT, "EV_EFI_HCRTM_EVENT" },
                { TG_EV_EFI_VARIABLE_AUTHORITY, "EV_EFI_VARIABLE_AUTHORITY" },
                { TG_EV_EFI_SPDM_FIRMWARE_BLOB, "EV_EFI_SPDM_FIRMWARE_BLOB" },
                { TG_EV_EFI_SPDM_FIRMWARE_CONFIG, "EV_EFI_SPDM_FIRMWARE_CONFIG" },
        };
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (names[i].type == type)
                        return names[i].name;
        return NULL;
}

/* Whether a string event is UTF-16LE (EV_S_CRTM_VERSION usually is): at least one character, every
 * high byte zero. */
static bool utf16(const uint8_t *p, size_t n) {
        if (n < 2 || n % 2 != 0 || p[0] == 0)
                return false;
        for (size_t i = 1; i < n; i += 2)
                if (p[i] != 0)
                        return false;
        return true;
}

/* Printable ASCII of a string event (EV_IPL, EV_EFI_ACTION, ...), stopping at its NUL, at most 200 characters. */
static void append_string(FILE *f, const uint8_t *p, size_t n) {
        size_t step = utf16(p, n) ? 2 : 1;

        fputc('"', f);
        for (size_t i = 0; i < n && i < 200 * step && p[i]; i += step)
                fputc(p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' ? p[i] : '?', f);
        fputc('"', f);
}

/* The file path nodes of an EFI device path (type 4 subtype 4: UTF-16), each node's length bounded. */
static void append_device_path(FILE *f, const uint8_t *p, size_t n) {
        cursor c = { .p = p, .size = n };
        bool any = false;

        while (left(&c) >= 4) {
                uint8_t type, subtype;
                uint16_t len;
                const uint8_t *node;
                if (!u8(&c, &type) || !u8(&c, &subtype) || !u16(&c, &len) || len < 4 || !take(&c, len - 4u, &node))
                        break;
                if (type == 0x7f && subtype == 0xff)
                        break;
                if (type == 4 && subtype == 4) {
                        fputs(any ? "" : " path ", f);
                        any = true;
                        for (size_t i = 0; i + 1 < len - 4u && node[i]; i += 2)
                                fputc(node[i] >= 0x20 && node[i] < 0x7f && node[i + 1] == 0 ? node[i] : '?', f);
                }
        }
}

static void describe(const tg_event *e, FILE *f) {
        cursor c = { .p = e->data, .size = e->data_size };
        tg_efi_variable v;
        uint64_t base, length, a, dp_len;
        const uint8_t *p;
        uint32_t tag, tag_size;
        uint8_t desc_size;

        switch (e->type) {
        case TG_EV_EFI_VARIABLE_DRIVER_CONFIG:
        case TG_EV_EFI_VARIABLE_AUTHORITY:
        case TG_EV_EFI_VARIABLE_BOOT:
        case TG_EV_EFI_VARIABLE_BOOT2:
                if (tg_efi_variable_parse(e->data, e->data_size, &v) >= 0) {
                        char g[TG_EFI_GUID_STRING_MAX];
                        fprintf(f, "%s (%s), %zu bytes", v.name, tg_efi_guid_to_string(&v.guid, g), v.data_size);
                        return;
                }
                break;
        case TG_EV_SEPARATOR:
                if (u32(&c, &tag) && left(&c) == 0) {
                        fprintf(f, tag == 0 ? "separator" : tag == UINT32_MAX ? "separator: firmware error" :
                                "separator 0x%08x", tag);
                        return;
                }
                break;
        case TG_EV_EFI_ACTION:
        case TG_EV_ACTION:
        case TG_EV_IPL:
        case TG_EV_S_CRTM_VERSION:
                append_string(f, e->data, e->data_size);
                return;
        case TG_EV_POST_CODE:
        case TG_EV_EFI_PLATFORM_FIRMWARE_BLOB:
                /* UEFI_PLATFORM_FIRMWARE_BLOB, or (POST code) a string such as "ACPI DATA". */
                if (e->data_size == 16 && u64(&c, &base) && u64(&c, &length)) {
                        fprintf(f, "firmware blob at 0x%llx, %llu bytes", (unsigned long long) base,
                                (unsigned long long) length);
                        return;
                }
                append_string(f, e->data, e->data_size);
                return;
        case TG_EV_EFI_PLATFORM_FIRMWARE_BLOB2:
                if (u8(&c, &desc_size) && take(&c, desc_size, &p) && u64(&c, &base) && u64(&c, &length) &&
                    left(&c) == 0) {
                        append_string(f, p, desc_size);
                        fprintf(f, " at 0x%llx, %llu bytes", (unsigned long long) base, (unsigned long long) length);
                        return;
                }
                break;
        case TG_EV_EFI_BOOT_SERVICES_APPLICATION:
        case TG_EV_EFI_BOOT_SERVICES_DRIVER:
        case TG_EV_EFI_RUNTIME_SERVICES_DRIVER:
                /* UEFI_IMAGE_LOAD_EVENT: the device path's length checked against what is left. */
                if (u64(&c, &base) && u64(&c, &length) && u64(&c, &a) && u64(&c, &dp_len) && dp_len == left(&c) &&
                    take(&c, (size_t) dp_len, &p)) {
                        fprintf(f, "image of %llu bytes", (unsigned long long) length);
                        append_device_path(f, p, (size_t) dp_len);
                        return;
                }
                break;
        case TG_EV_EVENT_TAG:
                /* TCG_PCClientTaggedEvent. */
                if (u32(&c, &tag) && u32(&c, &tag_size) && tag_size == left(&c)) {
                        fprintf(f, "tag 0x%08x, %u bytes", tag, tag_size);
                        return;
                }
                break;
        case TG_EV_NO_ACTION:
                if (e->data_size >= 16 && memchr(e->data, 0, 16)) {
                        append_string(f, e->data, 16);
                        if (e->data_size == 17 && memcmp(e->data, startup_locality_signature, 16) == 0)
                                fprintf(f, " %u", e->data[16]);
                        return;
                }
                break;
        default:
                break;
        }
        fprintf(f, "%u bytes", e->data_size);
}

int tg_event_describe(const tg_event *e, char **ret) {
        char *text = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);

        if (!f)
                return -TG_ERR_NOMEM;
        describe(e, f);
        if (fclose(f) != 0) {
                free(text);
                return -TG_ERR_NOMEM;
        }
        *ret = text;
        return 0;
}
