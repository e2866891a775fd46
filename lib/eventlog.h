/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

/*
 * The firmware's TCG event log (TCG PC Client Platform Firmware Profile,
 * PFP, §10): what the kernel exports in
 * /sys/kernel/security/tpm0/binary_bios_measurements. Two formats: the
 * crypto-agile log (a TCG_PCR_EVENT header holding the SpecID event "Spec ID
 * Event03" with the table of digest algorithms, then TCG_PCR_EVENT2 records
 * with one digest per algorithm) and the legacy SHA-1-only log (TCG_PCR_EVENT
 * records only).
 *
 * Threat model: the log is unauthenticated bytes. Whoever is root, or a
 * firmware bug, writes what it likes into it; only its replay against PCR
 * values read over a verified session (lifecycle/pcr-log.h) makes it
 * evidence. So the parser trusts nothing: every length is checked against
 * what is left before it is read, digest sizes come from the SpecID table
 * (and are checked against the known algorithms), event count and size are
 * bounded, and the input must be consumed exactly. Pure parsing, no TPM:
 * the log is little-endian (PFP §10.2), unlike the TPM's big-endian wire
 * format, so tss2-mu's unmarshallers do not apply.
 */

#define TG_EVENTLOG_PCRS 24
#define TG_EVENTLOG_MAX_BANKS 5           /* SHA-1, SHA-256, SHA-384, SHA-512, SM3-256 */
#define TG_EVENTLOG_MAX_DIGEST 64
#define TG_EVENTLOG_MAX_SIZE (16u << 20)  /* real logs are tens of KiB */
#define TG_EVENTLOG_MAX_EVENTS 32768u     /* real logs hold hundreds */
#define TG_EVENTLOG_MAX_EVENT_SIZE (1u << 20) /* the largest real events (db, dbx) are tens of KiB */

/* Event types (PFP §10.4.1). */
#define TG_EV_PREBOOT_CERT                 UINT32_C(0x00000000)
#define TG_EV_POST_CODE                    UINT32_C(0x00000001)
#define TG_EV_NO_ACTION                    UINT32_C(0x00000003)
#define TG_EV_SEPARATOR                    UINT32_C(0x00000004)
#define TG_EV_ACTION                       UINT32_C(0x00000005)
#define TG_EV_EVENT_TAG                    UINT32_C(0x00000006)
#define TG_EV_S_CRTM_CONTENTS              UINT32_C(0x00000007)
#define TG_EV_S_CRTM_VERSION               UINT32_C(0x00000008)
#define TG_EV_CPU_MICROCODE                UINT32_C(0x00000009)
#define TG_EV_PLATFORM_CONFIG_FLAGS        UINT32_C(0x0000000a)
#define TG_EV_TABLE_OF_DEVICES             UINT32_C(0x0000000b)
#define TG_EV_COMPACT_HASH                 UINT32_C(0x0000000c)
#define TG_EV_IPL                          UINT32_C(0x0000000d)
#define TG_EV_IPL_PARTITION_DATA           UINT32_C(0x0000000e)
#define TG_EV_NONHOST_CODE                 UINT32_C(0x0000000f)
#define TG_EV_NONHOST_CONFIG               UINT32_C(0x00000010)
#define TG_EV_NONHOST_INFO                 UINT32_C(0x00000011)
#define TG_EV_OMIT_BOOT_DEVICE_EVENTS      UINT32_C(0x00000012)
#define TG_EV_EFI_VARIABLE_DRIVER_CONFIG   UINT32_C(0x80000001)
#define TG_EV_EFI_VARIABLE_BOOT            UINT32_C(0x80000002)
#define TG_EV_EFI_BOOT_SERVICES_APPLICATION UINT32_C(0x80000003)
#define TG_EV_EFI_BOOT_SERVICES_DRIVER     UINT32_C(0x80000004)
#define TG_EV_EFI_RUNTIME_SERVICES_DRIVER  UINT32_C(0x80000005)
#define TG_EV_EFI_GPT_EVENT                UINT32_C(0x80000006)
#define TG_EV_EFI_ACTION                   UINT32_C(0x80000007)
#define TG_EV_EFI_PLATFORM_FIRMWARE_BLOB   UINT32_C(0x80000008)
#define TG_EV_EFI_HANDOFF_TABLES           UINT32_C(0x80000009)
#define TG_EV_EFI_PLATFORM_FIRMWARE_BLOB2  UINT32_C(0x8000000a)
#define TG_EV_EFI_HANDOFF_TABLES2          UINT32_C(0x8000000b)
#define TG_EV_EFI_VARIABLE_BOOT2           UINT32_C(0x8000000c)
#define TG_EV_EFI_HCRTM_EVENT              UINT32_C(0x80000010)
#define TG_EV_EFI_VARIABLE_AUTHORITY       UINT32_C(0x800000e0)
#define TG_EV_EFI_SPDM_FIRMWARE_BLOB       UINT32_C(0x800000e1)
#define TG_EV_EFI_SPDM_FIRMWARE_CONFIG     UINT32_C(0x800000e2)

/* An EFI GUID as its 16 bytes in the log's (mixed-endian) order. */
typedef struct tg_efi_guid {
        uint8_t b[16];
} tg_efi_guid;

/* EFI_GLOBAL_VARIABLE (SecureBoot, PK, KEK) and EFI_IMAGE_SECURITY_DATABASE_GUID (db, dbx). */
extern const tg_efi_guid tg_efi_global_variable_guid;
extern const tg_efi_guid tg_efi_image_security_database_guid;
bool tg_efi_guid_equal(const tg_efi_guid *a, const tg_efi_guid *b);
/* "8be4df61-93ca-11d2-aa0d-00e098032b8c"; buf holds TG_EFI_GUID_STRING_MAX. */
#define TG_EFI_GUID_STRING_MAX 37
const char *tg_efi_guid_to_string(const tg_efi_guid *g, char buf[static TG_EFI_GUID_STRING_MAX]);

/*
 * UEFI_VARIABLE_DATA (PFP §10.3.3), the event data of EV_EFI_VARIABLE_*: the
 * variable's GUID, its UTF-16 name (here as ASCII, anything else '?', at most
 * TG_EFI_VARIABLE_NAME_MAX characters) and its data (pointing into the event).
 */
#define TG_EFI_VARIABLE_NAME_MAX 128
typedef struct tg_efi_variable {
        tg_efi_guid guid;
        char name[TG_EFI_VARIABLE_NAME_MAX + 1];
        const uint8_t *data;
        size_t data_size;
} tg_efi_variable;
int tg_efi_variable_parse(const uint8_t *data, size_t size, tg_efi_variable *ret);
/* The UEFI_VARIABLE_DATA of (guid, name, data): malloc'ed, what the firmware hashes. */
int tg_efi_variable_build(const tg_efi_guid *guid, const char *name, const uint8_t *data, size_t size,
                          uint8_t **ret, size_t *ret_size);

typedef struct tg_event {
        uint32_t pcr;
        uint32_t type;
        const uint8_t *digest[TG_EVENTLOG_MAX_BANKS]; /* by the log's bank index, into the log's copy */
        const uint8_t *data;                          /* the event data, into the log's copy */
        uint32_t data_size;
} tg_event;

typedef struct tg_eventlog {
        uint8_t *buf;                  /* the log's own copy of the input */
        size_t size;
        bool crypto_agile;             /* false: a legacy SHA-1-only log */
        unsigned n_banks;
        uint16_t bank_alg[TG_EVENTLOG_MAX_BANKS];   /* TPM2_ALG_* */
        uint16_t bank_size[TG_EVENTLOG_MAX_BANKS];
        bool has_startup_locality;     /* a StartupLocality EV_NO_ACTION event set PCR 0's initial value */
        uint8_t startup_locality;
        size_t padding;                /* erased bytes after the last event (see the parser) */
        tg_event *events;              /* without the SpecID header */
        size_t n_events;
} tg_eventlog;

/* Parses a whole log; -TG_ERR_INVALID naming the offset and the field on anything malformed. */
int tg_eventlog_parse(const uint8_t *data, size_t size, tg_eventlog **ret);
void tg_eventlog_free(tg_eventlog *log);
DEFINE_TRIVIAL_CLEANUP_FUNC(tg_eventlog *, tg_eventlog_free);
#define _cleanup_eventlog_ _cleanup_(tg_eventlog_freep)

/* The log's index of a bank (TPM2_ALG_*), -1 when the log has no digests of it. */
int tg_eventlog_bank_index(const tg_eventlog *log, uint16_t alg);

/*
 * Replays one bank: every event but EV_NO_ACTION extends its PCR (PCR 0
 * starts at the StartupLocality). ret_values[i] has the bank's digest size;
 * ret_mask says which PCRs the log extended at all. A digest of another
 * event can stand in for one: replace (may be NULL) gives, by event index,
 * replacement digests of this bank (NULL entries: the log's own).
 * -TG_ERR_INVALID for a bank the log lacks or that OpenSSL cannot hash.
 */
int tg_eventlog_replay(const tg_eventlog *log, uint16_t alg, const uint8_t *const *replace,
                       uint8_t ret_values[TG_EVENTLOG_PCRS][TG_EVENTLOG_MAX_DIGEST], uint32_t *ret_mask);

/* "sha256", ... for a TPM2_ALG_* ("unknown" for others). */
const char *tg_eventlog_alg_name(uint16_t alg);

/* Hashes data with a bank's algorithm (TPM2_ALG_*); ret holds TG_EVENTLOG_MAX_DIGEST. */
int tg_eventlog_hash(uint16_t alg, const uint8_t *data, size_t size, uint8_t *ret, unsigned *ret_size);

/*
 * Whether the event's digests are the hash of its data in every bank, for
 * the types whose digest the PFP defines so (EV_SEPARATOR, EV_EFI_ACTION,
 * EV_EFI_VARIABLE_DRIVER_CONFIG, EV_EFI_VARIABLE_AUTHORITY, EV_IPL of
 * strings does not count: bootloaders hash other things). 1: it is, 0: it is
 * not (the data shown is not what was measured), -1: the type's digest is
 * not defined over its data.
 */
int tg_event_data_matches(const tg_eventlog *log, const tg_event *e);

/* "EV_SEPARATOR", ... ; NULL for an unknown type. */
const char *tg_event_type_to_string(uint32_t type);

/* A one-line description of what the event measured (malloc'ed, printable ASCII only). */
int tg_event_describe(const tg_event *e, char **ret);
