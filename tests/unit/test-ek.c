/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * EK module without a TPM: certificate chains made at test time, NV padding,
 * templates and their policy digests recomputed from their definitions, KDFa
 * and KDFe against straightforward independent implementations, and
 * MakeCredential unwrapped with the private key as a TPM would.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <ctype.h>
#include <limits.h>
#include <unistd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/core_names.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/x509v3.h>

#include "ek-cert.h"
#include "ek-store.h"
#include "ek.h"
#include "makecred.h"
#include "tcti.h"
#include "error.h"
#include "log.h"
#include "tpm.h"

/* ---- log capture ---- */

static char last_error[2048];

static void capture_sink(int level, const char *message, void *userdata) {
        if (level <= LOG_ERR)
                snprintf(last_error, sizeof last_error, "%s", message);
}

static void assert_error_mentions(const char *needle) {
        if (!strstr(last_error, needle))
                fail_msg("expected \"%s\" in the error message, got: %s", needle, last_error);
}

/* ---- certificates made at test time ---- */

static EVP_PKEY *gen_key(const char *kind) {
        EVP_PKEY *k;
        if (strcmp(kind, "RSA") == 0)
                k = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t) 2048);
        else
                k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", kind);
        assert_non_null(k);
        return k;
}

static void add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
        X509V3_CTX ctx;
        X509_EXTENSION *ext;

        X509V3_set_ctx(&ctx, issuer ?: cert, cert, NULL, NULL, 0);
        ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        assert_non_null(ext);
        assert_int_equal(X509_add_ext(cert, ext, -1), 1);
        X509_EXTENSION_free(ext);
}

/* The TCG EK certificate SAN: a critical directoryName with TPM manufacturer, model, version. */
static void add_tcg_san(X509 *cert) {
        static const char *const oids[][2] = {
                { "2.23.133.2.1", "id:00001014" }, { "2.23.133.2.2", "swtpm" }, { "2.23.133.2.3", "id:20191023" },
        };
        X509_NAME *dn = X509_NAME_new();
        GENERAL_NAME *gn = GENERAL_NAME_new();
        GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();

        for (size_t i = 0; i < ELEMENTSOF(oids); i++) {
                ASN1_OBJECT *o = OBJ_txt2obj(oids[i][0], 1);
                assert_int_equal(X509_NAME_add_entry_by_OBJ(dn, o, MBSTRING_UTF8, (const unsigned char *) oids[i][1],
                                                            -1, -1, 0), 1);
                ASN1_OBJECT_free(o);
        }
        GENERAL_NAME_set0_value(gn, GEN_DIRNAME, dn);
        assert_true(sk_GENERAL_NAME_push(gens, gn) > 0);
        assert_int_equal(X509_add1_ext_i2d(cert, NID_subject_alt_name, gens, 1, X509V3_ADD_DEFAULT), 1);
        GENERAL_NAMES_free(gens);
}

static void add_unknown_critical(X509 *cert) {
        static const unsigned char der_null[] = { 0x05, 0x00 };
        ASN1_OBJECT *o = OBJ_txt2obj("1.3.6.1.4.1.55555.1", 1);
        ASN1_OCTET_STRING *data = ASN1_OCTET_STRING_new();
        X509_EXTENSION *ext;

        assert_int_equal(ASN1_OCTET_STRING_set(data, der_null, sizeof der_null), 1);
        ext = X509_EXTENSION_create_by_OBJ(NULL, o, 1, data);
        assert_non_null(ext);
        assert_int_equal(X509_add_ext(cert, ext, -1), 1);
        X509_EXTENSION_free(ext);
        ASN1_OCTET_STRING_free(data);
        ASN1_OBJECT_free(o);
}

enum { CERT_CA = 1, CERT_EK = 2, CERT_UNKNOWN_CRITICAL = 4 };

static X509 *make_cert(const char *cn, EVP_PKEY *key, X509 *issuer, EVP_PKEY *issuer_key, unsigned flags,
                       long not_before_days, long not_after_days) {
        static long serial = 1;
        X509 *c = X509_new();

        assert_non_null(c);
        assert_int_equal(X509_set_version(c, X509_VERSION_3), 1);
        ASN1_INTEGER_set(X509_get_serialNumber(c), serial++);
        if (cn[0]) /* TCG EK certificates have an empty subject */
                assert_int_equal(X509_NAME_add_entry_by_txt(X509_get_subject_name(c), "CN", MBSTRING_UTF8,
                                                            (const unsigned char *) cn, -1, -1, 0), 1);
        assert_int_equal(X509_set_issuer_name(c, issuer ? X509_get_subject_name(issuer) : X509_get_subject_name(c)), 1);
        X509_gmtime_adj(X509_getm_notBefore(c), not_before_days * 86400);
        X509_gmtime_adj(X509_getm_notAfter(c), not_after_days * 86400);
        assert_int_equal(X509_set_pubkey(c, key), 1);
        add_ext(c, issuer, NID_subject_key_identifier, "hash");
        add_ext(c, issuer, NID_authority_key_identifier, "keyid:always");
        if (flags & CERT_CA) {
                add_ext(c, issuer, NID_basic_constraints, "critical,CA:TRUE");
                add_ext(c, issuer, NID_key_usage, "critical,keyCertSign,cRLSign");
        }
        if (flags & CERT_EK) {
                add_ext(c, issuer, NID_basic_constraints, "critical,CA:FALSE");
                add_ext(c, issuer, NID_key_usage,
                        EVP_PKEY_is_a(key, "RSA") ? "critical,keyEncipherment" : "critical,keyAgreement");
                add_ext(c, issuer, NID_ext_key_usage, "2.23.133.8.1");
                add_tcg_san(c);
        }
        if (flags & CERT_UNKNOWN_CRITICAL)
                add_unknown_critical(c);
        assert_true(X509_sign(c, issuer_key ?: key, EVP_sha256()) > 0);
        return c;
}

typedef struct ca {
        EVP_PKEY *root_key, *int_key;
        X509 *root, *intermediate;
} ca;

static void make_ca(ca *ret, const char *root_cn, const char *int_cn) {
        ret->root_key = gen_key("P-256");
        ret->int_key = gen_key("P-256");
        ret->root = make_cert(root_cn, ret->root_key, NULL, NULL, CERT_CA, -1, 3650);
        ret->intermediate = make_cert(int_cn, ret->int_key, ret->root, ret->root_key, CERT_CA, -1, 3650);
}

static void ca_done(ca *c) {
        X509_free(c->root);
        X509_free(c->intermediate);
        EVP_PKEY_free(c->root_key);
        EVP_PKEY_free(c->int_key);
}

static char tmpdir[] = "/tmp/tpmguard-test-ek-unit.XXXXXX";

static const char *write_pem(const char *name, X509 *a, X509 *b) {
        static char paths[16][PATH_MAX];
        static size_t next;
        char *path = paths[next++ % ELEMENTSOF(paths)];
        FILE *f;

        snprintf(path, PATH_MAX, "%s/%s", tmpdir, name);
        f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(PEM_write_X509(f, a), 1);
        if (b)
                assert_int_equal(PEM_write_X509(f, b), 1);
        assert_int_equal(fclose(f), 0);
        return path;
}

static const char *write_der(const char *name, X509 *cert) {
        static char paths[8][PATH_MAX];
        static size_t next;
        char *path = paths[next++ % ELEMENTSOF(paths)];
        FILE *f;

        snprintf(path, PATH_MAX, "%s/%s", tmpdir, name);
        f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(i2d_X509_fp(f, cert), 1);
        assert_int_equal(fclose(f), 0);
        return path;
}

static int verify_with(const char *store, const char *intermediates, X509 *leaf) {
        _cleanup_(tg_ek_trust_freep) tg_ek_trust *trust = NULL;
        int r;

        last_error[0] = '\0';
        r = tg_ek_trust_load(store, intermediates, &trust);
        if (r < 0)
                return r;
        return tg_ek_cert_verify(trust, leaf);
}

typedef struct chains {
        ca one;           /* the manufacturer */
        ca other;         /* another manufacturer, other names */
        ca same_names;    /* another manufacturer with the same CA names as "one" */
        EVP_PKEY *ek_key;
        X509 *leaf;       /* issued by one.intermediate */
        const char *bundle, *root, *intermediate;
} chains;

static int chains_setup(void **state) {
        chains *c = calloc(1, sizeof *c);
        assert_non_null(c);
        make_ca(&c->one, "Manufacturer Root", "Manufacturer EK CA");
        make_ca(&c->other, "Other Root", "Other EK CA");
        make_ca(&c->same_names, "Manufacturer Root", "Manufacturer EK CA");
        c->ek_key = gen_key("P-256");
        c->leaf = make_cert("", c->ek_key, c->one.intermediate, c->one.int_key, CERT_EK, -1, 3650);
        c->bundle = write_pem("bundle.pem", c->one.root, c->one.intermediate);
        c->root = write_pem("root.pem", c->one.root, NULL);
        c->intermediate = write_pem("intermediate.pem", c->one.intermediate, NULL);
        *state = c;
        return 0;
}

static int chains_teardown(void **state) {
        chains *c = *state;
        ca_done(&c->one);
        ca_done(&c->other);
        ca_done(&c->same_names);
        X509_free(c->leaf);
        EVP_PKEY_free(c->ek_key);
        free(c);
        return 0;
}

static void test_chain_valid(void **state) {
        chains *c = *state;
        char dir[PATH_MAX];

        assert_int_equal(verify_with(c->bundle, NULL, c->leaf), 0);
        assert_int_equal(verify_with(c->root, c->intermediate, c->leaf), 0);

        snprintf(dir, sizeof dir, "%s/store.d", tmpdir);
        assert_int_equal(mkdir(dir, 0700), 0);
        write_pem("store.d/root.pem", c->one.root, NULL);
        write_pem("store.d/ek-ca.pem", c->one.intermediate, NULL);
        write_pem("store.d/unrelated.pem", c->other.root, NULL);
        assert_int_equal(verify_with(dir, NULL, c->leaf), 0);

        /* Vendors publish CA certificates in DER too; stray non-certificate files are ignored. */
        snprintf(dir, sizeof dir, "%s/store-der.d", tmpdir);
        assert_int_equal(mkdir(dir, 0700), 0);
        write_der("store-der.d/root.cer", c->one.root);
        write_der("store-der.d/ek-ca.crt", c->one.intermediate);
        char readme[PATH_MAX + 16];
        snprintf(readme, sizeof readme, "%s/README", dir);
        FILE *f = fopen(readme, "we");
        assert_non_null(f);
        fputs("These are the vendor's certificates.\n", f);
        fclose(f);
        assert_int_equal(verify_with(dir, NULL, c->leaf), 0);
        assert_int_equal(verify_with(write_der("root.der", c->one.root), c->intermediate, c->leaf), 0);

        /* An RSA EK key (keyEncipherment only) verifies as well. */
        EVP_PKEY *rsa = gen_key("RSA");
        X509 *leaf = make_cert("", rsa, c->one.intermediate, c->one.int_key, CERT_EK, -1, 3650);
        assert_int_equal(verify_with(c->bundle, NULL, leaf), 0);
        X509_free(leaf);
        EVP_PKEY_free(rsa);
}

static void test_store_errors(void **state) {
        chains *c = *state;
        char path[PATH_MAX];

        assert_int_equal(verify_with(NULL, NULL, c->leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("No manufacturer CA store");
        assert_int_equal(verify_with("/nonexistent/ca.pem", NULL, c->leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("does not exist");
        /* An intermediate alone is no trust anchor. */
        assert_int_equal(verify_with(c->intermediate, NULL, c->leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("no self-signed root");
        snprintf(path, sizeof path, "%s/empty.pem", tmpdir);
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs("not a certificate\n", f);
        fclose(f);
        assert_int_equal(verify_with(path, NULL, c->leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("holds no certificate");
}

static void fingerprint_upper(X509 *cert, char *hex, size_t size) {
        uint8_t fp[32];
        unsigned len = 0;
        assert_int_equal(X509_digest(cert, EVP_sha256(), fp, &len), 1);
        tg_ek_fingerprint_format(fp, hex, size);
        for (char *p = hex; *p; p++)
                *p = (char) toupper((unsigned char) *p);
}

static void write_file(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        assert_int_equal(fclose(f), 0);
}

/* ek_ca as a list (shipped store, then the administrator's), additions and distrust in the local directory. */
static void test_store_list_and_distrust(void **state) {
        chains *c = *state;
        char shipped[PATH_MAX], local[PATH_MAX], list[3 * PATH_MAX], distrust[PATH_MAX + 16], hex[96], text[256];
        tg_ek_trust *trust = NULL;
        tg_ek_anchor anchor = {};
        uint8_t root_fp[32];
        unsigned len = 0;

        snprintf(shipped, sizeof shipped, "%s/list-shipped", tmpdir);
        snprintf(local, sizeof local, "%s/list-local", tmpdir);
        assert_int_equal(mkdir(shipped, 0700), 0);
        assert_int_equal(mkdir(local, 0700), 0);
        write_pem("list-shipped/other.pem", c->other.root, c->other.intermediate);
        snprintf(list, sizeof list, "%s %s/absent\t%s", shipped, tmpdir, local);
        snprintf(distrust, sizeof distrust, "%s/" TG_EK_STORE_DISTRUST, local);

        /* Another manufacturer's CAs only: not trusted; a missing store of the list is skipped. */
        assert_int_equal(verify_with(list, NULL, c->leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("neither in the manufacturer CA store");

        /* The administrator adds this manufacturer's CAs in the local directory. */
        write_pem("list-local/one.pem", c->one.root, c->one.intermediate);
        assert_int_equal(tg_ek_trust_load(list, NULL, &trust), 0);
        assert_int_equal(tg_ek_trust_anchor_count(trust), 2);
        assert_int_equal(tg_ek_cert_verify_anchor(trust, c->leaf, &anchor), 0);
        tg_ek_trust_free(TAKE_PTR(trust));
        assert_int_equal(X509_digest(c->one.root, EVP_sha256(), root_fp, &len), 1);
        assert_memory_equal(anchor.sha256, root_fp, 32);
        /* No MANIFEST line and no O=: the root's CN names it. */
        assert_string_equal(anchor.vendor, "Manufacturer Root");
        assert_non_null(strstr(anchor.subject, "CN=Manufacturer Root"));
        tg_ek_anchor_done(&anchor);

        /* Distrusting the intermediate (upper case, colons, a comment) breaks the chain. */
        fingerprint_upper(c->one.intermediate, hex, sizeof hex);
        snprintf(text, sizeof text, "# the EK CA\n  %s  # gone\n\n", hex);
        write_file(distrust, text);
        assert_int_equal(verify_with(list, NULL, c->leaf), -TG_ERR_EK_CERT);
        /* ... also when the intermediate comes from an intermediates file. */
        assert_int_equal(verify_with(list, c->intermediate, c->leaf), -TG_ERR_EK_CERT);

        /* Distrusting the root (plain hex): it anchors nothing any more. */
        tg_ek_fingerprint_format(root_fp, hex, sizeof hex);
        for (char *p = hex, *q = hex;; p++) {
                if (*p != ':')
                        *q++ = *p;
                if (!*p)
                        break;
        }
        write_file(distrust, hex);
        assert_int_equal(tg_ek_trust_load(list, NULL, &trust), 0);
        assert_int_equal(tg_ek_trust_anchor_count(trust), 1);
        tg_ek_trust_free(TAKE_PTR(trust));
        assert_int_equal(verify_with(list, NULL, c->leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("Manufacturer Root");

        /* A malformed distrust entry is an error, never skipped. */
        write_file(distrust, "0123 not a fingerprint\n");
        assert_int_equal(verify_with(list, NULL, c->leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("not a SHA-256 fingerprint");
        hex[10] = '\0';
        write_file(distrust, hex);
        assert_int_equal(verify_with(list, NULL, c->leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("not a SHA-256 fingerprint");
        assert_int_equal(unlink(distrust), 0);
        assert_int_equal(verify_with(list, NULL, c->leaf), 0);

        /* A list none of whose stores exists. */
        assert_int_equal(verify_with("/nonexistent/a /nonexistent/b", NULL, c->leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("None of the manufacturer CA stores");
        assert_int_equal(verify_with("   ", NULL, c->leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("No manufacturer CA store");
}

/* The issuer named by the certificate's AIA is named in the message (sanitized), never fetched. */
static void test_chain_missing_issuer_aia(void **state) {
        static const char url[] = "http://pki.example.invalid/ek-ca.crt\nFAKE: forged log line";
        chains *c = *state;
        AUTHORITY_INFO_ACCESS *aia = sk_ACCESS_DESCRIPTION_new_null();
        ACCESS_DESCRIPTION *ad = ACCESS_DESCRIPTION_new();
        X509 *leaf = X509_dup(c->leaf);

        assert_non_null(aia);
        assert_non_null(ad);
        assert_non_null(leaf);
        ad->method = OBJ_nid2obj(NID_ad_ca_issuers);
        ad->location->type = GEN_URI;
        ad->location->d.uniformResourceIdentifier = ASN1_IA5STRING_new();
        assert_int_equal(ASN1_STRING_set(ad->location->d.uniformResourceIdentifier, url, (int) strlen(url)), 1);
        assert_true(sk_ACCESS_DESCRIPTION_push(aia, ad) > 0);
        assert_int_equal(X509_add1_ext_i2d(leaf, NID_info_access, aia, 0, X509V3_ADD_DEFAULT), 1);
        AUTHORITY_INFO_ACCESS_free(aia);
        assert_true(X509_sign(leaf, c->one.int_key, EVP_sha256()) > 0);

        /* With the intermediate: fine, the AIA plays no part. */
        assert_int_equal(verify_with(c->bundle, NULL, leaf), 0);
        /* Without: the URL is named, with its control characters neutralized, and nothing is fetched. */
        assert_int_equal(verify_with(c->root, NULL, leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("http://pki.example.invalid/ek-ca.crt?FAKE:?forged?log?line");
        assert_error_mentions("downloads nothing");
        assert_null(strchr(last_error, '\n'));
        X509_free(leaf);
}

static void test_chain_self_signed(void **state) {
        EVP_PKEY *k = gen_key("P-256");
        X509 *leaf = make_cert("Self", k, NULL, NULL, CERT_EK, -1, 3650);
        chains *c = *state;

        assert_int_equal(verify_with(c->bundle, NULL, leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("self-signed");
        X509_free(leaf);
        EVP_PKEY_free(k);
}

static void test_chain_other_ca(void **state) {
        chains *c = *state;
        X509 *leaf2 = make_cert("", c->ek_key, c->other.intermediate, c->other.int_key, CERT_EK, -1, 3650);
        X509 *leaf3 = make_cert("", c->ek_key, c->same_names.intermediate, c->same_names.int_key, CERT_EK, -1, 3650);
        const char *other_int = write_pem("other-int.pem", c->other.intermediate, NULL);
        const char *other_bundle = write_pem("other-bundle.pem", c->other.intermediate, c->other.root);

        /* The other vendor's intermediate is available: the chain ends at a root we do not trust. */
        assert_int_equal(verify_with(c->bundle, other_int, leaf2), -TG_ERR_EK_CERT);
        assert_error_mentions("another CA");
        /* Even its root, given as an "intermediate", is no anchor. */
        assert_int_equal(verify_with(c->bundle, other_bundle, leaf2), -TG_ERR_EK_CERT);
        assert_error_mentions("another CA");
        /* A CA with the same names as ours but other keys (like two swtpm local CAs). */
        assert_int_equal(verify_with(c->bundle, NULL, leaf3), -TG_ERR_EK_CERT);
        assert_error_mentions("another CA");
        X509_free(leaf2);
        X509_free(leaf3);
}

static void test_chain_validity_period(void **state) {
        chains *c = *state;
        X509 *expired = make_cert("", c->ek_key, c->one.intermediate, c->one.int_key, CERT_EK, -30, -1);
        X509 *future = make_cert("", c->ek_key, c->one.intermediate, c->one.int_key, CERT_EK, 10, 3650);
        EVP_PKEY *k = gen_key("P-256");
        X509 *old_int = make_cert("Manufacturer EK CA", k, c->one.root, c->one.root_key, CERT_CA, -30, -1);
        X509 *leaf = make_cert("", c->ek_key, old_int, k, CERT_EK, -1, 3650);
        const char *old_bundle = write_pem("old-bundle.pem", c->one.root, old_int);

        assert_int_equal(verify_with(c->bundle, NULL, expired), -TG_ERR_EK_CERT);
        assert_error_mentions("The EK certificate");
        assert_error_mentions("has expired");
        assert_int_equal(verify_with(c->bundle, NULL, future), -TG_ERR_EK_CERT);
        assert_error_mentions("not yet valid");
        assert_int_equal(verify_with(old_bundle, NULL, leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("A CA certificate");
        assert_error_mentions("has expired");
        X509_free(expired);
        X509_free(future);
        X509_free(old_int);
        X509_free(leaf);
        EVP_PKEY_free(k);
}

static void test_chain_missing_intermediate(void **state) {
        chains *c = *state;
        assert_int_equal(verify_with(c->root, NULL, c->leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("intermediate CA certificate is missing");
}

static void test_chain_unknown_critical(void **state) {
        chains *c = *state;
        X509 *leaf = make_cert("", c->ek_key, c->one.intermediate, c->one.int_key, CERT_EK | CERT_UNKNOWN_CRITICAL,
                               -1, 3650);
        assert_int_equal(verify_with(c->bundle, NULL, leaf), -TG_ERR_EK_CERT);
        assert_error_mentions("critical");
        X509_free(leaf);
}

/* ---- parsing and NV padding ---- */

static void test_der_length(void **state) {
        size_t n = 0;
        static const uint8_t short_form[] = { 0x30, 0x03, 0x02, 0x01, 0x00, 0x00, 0x00 };
        static const uint8_t short_junk[] = { 0x30, 0x03, 0x02, 0x01, 0x00, 0x00, 0x01 };
        static const uint8_t non_minimal1[] = { 0x30, 0x81, 0x03, 0x02, 0x01, 0x00 };
        static const uint8_t non_minimal2[] = { 0x30, 0x82, 0x00, 0x03, 0x02, 0x01, 0x00 };
        static const uint8_t indefinite[] = { 0x30, 0x80, 0x02, 0x01, 0x00, 0x00, 0x00 };
        static const uint8_t truncated[] = { 0x30, 0x05, 0x02, 0x01, 0x00 };
        static const uint8_t not_seq[] = { 0x31, 0x03, 0x02, 0x01, 0x00 };
        static const uint8_t too_long[] = { 0x30, 0x85, 0x01, 0x00, 0x00, 0x00, 0x00 };
        uint8_t long_form[3 + 200] = { 0x30, 0x81, 200 };

        assert_int_equal(tg_ek_cert_der_length(short_form, sizeof short_form, &n), 0);
        assert_int_equal(n, 5);
        assert_int_equal(tg_ek_cert_der_length(long_form, sizeof long_form, &n), 0);
        assert_int_equal(n, 203);
        n = 77;
        assert_int_equal(tg_ek_cert_der_length(short_junk, sizeof short_junk, &n), -TG_ERR_EK_CERT);
        assert_int_equal(tg_ek_cert_der_length(non_minimal1, sizeof non_minimal1, &n), -TG_ERR_EK_CERT);
        assert_int_equal(tg_ek_cert_der_length(non_minimal2, sizeof non_minimal2, &n), -TG_ERR_EK_CERT);
        assert_int_equal(tg_ek_cert_der_length(indefinite, sizeof indefinite, &n), -TG_ERR_EK_CERT);
        assert_int_equal(tg_ek_cert_der_length(truncated, sizeof truncated, &n), -TG_ERR_EK_CERT);
        assert_int_equal(tg_ek_cert_der_length(not_seq, sizeof not_seq, &n), -TG_ERR_EK_CERT);
        assert_int_equal(tg_ek_cert_der_length(too_long, sizeof too_long, &n), -TG_ERR_EK_CERT);
        assert_int_equal(tg_ek_cert_der_length(long_form, 1, &n), -TG_ERR_EK_CERT);
        assert_int_equal(n, 77); /* untouched on failure */
}

static void test_cert_parse(void **state) {
        chains *c = *state;
        _cleanup_(X509_freep) X509 *parsed = NULL;
        unsigned char *der = NULL;
        uint8_t padded[4096], garbage[600];
        char *pem_data = NULL;
        BIO *bio = BIO_new(BIO_s_mem());
        int der_len = i2d_X509(c->leaf, &der);
        long pem_len;

        assert_true(der_len > 0 && (size_t) der_len + 100 < sizeof padded);

        /* DER exactly, DER zero-padded to an NV index size, PEM. */
        assert_int_equal(tg_ek_cert_parse(der, (size_t) der_len, &parsed), 0);
        assert_int_equal(X509_cmp(parsed, c->leaf), 0);
        X509_free(TAKE_PTR(parsed));
        memset(padded, 0, sizeof padded);
        memcpy(padded, der, (size_t) der_len);
        assert_int_equal(tg_ek_cert_parse(padded, (size_t) der_len + 100, &parsed), 0);
        assert_int_equal(X509_cmp(parsed, c->leaf), 0);
        X509_free(TAKE_PTR(parsed));
        assert_int_equal(PEM_write_bio_X509(bio, c->leaf), 1);
        pem_len = BIO_get_mem_data(bio, &pem_data);
        assert_int_equal(tg_ek_cert_parse((uint8_t *) pem_data, (size_t) pem_len, &parsed), 0);
        assert_int_equal(X509_cmp(parsed, c->leaf), 0);
        X509_free(TAKE_PTR(parsed));

        /* Padding that is neither all 0x00 nor all 0xFF. */
        padded[der_len + 50] = 0xff;
        assert_int_equal(tg_ek_cert_parse(padded, (size_t) der_len + 100, &parsed), -TG_ERR_EK_CERT);
        padded[der_len + 50] = 0x01;
        memset(padded + der_len, 0xff, 50);
        assert_int_equal(tg_ek_cert_parse(padded, (size_t) der_len + 100, &parsed), -TG_ERR_EK_CERT);
        /* Erased-flash padding (0xFF throughout), as ST33 TPMs have it. */
        memset(padded + der_len, 0xff, 100);
        assert_int_equal(tg_ek_cert_parse(padded, (size_t) der_len + 100, &parsed), 0);
        assert_int_equal(X509_cmp(parsed, c->leaf), 0);
        X509_free(TAKE_PTR(parsed));
        /* Truncated. */
        assert_int_equal(tg_ek_cert_parse(der, (size_t) der_len - 1, &parsed), -TG_ERR_EK_CERT);
        /* A well-formed SEQUENCE that is no certificate. */
        static const uint8_t seq[] = { 0x30, 0x03, 0x02, 0x01, 0x00 };
        assert_int_equal(tg_ek_cert_parse(seq, sizeof seq, &parsed), -TG_ERR_EK_CERT);
        /* Garbage. */
        assert_int_equal(RAND_bytes(garbage, sizeof garbage), 1);
        garbage[0] = 0x42;
        assert_int_equal(tg_ek_cert_parse(garbage, sizeof garbage, &parsed), -TG_ERR_EK_CERT);
        /* A PEM block with a broken body. */
        static const char bad_pem[] = "-----BEGIN CERTIFICATE-----\nMIIBbroken!!\n-----END CERTIFICATE-----\n";
        assert_int_equal(tg_ek_cert_parse((const uint8_t *) bad_pem, sizeof bad_pem - 1, &parsed), -TG_ERR_EK_CERT);
        assert_null(parsed);

        OPENSSL_free(der);
        BIO_free(bio);
}

/* ---- templates ---- */

static void digest(const EVP_MD *md, const void *a, size_t a_n, const void *b, size_t b_n, const void *c, size_t c_n,
                   uint8_t *out) {
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        assert_int_equal(EVP_DigestInit_ex(ctx, md, NULL), 1);
        assert_int_equal(EVP_DigestUpdate(ctx, a, a_n), 1);
        assert_int_equal(EVP_DigestUpdate(ctx, b, b_n), 1);
        assert_int_equal(EVP_DigestUpdate(ctx, c, c_n), 1);
        assert_int_equal(EVP_DigestFinal_ex(ctx, out, NULL), 1);
        EVP_MD_CTX_free(ctx);
}

/* PolicySecret(TPM_RH_ENDORSEMENT), empty policyRef, from a fresh session (Part 3, 23.4). */
static void policy_a(const EVP_MD *md, uint8_t *out) {
        static const uint8_t cc_secret[4] = { 0x00, 0x00, 0x01, 0x51 }, rh_endorsement[4] = { 0x40, 0x00, 0x00, 0x0b };
        uint8_t zero[64] = {}, step[64];
        size_t n = (size_t) EVP_MD_get_size(md);

        digest(md, zero, n, cc_secret, 4, rh_endorsement, 4, step);
        digest(md, step, n, NULL, 0, NULL, 0, out);
}

/* PolicyOR(a, c) from a fresh session (Part 3, 23.6). */
static void policy_or(const EVP_MD *md, const uint8_t *a, const uint8_t *c, uint8_t *out) {
        static const uint8_t cc_or[4] = { 0x00, 0x00, 0x01, 0x71 };
        uint8_t zero[64] = {}, buf[4 + 2 * 64];
        size_t n = (size_t) EVP_MD_get_size(md);

        memcpy(buf, cc_or, 4);
        memcpy(buf + 4, a, n);
        memcpy(buf + 4 + n, c, n);
        digest(md, zero, n, buf, 4 + 2 * n, NULL, 0, out);
}

static void test_template_lookup(void **state) {
        size_t n;
        const tg_ek_template *all = tg_ek_templates(&n);
        EVP_PKEY *rsa = gen_key("RSA"), *p256 = gen_key("P-256"), *p384 = gen_key("P-384");

        assert_true(n >= 5);
        /* ECC is preferred. */
        assert_int_equal(all[0].type, TPM2_ALG_ECC);
        assert_string_equal(tg_ek_template_by_nv_index(0x01C00002)->name, "L-1 (RSA-2048)");
        assert_string_equal(tg_ek_template_by_nv_index(0x01C0000A)->name, "L-2 (ECC P-256)");
        assert_string_equal(tg_ek_template_by_nv_index(0x01C00012)->name, "H-1 (RSA-2048)");
        assert_string_equal(tg_ek_template_by_nv_index(0x01C00014)->name, "H-2 (ECC P-256)");
        assert_string_equal(tg_ek_template_by_nv_index(0x01C00016)->name, "H-3 (ECC P-384)");
        assert_null(tg_ek_template_by_nv_index(0x01C00003));
        assert_null(tg_ek_template_by_nv_index(0));

        assert_true(tg_ek_template_fits_key(tg_ek_template_by_nv_index(0x01C00002), rsa));
        assert_true(tg_ek_template_fits_key(tg_ek_template_by_nv_index(0x01C00012), rsa));
        assert_false(tg_ek_template_fits_key(tg_ek_template_by_nv_index(0x01C0001C), rsa)); /* RSA-3072 */
        assert_false(tg_ek_template_fits_key(tg_ek_template_by_nv_index(0x01C0000A), rsa));
        assert_true(tg_ek_template_fits_key(tg_ek_template_by_nv_index(0x01C0000A), p256));
        assert_true(tg_ek_template_fits_key(tg_ek_template_by_nv_index(0x01C00014), p256));
        assert_false(tg_ek_template_fits_key(tg_ek_template_by_nv_index(0x01C00016), p256));
        assert_true(tg_ek_template_fits_key(tg_ek_template_by_nv_index(0x01C00016), p384));
        assert_false(tg_ek_template_fits_key(tg_ek_template_by_nv_index(0x01C00002), p384));
        EVP_PKEY_free(rsa);
        EVP_PKEY_free(p256);
        EVP_PKEY_free(p384);
}

/* PolicyC = PolicyAuthorizeNV(0x01C07F01), as published in the TCG EK Credential Profile. */
static const char policy_c_sha256_hex[] = "3767e2edd43ff45a3a7e1eaefcef78643dca964632e7aad82c673a30d8633fde";
static const char policy_c_sha384_hex[] =
        "d6032ce61f2fb3c240eb3cf6a33237ef2b6a16f4293c22b455e261cffd217ad5b4947c2d73e63005eed2dc2b3593d165";

static void unhex(const char *hex, uint8_t *out) {
        for (size_t i = 0; hex[2 * i]; i++)
                assert_int_equal(sscanf(hex + 2 * i, "%2hhx", &out[i]), 1);
}

static void test_template_contents(void **state) {
        static const uint8_t zeros[256] = {};
        uint8_t a256[32], a384[48], c256[32], c384[48], b256[32], b384[48];
        TPM2B_PUBLIC p;

        policy_a(EVP_sha256(), a256);
        policy_a(EVP_sha384(), a384);
        unhex(policy_c_sha256_hex, c256);
        unhex(policy_c_sha384_hex, c384);
        policy_or(EVP_sha256(), a256, c256, b256);
        policy_or(EVP_sha384(), a384, c384, b384);

        /* L-1: design §3 gives PolicyA explicitly; our recomputation must agree. */
        static const char policy_a_hex[] = "837197674484b3f81a90cc8d46a5d724fd52d76e06520b64f2a1da1b331469aa";
        uint8_t published_a[32];
        unhex(policy_a_hex, published_a);
        assert_memory_equal(a256, published_a, 32);

        assert_int_equal(tg_ek_template_public(tg_ek_template_by_nv_index(0x01C00002), &p), 0);
        assert_int_equal(p.publicArea.type, TPM2_ALG_RSA);
        assert_int_equal(p.publicArea.nameAlg, TPM2_ALG_SHA256);
        assert_int_equal(p.publicArea.objectAttributes, 0x000300B2);
        assert_int_equal(p.publicArea.authPolicy.size, 32);
        assert_memory_equal(p.publicArea.authPolicy.buffer, a256, 32);
        assert_int_equal(p.publicArea.parameters.rsaDetail.symmetric.algorithm, TPM2_ALG_AES);
        assert_int_equal(p.publicArea.parameters.rsaDetail.symmetric.keyBits.aes, 128);
        assert_int_equal(p.publicArea.parameters.rsaDetail.symmetric.mode.aes, TPM2_ALG_CFB);
        assert_int_equal(p.publicArea.parameters.rsaDetail.scheme.scheme, TPM2_ALG_NULL);
        assert_int_equal(p.publicArea.parameters.rsaDetail.keyBits, 2048);
        assert_int_equal(p.publicArea.parameters.rsaDetail.exponent, 0);
        assert_int_equal(p.publicArea.unique.rsa.size, 256);
        assert_memory_equal(p.publicArea.unique.rsa.buffer, zeros, 256);

        assert_int_equal(tg_ek_template_public(tg_ek_template_by_nv_index(0x01C0000A), &p), 0);
        assert_int_equal(p.publicArea.type, TPM2_ALG_ECC);
        assert_int_equal(p.publicArea.objectAttributes, 0x000300B2);
        assert_memory_equal(p.publicArea.authPolicy.buffer, a256, 32);
        assert_int_equal(p.publicArea.parameters.eccDetail.curveID, TPM2_ECC_NIST_P256);
        assert_int_equal(p.publicArea.parameters.eccDetail.kdf.scheme, TPM2_ALG_NULL);
        assert_int_equal(p.publicArea.unique.ecc.x.size, 32);
        assert_int_equal(p.publicArea.unique.ecc.y.size, 32);
        assert_memory_equal(p.publicArea.unique.ecc.x.buffer, zeros, 32);

        assert_int_equal(tg_ek_template_public(tg_ek_template_by_nv_index(0x01C00014), &p), 0);
        assert_int_equal(p.publicArea.objectAttributes, 0x000300F2);
        assert_int_equal(p.publicArea.authPolicy.size, 32);
        assert_memory_equal(p.publicArea.authPolicy.buffer, b256, 32);
        assert_int_equal(p.publicArea.parameters.eccDetail.symmetric.keyBits.aes, 128);
        assert_int_equal(p.publicArea.unique.ecc.x.size, 0);
        assert_int_equal(p.publicArea.unique.ecc.y.size, 0);

        /* H-3: what swtpm_setup 0.7.1 certifies at 0x01C00016 (the integration test re-creates it). */
        assert_int_equal(tg_ek_template_public(tg_ek_template_by_nv_index(0x01C00016), &p), 0);
        assert_int_equal(p.publicArea.nameAlg, TPM2_ALG_SHA384);
        assert_int_equal(p.publicArea.objectAttributes, 0x000300F2);
        assert_int_equal(p.publicArea.authPolicy.size, 48);
        assert_memory_equal(p.publicArea.authPolicy.buffer, b384, 48);
        assert_int_equal(p.publicArea.parameters.eccDetail.curveID, TPM2_ECC_NIST_P384);
        assert_int_equal(p.publicArea.parameters.eccDetail.symmetric.keyBits.aes, 256);
        assert_int_equal(p.publicArea.unique.ecc.x.size, 0);

        assert_int_equal(tg_ek_template_public(tg_ek_template_by_nv_index(0x01C00012), &p), 0);
        assert_int_equal(p.publicArea.type, TPM2_ALG_RSA);
        assert_int_equal(p.publicArea.objectAttributes, 0x000300F2);
        assert_memory_equal(p.publicArea.authPolicy.buffer, b256, 32);
        assert_int_equal(p.publicArea.unique.rsa.size, 0);
}

/* ---- KDFs against straightforward implementations of Part 1, 11.4.10 ---- */

static void be32(uint32_t v, uint8_t out[4]) {
        out[0] = (uint8_t) (v >> 24);
        out[1] = (uint8_t) (v >> 16);
        out[2] = (uint8_t) (v >> 8);
        out[3] = (uint8_t) v;
}

static void ref_kdfa(const EVP_MD *md, const uint8_t *key, size_t key_n, const char *label, const uint8_t *u,
                     size_t u_n, const uint8_t *v, size_t v_n, size_t bits, uint8_t *out) {
        size_t h = (size_t) EVP_MD_get_size(md), done = 0;
        for (uint32_t i = 1; done < bits / 8; i++) {
                uint8_t block[64], counter[4], len[4];
                unsigned block_n = 0;
                EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
                EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
                OSSL_PARAM params[] = {
                        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *) EVP_MD_get0_name(md), 0),
                        OSSL_PARAM_construct_end(),
                };
                size_t outl = 0;
                be32(i, counter);
                be32((uint32_t) bits, len);
                assert_int_equal(EVP_MAC_init(ctx, key, key_n, params), 1);
                assert_int_equal(EVP_MAC_update(ctx, counter, 4), 1);
                assert_int_equal(EVP_MAC_update(ctx, (const uint8_t *) label, strlen(label) + 1), 1);
                if (u_n)
                        assert_int_equal(EVP_MAC_update(ctx, u, u_n), 1);
                if (v_n)
                        assert_int_equal(EVP_MAC_update(ctx, v, v_n), 1);
                assert_int_equal(EVP_MAC_update(ctx, len, 4), 1);
                assert_int_equal(EVP_MAC_final(ctx, block, &outl, sizeof block), 1);
                block_n = (unsigned) outl;
                assert_int_equal(block_n, h);
                size_t take = bits / 8 - done < h ? bits / 8 - done : h;
                memcpy(out + done, block, take);
                done += take;
                EVP_MAC_CTX_free(ctx);
                EVP_MAC_free(mac);
        }
}

static void ref_kdfe(const EVP_MD *md, const uint8_t *z, size_t z_n, const char *label, const uint8_t *u, size_t u_n,
                     const uint8_t *v, size_t v_n, size_t bits, uint8_t *out) {
        size_t h = (size_t) EVP_MD_get_size(md), done = 0;
        for (uint32_t i = 1; done < bits / 8; i++) {
                uint8_t block[64], counter[4];
                EVP_MD_CTX *ctx = EVP_MD_CTX_new();
                be32(i, counter);
                assert_int_equal(EVP_DigestInit_ex(ctx, md, NULL), 1);
                assert_int_equal(EVP_DigestUpdate(ctx, counter, 4), 1);
                assert_int_equal(EVP_DigestUpdate(ctx, z, z_n), 1);
                assert_int_equal(EVP_DigestUpdate(ctx, label, strlen(label) + 1), 1);
                assert_int_equal(EVP_DigestUpdate(ctx, u, u_n), 1);
                assert_int_equal(EVP_DigestUpdate(ctx, v, v_n), 1);
                assert_int_equal(EVP_DigestFinal_ex(ctx, block, NULL), 1);
                EVP_MD_CTX_free(ctx);
                size_t take = bits / 8 - done < h ? bits / 8 - done : h;
                memcpy(out + done, block, take);
                done += take;
        }
}

static const EVP_MD *md_of(TPMI_ALG_HASH alg) {
        return alg == TPM2_ALG_SHA384 ? EVP_sha384() : alg == TPM2_ALG_SHA512 ? EVP_sha512() : EVP_sha256();
}

static void test_kdfa(void **state) {
        static const TPMI_ALG_HASH algs[] = { TPM2_ALG_SHA256, TPM2_ALG_SHA384, TPM2_ALG_SHA512 };
        static const size_t bit_lengths[] = { 128, 256, 384, 520, 1024 };
        uint8_t key[48], u[34], v[20], got[128], want[128];

        assert_int_equal(RAND_bytes(key, sizeof key), 1);
        assert_int_equal(RAND_bytes(u, sizeof u), 1);
        assert_int_equal(RAND_bytes(v, sizeof v), 1);
        for (size_t a = 0; a < ELEMENTSOF(algs); a++)
                for (size_t b = 0; b < ELEMENTSOF(bit_lengths); b++) {
                        size_t bits = bit_lengths[b];
                        assert_int_equal(tg_kdfa(algs[a], key, sizeof key, "STORAGE", u, sizeof u, NULL, 0, bits, got), 0);
                        ref_kdfa(md_of(algs[a]), key, sizeof key, "STORAGE", u, sizeof u, NULL, 0, bits, want);
                        assert_memory_equal(got, want, bits / 8);
                        assert_int_equal(tg_kdfa(algs[a], key, 32, "INTEGRITY", NULL, 0, NULL, 0, bits, got), 0);
                        ref_kdfa(md_of(algs[a]), key, 32, "INTEGRITY", NULL, 0, NULL, 0, bits, want);
                        assert_memory_equal(got, want, bits / 8);
                        assert_int_equal(tg_kdfa(algs[a], key, 32, "ATH", u, sizeof u, v, sizeof v, bits, got), 0);
                        ref_kdfa(md_of(algs[a]), key, 32, "ATH", u, sizeof u, v, sizeof v, bits, want);
                        assert_memory_equal(got, want, bits / 8);
                }
        /* The output length is an input: a shorter request is not a prefix of a longer one. */
        assert_int_equal(tg_kdfa(TPM2_ALG_SHA256, key, 32, "STORAGE", u, sizeof u, NULL, 0, 128, got), 0);
        assert_int_equal(tg_kdfa(TPM2_ALG_SHA256, key, 32, "STORAGE", u, sizeof u, NULL, 0, 256, want), 0);
        assert_memory_not_equal(got, want, 16);

        assert_int_equal(tg_kdfa(TPM2_ALG_SHA1, key, 32, "STORAGE", NULL, 0, NULL, 0, 128, got), -TG_ERR_INVALID);
        assert_int_equal(tg_kdfa(TPM2_ALG_SHA256, key, 32, "STORAGE", NULL, 0, NULL, 0, 12, got), -TG_ERR_INVALID);
        assert_int_equal(tg_kdfa(TPM2_ALG_SHA256, key, 0, "STORAGE", NULL, 0, NULL, 0, 128, got), -TG_ERR_INVALID);
}

static void test_kdfe(void **state) {
        static const TPMI_ALG_HASH algs[] = { TPM2_ALG_SHA256, TPM2_ALG_SHA384 };
        static const size_t bit_lengths[] = { 256, 384, 520 };
        uint8_t z[48], u[48], v[48], got[128], want[128];

        assert_int_equal(RAND_bytes(z, sizeof z), 1);
        assert_int_equal(RAND_bytes(u, sizeof u), 1);
        assert_int_equal(RAND_bytes(v, sizeof v), 1);
        for (size_t a = 0; a < ELEMENTSOF(algs); a++)
                for (size_t b = 0; b < ELEMENTSOF(bit_lengths); b++) {
                        size_t bits = bit_lengths[b];
                        assert_int_equal(tg_kdfe(algs[a], z, 32, "IDENTITY", u, 32, v, 32, bits, got), 0);
                        ref_kdfe(md_of(algs[a]), z, 32, "IDENTITY", u, 32, v, 32, bits, want);
                        assert_memory_equal(got, want, bits / 8);
                        assert_int_equal(tg_kdfe(algs[a], z, 48, "DUPLICATE", u, 48, v, 48, bits, got), 0);
                        ref_kdfe(md_of(algs[a]), z, 48, "DUPLICATE", u, 48, v, 48, bits, want);
                        assert_memory_equal(got, want, bits / 8);
                }
        assert_int_equal(tg_kdfe(TPM2_ALG_SHA256, z, 0, "IDENTITY", u, 32, v, 32, 256, got), -TG_ERR_INVALID);
}

/* ---- MakeCredential, unwrapped the way the TPM's ActivateCredential does ---- */

static void ek_public_of(EVP_PKEY *key, uint32_t nv_index, TPMT_PUBLIC *ret) {
        TPM2B_PUBLIC p;
        assert_int_equal(tg_ek_template_public(tg_ek_template_by_nv_index(nv_index), &p), 0);
        if (p.publicArea.type == TPM2_ALG_RSA) {
                BIGNUM *n = NULL;
                assert_int_equal(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &n), 1);
                p.publicArea.unique.rsa.size = (uint16_t) BN_num_bytes(n);
                assert_int_equal(BN_bn2bin(n, p.publicArea.unique.rsa.buffer), p.publicArea.unique.rsa.size);
                BN_free(n);
        } else {
                BIGNUM *x = NULL, *y = NULL;
                int coord = p.publicArea.parameters.eccDetail.curveID == TPM2_ECC_NIST_P384 ? 48 : 32;
                assert_int_equal(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &x), 1);
                assert_int_equal(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &y), 1);
                p.publicArea.unique.ecc.x.size = p.publicArea.unique.ecc.y.size = (uint16_t) coord;
                assert_int_equal(BN_bn2binpad(x, p.publicArea.unique.ecc.x.buffer, coord), coord);
                assert_int_equal(BN_bn2binpad(y, p.publicArea.unique.ecc.y.buffer, coord), coord);
                BN_free(x);
                BN_free(y);
        }
        *ret = p.publicArea;
}

/* Recovers the seed from the encrypted secret with the EK private key. */
static size_t unwrap_seed(EVP_PKEY *priv, const TPMT_PUBLIC *ek, const TPM2B_ENCRYPTED_SECRET *secret, uint8_t *seed) {
        const EVP_MD *md = md_of(ek->nameAlg);
        size_t n = (size_t) EVP_MD_get_size(md);
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, priv, NULL);

        if (ek->type == TPM2_ALG_RSA) {
                size_t out = 512;
                uint8_t buf[512];
                assert_int_equal(secret->size, 256);
                assert_int_equal(EVP_PKEY_decrypt_init(ctx), 1);
                assert_int_equal(EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING), 1);
                assert_int_equal(EVP_PKEY_CTX_set_rsa_oaep_md(ctx, md), 1);
                assert_int_equal(EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, md), 1);
                assert_int_equal(EVP_PKEY_CTX_set0_rsa_oaep_label(ctx, OPENSSL_memdup("IDENTITY", 9), 9), 1);
                assert_int_equal(EVP_PKEY_decrypt(ctx, buf, &out, secret->secret, secret->size), 1);
                assert_int_equal(out, n);
                memcpy(seed, buf, n);
        } else {
                TPMS_ECC_POINT point = {};
                TPMT_PUBLIC eph_pub = *ek;
                EVP_PKEY *eph = NULL;
                EVP_PKEY_CTX *dctx;
                uint8_t z[48];
                size_t off = 0, z_n = sizeof z, coord = ek->unique.ecc.x.size;

                assert_int_equal(Tss2_MU_TPMS_ECC_POINT_Unmarshal(secret->secret, secret->size, &off, &point),
                                 TSS2_RC_SUCCESS);
                assert_int_equal(off, secret->size);
                assert_int_equal(point.x.size, coord);
                assert_int_equal(point.y.size, coord);
                eph_pub.unique.ecc = point;
                assert_int_equal(tg_public_to_evp(&eph_pub, &eph), 0);
                dctx = EVP_PKEY_CTX_new_from_pkey(NULL, priv, NULL);
                assert_int_equal(EVP_PKEY_derive_init(dctx), 1);
                assert_int_equal(EVP_PKEY_derive_set_peer(dctx, eph), 1);
                assert_int_equal(EVP_PKEY_derive(dctx, z, &z_n), 1);
                assert_int_equal(z_n, coord);
                ref_kdfe(md, z, z_n, "IDENTITY", point.x.buffer, coord, ek->unique.ecc.x.buffer, coord, n * 8, seed);
                EVP_PKEY_CTX_free(dctx);
                EVP_PKEY_free(eph);
        }
        EVP_PKEY_CTX_free(ctx);
        return n;
}

/* ActivateCredential in software: check the HMAC over encIdentity ‖ name, decrypt, return the credential. */
static int activate(EVP_PKEY *priv, const TPMT_PUBLIC *ek, const TPM2B_NAME *name, const TPM2B_ID_OBJECT *blob,
                    const TPM2B_ENCRYPTED_SECRET *secret, uint8_t *ret, size_t *ret_n) {
        const EVP_MD *md = md_of(ek->nameAlg);
        uint8_t seed[64], sym_key[32], hmac_key[64], mac[64], plain[128], mac_input[256];
        size_t n = unwrap_seed(priv, ek, secret, seed), aes = ek->type == TPM2_ALG_RSA
                ? ek->parameters.rsaDetail.symmetric.keyBits.aes : ek->parameters.eccDetail.symmetric.keyBits.aes;
        size_t enc_n, mac_n = 0;
        int outl = 0;

        assert_true(blob->size > 2 + n);
        assert_int_equal(blob->credential[0] << 8 | blob->credential[1], n);
        enc_n = blob->size - 2 - n;

        ref_kdfa(md, seed, n, "INTEGRITY", NULL, 0, NULL, 0, n * 8, hmac_key);
        memcpy(mac_input, blob->credential + 2 + n, enc_n);
        memcpy(mac_input + enc_n, name->name, name->size);
        assert_non_null(EVP_Q_mac(NULL, "HMAC", NULL, EVP_MD_get0_name(md), NULL, hmac_key, n, mac_input,
                                  enc_n + name->size, mac, sizeof mac, &mac_n));
        if (mac_n != n || memcmp(mac, blob->credential + 2, n) != 0)
                return -1; /* TPM_RC_INTEGRITY */

        ref_kdfa(md, seed, n, "STORAGE", name->name, name->size, NULL, 0, aes, sym_key);
        EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
        uint8_t iv[16] = {};
        assert_int_equal(EVP_DecryptInit_ex(c, aes == 128 ? EVP_aes_128_cfb128() : EVP_aes_256_cfb128(), NULL,
                                            sym_key, iv), 1);
        assert_int_equal(EVP_DecryptUpdate(c, plain, &outl, blob->credential + 2 + n, (int) enc_n), 1);
        EVP_CIPHER_CTX_free(c);
        assert_int_equal((size_t) outl, enc_n);
        assert_int_equal((size_t) (plain[0] << 8 | plain[1]), enc_n - 2);
        memcpy(ret, plain + 2, enc_n - 2);
        *ret_n = enc_n - 2;
        return 0;
}

static void make_and_activate(const char *kind, uint32_t nv_index, size_t expected_secret_size) {
        EVP_PKEY *priv = gen_key(kind);
        _cleanup_secret_ tg_secret *challenge = NULL;
        TPMT_PUBLIC ek;
        TPM2B_NAME name = { .size = 34 }, other;
        TPM2B_ID_OBJECT blob = {};
        TPM2B_ENCRYPTED_SECRET secret = {};
        uint8_t got[64];
        size_t got_n = 0, digest_n;

        ek_public_of(priv, nv_index, &ek);
        digest_n = ek.nameAlg == TPM2_ALG_SHA384 ? 48 : 32;
        name.name[0] = 0x00;
        name.name[1] = 0x0b;
        assert_int_equal(RAND_bytes(name.name + 2, 32), 1);
        assert_int_equal(tg_secret_new_random(32, &challenge), 0);

        assert_int_equal(tg_make_credential(&ek, &name, challenge, &blob, &secret), 0);
        assert_int_equal(secret.size, expected_secret_size);
        assert_int_equal(blob.size, 2 + digest_n + 2 + 32);
        assert_int_equal(activate(priv, &ek, &name, &blob, &secret, got, &got_n), 0);
        assert_int_equal(got_n, 32);
        assert_memory_equal(got, challenge->data, 32);

        /* Bound to the name: another name fails the integrity check. */
        other = name;
        other.name[33] ^= 0x80;
        assert_int_equal(activate(priv, &ek, &other, &blob, &secret, got, &got_n), -1);
        /* A flipped ciphertext bit fails it too. */
        blob.credential[blob.size - 1] ^= 1;
        assert_int_equal(activate(priv, &ek, &name, &blob, &secret, got, &got_n), -1);

        /* A fresh seed every time. */
        TPM2B_ID_OBJECT blob2;
        TPM2B_ENCRYPTED_SECRET secret2;
        assert_int_equal(tg_make_credential(&ek, &name, challenge, &blob2, &secret2), 0);
        assert_memory_not_equal(secret.secret, secret2.secret, secret.size);

        /* A credential larger than the name algorithm's digest cannot be activated by a TPM. */
        _cleanup_secret_ tg_secret *big = NULL;
        assert_int_equal(tg_secret_new_random(digest_n + 1, &big), 0);
        assert_int_equal(tg_make_credential(&ek, &name, big, &blob2, &secret2), -TG_ERR_INVALID);
        EVP_PKEY_free(priv);
}

static void test_make_credential_rsa(void **state) {
        make_and_activate("RSA", 0x01C00002, 256);
}

static void test_make_credential_ecc_p256(void **state) {
        make_and_activate("P-256", 0x01C0000A, 2 + 32 + 2 + 32);
}

static void test_make_credential_ecc_p384(void **state) {
        make_and_activate("P-384", 0x01C00016, 2 + 48 + 2 + 48);
}

static void test_make_credential_rejects(void **state) {
        EVP_PKEY *priv = gen_key("P-256");
        _cleanup_secret_ tg_secret *challenge = NULL;
        TPMT_PUBLIC ek;
        TPM2B_NAME name = { .size = 34 }, empty = {};
        TPM2B_ID_OBJECT blob;
        TPM2B_ENCRYPTED_SECRET secret;

        ek_public_of(priv, 0x01C0000A, &ek);
        assert_int_equal(tg_secret_new_random(32, &challenge), 0);
        assert_int_equal(tg_make_credential(&ek, &empty, challenge, &blob, &secret), -TG_ERR_INVALID);
        ek.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
        assert_int_equal(tg_make_credential(&ek, &name, challenge, &blob, &secret), -TG_ERR_INVALID);
        ek_public_of(priv, 0x01C0000A, &ek);
        ek.unique.ecc.y.buffer[5] ^= 1; /* not on the curve */
        assert_int_equal(tg_make_credential(&ek, &name, challenge, &blob, &secret), -TG_ERR_INVALID);
        EVP_PKEY_free(priv);
}

static int group_setup(void **state) {
        assert_non_null(mkdtemp(tmpdir));
        tg_log_set_sink(capture_sink, NULL);
        return 0;
}

static int group_teardown(void **state) {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}


/*
 * Issue 22 audit: a TPM that answers every GetCapability(NV handles) with
 * "more data" and the same handle kept tpmguard asking forever (a hang at
 * provisioning). A transport that gives exactly that answer must get a
 * refusal, and quickly (alarm: a hang fails the test instead of meson's timeout).
 */
typedef struct repeat_tcti {
        TSS2_TCTI_CONTEXT_COMMON_V2 common;
        unsigned answered;
} repeat_tcti;

static const uint8_t repeated_capability[] = {
        0x80, 0x01, 0, 0, 0, 27, 0, 0, 0, 0, /* NO_SESSIONS, 27 bytes, success */
        0x01,                                /* moreData = YES */
        0, 0, 0, 0x01,                       /* TPM2_CAP_HANDLES */
        0, 0, 0, 0x03,                       /* three handles, none of them advancing past the first asked */
        0x01, 0xc0, 0x00, 0x00,
        0x01, 0xc0, 0x00, 0x00,
        0x01, 0xc0, 0x00, 0x00,
};

static TSS2_RC repeat_transmit(TSS2_TCTI_CONTEXT *tcti, size_t size, const uint8_t *command) {
        return TSS2_RC_SUCCESS;
}

static TSS2_RC repeat_receive(TSS2_TCTI_CONTEXT *tcti, size_t *size, uint8_t *response, int32_t timeout) {
        repeat_tcti *t = (repeat_tcti *) tcti;

        if (response) {
                if (*size < sizeof repeated_capability)
                        return TSS2_TCTI_RC_INSUFFICIENT_BUFFER;
                memcpy(response, repeated_capability, sizeof repeated_capability);
                t->answered++;
        }
        *size = sizeof repeated_capability;
        return TSS2_RC_SUCCESS;
}

static void test_nv_listing_must_advance(void **state) {
        chains *c = *state;
        repeat_tcti transport = {
                .common.v1 = { .magic = 1, .version = 1, .transmit = repeat_transmit, .receive = repeat_receive },
        };
        tg_tpm tpm = { .transport = (TSS2_TCTI_CONTEXT *) &transport };
        TPM2B_NAME name = { .size = 34 };
        tg_ek_result result = {};

        assert_int_equal(tg_tcti_wrap(tpm.transport, &tpm.tcti), 0);
        assert_int_equal(Esys_Initialize(&tpm.esys, tpm.tcti, NULL), TSS2_RC_SUCCESS);
        alarm(60);
        assert_int_equal(tg_ek_attest_key(&tpm, &(tg_ek_options) { .ca_store = c->bundle }, ESYS_TR_PASSWORD, ESYS_TR_NONE, &name,
                                          &result),
                         -TG_ERR_INTERPOSER);
        alarm(0);
        assert_true(transport.answered <= 2);
        Esys_Finalize(&tpm.esys);
        tg_tcti_free(tpm.tcti);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_chain_valid, chains_setup, chains_teardown),
                cmocka_unit_test_setup_teardown(test_store_errors, chains_setup, chains_teardown),
                cmocka_unit_test_setup_teardown(test_store_list_and_distrust, chains_setup, chains_teardown),
                cmocka_unit_test_setup_teardown(test_chain_missing_issuer_aia, chains_setup, chains_teardown),
                cmocka_unit_test_setup_teardown(test_chain_self_signed, chains_setup, chains_teardown),
                cmocka_unit_test_setup_teardown(test_chain_other_ca, chains_setup, chains_teardown),
                cmocka_unit_test_setup_teardown(test_chain_validity_period, chains_setup, chains_teardown),
                cmocka_unit_test_setup_teardown(test_chain_missing_intermediate, chains_setup, chains_teardown),
                cmocka_unit_test_setup_teardown(test_chain_unknown_critical, chains_setup, chains_teardown),
                cmocka_unit_test(test_der_length),
                cmocka_unit_test_setup_teardown(test_cert_parse, chains_setup, chains_teardown),
                cmocka_unit_test(test_template_lookup),
                cmocka_unit_test(test_template_contents),
                cmocka_unit_test(test_kdfa),
                cmocka_unit_test(test_kdfe),
                cmocka_unit_test(test_make_credential_rsa),
                cmocka_unit_test(test_make_credential_ecc_p256),
                cmocka_unit_test(test_make_credential_ecc_p384),
                cmocka_unit_test(test_make_credential_rejects),
                cmocka_unit_test_setup_teardown(test_nv_listing_must_advance, chains_setup, chains_teardown),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
