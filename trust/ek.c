/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * EK certificate verification and the EK-bound proof of the EK signing key.
 * See ek.h for the threat model. In short: nothing the TPM returns is
 * trusted until the certified TPM has proven possession of the EK's private
 * key by returning a challenge only it could unwrap, bound to the name of the
 * key being attested.
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

#include "ek-store.h"
#include "ek.h"
#include "error.h"
#include "log.h"
#include "tpmguard-config.h"
#include "util.h"

/* A certificate larger than this in NV or in a file is not an EK certificate. */
#define EK_CERT_MAX_SIZE 8192

/* TCG EK Credential Profile v2.5, Table 2 ("L" templates) and Tables 3-7 ("H" templates). */
static const tg_ek_template ek_templates[] = {
        { "L-2 (ECC P-256)", 0x01C0000A, TPM2_ALG_ECC, 0,    TPM2_ECC_NIST_P256, TPM2_ALG_SHA256, 128, false },
        { "H-2 (ECC P-256)", 0x01C00014, TPM2_ALG_ECC, 0,    TPM2_ECC_NIST_P256, TPM2_ALG_SHA256, 128, true },
        { "H-3 (ECC P-384)", 0x01C00016, TPM2_ALG_ECC, 0,    TPM2_ECC_NIST_P384, TPM2_ALG_SHA384, 256, true },
        { "L-1 (RSA-2048)",  0x01C00002, TPM2_ALG_RSA, 2048, 0,                  TPM2_ALG_SHA256, 128, false },
        { "H-1 (RSA-2048)",  0x01C00012, TPM2_ALG_RSA, 2048, 0,                  TPM2_ALG_SHA256, 128, true },
        { "H-6 (RSA-3072)",  0x01C0001C, TPM2_ALG_RSA, 3072, 0,                  TPM2_ALG_SHA384, 256, true },
        { "H-7 (RSA-4096)",  0x01C0001E, TPM2_ALG_RSA, 4096, 0,                  TPM2_ALG_SHA384, 256, true },
};

/*
 * Policy digests of the EK Credential Profile. PolicyA = PolicySecret(TPM_RH_ENDORSEMENT);
 * PolicyC = PolicyAuthorizeNV(0x01C07F01); PolicyB = PolicyOR(PolicyA, PolicyC).
 * The unit tests recompute PolicyA and PolicyB from their definitions.
 */
static const uint8_t policy_a_sha256[32] = {
        0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xb3, 0xf8, 0x1a, 0x90, 0xcc, 0x8d, 0x46, 0xa5, 0xd7, 0x24,
        0xfd, 0x52, 0xd7, 0x6e, 0x06, 0x52, 0x0b, 0x64, 0xf2, 0xa1, 0xda, 0x1b, 0x33, 0x14, 0x69, 0xaa,
};
static const uint8_t policy_c_sha256[32] = {
        0x37, 0x67, 0xe2, 0xed, 0xd4, 0x3f, 0xf4, 0x5a, 0x3a, 0x7e, 0x1e, 0xae, 0xfc, 0xef, 0x78, 0x64,
        0x3d, 0xca, 0x96, 0x46, 0x32, 0xe7, 0xaa, 0xd8, 0x2c, 0x67, 0x3a, 0x30, 0xd8, 0x63, 0x3f, 0xde,
};
static const uint8_t policy_b_sha256[32] = {
        0xca, 0x3d, 0x0a, 0x99, 0xa2, 0xb9, 0x39, 0x06, 0xf7, 0xa3, 0x34, 0x24, 0x14, 0xef, 0xcf, 0xb3,
        0xa3, 0x85, 0xd4, 0x4c, 0xd1, 0xfd, 0x45, 0x90, 0x89, 0xd1, 0x9b, 0x50, 0x71, 0xc0, 0xb7, 0xa0,
};
static const uint8_t policy_a_sha384[48] = {
        0x8b, 0xbf, 0x22, 0x66, 0x53, 0x7c, 0x17, 0x1c, 0xb5, 0x6e, 0x40, 0x3c, 0x4d, 0xc1, 0xd4, 0xb6,
        0x4f, 0x43, 0x26, 0x11, 0xdc, 0x38, 0x6e, 0x6f, 0x53, 0x20, 0x50, 0xc3, 0x27, 0x8c, 0x93, 0x0e,
        0x14, 0x3e, 0x8b, 0xb1, 0x13, 0x38, 0x24, 0xcc, 0xb4, 0x31, 0x05, 0x38, 0x71, 0xc6, 0xdb, 0x53,
};
static const uint8_t policy_c_sha384[48] = {
        0xd6, 0x03, 0x2c, 0xe6, 0x1f, 0x2f, 0xb3, 0xc2, 0x40, 0xeb, 0x3c, 0xf6, 0xa3, 0x32, 0x37, 0xef,
        0x2b, 0x6a, 0x16, 0xf4, 0x29, 0x3c, 0x22, 0xb4, 0x55, 0xe2, 0x61, 0xcf, 0xfd, 0x21, 0x7a, 0xd5,
        0xb4, 0x94, 0x7c, 0x2d, 0x73, 0xe6, 0x30, 0x05, 0xee, 0xd2, 0xdc, 0x2b, 0x35, 0x93, 0xd1, 0x65,
};
static const uint8_t policy_b_sha384[48] = {
        0xb2, 0x6e, 0x7d, 0x28, 0xd1, 0x1a, 0x50, 0xbc, 0x53, 0xd8, 0x82, 0xbc, 0xf5, 0xfd, 0x3a, 0x1a,
        0x07, 0x41, 0x48, 0xbb, 0x35, 0xd3, 0xb4, 0xe4, 0xcb, 0x1c, 0x0a, 0xd9, 0xbd, 0xe4, 0x19, 0xca,
        0xcb, 0x47, 0xba, 0x09, 0x69, 0x96, 0x46, 0x15, 0x0f, 0x9f, 0xc0, 0x00, 0xf3, 0xf8, 0x0e, 0x12,
};

DEFINE_TRIVIAL_CLEANUP_FUNC(BIO *, BIO_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(X509_STORE_CTX *, X509_STORE_CTX_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_KDF *, EVP_KDF_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_KDF_CTX *, EVP_KDF_CTX_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_CIPHER_CTX *, EVP_CIPHER_CTX_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(BIGNUM *, BN_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);
static inline const char *strna(const char *s) {
        return s ?: "(unknown)";
}
static inline void esys_freep(void *p) {
        Esys_Free(*(void **) p);
}
#define _cleanup_esys_ _cleanup_(esys_freep)

void tg_ek_result_done(tg_ek_result *r) {
        if (!r)
                return;
        free(r->cert_subject);
        free(r->cert_issuer);
        tg_ek_anchor_done(&r->anchor);
        *r = (tg_ek_result) {};
}

/* ---- Hash algorithms ---- */

static const char *hash_name(TPMI_ALG_HASH hash) {
        switch (hash) {
        case TPM2_ALG_SHA256: return "SHA256";
        case TPM2_ALG_SHA384: return "SHA384";
        case TPM2_ALG_SHA512: return "SHA512";
        default:              return NULL;
        }
}

static size_t hash_size(TPMI_ALG_HASH hash) {
        switch (hash) {
        case TPM2_ALG_SHA256: return 32;
        case TPM2_ALG_SHA384: return 48;
        case TPM2_ALG_SHA512: return 64;
        default:              return 0;
        }
}

/* ---- Templates ---- */

const tg_ek_template *tg_ek_templates(size_t *ret_n) {
        *ret_n = ELEMENTSOF(ek_templates);
        return ek_templates;
}

const tg_ek_template *tg_ek_template_by_nv_index(uint32_t nv_index) {
        for (size_t i = 0; i < ELEMENTSOF(ek_templates); i++)
                if (ek_templates[i].nv_index == nv_index)
                        return &ek_templates[i];
        return NULL;
}

bool tg_ek_template_fits_key(const tg_ek_template *t, EVP_PKEY *key) {
        char group[64];
        size_t group_len = 0;

        switch (t->type) {
        case TPM2_ALG_RSA:
                return EVP_PKEY_is_a(key, "RSA") && EVP_PKEY_get_bits(key) == t->rsa_bits;
        case TPM2_ALG_ECC:
                if (!EVP_PKEY_is_a(key, "EC") ||
                    EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &group_len) != 1)
                        return false;
                switch (t->curve) {
                case TPM2_ECC_NIST_P256: return OBJ_sn2nid(group) == NID_X9_62_prime256v1;
                case TPM2_ECC_NIST_P384: return OBJ_sn2nid(group) == NID_secp384r1;
                default:                 return false;
                }
        default:
                return false;
        }
}

static void ek_policy_digests(TPMI_ALG_HASH hash, const uint8_t **a, const uint8_t **b, const uint8_t **c) {
        if (hash == TPM2_ALG_SHA384) {
                *a = policy_a_sha384;
                *b = policy_b_sha384;
                *c = policy_c_sha384;
        } else {
                assert(hash == TPM2_ALG_SHA256);
                *a = policy_a_sha256;
                *b = policy_b_sha256;
                *c = policy_c_sha256;
        }
}

int tg_ek_template_public(const tg_ek_template *t, TPM2B_PUBLIC *ret) {
        TPM2B_PUBLIC pub = {};
        TPMT_PUBLIC *p = &pub.publicArea;
        const uint8_t *policy_a, *policy_b, *policy_c;
        size_t digest = hash_size(t->name_alg);
        TPMT_SYM_DEF_OBJECT sym = {
                .algorithm = TPM2_ALG_AES,
                .keyBits.aes = t->aes_bits,
                .mode.aes = TPM2_ALG_CFB,
        };

        if (digest != 32 && digest != 48)
                return log_error_rc(-TG_ERR_INVALID, "EK template %s: unsupported name algorithm.", t->name);
        ek_policy_digests(t->name_alg, &policy_a, &policy_b, &policy_c);

        p->type = t->type;
        p->nameAlg = t->name_alg;
        /* fixedTPM, fixedParent, sensitiveDataOrigin, adminWithPolicy, restricted, decrypt (0x000300B2);
         * the high range adds userWithAuth (0x000300F2). */
        p->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                              TPMA_OBJECT_ADMINWITHPOLICY | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
        if (t->high_range)
                p->objectAttributes |= TPMA_OBJECT_USERWITHAUTH;
        p->authPolicy.size = (uint16_t) digest;
        memcpy(p->authPolicy.buffer, t->high_range ? policy_b : policy_a, digest);

        switch (t->type) {
        case TPM2_ALG_RSA:
                p->parameters.rsaDetail.symmetric = sym;
                p->parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
                p->parameters.rsaDetail.keyBits = t->rsa_bits;
                p->parameters.rsaDetail.exponent = 0;
                /* Low range: a zero-filled unique of the modulus size. High range: empty. */
                if (!t->high_range)
                        p->unique.rsa.size = t->rsa_bits / 8;
                break;
        case TPM2_ALG_ECC:
                p->parameters.eccDetail.symmetric = sym;
                p->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
                p->parameters.eccDetail.curveID = t->curve;
                p->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
                if (!t->high_range) {
                        p->unique.ecc.x.size = 32;
                        p->unique.ecc.y.size = 32;
                }
                break;
        default:
                return log_error_rc(-TG_ERR_INVALID, "EK template %s: unsupported key type.", t->name);
        }
        *ret = pub;
        return 0;
}

/* ---- Certificates ---- */

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

static char *name_oneline(const X509_NAME *name) {
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

        r = tg_read_file(path, 1024 * 1024, &buf, &size);
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
                subject = name_oneline(X509_get_subject_name(at));
                issuer = name_oneline(X509_get_issuer_name(at));
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

struct tg_ek_trust {
        X509_STORE *anchors;       /* the stores' self-signed roots */
        STACK_OF(X509) *known;     /* every certificate of the stores, for diagnostics */
        STACK_OF(X509) *untrusted; /* the stores' other certificates plus the intermediates file */
        STACK_OF(X509) *distrusted; /* certificates dropped by a distrust list, for diagnostics */
        tg_ek_manifest **manifests; /* of the store directories that have one: vendor names */
        size_t n_manifests;
        tg_ek_fingerprints distrust; /* every store's distrust lists, for helpers added later */
};

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

static bool cert_sha256(X509 *c, uint8_t out[32]) {
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
                if (!cert_sha256(c, fp))
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

        if (!cert_sha256(cert, fp))
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
                        _cleanup_free_ char *subject = name_oneline(X509_get_subject_name(d));
                        uint8_t fp[32];
                        char hex[96] = "";
                        if (cert_sha256(d, fp))
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
                if (!root || !cert_sha256(root, a.sha256))
                        return -TG_ERR_NOMEM;
                a.vendor = anchor_vendor(trust, root, a.sha256);
                a.subject = name_oneline(X509_get_subject_name(root));
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

/* ---- KDFs ---- */

static int kdf_run(const char *kdf_name, const OSSL_PARAM params[], uint8_t *out, size_t out_size) {
        _cleanup_(EVP_KDF_freep) EVP_KDF *kdf = EVP_KDF_fetch(NULL, kdf_name, NULL);
        _cleanup_(EVP_KDF_CTX_freep) EVP_KDF_CTX *ctx = NULL;

        if (!kdf)
                return log_error_rc(-TG_ERR_IO, "OpenSSL has no %s KDF.", kdf_name);
        ctx = EVP_KDF_CTX_new(kdf);
        if (!ctx)
                return -TG_ERR_NOMEM;
        if (EVP_KDF_derive(ctx, out, out_size, params) != 1) {
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "OpenSSL %s derivation failed.", kdf_name);
        }
        return 0;
}

/* label ‖ 00 ‖ u ‖ v, in a wiped buffer (it may hold secret-derived context). */
static int concat_label(const char *label, const uint8_t *u, size_t u_size, const uint8_t *v, size_t v_size,
                        bool with_label, tg_secret **ret) {
        size_t label_size = with_label ? strlen(label) + 1 : 0;
        tg_secret *s;
        int r;

        r = tg_secret_new(label_size + u_size + v_size, &s);
        if (r < 0)
                return r;
        if (label_size > 0)
                memcpy(s->data, label, label_size);
        if (u_size > 0)
                memcpy(s->data + label_size, u, u_size);
        if (v_size > 0)
                memcpy(s->data + label_size + u_size, v, v_size);
        *ret = s;
        return 0;
}

int tg_kdfa(TPMI_ALG_HASH hash, const uint8_t *key, size_t key_size, const char *label,
            const uint8_t *context_u, size_t u_size, const uint8_t *context_v, size_t v_size,
            size_t bits, uint8_t *out) {
        _cleanup_secret_ tg_secret *context = NULL;
        const char *md = hash_name(hash);
        int r;

        if (!md || bits == 0 || bits % 8 != 0 || key_size == 0 || !label)
                return log_error_rc(-TG_ERR_INVALID, "KDFa: invalid parameters.");
        r = concat_label(label, context_u, u_size, context_v, v_size, false, &context);
        if (r < 0)
                return r;
        /*
         * SP 800-108 counter mode with a 32-bit counter first, the label,
         * OpenSSL's 00 separator (= the label's NUL terminator in TPM terms),
         * the context and the 32-bit output length in bits: exactly KDFa.
         */
        OSSL_PARAM params[] = {
                OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_MODE, (char *) "COUNTER", 0),
                OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_MAC, (char *) "HMAC", 0),
                OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *) md, 0),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *) key, key_size),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *) label, strlen(label)),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, context->data, context->size),
                OSSL_PARAM_construct_end(),
        };
        return kdf_run("KBKDF", params, out, bits / 8);
}

int tg_kdfe(TPMI_ALG_HASH hash, const uint8_t *z, size_t z_size, const char *label,
            const uint8_t *party_u, size_t u_size, const uint8_t *party_v, size_t v_size,
            size_t bits, uint8_t *out) {
        _cleanup_secret_ tg_secret *info = NULL;
        const char *md = hash_name(hash);
        int r;

        if (!md || bits == 0 || bits % 8 != 0 || z_size == 0 || !label)
                return log_error_rc(-TG_ERR_INVALID, "KDFe: invalid parameters.");
        r = concat_label(label, party_u, u_size, party_v, v_size, true, &info);
        if (r < 0)
                return r;
        /* SP 800-56C one-step hash KDF: H([i]32 ‖ Z ‖ FixedInfo), FixedInfo = label ‖ 00 ‖ U ‖ V. */
        OSSL_PARAM params[] = {
                OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *) md, 0),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *) z, z_size),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info->data, info->size),
                OSSL_PARAM_construct_end(),
        };
        return kdf_run("SSKDF", params, out, bits / 8);
}

/* ---- MakeCredential in software ---- */

/* RSA (Part 1 B.10.4): seed = random, secret = OAEP(nameAlg, label "IDENTITY\0"). */
static int seed_rsa(const TPMT_PUBLIC *ek, EVP_PKEY *ek_key, size_t seed_size, tg_secret **ret_seed,
                    TPM2B_ENCRYPTED_SECRET *ret_secret) {
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, ek_key, NULL);
        _cleanup_secret_ tg_secret *seed = NULL;
        TPM2B_ENCRYPTED_SECRET secret = {};
        const char *md = hash_name(ek->nameAlg);
        unsigned char *label = NULL;
        size_t out = sizeof secret.secret;
        int r;

        if (!ctx)
                return -TG_ERR_NOMEM;
        r = tg_secret_new_random(seed_size, &seed);
        if (r < 0)
                return r;
        label = OPENSSL_memdup("IDENTITY", sizeof "IDENTITY");
        if (!label)
                return -TG_ERR_NOMEM;
        if (EVP_PKEY_encrypt_init(ctx) != 1 ||
            EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) != 1 ||
            EVP_PKEY_CTX_set_rsa_oaep_md_name(ctx, md, NULL) != 1 ||
            EVP_PKEY_CTX_set_rsa_mgf1_md_name(ctx, md, NULL) != 1) {
                OPENSSL_free(label);
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "OpenSSL cannot set up RSA-OAEP for the EK.");
        }
        if (EVP_PKEY_CTX_set0_rsa_oaep_label(ctx, label, sizeof "IDENTITY") != 1) {
                OPENSSL_free(label);
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "OpenSSL cannot set the RSA-OAEP label.");
        }
        if (EVP_PKEY_encrypt(ctx, secret.secret, &out, seed->data, seed->size) != 1) {
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "RSA-OAEP encryption of the credential seed failed.");
        }
        secret.size = (uint16_t) out;
        *ret_seed = TAKE_PTR(seed);
        *ret_secret = secret;
        return 0;
}

static int bn_to_padded(const BIGNUM *bn, uint8_t *out, size_t size) {
        return BN_bn2binpad(bn, out, (int) size) == (int) size ? 0 : -TG_ERR_INVALID;
}

/*
 * ECC (Part 1 C.6.4): an ephemeral key pair on the EK's curve, Z = x of
 * d_e·Q_EK, seed = KDFe(nameAlg, Z, "IDENTITY", x_e, x_EK); the secret is the
 * ephemeral public point.
 */
static int seed_ecc(const TPMT_PUBLIC *ek, EVP_PKEY *ek_key, size_t seed_size, tg_secret **ret_seed,
                    TPM2B_ENCRYPTED_SECRET *ret_secret) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *ephemeral = NULL;
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = NULL;
        _cleanup_(BN_freep) BIGNUM *x = NULL, *y = NULL;
        _cleanup_secret_ tg_secret *z = NULL, *seed = NULL;
        TPMS_ECC_POINT point = {};
        TPM2B_ENCRYPTED_SECRET secret = {};
        size_t coord = ek->unique.ecc.x.size, z_size = 0, off = 0;
        const char *group = ek->parameters.eccDetail.curveID == TPM2_ECC_NIST_P384 ? "P-384" : "P-256";
        TSS2_RC rc;
        int r;

        ephemeral = EVP_PKEY_Q_keygen(NULL, NULL, "EC", group);
        if (!ephemeral ||
            EVP_PKEY_get_bn_param(ephemeral, OSSL_PKEY_PARAM_EC_PUB_X, &x) != 1 ||
            EVP_PKEY_get_bn_param(ephemeral, OSSL_PKEY_PARAM_EC_PUB_Y, &y) != 1) {
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "OpenSSL cannot create an ephemeral %s key.", group);
        }
        point.x.size = point.y.size = (uint16_t) coord;
        if (bn_to_padded(x, point.x.buffer, coord) < 0 || bn_to_padded(y, point.y.buffer, coord) < 0)
                return log_error_rc(-TG_ERR_INVALID, "The ephemeral point does not fit the EK's curve.");

        r = tg_secret_new(coord, &z);
        if (r < 0)
                return r;
        ctx = EVP_PKEY_CTX_new_from_pkey(NULL, ephemeral, NULL);
        z_size = z->size;
        if (!ctx || EVP_PKEY_derive_init(ctx) != 1 || EVP_PKEY_derive_set_peer(ctx, ek_key) != 1 ||
            EVP_PKEY_derive(ctx, z->data, &z_size) != 1 || z_size != coord) {
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "ECDH with the EK public key failed.");
        }

        r = tg_secret_new(seed_size, &seed);
        if (r < 0)
                return r;
        r = tg_kdfe(ek->nameAlg, z->data, z->size, "IDENTITY", point.x.buffer, coord,
                    ek->unique.ecc.x.buffer, coord, seed_size * 8, seed->data);
        if (r < 0)
                return r;

        rc = Tss2_MU_TPMS_ECC_POINT_Marshal(&point, secret.secret, sizeof secret.secret, &off);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_INVALID, "Cannot marshal the ephemeral point: %s", Tss2_RC_Decode(rc));
        secret.size = (uint16_t) off;
        *ret_seed = TAKE_PTR(seed);
        *ret_secret = secret;
        return 0;
}

int tg_make_credential(const TPMT_PUBLIC *ek, const TPM2B_NAME *object_name, const tg_secret *credential,
                       TPM2B_ID_OBJECT *ret_blob, TPM2B_ENCRYPTED_SECRET *ret_secret) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *ek_key = NULL;
        _cleanup_(EVP_CIPHER_CTX_freep) EVP_CIPHER_CTX *cipher = NULL;
        _cleanup_secret_ tg_secret *seed = NULL, *sym_key = NULL, *hmac_key = NULL, *plain = NULL;
        const TPMT_SYM_DEF_OBJECT *sym;
        TPM2B_ENCRYPTED_SECRET secret = {};
        TPM2B_ID_OBJECT blob = {};
        const char *md = hash_name(ek->nameAlg);
        size_t digest = hash_size(ek->nameAlg), hmac_len = 0, enc_size;
        uint8_t iv[16] = {}, *enc;
        int r, outl = 0, finl = 0;

        if (!md)
                return log_error_rc(-TG_ERR_INVALID, "EK name algorithm 0x%04x is not supported.", ek->nameAlg);
        if (credential->size == 0 || credential->size > digest)
                return log_error_rc(-TG_ERR_INVALID, "A credential must hold 1..%zu bytes.", digest);
        if (object_name->size == 0)
                return log_error_rc(-TG_ERR_INVALID, "MakeCredential needs the name of the object to bind.");

        sym = ek->type == TPM2_ALG_RSA ? &ek->parameters.rsaDetail.symmetric : &ek->parameters.eccDetail.symmetric;
        if ((ek->type != TPM2_ALG_RSA && ek->type != TPM2_ALG_ECC) || sym->algorithm != TPM2_ALG_AES ||
            sym->mode.aes != TPM2_ALG_CFB || (sym->keyBits.aes != 128 && sym->keyBits.aes != 256))
                return log_error_rc(-TG_ERR_INVALID, "The EK is not a storage key with AES-CFB protection.");

        r = tg_public_to_evp(ek, &ek_key);
        if (r < 0)
                return r;
        r = ek->type == TPM2_ALG_RSA ? seed_rsa(ek, ek_key, digest, &seed, &secret)
                                     : seed_ecc(ek, ek_key, digest, &seed, &secret);
        if (r < 0)
                return r;

        /* symKey = KDFa(nameAlg, seed, "STORAGE", name, -, symmetric key bits). */
        r = tg_secret_new(sym->keyBits.aes / 8, &sym_key);
        if (r < 0)
                return r;
        r = tg_kdfa(ek->nameAlg, seed->data, seed->size, "STORAGE", object_name->name, object_name->size,
                    NULL, 0, sym->keyBits.aes, sym_key->data);
        if (r < 0)
                return r;

        /* encIdentity = AES-CFB(symKey, IV = 0, marshalled TPM2B_DIGEST(credential)). */
        r = tg_secret_new(2 + credential->size, &plain);
        if (r < 0)
                return r;
        plain->data[0] = (uint8_t) (credential->size >> 8);
        plain->data[1] = (uint8_t) credential->size;
        memcpy(plain->data + 2, credential->data, credential->size);
        enc_size = plain->size;
        /* The blob: TPM2B(outerHMAC) ‖ encIdentity. */
        if (2 + digest + enc_size > sizeof blob.credential)
                return log_error_rc(-TG_ERR_INVALID, "The credential blob would not fit a TPM2B_ID_OBJECT.");
        enc = blob.credential + 2 + digest;
        cipher = EVP_CIPHER_CTX_new();
        if (!cipher)
                return -TG_ERR_NOMEM;
        if (EVP_EncryptInit_ex(cipher, sym->keyBits.aes == 128 ? EVP_aes_128_cfb128() : EVP_aes_256_cfb128(),
                               NULL, sym_key->data, iv) != 1 ||
            EVP_EncryptUpdate(cipher, enc, &outl, plain->data, (int) plain->size) != 1 ||
            EVP_EncryptFinal_ex(cipher, enc + outl, &finl) != 1 || (size_t) outl + (size_t) finl != enc_size) {
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "AES-CFB encryption of the credential failed.");
        }

        /* HMACkey = KDFa(nameAlg, seed, "INTEGRITY", -, -, digest bits); outerHMAC over encIdentity ‖ name. */
        r = tg_secret_new(digest, &hmac_key);
        if (r < 0)
                return r;
        r = tg_kdfa(ek->nameAlg, seed->data, seed->size, "INTEGRITY", NULL, 0, NULL, 0, digest * 8, hmac_key->data);
        if (r < 0)
                return r;
        {
                uint8_t mac_input[sizeof blob.credential + sizeof object_name->name];
                memcpy(mac_input, enc, enc_size);
                memcpy(mac_input + enc_size, object_name->name, object_name->size);
                if (!EVP_Q_mac(NULL, "HMAC", NULL, md, NULL, hmac_key->data, hmac_key->size, mac_input,
                               enc_size + object_name->size, blob.credential + 2, digest, &hmac_len) ||
                    hmac_len != digest) {
                        ERR_clear_error();
                        return log_error_rc(-TG_ERR_IO, "HMAC of the credential failed.");
                }
        }
        blob.credential[0] = (uint8_t) (digest >> 8);
        blob.credential[1] = (uint8_t) digest;
        blob.size = (uint16_t) (2 + digest + enc_size);

        *ret_blob = blob;
        *ret_secret = secret;
        return 0;
}

/* ---- TPM side ---- */

static bool rc_is_auth_failure(TSS2_RC rc) {
        TSS2_RC base = tg_tpm_rc_base(rc);
        return (rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER &&
               (base == TPM2_RC_BAD_AUTH || base == TPM2_RC_AUTH_FAIL);
}

static int endorsement_rc(TSS2_RC rc, const char *operation) {
        if (rc_is_auth_failure(rc))
                return log_error_rc(-TG_ERR_AUTH_NEEDED,
                                    "%s: the endorsement hierarchy has a password. Give it with "
                                    "--endorsement-auth-file (it is never stored), then retry.", operation);
        return tg_tpm_rc(rc, operation);
}

/* The EK certificate NV indices that exist in this TPM (of those we know). */
static int nv_indices_present(tg_tpm *tpm, bool present[static ELEMENTSOF(ek_templates)]) {
        TPM2_HANDLE next = 0x01C00000;
        TPMI_YES_NO more = TPM2_YES;

        memset(present, 0, sizeof(bool) * ELEMENTSOF(ek_templates));
        while (more == TPM2_YES) {
                _cleanup_esys_ TPMS_CAPABILITY_DATA *cap = NULL;
                TSS2_RC rc = Esys_GetCapability(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                                TPM2_CAP_HANDLES, next, TPM2_MAX_CAP_HANDLES, &more, &cap);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "GetCapability(NV indices)");
                if (cap->capability != TPM2_CAP_HANDLES)
                        return log_error_rc(-TG_ERR_INTERPOSER,
                                            "GetCapability(NV indices) answered with capability 0x%08x: "
                                            "an interposer on the TPM bus is suspected.", cap->capability);
                const TPML_HANDLE *h = &cap->data.handles;
                if (h->count == 0)
                        break;
                /*
                 * The TPM lists handles in ascending order from `next` on. A list that does not
                 * (a forged "more data" that repeats itself) would keep this loop asking forever:
                 * every round must move `next` forward, so the loop ends.
                 */
                for (uint32_t i = 0; i < h->count; i++) {
                        if (h->handle[i] < next || (i > 0 && h->handle[i] <= h->handle[i - 1]))
                                return log_error_rc(-TG_ERR_INTERPOSER,
                                                    "GetCapability(NV indices) listed handle 0x%08x out of order: "
                                                    "an interposer on the TPM bus is suspected.", h->handle[i]);
                        for (size_t t = 0; t < ELEMENTSOF(ek_templates); t++)
                                if (h->handle[i] == ek_templates[t].nv_index)
                                        present[t] = true;
                }
                if (h->handle[h->count - 1] >= 0x01C0001F)
                        break;
                next = h->handle[h->count - 1] + 1;
        }
        return 0;
}

static uint16_t nv_buffer_max(tg_tpm *tpm) {
        _cleanup_esys_ TPMS_CAPABILITY_DATA *cap = NULL;

        if (tg_tpm_get_properties(tpm->esys, TPM2_PT_NV_BUFFER_MAX, 1, &cap) == 0 &&
            cap->data.tpmProperties.count == 1 &&
            cap->data.tpmProperties.tpmProperty[0].property == TPM2_PT_NV_BUFFER_MAX) {
                uint32_t v = cap->data.tpmProperties.tpmProperty[0].value;
                if (v >= 64)
                        return (uint16_t) (v < TPM2_MAX_NV_BUFFER_SIZE ? v : TPM2_MAX_NV_BUFFER_SIZE);
        }
        return 512; /* every TPM 2.0 supports at least this much */
}

/* owner_session: authorizes an owner-read index (a session salted to a trusted key; the owner password is never
 * sent in clear). An index that authorizes its own read (TPMA_NV_AUTHREAD, empty auth value) needs none. */
static int nv_read(tg_tpm *tpm, ESYS_TR owner_session, uint32_t index, size_t max_size, uint8_t **ret,
                   size_t *ret_size) {
        _cleanup_handle_ tg_handle nv = { .esys = tpm->esys, .tr = ESYS_TR_NONE, .close_only = true };
        _cleanup_esys_ TPM2B_NV_PUBLIC *pub = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        uint16_t chunk = nv_buffer_max(tpm), size;
        ESYS_TR auth, session = ESYS_TR_PASSWORD;
        TSS2_RC rc;

        rc = Esys_TR_FromTPMPublic(tpm->esys, index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &nv.tr);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "Opening the EK certificate NV index");
        rc = Esys_NV_ReadPublic(tpm->esys, nv.tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &pub, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "NV_ReadPublic(EK certificate)");
        size = pub->nvPublic.dataSize;
        if (size == 0 || size > max_size)
                return log_error_rc(-TG_ERR_EK_CERT, "The EK certificate NV index 0x%08x has an implausible size (%u).",
                                    index, size);
        /*
         * EK certificate indices are TPMA_NV_AUTHREAD with an empty auth value:
         * the index authorizes its own read. An index readable only by the
         * owner is read with the owner hierarchy (its auth as set by the caller).
         */
        if (pub->nvPublic.attributes & TPMA_NV_AUTHREAD)
                auth = nv.tr;
        else if (pub->nvPublic.attributes & TPMA_NV_OWNERREAD) {
                auth = ESYS_TR_RH_OWNER;
                session = owner_session;
        } else
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "The EK certificate NV index 0x%08x is readable neither with its own nor with "
                                    "owner authorization.", index);
        buf = malloc(size);
        if (!buf)
                return -TG_ERR_NOMEM;
        for (uint16_t off = 0; off < size;) {
                _cleanup_esys_ TPM2B_MAX_NV_BUFFER *data = NULL;
                uint16_t want = size - off < chunk ? size - off : chunk;
                rc = Esys_NV_Read(tpm->esys, auth, nv.tr, session, ESYS_TR_NONE, ESYS_TR_NONE,
                                  want, off, &data);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "NV_Read(EK certificate)");
                if (data->size != want)
                        return log_error_rc(-TG_ERR_TPM, "NV_Read returned %u bytes instead of %u.", data->size, want);
                memcpy(buf + off, data->buffer, want);
                off += want;
        }
        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

/*
 * TCG EK Credential Profile 2.5, 2.2.1.5: NV indices 0x01C00100 to
 * 0x01C001FF may hold certificates of the EK certificate's chain, DER,
 * concatenated, padded. Intel PTT keeps its per-platform CAs (below the
 * "On Die CSME P_MCC" issuing CA) there, so its chains cannot be built
 * without them.
 */
#define EK_CHAIN_NV_FIRST 0x01C00100
#define EK_CHAIN_NV_LAST 0x01C001FF
#define EK_CHAIN_MAX_SIZE 16384

static int nv_chain_indices(tg_tpm *tpm, uint32_t *indices, size_t max, size_t *ret_n) {
        TPM2_HANDLE next = EK_CHAIN_NV_FIRST;
        TPMI_YES_NO more = TPM2_YES;
        size_t n = 0;

        while (more == TPM2_YES && n < max) {
                _cleanup_esys_ TPMS_CAPABILITY_DATA *cap = NULL;
                TSS2_RC rc = Esys_GetCapability(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                                TPM2_CAP_HANDLES, next, TPM2_MAX_CAP_HANDLES, &more, &cap);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "GetCapability(NV indices)");
                const TPML_HANDLE *h = &cap->data.handles;
                if (h->count == 0)
                        break;
                for (uint32_t i = 0; i < h->count && n < max; i++)
                        if (h->handle[i] >= EK_CHAIN_NV_FIRST && h->handle[i] <= EK_CHAIN_NV_LAST)
                                indices[n++] = h->handle[i];
                if (h->handle[h->count - 1] >= EK_CHAIN_NV_LAST)
                        break;
                next = h->handle[h->count - 1] + 1;
        }
        *ret_n = n;
        return 0;
}

static bool all_padding(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (p[i] != p[0] || (p[i] != 0x00 && p[i] != 0xff))
                        return false;
        return true;
}

/* Adds the concatenated DER certificates of buf (padding after the last one allowed) to the trust's helpers. */
static int add_der_chain(tg_ek_trust *t, const uint8_t *buf, size_t size, uint32_t index, unsigned *ret_added) {
        const uint8_t *p = buf;

        while ((size_t) (p - buf) < size) {
                size_t left = size - (size_t) (p - buf);
                X509 *c;
                int r;

                if (all_padding(p, left))
                        break;
                c = *p == 0x30 ? d2i_X509(NULL, &p, (long) left) : NULL;
                ERR_clear_error();
                if (!c) {
                        log_info("NV index 0x%08x holds no certificate at offset %zu: the rest of it is ignored.",
                                 index, size - left);
                        return -TG_ERR_EK_CERT;
                }
                r = tg_ek_trust_add_untrusted(t, c);
                X509_free(c);
                if (r < 0)
                        return r;
                *ret_added += (unsigned) r;
        }
        return 0;
}

int tg_ek_trust_add_nv_chain(tg_ek_trust *t, tg_tpm *tpm) {
        uint32_t indices[32];
        size_t n = 0;
        unsigned added = 0;
        int r;

        r = nv_chain_indices(tpm, indices, ELEMENTSOF(indices), &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ uint8_t *buf = NULL;
                size_t size = 0;

                /* Chain indices authorize their own read; an owner-read one gets the empty owner password,
                 * as no owner password is ever given to provisioning or doctor. */
                r = nv_read(tpm, ESYS_TR_PASSWORD, indices[i], EK_CHAIN_MAX_SIZE, &buf, &size);
                if (r == -TG_ERR_NOMEM || r == -TG_ERR_TPM_UNREACHABLE)
                        return r;
                if (r < 0) {
                        /* Unreadable or implausible: it only ever helps, so it is skipped. */
                        log_info("The EK chain NV index 0x%08x is not readable: ignored.", indices[i]);
                        continue;
                }
                r = add_der_chain(t, buf, size, indices[i], &added);
                if (r == -TG_ERR_NOMEM)
                        return r;
        }
        if (added > 0)
                log_debug("%u intermediate certificates from the TPM's EK chain NV indices.", added);
        return 0;
}

int tg_ek_cert_read_nv(tg_tpm *tpm, uint32_t nv_index, X509 **ret) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t size;
        int r;

        /* doctor's re-check: no owner password is given to it, so an owner-read index is read with the
         * empty one (nothing to protect). */
        r = nv_read(tpm, ESYS_TR_PASSWORD, nv_index, EK_CERT_MAX_SIZE, &buf, &size);
        if (r < 0)
                return r;
        return tg_ek_cert_parse(buf, size, ret);
}

/*
 * CreatePrimary(endorsement, template) and compare with the certified key.
 * Returns 0 with the EK loaded in ret_ek, -TG_ERR_EK_CERT on a key mismatch.
 */
static int ek_create_matching(tg_tpm *tpm, ESYS_TR auth_session, const tg_ek_template *t, EVP_PKEY *cert_key,
                              tg_handle *ret_ek, TPM2B_PUBLIC *ret_public) {
        _cleanup_handle_ tg_handle ek = { .esys = tpm->esys, .tr = ESYS_TR_NONE };
        _cleanup_esys_ TPM2B_PUBLIC *out = NULL;
        TPM2B_SENSITIVE_CREATE sensitive = {};
        TPM2B_DATA outside = {};
        TPML_PCR_SELECTION pcrs = {};
        TPM2B_PUBLIC in;
        TSS2_RC rc;
        int r;

        r = tg_ek_template_public(t, &in);
        if (r < 0)
                return r;
        rc = Esys_CreatePrimary(tpm->esys, ESYS_TR_RH_ENDORSEMENT, auth_session, ESYS_TR_NONE, ESYS_TR_NONE,
                                &sensitive, &in, &outside, &pcrs, &ek.tr, &out, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return endorsement_rc(rc, "CreatePrimary(EK)");
        if (out->publicArea.type != in.publicArea.type || out->publicArea.nameAlg != in.publicArea.nameAlg ||
            out->publicArea.objectAttributes != in.publicArea.objectAttributes ||
            out->publicArea.authPolicy.size != in.publicArea.authPolicy.size ||
            memcmp(out->publicArea.authPolicy.buffer, in.publicArea.authPolicy.buffer, in.publicArea.authPolicy.size) != 0)
                return log_error_rc(-TG_ERR_EK_CERT, "The TPM returned an EK that does not follow template %s.", t->name);
        if (!tg_public_equals_evp(&out->publicArea, cert_key))
                return log_debug_rc(-TG_ERR_EK_CERT, "EK from template %s differs from the certified key.", t->name);
        *ret_public = *out;
        *ret_ek = ek;
        ek.tr = ESYS_TR_NONE;
        return 0;
}

/* A verified EK certificate, the template that re-creates its key, and that EK loaded. */
typedef struct ek_candidate {
        X509 *cert;
        const tg_ek_template *template;
        uint32_t nv_index;
        tg_handle ek;
        TPM2B_PUBLIC ek_public;
        tg_ek_anchor anchor;
} ek_candidate;

static void ek_candidate_done(ek_candidate *c) {
        tg_handle_release(&c->ek);
        tg_ek_anchor_done(&c->anchor);
        X509_free(c->cert);
        c->cert = NULL;
}

/* Verifies cert and finds the template (among those allowed for nv_index, 0 = any) that re-creates its key. */
static int ek_candidate_try(tg_tpm *tpm, ESYS_TR auth_session, const tg_ek_trust *trust, X509 *cert,
                            uint32_t nv_index, const char *origin, ek_candidate *ret) {
        _cleanup_(tg_ek_anchor_done) tg_ek_anchor anchor = {};
        EVP_PKEY *key;
        int r;

        r = tg_ek_cert_verify_anchor(trust, cert, &anchor);
        if (r < 0)
                return r;
        key = X509_get0_pubkey(cert);
        if (!key)
                return log_error_rc(-TG_ERR_EK_CERT, "The EK certificate from %s has no usable public key.", origin);

        bool fits_any = false;
        for (size_t i = 0; i < ELEMENTSOF(ek_templates); i++) {
                const tg_ek_template *t = &ek_templates[i];
                if ((nv_index != 0 && t->nv_index != nv_index) || !tg_ek_template_fits_key(t, key))
                        continue;
                fits_any = true;
                r = ek_create_matching(tpm, auth_session, t, key, &ret->ek, &ret->ek_public);
                if (r == -TG_ERR_EK_CERT)
                        continue;
                if (r < 0)
                        return r;
                ret->template = t;
                ret->nv_index = nv_index;
                if (!X509_up_ref(cert))
                        return -TG_ERR_NOMEM;
                ret->cert = cert;
                ret->anchor = anchor;
                anchor = (tg_ek_anchor) {};
                return 0;
        }
        if (!fits_any)
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "The EK certificate from %s holds a key type no EK template of its index has.", origin);
        return log_error_rc(-TG_ERR_EK_CERT,
                            "The EK certificate from %s does not belong to this TPM: the EK the TPM re-creates has "
                            "another public key. Use this TPM's own EK certificate.", origin);
}

static int ek_candidate_from_file(tg_tpm *tpm, ESYS_TR auth_session, const tg_ek_trust *trust,
                                  const char *cert_file, ek_candidate *ret) {
        _cleanup_free_ uint8_t *buf = NULL;
        _cleanup_(X509_freep) X509 *cert = NULL;
        size_t size = 0;
        int r;

        r = tg_read_file(cert_file, EK_CERT_MAX_SIZE, &buf, &size);
        if (r < 0)
                return log_error_rc(-TG_ERR_EK_CERT, "Cannot read the EK certificate file %s (%s).", cert_file,
                                    tg_err_str(r));
        r = tg_ek_cert_parse(buf, size, &cert);
        if (r < 0)
                return r;
        return ek_candidate_try(tpm, auth_session, trust, cert, 0, cert_file, ret);
}

static int ek_candidate_from_nv(tg_tpm *tpm, ESYS_TR auth_session, const tg_ek_trust *trust, ek_candidate *ret) {
        bool present[ELEMENTSOF(ek_templates)];
        int r, first_error = 0;

        r = nv_indices_present(tpm, present);
        if (r < 0)
                return r;
        /* In order of preference; a certificate that fails lets the next one try. */
        for (size_t i = 0; i < ELEMENTSOF(ek_templates); i++) {
                _cleanup_free_ uint8_t *buf = NULL;
                _cleanup_(X509_freep) X509 *cert = NULL;
                char origin[64];
                size_t size = 0;

                if (!present[i])
                        continue;
                snprintf(origin, sizeof origin, "NV index 0x%08x", ek_templates[i].nv_index);
                r = nv_read(tpm, auth_session, ek_templates[i].nv_index, EK_CERT_MAX_SIZE, &buf, &size);
                if (r >= 0)
                        r = tg_ek_cert_parse(buf, size, &cert);
                if (r >= 0)
                        r = ek_candidate_try(tpm, auth_session, trust, cert, ek_templates[i].nv_index, origin, ret);
                if (r >= 0)
                        return 0;
                if (r != -TG_ERR_EK_CERT)
                        return r;
                if (first_error == 0)
                        first_error = r;
                log_info("The EK certificate at %s is not usable; trying the next one.", origin);
        }
        if (first_error < 0)
                return first_error;
        return log_error_rc(-TG_ERR_EK_CERT,
                            "This TPM has no EK certificate in NV (firmware TPMs often have none). Give the EK "
                            "certificate as a file, obtained from the TPM or platform vendor.");
}

/* auth_session: authorizes PolicySecret(endorsement), salted to the certified EK. */
static int ek_policy_session(tg_tpm *tpm, ESYS_TR auth_session, const tg_ek_template *t, tg_handle *ret) {
        _cleanup_handle_ tg_handle session = { .esys = tpm->esys, .tr = ESYS_TR_NONE };
        TPMT_SYM_DEF no_symmetric = { .algorithm = TPM2_ALG_NULL };
        TSS2_RC rc;

        rc = Esys_StartAuthSession(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                   NULL, TPM2_SE_POLICY, &no_symmetric, t->name_alg, &session.tr);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "StartAuthSession(EK policy)");
        rc = Esys_PolicySecret(tpm->esys, ESYS_TR_RH_ENDORSEMENT, session.tr, auth_session, ESYS_TR_NONE,
                               ESYS_TR_NONE, NULL, NULL, NULL, 0, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return endorsement_rc(rc, "PolicySecret(endorsement)");
        if (t->high_range) {
                const uint8_t *a, *b, *c;
                size_t n = hash_size(t->name_alg);
                TPML_DIGEST branches = { .count = 2 };

                ek_policy_digests(t->name_alg, &a, &b, &c);
                branches.digests[0].size = branches.digests[1].size = (uint16_t) n;
                memcpy(branches.digests[0].buffer, a, n);
                memcpy(branches.digests[1].buffer, c, n);
                rc = Esys_PolicyOR(tpm->esys, session.tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &branches);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "PolicyOR(EK policy B)");
        }
        *ret = session;
        session.tr = ESYS_TR_NONE;
        return 0;
}

static int ek_activate(tg_tpm *tpm, ek_candidate *c, ESYS_TR auth_session, ESYS_TR key, const TPM2B_NAME *key_name) {
        _cleanup_secret_ tg_secret *challenge = NULL;
        _cleanup_handle_ tg_handle session = TG_HANDLE_NULL;
        TPM2B_DIGEST *cert_info = NULL;
        TPM2B_ID_OBJECT blob;
        TPM2B_ENCRYPTED_SECRET secret;
        TSS2_RC rc;
        bool equal;
        int r;

        r = tg_secret_new_random(32, &challenge);
        if (r < 0)
                return r;
        r = tg_make_credential(&c->ek_public.publicArea, key_name, challenge, &blob, &secret);
        if (r < 0)
                return r;
        r = ek_policy_session(tpm, auth_session, c->template, &session);
        if (r < 0)
                return r;

        /* activateHandle: the key (admin role, empty password); keyHandle: the EK (its policy). */
        rc = Esys_ActivateCredential(tpm->esys, key, c->ek.tr, ESYS_TR_PASSWORD, session.tr, ESYS_TR_NONE,
                                     &blob, &secret, &cert_info);
        if (rc != TSS2_RC_SUCCESS) {
                TSS2_RC base = tg_tpm_rc_base(rc);
                if ((rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER &&
                    (base == TPM2_RC_INTEGRITY || base == TPM2_RC_VALUE || base == TPM2_RC_SIZE ||
                     base == TPM2_RC_ECC_POINT || base == TPM2_RC_POLICY_FAIL))
                        return log_alert_rc(-TG_ERR_EK_PROOF,
                                            "The TPM answering is not the TPM of this EK certificate: interposer "
                                            "suspected (ActivateCredential refused: %s). Do not provision this machine "
                                            "until the TPM bus has been inspected.", Tss2_RC_Decode(rc));
                return tg_tpm_rc(rc, "ActivateCredential");
        }
        equal = cert_info->size == challenge->size && memeq_const(cert_info->buffer, challenge->data, challenge->size);
        explicit_bzero(cert_info, sizeof *cert_info);
        Esys_Free(cert_info);
        if (!equal)
                return log_alert_rc(-TG_ERR_EK_PROOF,
                                    "The TPM answering is not the TPM of this EK certificate: interposer suspected "
                                    "(ActivateCredential returned a wrong challenge). Do not provision this machine "
                                    "until the TPM bus has been inspected.");
        return 0;
}

struct tg_ek_certified {
        tg_ek_trust *trust;
        ek_candidate candidate;
        tg_handle session; /* HMAC session salted to the certified EK */
};

void tg_ek_certified_free(tg_ek_certified *ek) {
        if (!ek)
                return;
        tg_handle_release(&ek->session);
        ek_candidate_done(&ek->candidate);
        tg_ek_trust_free(ek->trust);
        free(ek);
}

ESYS_TR tg_ek_certified_session(const tg_ek_certified *ek) {
        return ek->session.tr;
}

int tg_ek_certified_load(tg_tpm *tpm, const tg_ek_options *opts, ESYS_TR auth_session, tg_ek_certified **ret) {
        static const TPMT_SYM_DEF aes128cfb = {
                .algorithm = TPM2_ALG_AES,
                .keyBits.aes = 128,
                .mode.aes = TPM2_ALG_CFB,
        };
        _cleanup_(tg_ek_certified_freep) tg_ek_certified *ek = NULL;
        TSS2_RC rc;
        int r;

        assert(tpm && opts && ret);
        ek = calloc(1, sizeof *ek);
        if (!ek)
                return -TG_ERR_NOMEM;
        ek->candidate.ek = (tg_handle) { .esys = tpm->esys, .tr = ESYS_TR_NONE };
        ek->session = (tg_handle) { .esys = tpm->esys, .tr = ESYS_TR_NONE };

        /* The CA store first: a broken store is reported once, before any TPM work. */
        r = tg_ek_trust_load(opts->ca_store, opts->intermediates_file, &ek->trust);
        if (r < 0)
                return r;
        /* The TPM's own chain certificates, as helpers only: the chain must still end at a store root. */
        r = tg_ek_trust_add_nv_chain(ek->trust, tpm);
        if (r < 0)
                return r;
        r = opts->cert_file ? ek_candidate_from_file(tpm, auth_session, ek->trust, opts->cert_file, &ek->candidate)
                            : ek_candidate_from_nv(tpm, auth_session, ek->trust, &ek->candidate);
        if (r < 0)
                return r;
        log_debug("EK certificate verified; EK re-created from template %s.", ek->candidate.template->name);

        /*
         * A session salted to the EK, whose public key we just checked against the
         * certificate: only the certified TPM can recover the salt, so an endorsement
         * password authorized in it (an HMAC, never the password) is safe from the bus.
         */
        rc = Esys_StartAuthSession(tpm->esys, ek->candidate.ek.tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                   ESYS_TR_NONE, NULL, TPM2_SE_HMAC, &aes128cfb, TPM2_ALG_SHA256, &ek->session.tr);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "StartAuthSession (salted to the certified EK)");
        (void) Esys_TRSess_SetAttributes(tpm->esys, ek->session.tr, TPMA_SESSION_CONTINUESESSION, 0xff);
        *ret = TAKE_PTR(ek);
        return 0;
}

int tg_ek_certified_prove(tg_tpm *tpm, tg_ek_certified *ek, ESYS_TR key, const TPM2B_NAME *key_name,
                          tg_ek_result *ret) {
        ek_candidate *c = &ek->candidate;
        tg_ek_result result = {};
        unsigned digest_len = 0;
        int r;

        assert(tpm && ek && key_name && ret);
        r = ek_activate(tpm, c, ek->session.tr, key, key_name);
        if (r < 0)
                return r;

        result.nv_index = c->nv_index;
        result.template_name = c->template->name;
        result.cert_subject = name_oneline(X509_get_subject_name(c->cert));
        result.cert_issuer = name_oneline(X509_get_issuer_name(c->cert));
        result.anchor = c->anchor;
        c->anchor = (tg_ek_anchor) {};
        if (!result.cert_subject || !result.cert_issuer ||
            X509_digest(c->cert, EVP_sha256(), result.cert_sha256, &digest_len) != 1 || digest_len != 32) {
                tg_ek_result_done(&result);
                return -TG_ERR_NOMEM;
        }
        *ret = result;
        return 0;
}

int tg_ek_attest_key(tg_tpm *tpm, const tg_ek_options *opts, ESYS_TR auth_session, ESYS_TR key,
                     const TPM2B_NAME *key_name, tg_ek_result *ret) {
        _cleanup_(tg_ek_certified_freep) tg_ek_certified *ek = NULL;
        int r;

        r = tg_ek_certified_load(tpm, opts, auth_session, &ek);
        if (r < 0)
                return r;
        return tg_ek_certified_prove(tpm, ek, key, key_name, ret);
}
