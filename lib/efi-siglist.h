/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eventlog.h"

/*
 * The Secure Boot databases' format (UEFI 2.10 §32.4.1): a variable's data
 * (PK, KEK, db, dbx) is a sequence of EFI_SIGNATURE_LISTs, each a type GUID,
 * sizes and EFI_SIGNATURE_DATA entries (owner GUID + an X.509 certificate or
 * a hash). The same bytes come from the event log (hostile) and from update
 * files (efi-updatevar's .esl, an authenticated variable's .auth): every size
 * is checked against what is left, and the input must be consumed exactly.
 */

extern const tg_efi_guid tg_efi_cert_x509_guid;
extern const tg_efi_guid tg_efi_cert_sha256_guid;

#define TG_ESL_MAX_ENTRIES 65536u

typedef struct tg_esl_entry {
        tg_efi_guid type;        /* the list's SignatureType */
        const uint8_t *signature; /* the whole EFI_SIGNATURE_DATA (owner GUID first), into the input */
        size_t signature_size;    /* the list's SignatureSize, >= 16 */
} tg_esl_entry;

/* Every entry of a list of EFI_SIGNATURE_LISTs (ret may be NULL: just check it). */
int tg_esl_parse(const uint8_t *data, size_t size, tg_esl_entry **ret, size_t *ret_n);

/*
 * The EFI_SIGNATURE_LISTs of an update file: the file itself, or an
 * authenticated variable (EFI_VARIABLE_AUTHENTICATION_2: EFI_TIME and a
 * WIN_CERTIFICATE_UEFI_GUID with a PKCS#7 signature before the lists),
 * whose header is skipped, bounds-checked. The signature is not checked
 * here: the firmware checks it, and refuses the write if it is bad.
 */
int tg_esl_from_update_file(const uint8_t *data, size_t size, const uint8_t **ret_lists, size_t *ret_size,
                            bool *ret_authenticated);

/*
 * The variable's data after an append write (EFI_VARIABLE_APPEND_WRITE) of
 * add to old, as the firmware computes it (UEFI 2.10 §8.2.1, edk2's
 * FilterSignatureList): entries already in old (same type, size and bytes)
 * are dropped, the lists left with new entries are appended. Malloc'ed.
 */
int tg_esl_append(const uint8_t *old, size_t old_size, const uint8_t *add, size_t add_size, uint8_t **ret,
                  size_t *ret_size);

/* Whether a certificate (DER) is an X.509 entry of the lists; its owner GUID in ret_owner. */
bool tg_esl_find_x509(const uint8_t *lists, size_t size, const uint8_t *der, size_t der_size, tg_efi_guid *ret_owner);

/* The subject of a DER certificate (RFC 2253, one line, sanitized), NULL when it is none. Malloc'ed. */
char *tg_x509_der_subject(const uint8_t *der, size_t size);

/*
 * What the lists hold, for people: {"entries": N, "x509": [{"subject", "owner"}...],
 * "sha256": N, "other": N}; subjects through OpenSSL, sanitized.
 */
int tg_esl_summary(const uint8_t *data, size_t size, json_object **ret);
