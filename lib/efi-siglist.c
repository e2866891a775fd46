/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * EFI_SIGNATURE_LIST parsing, update files and the firmware's append rule
 * (efi-siglist.h). Hostile input from the log or a downloaded file: sizes
 * are 32-bit and checked against what is left before they are used.
 */
#include <limits.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>

#include "efi-siglist.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "sanitize.h"

const tg_efi_guid tg_efi_cert_x509_guid = { { 0xa1, 0x59, 0xc0, 0xa5, 0xe4, 0x94, 0xa7, 0x4a,
                                              0x87, 0xb5, 0xab, 0x15, 0x5c, 0x2b, 0xf0, 0x72 } };
const tg_efi_guid tg_efi_cert_sha256_guid = { { 0x26, 0x16, 0xc4, 0xc1, 0x4c, 0x50, 0x92, 0x40,
                                                0xac, 0xa9, 0x41, 0xf9, 0x36, 0x93, 0x43, 0x28 } };
/* EFI_CERT_TYPE_PKCS7_GUID: the CertType of an EFI_VARIABLE_AUTHENTICATION_2. */
static const tg_efi_guid cert_type_pkcs7_guid = { { 0x9d, 0xd2, 0xaf, 0x4a, 0xdf, 0x68, 0xee, 0x49,
                                                    0x8a, 0xa9, 0x34, 0x7d, 0x37, 0x56, 0x65, 0xa7 } };

#define ESL_HEADER 28u /* SignatureType, SignatureListSize, SignatureHeaderSize, SignatureSize */

static uint32_t le32(const uint8_t *p) {
        return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}

/* One list at data[off]: its sizes checked; ret_* the signatures' place, count and size. */
static int list_at(const uint8_t *data, size_t size, size_t off, size_t *ret_list_size, size_t *ret_first,
                   size_t *ret_count, size_t *ret_sig_size) {
        size_t rest = size - off;
        uint32_t list_size, header_size, sig_size;

        if (rest < ESL_HEADER)
                return log_error_rc(-TG_ERR_INVALID, "EFI_SIGNATURE_LIST at offset %zu: truncated header.", off);
        list_size = le32(data + off + 16);
        header_size = le32(data + off + 20);
        sig_size = le32(data + off + 24);
        if (list_size > rest || list_size < ESL_HEADER)
                return log_error_rc(-TG_ERR_INVALID, "EFI_SIGNATURE_LIST at offset %zu: SignatureListSize %u, %zu "
                                    "bytes left.", off, list_size, rest);
        if (header_size > list_size - ESL_HEADER)
                return log_error_rc(-TG_ERR_INVALID, "EFI_SIGNATURE_LIST at offset %zu: SignatureHeaderSize %u does "
                                    "not fit.", off, header_size);
        /* An EFI_SIGNATURE_DATA is the owner GUID and at least one byte. */
        if (sig_size <= 16 || (list_size - ESL_HEADER - header_size) % sig_size != 0)
                return log_error_rc(-TG_ERR_INVALID, "EFI_SIGNATURE_LIST at offset %zu: SignatureSize %u does not "
                                    "divide the list.", off, sig_size);
        *ret_list_size = list_size;
        *ret_first = off + ESL_HEADER + header_size;
        *ret_count = (list_size - ESL_HEADER - header_size) / sig_size;
        *ret_sig_size = sig_size;
        return 0;
}

int tg_esl_parse(const uint8_t *data, size_t size, tg_esl_entry **ret, size_t *ret_n) {
        _cleanup_free_ tg_esl_entry *entries = NULL;
        size_t n = 0, allocated = 0;

        for (size_t off = 0; off < size;) {
                size_t list_size, first, count, sig_size;
                int r = list_at(data, size, off, &list_size, &first, &count, &sig_size);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < count; i++) {
                        if (n >= TG_ESL_MAX_ENTRIES)
                                return log_error_rc(-TG_ERR_INVALID, "More than %u signatures in a variable.",
                                                    TG_ESL_MAX_ENTRIES);
                        if (ret && n == allocated) {
                                size_t m = allocated ? allocated * 2 : 16;
                                tg_esl_entry *p = reallocarray(entries, m, sizeof *p);
                                if (!p)
                                        return -TG_ERR_NOMEM;
                                entries = p;
                                allocated = m;
                        }
                        if (ret) {
                                memcpy(entries[n].type.b, data + off, 16);
                                entries[n].signature = data + first + i * sig_size;
                                entries[n].signature_size = sig_size;
                        }
                        n++;
                }
                off += list_size;
        }
        if (ret)
                *ret = TAKE_PTR(entries);
        if (ret_n)
                *ret_n = n;
        return 0;
}

int tg_esl_from_update_file(const uint8_t *data, size_t size, const uint8_t **ret_lists, size_t *ret_size,
                            bool *ret_authenticated) {
        bool authenticated = false;
        size_t skip = 0;
        int r;

        /* EFI_VARIABLE_AUTHENTICATION_2: EFI_TIME (16), WIN_CERTIFICATE {dwLength, wRevision 0x0200,
         * wCertificateType WIN_CERT_TYPE_EFI_GUID 0x0ef1}, CertType, CertData (dwLength covers all but EFI_TIME). */
        if (size >= 16 + 24 && data[16 + 4] == 0x00 && data[16 + 5] == 0x02 && data[16 + 6] == 0xf1 &&
            data[16 + 7] == 0x0e && memcmp(data + 16 + 8, cert_type_pkcs7_guid.b, 16) == 0) {
                uint32_t length = le32(data + 16);
                if (length < 24 || length > size - 16)
                        return log_error_rc(-TG_ERR_INVALID, "The authenticated variable's WIN_CERTIFICATE claims %u "
                                            "bytes, %zu are left.", length, size - 16);
                skip = 16 + (size_t) length;
                authenticated = true;
        }
        r = tg_esl_parse(data + skip, size - skip, NULL, NULL);
        if (r < 0)
                return log_error_rc(r, "The update file is neither EFI_SIGNATURE_LISTs nor an authenticated variable "
                                    "holding them.");
        *ret_lists = data + skip;
        *ret_size = size - skip;
        *ret_authenticated = authenticated;
        return 0;
}

/* Whether old holds sig (same list type and size, same bytes), as edk2's FilterSignatureList compares. */
static bool holds(const tg_esl_entry *old, size_t n_old, const uint8_t *type, const uint8_t *sig, size_t sig_size) {
        for (size_t i = 0; i < n_old; i++)
                if (old[i].signature_size == sig_size && memcmp(old[i].type.b, type, 16) == 0 &&
                    memcmp(old[i].signature, sig, sig_size) == 0)
                        return true;
        return false;
}

int tg_esl_append(const uint8_t *old, size_t old_size, const uint8_t *add, size_t add_size, uint8_t **ret,
                  size_t *ret_size) {
        _cleanup_free_ tg_esl_entry *old_entries = NULL;
        _cleanup_free_ uint8_t *out = NULL;
        size_t n_old = 0, out_size = old_size;
        int r;

        r = tg_esl_parse(old, old_size, &old_entries, &n_old);
        if (r < 0)
                return r;
        r = tg_esl_parse(add, add_size, NULL, NULL);
        if (r < 0)
                return r;
        /* At most old + add: the filter only drops entries and their lists' headers. */
        out = malloc(old_size + add_size + 1);
        if (!out)
                return -TG_ERR_NOMEM;
        if (old_size)
                memcpy(out, old, old_size);
        for (size_t off = 0; off < add_size;) {
                size_t list_size, first, count, sig_size, start = out_size, copied = 0;
                uint32_t new_size;

                r = list_at(add, add_size, off, &list_size, &first, &count, &sig_size);
                if (r < 0)
                        return r;
                /* The list's header and SignatureHeader, its size fixed below. */
                memcpy(out + out_size, add + off, first - off);
                out_size += first - off;
                for (size_t i = 0; i < count; i++) {
                        const uint8_t *sig = add + first + i * sig_size;
                        if (holds(old_entries, n_old, add + off, sig, sig_size))
                                continue;
                        memcpy(out + out_size, sig, sig_size);
                        out_size += sig_size;
                        copied++;
                }
                if (copied == 0)
                        out_size = start; /* nothing new: the list is not written */
                else {
                        new_size = (uint32_t) (out_size - start);
                        for (unsigned b = 0; b < 4; b++)
                                out[start + 16 + b] = (uint8_t) (new_size >> (8 * b));
                }
                off += list_size;
        }
        *ret = TAKE_PTR(out);
        *ret_size = out_size;
        return 0;
}

bool tg_esl_find_x509(const uint8_t *lists, size_t size, const uint8_t *der, size_t der_size, tg_efi_guid *ret_owner) {
        _cleanup_free_ tg_esl_entry *entries = NULL;
        size_t n = 0;

        if (tg_esl_parse(lists, size, &entries, &n) < 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (tg_efi_guid_equal(&entries[i].type, &tg_efi_cert_x509_guid) &&
                    entries[i].signature_size - 16 == der_size && memcmp(entries[i].signature + 16, der, der_size) == 0) {
                        memcpy(ret_owner->b, entries[i].signature, 16);
                        return true;
                }
        return false;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(X509 *, X509_free);

char *tg_x509_der_subject(const uint8_t *der, size_t size) {
        _cleanup_(X509_freep) X509 *x = NULL;
        const unsigned char *p = der;
        BIO *bio;
        char *s = NULL;
        long n;

        if (size > LONG_MAX)
                return NULL;
        x = d2i_X509(NULL, &p, (long) size);
        if (!x || p != der + size)
                return NULL;
        bio = BIO_new(BIO_s_mem());
        if (!bio)
                return NULL;
        if (X509_NAME_print_ex(bio, X509_get_subject_name(x), 0, XN_FLAG_RFC2253) >= 0) {
                char *data;
                n = BIO_get_mem_data(bio, &data);
                if (n >= 0)
                        s = strndup(data, (size_t) n);
        }
        BIO_free(bio);
        return s ? tg_str_sanitize_line(s) : NULL;
}

int tg_esl_summary(const uint8_t *data, size_t size, json_object **ret) {
        _cleanup_free_ tg_esl_entry *entries = NULL;
        _cleanup_json_ json_object *o = json_object_new_object(), *x509 = json_object_new_array();
        size_t n = 0, sha256 = 0, other = 0;
        int r;

        if (!o || !x509)
                return -TG_ERR_NOMEM;
        r = tg_esl_parse(data, size, &entries, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                if (tg_efi_guid_equal(&entries[i].type, &tg_efi_cert_x509_guid)) {
                        _cleanup_free_ char *subject = tg_x509_der_subject(entries[i].signature + 16,
                                                                   entries[i].signature_size - 16);
                        json_object *c = json_object_new_object();
                        char g[TG_EFI_GUID_STRING_MAX];
                        tg_efi_guid owner;

                        if (!c || json_object_array_add(x509, c) < 0) {
                                json_object_put(c);
                                return -TG_ERR_NOMEM;
                        }
                        memcpy(owner.b, entries[i].signature, 16);
                        json_object_object_add(c, "subject", json_object_new_string(subject ?: "(unparsable certificate)"));
                        json_object_object_add(c, "owner", json_object_new_string(tg_efi_guid_to_string(&owner, g)));
                } else if (tg_efi_guid_equal(&entries[i].type, &tg_efi_cert_sha256_guid))
                        sha256++;
                else
                        other++;
        }
        json_object_object_add(o, "entries", json_object_new_uint64(n));
        json_object_object_add(o, "x509", TAKE_PTR(x509));
        json_object_object_add(o, "sha256", json_object_new_uint64(sha256));
        json_object_object_add(o, "other", json_object_new_uint64(other));
        *ret = TAKE_PTR(o);
        return 0;
}
