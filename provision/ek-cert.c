/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * X.509 trust for EK certificates: the manufacturer CA stores (roots are
 * anchors, intermediates only chain helpers, distrust lists honoured) and
 * chain verification with OpenSSL. See ek.h for the threat model: a
 * certificate that chains to a manufacturer root says which public key is
 * the EK; it proves nothing about the TPM that answers until ek.c's
 * ActivateCredential does.
 */
#include <assert.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509v3.h>
#include <tss2/tss2_rc.h>

#include "ek-cert.h"
#include "ek-store.h"
#include "error.h"
#include "log.h"
#include "tpmguard-config.h"
#include "util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(BIO *, BIO_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(X509_STORE_CTX *, X509_STORE_CTX_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);

struct tg_ek_trust {
        X509_STORE *anchors;       /* the stores' self-signed roots */
        STACK_OF(X509) *known;     /* every certificate of the stores, for diagnostics */
        STACK_OF(X509) *untrusted; /* the stores' other certificates plus the intermediates file */
        STACK_OF(X509) *distrusted; /* certificates dropped by a distrust list, for diagnostics */
        tg_ek_manifest **manifests; /* of the store directories that have one: vendor names */
        size_t n_manifests;
        tg_ek_fingerprints distrust; /* every store's distrust lists, for helpers added later */
};

static inline const char *strna(const char *s) {
        return s ?: "(unknown)";
}

int tg_ek_cert_der_length(const uint8_t *buf, size_t size, size_t *ret) {
        size_t header, content = 0, total;

        if (size < 2 || buf[0] != 0x30)
                return log_error_rc(-TG_ERR_EK_CERT, "The EK certificate is not DER: no outer SEQUENCE.");
        if (buf[1] < 0x80) {
                header = 2;
                content = buf[1];
        } else {
                size_t n = buf[1] & 0x7f;
                /* DER: long form only with 1..4 length octets, minimal (no leading zero, >= 128). */
                if (n == 0 || n > 4 || size < 2 + n)
                        return log_error_rc(-TG_ERR_EK_CERT, "The EK certificate has a malformed DER length.");
                if (buf[2] == 0)
                        return log_error_rc(-TG_ERR_EK_CERT, "The EK certificate has a non-minimal DER length.");
                for (size_t i = 0; i < n; i++)
                        content = content << 8 | buf[2 + i];
                if (content < 0x80)
                        return log_error_rc(-TG_ERR_EK_CERT, "The EK certificate has a non-minimal DER length.");
                header = 2 + n;
        }
        if (content > size - header)
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "The EK certificate is truncated: its DER header announces %zu bytes, %zu are present.",
                                    header + content, size);
        total = header + content;
        /*
         * Some TPMs store the certificate padded to the NV index size: with
         * zeros, or with 0xFF (erased flash; STMicroelectronics ST33 parts,
         * see tests/data/ek-samples). Only one padding byte value, repeated,
         * may follow.
         */
        for (size_t i = total; i < size; i++)
                if (buf[i] != buf[total] || (buf[i] != 0x00 && buf[i] != 0xff))
                        return log_error_rc(-TG_ERR_EK_CERT,
                                            "The EK certificate is followed by %zu bytes that are not padding "
                                            "(all 0x00 or all 0xFF).", size - total);
        *ret = total;
        return 0;
}

int tg_ek_cert_parse(const uint8_t *buf, size_t size, X509 **ret) {
        X509 *cert = NULL;
        size_t len;
        int r;

        /* DER starts with its SEQUENCE tag; anything else must be PEM. */
        if (size > 0 && buf[0] != 0x30) {
                _cleanup_(BIO_freep) BIO *bio = BIO_new_mem_buf(buf, (int) size);
                if (!bio)
                        return -TG_ERR_NOMEM;
                cert = PEM_read_bio_X509(bio, NULL, NULL, NULL);
                ERR_clear_error();
                if (!cert)
                        return log_error_rc(-TG_ERR_EK_CERT,
                                            "The EK certificate is neither DER nor a PEM certificate: not a certificate.");
        } else {
                const uint8_t *p = buf;
                r = tg_ek_cert_der_length(buf, size, &len);
                if (r < 0)
                        return r;
                cert = d2i_X509(NULL, &p, (long) len);
                ERR_clear_error();
                if (!cert || (size_t) (p - buf) != len) {
                        X509_free(cert);
                        return log_error_rc(-TG_ERR_EK_CERT, "The EK certificate is not a valid DER X.509 certificate.");
                }
        }
        *ret = cert;
        return 0;
}

char *tg_ek_name_oneline(const X509_NAME *name) {
        _cleanup_(BIO_freep) BIO *bio = BIO_new(BIO_s_mem());
        char *data = NULL, *s;
        long n;

        if (!bio || X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253) < 0)
                return NULL;
        n = BIO_get_mem_data(bio, &data);
        if (n < 0)
                return NULL;
        s = strndup(data ?: "", (size_t) n);
        return s;
}

/*
 * Reads every certificate of a PEM file into out; a file without PEM that is
 * exactly one DER certificate (vendors often publish their CA certificates as
 * .cer/.crt in DER) counts as well. Returns how many (may be 0).
 */
static int load_certs(const char *path, STACK_OF(X509) *out) {
        _cleanup_free_ uint8_t *buf = NULL;
        _cleanup_(BIO_freep) BIO *bio = NULL;
        size_t size = 0;
        int n = 0, r;

        /* A trust anchor: root-only, as tpmguard.conf and the pin are (tg_check_trusted). */
        r = tg_read_trusted_file(path, "CA certificate file", 1024 * 1024, &buf, &size);
        if (r < 0)
                return log_error_rc(-TG_ERR_EK_CERT, "Cannot read the CA certificate file %s (%s).", path,
                                    tg_err_str(r));
        if (size > 0 && buf[0] == 0x30) {
                const uint8_t *p = buf;
                X509 *c = d2i_X509(NULL, &p, (long) size);
                ERR_clear_error();
                if (!c || (size_t) (p - buf) != size) {
                        X509_free(c);
                        return log_error_rc(-TG_ERR_EK_CERT, "%s is neither PEM nor one DER certificate.", path);
                }
                if (!sk_X509_push(out, c)) {
                        X509_free(c);
                        return -TG_ERR_NOMEM;
                }
                return 1;
        }
        bio = BIO_new_mem_buf(buf, (int) size);
        if (!bio)
                return -TG_ERR_NOMEM;
        for (;;) {
                X509 *c = PEM_read_bio_X509(bio, NULL, NULL, NULL);
                if (!c)
                        break;
                if (!sk_X509_push(out, c)) {
                        X509_free(c);
                        return -TG_ERR_NOMEM;
                }
                n++;
        }
        /* End of input shows up as "no start line"; anything else is a broken PEM block. */
        unsigned long e = ERR_peek_last_error();
        ERR_clear_error();
        if (e != 0 && ERR_GET_REASON(e) != PEM_R_NO_START_LINE)
                return log_error_rc(-TG_ERR_EK_CERT, "%s holds a malformed PEM certificate.", path);
        return n;
}

/* What one store of the ek_ca list contributes: certificates, and from a directory its manifest and distrust list. */
static int load_ca_store(const char *ca_store, STACK_OF(X509) *out, tg_ek_manifest **ret_manifest,
                         tg_ek_fingerprints *distrust) {
        struct stat st;
        int r;

        if (stat(ca_store, &st) < 0)
                return log_error_rc(-TG_ERR_NOT_FOUND,
                                    "The manufacturer CA store %s does not exist: install the TPM vendor's EK CA "
                                    "certificates there, or point the configuration at them.", ca_store);
        if (S_ISDIR(st.st_mode)) {
                _cleanup_(closedirp) DIR *d = opendir(ca_store);
                _cleanup_free_ char *manifest_path = NULL, *distrust_path = NULL;
                struct dirent *de;
                if (!d)
                        return log_error_rc(-TG_ERR_EK_CERT, "Cannot open the CA store directory %s.", ca_store);
                while ((de = readdir(d))) {
                        _cleanup_free_ char *path = NULL;
                        struct stat fst;
                        /* The manifest and the distrust list are not certificates (ek-store.h). */
                        if (de->d_name[0] == '.' || strcmp(de->d_name, TG_EK_STORE_MANIFEST) == 0 ||
                            strcmp(de->d_name, TG_EK_STORE_DISTRUST) == 0)
                                continue;
                        if (asprintf(&path, "%s/%s", ca_store, de->d_name) < 0)
                                return -TG_ERR_NOMEM;
                        if (stat(path, &fst) < 0 || !S_ISREG(fst.st_mode))
                                continue;
                        r = load_certs(path, out);
                        if (r < 0)
                                return r;
                        if (r == 0)
                                log_debug("%s holds no certificate, ignored.", path);
                }
                if (asprintf(&manifest_path, "%s/" TG_EK_STORE_MANIFEST, ca_store) < 0 ||
                    asprintf(&distrust_path, "%s/" TG_EK_STORE_DISTRUST, ca_store) < 0)
                        return -TG_ERR_NOMEM;
                r = tg_ek_manifest_load(manifest_path, ret_manifest);
                if (r < 0 && r != -TG_ERR_NOT_FOUND)
                        return -TG_ERR_EK_CERT;
                r = tg_ek_fingerprints_load(distrust, distrust_path);
                if (r < 0)
                        return r;
        } else {
                r = load_certs(ca_store, out);
                if (r < 0)
                        return r;
        }
        return 0;
}

static bool store_has_subject(STACK_OF(X509) *certs, const X509_NAME *name) {
        for (int i = 0; i < sk_X509_num(certs); i++)
                if (X509_NAME_cmp(X509_get_subject_name(sk_X509_value(certs, i)), name) == 0)
                        return true;
        return false;
}

/* One message per failure class, each naming the cause and the next step. */
static int chain_error(X509_STORE_CTX *ctx, STACK_OF(X509) *known) {
        int err = X509_STORE_CTX_get_error(ctx), depth = X509_STORE_CTX_get_error_depth(ctx);
        X509 *at = X509_STORE_CTX_get_current_cert(ctx);
        _cleanup_free_ char *subject = NULL, *issuer = NULL;
        const char *what = depth == 0 ? "The EK certificate" : "A CA certificate in the EK certificate's chain";

        if (at) {
                subject = tg_ek_name_oneline(X509_get_subject_name(at));
                issuer = tg_ek_name_oneline(X509_get_issuer_name(at));
        }
        switch (err) {
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "The EK certificate (%s) is self-signed, not issued by a manufacturer CA. "
                                    "Use the certificate the TPM vendor issued.", strna(subject));
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "The EK certificate chains to the root CA \"%s\", which is not in the manufacturer "
                                    "CA store: it was issued by another CA. Add that vendor's root CA only if you trust it.",
                                    strna(subject));
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
                if (at && store_has_subject(known, X509_get_issuer_name(at)))
                        return log_error_rc(-TG_ERR_EK_CERT,
                                            "%s (%s) was issued by a CA named \"%s\" but not by the one of that name "
                                            "in the manufacturer CA store (different key): it chains to another CA.",
                                            what, strna(subject), strna(issuer));
                if (depth == 0)
                        return log_error_rc(-TG_ERR_EK_CERT,
                                            "The issuer \"%s\" of the EK certificate is neither in the manufacturer CA "
                                            "store nor among the intermediates: an intermediate CA certificate is missing "
                                            "(add it to the store or give an intermediates file), or the certificate comes "
                                            "from another manufacturer.", strna(issuer));
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "The EK certificate's chain ends at \"%s\", issued by \"%s\", which is not a trusted "
                                    "root in the manufacturer CA store: it chains to another CA, or the store lacks "
                                    "the vendor's root certificate.", strna(subject), strna(issuer));
        case X509_V_ERR_CERT_HAS_EXPIRED:
                return log_error_rc(-TG_ERR_EK_CERT, "%s (%s) has expired. Check the system clock; "
                                    "an expired EK certificate cannot be used.", what, strna(subject));
        case X509_V_ERR_CERT_NOT_YET_VALID:
                return log_error_rc(-TG_ERR_EK_CERT, "%s (%s) is not yet valid. Check the system clock.",
                                    what, strna(subject));
        case X509_V_ERR_CERT_SIGNATURE_FAILURE:
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "The signature on %s (%s) does not verify with the key of its issuer \"%s\" in the "
                                    "store: it was issued by another CA of the same name, or it is forged.",
                                    depth == 0 ? "the EK certificate" : "a CA certificate", strna(subject), strna(issuer));
        default:
                return log_error_rc(-TG_ERR_EK_CERT, "%s (%s) failed verification: %s.", what, strna(subject),
                                    X509_verify_cert_error_string(err));
        }
}


void tg_ek_trust_free(tg_ek_trust *t) {
        if (!t)
                return;
        X509_STORE_free(t->anchors);
        sk_X509_pop_free(t->known, X509_free);
        sk_X509_pop_free(t->untrusted, X509_free);
        sk_X509_pop_free(t->distrusted, X509_free);
        for (size_t i = 0; i < t->n_manifests; i++)
                tg_ek_manifest_free(t->manifests[i]);
        free(t->manifests);
        tg_ek_fingerprints_done(&t->distrust);
        free(t);
}

void tg_ek_anchor_done(tg_ek_anchor *a) {
        if (!a)
                return;
        free(a->vendor);
        free(a->subject);
        *a = (tg_ek_anchor) {};
}

bool tg_ek_cert_sha256(X509 *c, uint8_t out[32]) {
        unsigned len = 0;
        bool ok = X509_digest(c, EVP_sha256(), out, &len) == 1 && len == 32;
        ERR_clear_error();
        return ok;
}

/* Drops the certificates of certs whose fingerprint is distrusted, into dropped. */
static int apply_distrust(STACK_OF(X509) *certs, const tg_ek_fingerprints *distrust, STACK_OF(X509) *dropped) {
        for (int i = sk_X509_num(certs) - 1; i >= 0; i--) {
                X509 *c = sk_X509_value(certs, i);
                uint8_t fp[32];
                if (!tg_ek_cert_sha256(c, fp))
                        return -TG_ERR_NOMEM;
                if (!tg_ek_fingerprints_contain(distrust, fp))
                        continue;
                (void) sk_X509_delete(certs, i);
                if (!sk_X509_push(dropped, c)) {
                        X509_free(c);
                        return -TG_ERR_NOMEM;
                }
        }
        return 0;
}

int tg_ek_trust_load(const char *ca_stores, const char *intermediates_file, tg_ek_trust **ret) {
        _cleanup_(tg_ek_trust_freep) tg_ek_trust *t = NULL;
        _cleanup_free_ char *list = NULL;
        char *save = NULL;
        size_t n_stores = 0, n_missing = 0;
        int r, anchors = 0;

        if (!ca_stores || strspn(ca_stores, " \t") == strlen(ca_stores))
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "No manufacturer CA store is configured: an EK certificate cannot be trusted "
                                    "without one. Install the TPM vendor's EK CA certificates and configure them.");
        t = calloc(1, sizeof *t);
        list = strdup(ca_stores);
        if (!t || !list)
                return -TG_ERR_NOMEM;
        t->anchors = X509_STORE_new();
        t->known = sk_X509_new_null();
        t->untrusted = sk_X509_new_null();
        t->distrusted = sk_X509_new_null();
        if (!t->anchors || !t->known || !t->untrusted || !t->distrusted)
                return -TG_ERR_NOMEM;

        /*
         * ek_ca is a list: the shipped store (/usr/share/tpmguard/ek-ca) and
         * the administrator's (/etc/tpmguard/ek-ca) by default. A store of
         * the list that does not exist only removes trust, so it is skipped;
         * a list none of whose stores exists is an error, as is a single
         * store that does not exist (a mistyped --ek-ca).
         */
        for (char *path = strtok_r(list, " \t", &save); path; path = strtok_r(NULL, " \t", &save))
                n_stores++;
        free(list);
        list = strdup(ca_stores);
        if (!list)
                return -TG_ERR_NOMEM;
        for (char *path = strtok_r(list, " \t", &save); path; path = strtok_r(NULL, " \t", &save)) {
                tg_ek_manifest *m = NULL;
                if (n_stores > 1 && access(path, F_OK) < 0) {
                        log_debug("The manufacturer CA store %s does not exist, skipped.", path);
                        n_missing++;
                        continue;
                }
                r = load_ca_store(path, t->known, &m, &t->distrust);
                if (r == -TG_ERR_NOT_FOUND)
                        return -TG_ERR_EK_CERT;
                if (r < 0)
                        return r;
                if (m) {
                        tg_ek_manifest **grown = reallocarray(t->manifests, t->n_manifests + 1, sizeof(tg_ek_manifest *));
                        if (!grown) {
                                tg_ek_manifest_free(m);
                                return -TG_ERR_NOMEM;
                        }
                        t->manifests = grown;
                        t->manifests[t->n_manifests++] = m;
                }
        }
        if (n_missing == n_stores)
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "None of the manufacturer CA stores \"%s\" exists: install the TPM vendor's EK CA "
                                    "certificates (tpmguard ships them in its default store), or point ek_ca or "
                                    "--ek-ca at them.", ca_stores);
        /* The administrator's distrust list wins over every store: the CA is gone as anchor and as helper. */
        r = apply_distrust(t->known, &t->distrust, t->distrusted);
        if (r < 0)
                return r;
        if (sk_X509_num(t->known) == 0)
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "The manufacturer CA store %s holds no certificate%s.", ca_stores,
                                    sk_X509_num(t->distrusted) > 0 ? " that is not distrusted" : "");
        /*
         * Only self-signed certificates of the store are trust anchors. The
         * store's other certificates (and the intermediates file) only help
         * build the chain, which must still end at one of those anchors: an
         * intermediate alone never makes a certificate trusted.
         */
        for (int i = 0; i < sk_X509_num(t->known); i++) {
                X509 *c = sk_X509_value(t->known, i);
                if (X509_self_signed(c, 0) == 1) {
                        if (X509_STORE_add_cert(t->anchors, c) != 1)
                                return -TG_ERR_NOMEM;
                        anchors++;
                } else if (!X509_add_cert(t->untrusted, c, X509_ADD_FLAG_UP_REF))
                        return -TG_ERR_NOMEM;
        }
        ERR_clear_error();
        if (anchors == 0)
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "The manufacturer CA store %s holds no self-signed root CA certificate: add the "
                                    "vendor's root CA.", ca_stores);
        if (intermediates_file) {
                r = load_certs(intermediates_file, t->untrusted);
                if (r < 0)
                        return r;
                if (r == 0)
                        return log_error_rc(-TG_ERR_EK_CERT, "The intermediates file %s holds no certificate.",
                                            intermediates_file);
                r = apply_distrust(t->untrusted, &t->distrust, t->distrusted);
                if (r < 0)
                        return r;
        }
        log_debug("EK trust: %d anchors, %d intermediates, %d distrusted, from \"%s\".", anchors,
                  sk_X509_num(t->untrusted), sk_X509_num(t->distrusted), ca_stores);
        *ret = TAKE_PTR(t);
        return 0;
}

int tg_ek_trust_add_untrusted(tg_ek_trust *t, X509 *cert) {
        uint8_t fp[32];

        if (!tg_ek_cert_sha256(cert, fp))
                return -TG_ERR_NOMEM;
        /* A distrusted CA stays out, wherever it comes from. */
        if (tg_ek_fingerprints_contain(&t->distrust, fp)) {
                if (!X509_add_cert(t->distrusted, cert, X509_ADD_FLAG_UP_REF))
                        return -TG_ERR_NOMEM;
                return 0;
        }
        if (!X509_add_cert(t->untrusted, cert, X509_ADD_FLAG_UP_REF | X509_ADD_FLAG_NO_DUP))
                return -TG_ERR_NOMEM;
        return 1;
}

size_t tg_ek_trust_anchor_count(const tg_ek_trust *t) {
        STACK_OF(X509_OBJECT) *objs = X509_STORE_get0_objects(t->anchors);
        size_t n = 0;
        for (int i = 0; i < sk_X509_OBJECT_num(objs); i++)
                if (X509_OBJECT_get_type(sk_X509_OBJECT_value(objs, i)) == X509_LU_X509)
                        n++;
        return n;
}

/* The vendor of an anchor: its manifest line, else its subject's organization, else its common name. */
static char *anchor_vendor(const tg_ek_trust *t, X509 *anchor, const uint8_t fp[32]) {
        const X509_NAME *name = X509_get_subject_name(anchor);
        int i;

        for (size_t k = 0; k < t->n_manifests; k++) {
                const tg_ek_manifest_entry *e = tg_ek_manifest_find(t->manifests[k], fp);
                if (e)
                        return strdup(e->vendor);
        }
        i = X509_NAME_get_index_by_NID(name, NID_organizationName, -1);
        if (i < 0)
                i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
        if (i >= 0) {
                unsigned char *utf8 = NULL;
                int len = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i)));
                if (len > 0) {
                        char *s = strndup((const char *) utf8, (size_t) len);
                        OPENSSL_free(utf8);
                        return s;
                }
                OPENSSL_free(utf8);
                ERR_clear_error();
        }
        return strdup("(unknown vendor)");
}

/* A failed chain whose missing issuer the administrator distrusted says so. */
static bool explain_distrusted(const tg_ek_trust *trust, X509_STORE_CTX *ctx) {
        X509 *at = X509_STORE_CTX_get_current_cert(ctx);
        if (!at)
                return false;
        for (int i = 0; i < sk_X509_num(trust->distrusted); i++) {
                X509 *d = sk_X509_value(trust->distrusted, i);
                if (X509_NAME_cmp(X509_get_subject_name(d), X509_get_issuer_name(at)) == 0) {
                        _cleanup_free_ char *subject = tg_ek_name_oneline(X509_get_subject_name(d));
                        uint8_t fp[32];
                        char hex[96] = "";
                        if (tg_ek_cert_sha256(d, fp))
                                tg_ek_fingerprint_format(fp, hex, sizeof hex);
                        log_error("The issuer \"%s\" (SHA-256 %s) is distrusted by a distrust list of the CA store.",
                                  strna(subject), hex);
                        return true;
                }
        }
        return false;
}

/*
 * A chain that lacks an issuer: the certificate's Authority Information
 * Access (caIssuers) says where the vendor publishes it. Only named, never
 * fetched: nothing is downloaded, at provisioning or at boot, and what an
 * administrator adds to the local store is their decision. The URL comes
 * from a certificate the TPM (or an interposer) handed over, so only
 * printable ASCII of it is shown.
 */
static void explain_missing_issuer(X509_STORE_CTX *ctx) {
        int err = X509_STORE_CTX_get_error(ctx);
        X509 *at = X509_STORE_CTX_get_current_cert(ctx);
        AUTHORITY_INFO_ACCESS *aia;

        if (!at || (err != X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT && err != X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY))
                return;
        aia = X509_get_ext_d2i(at, NID_info_access, NULL, NULL);
        ERR_clear_error();
        if (!aia)
                return;
        for (int i = 0; i < sk_ACCESS_DESCRIPTION_num(aia); i++) {
                const ACCESS_DESCRIPTION *ad = sk_ACCESS_DESCRIPTION_value(aia, i);
                const ASN1_IA5STRING *uri;
                char url[256];
                int n;

                if (OBJ_obj2nid(ad->method) != NID_ad_ca_issuers || ad->location->type != GEN_URI)
                        continue;
                uri = ad->location->d.uniformResourceIdentifier;
                n = ASN1_STRING_length(uri) < (int) sizeof url - 1 ? ASN1_STRING_length(uri) : (int) sizeof url - 1;
                for (int k = 0; k < n; k++) {
                        unsigned char ch = ASN1_STRING_get0_data(uri)[k];
                        url[k] = ch >= 0x21 && ch < 0x7f ? (char) ch : '?';
                }
                url[n > 0 ? n : 0] = '\0';
                log_error("The missing issuer's certificate is published at %s (the certificate's Authority "
                          "Information Access). tpmguard downloads nothing: fetch it on a trusted machine, check "
                          "it, and add it to " TPMGUARD_EK_CA_LOCAL_DIR "/ (or give it with --ek-intermediates).",
                          url);
                break;
        }
        AUTHORITY_INFO_ACCESS_free(aia);
}

int tg_ek_cert_verify_anchor(const tg_ek_trust *trust, X509 *cert, tg_ek_anchor *ret_anchor) {
        _cleanup_(X509_STORE_CTX_freep) X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        _cleanup_free_ char *fingerprint = NULL;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int md_size = 0;
        int r;

        if (!ctx)
                return -TG_ERR_NOMEM;
        if (X509_STORE_CTX_init(ctx, trust->anchors, cert, trust->untrusted) != 1)
                return -TG_ERR_NOMEM;
        /*
         * No X509_V_FLAG_IGNORE_CRITICAL: EK certificates (TCG EK Credential
         * Profile, and swtpm's) mark the subjectAltName critical (TPM
         * manufacturer, model, version as a directoryName) and basicConstraints
         * and keyUsage critical; OpenSSL handles all three, so swtpm's
         * certificates verify as they are. Any other critical extension is
         * refused rather than ignored. No purpose is set: an EK's key usage is
         * keyEncipherment (RSA) or keyAgreement (ECC), never digitalSignature,
         * and it needs none. No X509_V_FLAG_PARTIAL_CHAIN: only a self-signed
         * root of the store ends a chain, never an intermediate.
         */
        if (X509_verify_cert(ctx) == 1) {
                STACK_OF(X509) *chain = X509_STORE_CTX_get0_chain(ctx);
                X509 *root = chain ? sk_X509_value(chain, sk_X509_num(chain) - 1) : NULL;
                tg_ek_anchor a = {};

                ERR_clear_error();
                if (!ret_anchor)
                        return 0;
                if (!root || !tg_ek_cert_sha256(root, a.sha256))
                        return -TG_ERR_NOMEM;
                a.vendor = anchor_vendor(trust, root, a.sha256);
                a.subject = tg_ek_name_oneline(X509_get_subject_name(root));
                if (!a.vendor || !a.subject) {
                        tg_ek_anchor_done(&a);
                        return -TG_ERR_NOMEM;
                }
                *ret_anchor = a;
                return 0;
        }
        ERR_clear_error();
        /* The owner can compare it with a second, independent reading of the EK certificate. */
        if (X509_digest(cert, EVP_sha256(), md, &md_size) == 1 && tg_hex_encode(md, md_size, &fingerprint) >= 0)
                log_error("The EK certificate (SHA-256 fingerprint %s) does not verify:", fingerprint);
        r = chain_error(ctx, trust->known);
        if (!explain_distrusted(trust, ctx))
                explain_missing_issuer(ctx);
        return r;
}

int tg_ek_cert_verify(const tg_ek_trust *trust, X509 *cert) {
        return tg_ek_cert_verify_anchor(trust, cert, NULL);
}
