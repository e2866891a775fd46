/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * EK certificates (TPM NV, read over the bus, or a file): the DER length
 * parser, the PEM/DER certificate parser and chain verification against a
 * manufacturer CA store. The CA is made here at start-up, so no input can
 * chain to it: tg_ek_cert_verify accepting anything is a trust bug.
 */
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include "ek-cert.h"
#include "fuzz.h"

static char ca_path[] = "/tmp/tpmguard-fuzz-ca.XXXXXX";

static void ca_remove(void) {
        (void) unlink(ca_path);
}

static void ca_make(void) {
        EVP_PKEY *key = EVP_EC_gen("P-256");
        X509 *ca = X509_new();
        X509_NAME *name;
        FILE *f;
        int fd;

        if (!key || !ca)
                abort();
        name = X509_get_subject_name(ca);
        if (X509_set_version(ca, 2) != 1 ||
            ASN1_INTEGER_set(X509_get_serialNumber(ca), 1) != 1 ||
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *) "tpmguard fuzz CA", -1, -1, 0) != 1 ||
            X509_set_issuer_name(ca, name) != 1 ||
            !X509_gmtime_adj(X509_getm_notBefore(ca), -3600) ||
            !X509_gmtime_adj(X509_getm_notAfter(ca), 3600L * 24 * 365) ||
            X509_set_pubkey(ca, key) != 1 ||
            X509_sign(ca, key, EVP_sha256()) <= 0)
                abort();
        fd = mkstemp(ca_path);
        if (fd < 0)
                abort();
        atexit(ca_remove);
        f = fdopen(fd, "w");
        if (!f || PEM_write_X509(f, ca) != 1 || fclose(f) != 0)
                abort();
        X509_free(ca);
        EVP_PKEY_free(key);
}

static tg_ek_trust *trust;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_silence_logs();
        ca_make();
        if (tg_ek_trust_load(ca_path, NULL, &trust) < 0)
                abort();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t *copy = malloc(size ? size : 1);
        X509 *cert = NULL;
        size_t len;

        if (!copy)
                abort();
        memcpy(copy, data, size);
        if (tg_ek_cert_der_length(copy, size, &len) == 0 && (len < 2 || len > size))
                abort();
        if (tg_ek_cert_parse(copy, size, &cert) == 0) {
                if (!cert)
                        abort();
                if (tg_ek_cert_verify(trust, cert) == 0)
                        abort();
                X509_free(cert);
        }
        free(copy);
        return 0;
}
