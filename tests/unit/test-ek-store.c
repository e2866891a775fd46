/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The default EK CA trust store (data/ek-ca), verified at every run:
 *   - every certificate parses, and each PEM block is one certificate;
 *   - roots.pem holds self-signed CA certificates only, intermediates.pem CA
 *     certificates that are not self-signed;
 *   - every intermediate chains to a shipped root, or is listed as "orphan"
 *     in the MANIFEST (and is reported);
 *   - certificates and MANIFEST lines correspond one to one: fingerprint,
 *     kind, subject and validity (a certificate changed without its line, or
 *     a line without its certificate, fails);
 *   - certificates expired or expiring within three years are listed, not
 *     failed;
 *   - the checker itself fails on a changed store (the store is copied and
 *     altered);
 *   - the store loads through tg_ek_trust_load with exactly the manifest's
 *     roots as anchors, and real EK certificates of real TPMs
 *     (tests/data/ek-samples/SOURCES) verify against it through the code
 *     provision runs (tg_ek_cert_parse, tg_ek_trust_load,
 *     tg_ek_cert_verify_anchor), naming the vendor that anchored them; a
 *     distrust list drops that anchor.
 *
 * Usage: test-ek-store STORE_DIR SAMPLES_DIR
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "ek-cert.h"
#include "ek-store.h"
#include "ek.h"
#include "error.h"
#include "log.h"
#include "util.h"

static const char *store_dir, *samples_dir;
static char tmpdir[] = "/tmp/tpmguard-test-ek-store.XXXXXX";

/* ---- log capture: every error line of the last operation ---- */

static char errors[8192];

static void capture_sink(int level, const char *message, void *userdata) {
        size_t len = strlen(errors);
        if (level <= LOG_ERR)
                snprintf(errors + len, sizeof errors - len, "%s\n", message);
}

static void assert_errors_mention(const char *needle) {
        if (!strstr(errors, needle))
                fail_msg("expected \"%s\" in the error messages, got: %s", needle, errors);
}

/* ---- helpers ---- */

static char *read_text(const char *path) {
        uint8_t *buf = NULL;
        size_t size = 0;
        assert_int_equal(tg_read_file(path, 4 * 1024 * 1024, &buf, &size), 0);
        return (char *) buf;
}

static void write_text(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fputs(text, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
}

static char *path_in(const char *dir, const char *name) {
        char *p = NULL;
        assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
        return p;
}

static size_t count_substr(const char *text, const char *needle) {
        size_t n = 0;
        for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
                n++;
        return n;
}

static char *rfc2253(const X509_NAME *name) {
        BIO *bio = BIO_new(BIO_s_mem());
        char *data = NULL, *s;
        long n;

        assert_non_null(bio);
        assert_true(X509_NAME_print_ex(bio, name, 0, XN_FLAG_RFC2253) >= 0);
        n = BIO_get_mem_data(bio, &data);
        s = strndup(data ?: "", (size_t) n);
        BIO_free(bio);
        return s;
}

static void iso_time(const ASN1_TIME *t, char *buf, size_t size) {
        struct tm tm = {};
        assert_int_equal(ASN1_TIME_to_tm(t, &tm), 1);
        strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- the checker ---- */

typedef struct store_report {
        bool verbose;   /* list orphans and expiring certificates */
        unsigned problems, roots, intermediates, orphans, expiring, expired;
} store_report;

static void problem(store_report *rep, const char *format, ...) __attribute__((format(printf, 2, 3)));
static void problem(store_report *rep, const char *format, ...) {
        va_list ap;
        va_start(ap, format);
        if (rep->verbose) {
                fputs("# store problem: ", stdout);
                vprintf(format, ap);
                fputc('\n', stdout);
        }
        va_end(ap);
        rep->problems++;
}

/* Every PEM block of the file, parsed; a block that does not parse is a problem. */
static STACK_OF(X509) *load_pem(const char *path, store_report *rep) {
        char *text = read_text(path);
        STACK_OF(X509) *certs = sk_X509_new_null();
        BIO *bio = BIO_new_mem_buf(text, -1);
        size_t blocks = count_substr(text, "-----BEGIN CERTIFICATE-----");
        X509 *c;

        assert_non_null(certs);
        assert_non_null(bio);
        /* A block that does not parse is counted and skipped; the next ones are still read. */
        for (size_t i = 0; i <= blocks; i++) {
                c = PEM_read_bio_X509(bio, NULL, NULL, NULL);
                if (c)
                        assert_true(sk_X509_push(certs, c) > 0);
                else if (ERR_GET_REASON(ERR_peek_last_error()) == PEM_R_NO_START_LINE)
                        break;
                ERR_clear_error();
        }
        ERR_clear_error();
        if ((size_t) sk_X509_num(certs) != blocks)
                problem(rep, "%s: %zu PEM blocks but %d parse as certificates", path, blocks, sk_X509_num(certs));
        BIO_free(bio);
        free(text);
        return certs;
}

/* The certificate against its manifest line; returns the line's kind or NULL. */
static const tg_ek_manifest_entry *check_against_manifest(X509 *c, const tg_ek_manifest *m, bool *seen,
                                                          const char *file, store_report *rep) {
        uint8_t fp[32];
        unsigned len = 0;
        char hex[96], date[32];
        const tg_ek_manifest_entry *e;
        char *subject = rfc2253(X509_get_subject_name(c));

        assert_int_equal(X509_digest(c, EVP_sha256(), fp, &len), 1);
        tg_ek_fingerprint_format(fp, hex, sizeof hex);
        e = tg_ek_manifest_find(m, fp);
        if (!e) {
                problem(rep, "%s: %s (SHA-256 %s) has no MANIFEST line", file, subject, hex);
                free(subject);
                return NULL;
        }
        seen[e - m->entries] = true;
        if (strcmp(e->subject, subject) != 0)
                problem(rep, "%s: %s: the MANIFEST names its subject \"%s\"", file, hex, e->subject);
        iso_time(X509_get0_notBefore(c), date, sizeof date);
        if (strcmp(e->not_before, date) != 0)
                problem(rep, "%s: %s: notBefore %s, MANIFEST %s", file, subject, date, e->not_before);
        iso_time(X509_get0_notAfter(c), date, sizeof date);
        if (strcmp(e->not_after, date) != 0)
                problem(rep, "%s: %s: notAfter %s, MANIFEST %s", file, subject, date, e->not_after);
        free(subject);
        return e;
}

static void check_expiry(X509 *c, const tg_ek_manifest_entry *e, store_report *rep) {
        time_t now = time(NULL), soon = now + (time_t) (3 * 365.25 * 24 * 3600);
        char date[32];

        iso_time(X509_get0_notAfter(c), date, sizeof date);
        if (X509_cmp_time(X509_get0_notAfter(c), &now) < 0) {
                if (rep->verbose)
                        printf("# expired %s: %s %s \"%s\"\n", date, e->vendor, e->kind, e->subject);
                rep->expired++;
        } else if (X509_cmp_time(X509_get0_notAfter(c), &soon) < 0) {
                if (rep->verbose)
                        printf("# expires within three years, %s: %s %s \"%s\"\n", date, e->vendor, e->kind, e->subject);
                rep->expiring++;
        }
}

static void check_store(const char *dir, bool verbose, store_report *rep) {
        char *manifest_path = path_in(dir, TG_EK_STORE_MANIFEST), *roots_path = path_in(dir, "roots.pem"),
             *ints_path = path_in(dir, "intermediates.pem");
        tg_ek_manifest *m = NULL;
        STACK_OF(X509) *roots, *ints;
        X509_STORE *anchors = X509_STORE_new();
        bool *seen;

        *rep = (store_report) { .verbose = verbose };
        errors[0] = '\0';
        if (tg_ek_manifest_load(manifest_path, &m) < 0) {
                problem(rep, "%s does not parse: %s", manifest_path, errors);
                goto out_paths;
        }
        seen = calloc(m->n + 1, sizeof *seen);
        assert_non_null(seen);
        assert_non_null(anchors);
        roots = load_pem(roots_path, rep);
        ints = load_pem(ints_path, rep);

        for (int i = 0; i < sk_X509_num(roots); i++) {
                X509 *c = sk_X509_value(roots, i);
                const tg_ek_manifest_entry *e = check_against_manifest(c, m, seen, "roots.pem", rep);
                rep->roots++;
                if (X509_self_signed(c, 1) != 1)
                        problem(rep, "roots.pem: \"%s\" is not self-signed (or its signature does not verify)",
                                e ? e->subject : "?");
                if (X509_check_ca(c) < 1)
                        problem(rep, "roots.pem: \"%s\" is not a CA certificate", e ? e->subject : "?");
                if (e && strcmp(e->kind, "root") != 0)
                        problem(rep, "roots.pem: \"%s\" is listed as %s", e->subject, e->kind);
                if (e)
                        check_expiry(c, e, rep);
                assert_int_equal(X509_STORE_add_cert(anchors, c), 1);
        }
        for (int i = 0; i < sk_X509_num(ints); i++) {
                X509 *c = sk_X509_value(ints, i);
                const tg_ek_manifest_entry *e = check_against_manifest(c, m, seen, "intermediates.pem", rep);
                X509_STORE_CTX *ctx = X509_STORE_CTX_new();
                bool chains;

                if (X509_self_signed(c, 0) == 1)
                        problem(rep, "intermediates.pem: \"%s\" is self-signed: a root among the intermediates",
                                e ? e->subject : "?");
                if (X509_check_ca(c) < 1)
                        problem(rep, "intermediates.pem: \"%s\" is not a CA certificate", e ? e->subject : "?");
                /* Chain building only: validity is reported below, not failed. */
                assert_non_null(ctx);
                assert_int_equal(X509_STORE_CTX_init(ctx, anchors, c, ints), 1);
                X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(ctx), X509_V_FLAG_NO_CHECK_TIME);
                chains = X509_verify_cert(ctx) == 1;
                X509_STORE_CTX_free(ctx);
                ERR_clear_error();
                if (!e)
                        continue;
                if (strcmp(e->kind, "intermediate") == 0) {
                        rep->intermediates++;
                        if (!chains)
                                problem(rep, "intermediates.pem: \"%s\" does not chain to a shipped root", e->subject);
                } else if (strcmp(e->kind, "orphan") == 0) {
                        rep->orphans++;
                        if (chains)
                                problem(rep, "intermediates.pem: \"%s\" is listed as orphan but chains to a root",
                                        e->subject);
                        else if (rep->verbose) {
                                char *issuer = rfc2253(X509_get_issuer_name(c));
                                printf("# orphan (its root is not shipped): %s \"%s\", issuer \"%s\"\n", e->vendor,
                                       e->subject, issuer);
                                free(issuer);
                        }
                } else
                        problem(rep, "intermediates.pem: \"%s\" is listed as %s", e->subject, e->kind);
                check_expiry(c, e, rep);
        }
        for (size_t k = 0; k < m->n; k++)
                if (!seen[k])
                        problem(rep, "MANIFEST: %s \"%s\" has no certificate in the store", m->entries[k].kind,
                                m->entries[k].subject);

        sk_X509_pop_free(roots, X509_free);
        sk_X509_pop_free(ints, X509_free);
        free(seen);
        tg_ek_manifest_free(m);
out_paths:
        X509_STORE_free(anchors);
        free(manifest_path);
        free(roots_path);
        free(ints_path);
}

/* ---- the shipped store ---- */

static void test_shipped_store(void **state) {
        store_report rep;

        check_store(store_dir, true, &rep);
        printf("# store: %u roots, %u intermediates, %u orphans; %u expired, %u expiring within three years\n",
               rep.roots, rep.intermediates, rep.orphans, rep.expired, rep.expiring);
        assert_int_equal(rep.problems, 0);
        /* The bundle's roots of AMD, Infineon, Intel, Microsoft, NSING, Nuvoton, STMicro/GlobalSign. */
        assert_true(rep.roots >= 20);
        assert_true(rep.intermediates >= 100);
}

static void test_loads_as_provision_does(void **state) {
        _cleanup_(tg_ek_trust_freep) tg_ek_trust *trust = NULL, *listed = NULL, *ints_only = NULL;
        tg_ek_manifest *m = NULL;
        char *manifest_path = path_in(store_dir, TG_EK_STORE_MANIFEST), *list = NULL,
             *ints_path = path_in(store_dir, "intermediates.pem");
        size_t roots = 0;

        assert_int_equal(tg_ek_manifest_load(manifest_path, &m), 0);
        for (size_t k = 0; k < m->n; k++)
                roots += strcmp(m->entries[k].kind, "root") == 0;
        /* Exactly the manifest's roots are anchors: no intermediate ever is one. */
        assert_int_equal(tg_ek_trust_load(store_dir, NULL, &trust), 0);
        assert_int_equal(tg_ek_trust_anchor_count(trust), roots);
        /* As the default ek_ca lists it: the shipped store, then a local directory that may not exist. */
        assert_true(asprintf(&list, "%s %s/no-local-dir", store_dir, tmpdir) > 0);
        assert_int_equal(tg_ek_trust_load(list, NULL, &listed), 0);
        assert_int_equal(tg_ek_trust_anchor_count(listed), roots);
        /* The intermediates alone anchor nothing. */
        errors[0] = '\0';
        assert_int_equal(tg_ek_trust_load(ints_path, NULL, &ints_only), -TG_ERR_EK_CERT);
        assert_errors_mention("no self-signed root");
        tg_ek_manifest_free(m);
        free(manifest_path);
        free(ints_path);
        free(list);
}

/* ---- the checker fails on a changed store ---- */

static char *copy_store(const char *name) {
        static const char *const files[] = { "roots.pem", "intermediates.pem", TG_EK_STORE_MANIFEST };
        char *dir = path_in(tmpdir, name);

        assert_int_equal(mkdir(dir, 0700), 0);
        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                char *src = path_in(store_dir, files[i]), *dst = path_in(dir, files[i]), *text = read_text(src);
                write_text(dst, text);
                free(text);
                free(src);
                free(dst);
        }
        return dir;
}

/* The text of the n-th PEM block of text (counting from 0), as [start, end). */
static void pem_block(const char *text, int n, const char **start, const char **end) {
        const char *p = text;
        for (int i = 0; i <= n; i++) {
                p = strstr(p, "-----BEGIN CERTIFICATE-----");
                assert_non_null(p);
                if (i < n)
                        p++;
        }
        *start = p;
        *end = strstr(p, "-----END CERTIFICATE-----");
        assert_non_null(*end);
        *end += strlen("-----END CERTIFICATE-----\n");
}

static void rewrite(const char *dir, const char *file, const char *text) {
        char *p = path_in(dir, file);
        write_text(p, text);
        free(p);
}

static void assert_store_fails(const char *dir, const char *why) {
        store_report rep;
        check_store(dir, false, &rep);
        if (rep.problems == 0)
                fail_msg("the store check passed a store with %s", why);
        printf("# a store with %s: %u problems found\n", why, rep.problems);
}

static void test_checker_catches_changes(void **state) {
        char *src = path_in(store_dir, "roots.pem"), *roots = read_text(src), *ints_src = path_in(store_dir, "intermediates.pem"),
             *ints = read_text(ints_src), *msrc = path_in(store_dir, TG_EK_STORE_MANIFEST), *manifest = read_text(msrc);
        const char *s0, *e0, *s1, *e1;
        char *dir, *t;

        /* A root swapped for another certificate (the second root in place of the first), manifest unchanged. */
        dir = copy_store("swapped");
        pem_block(roots, 0, &s0, &e0);
        pem_block(roots, 1, &s1, &e1);
        assert_true(asprintf(&t, "%.*s%.*s%s", (int) (s0 - roots), roots, (int) (e1 - s1), s1, e0) > 0);
        rewrite(dir, "roots.pem", t);
        assert_store_fails(dir, "a root replaced without its MANIFEST line");
        free(t);
        free(dir);

        /* One character of a certificate changed (its fingerprint and signature with it). */
        dir = copy_store("altered");
        t = strdup(ints);
        assert_non_null(t);
        pem_block(t, 3, &s0, &e0);
        {
                char *c = t + (s0 - t) + strlen("-----BEGIN CERTIFICATE-----\n") + 70;
                *c = *c == 'A' ? 'B' : 'A';
        }
        rewrite(dir, "intermediates.pem", t);
        assert_store_fails(dir, "an intermediate altered");
        free(t);
        free(dir);

        /* An intermediate removed: its MANIFEST line has no certificate. */
        dir = copy_store("removed");
        pem_block(ints, 5, &s0, &e0);
        assert_true(asprintf(&t, "%.*s%s", (int) (s0 - ints), ints, e0) > 0);
        rewrite(dir, "intermediates.pem", t);
        assert_store_fails(dir, "an intermediate removed but still in the MANIFEST");
        free(t);
        free(dir);

        /* An intermediate moved among the roots: not self-signed, listed as intermediate. */
        dir = copy_store("promoted");
        pem_block(ints, 0, &s0, &e0);
        assert_true(asprintf(&t, "%s%.*s", roots, (int) (e0 - s0), s0) > 0);
        rewrite(dir, "roots.pem", t);
        assert_store_fails(dir, "an intermediate among the roots");
        free(t);
        free(dir);

        /* A fingerprint changed in the MANIFEST. */
        dir = copy_store("fingerprint");
        t = strdup(manifest);
        assert_non_null(t);
        {
                char *line = strstr(t, "\nroot\t"), *fp;
                assert_non_null(line);
                fp = line + 1;
                for (int f = 0; f < 3; f++)
                        fp = strchr(fp, '\t') + 1;
                fp[10] = fp[10] == '0' ? '1' : '0';
        }
        rewrite(dir, TG_EK_STORE_MANIFEST, t);
        assert_store_fails(dir, "a MANIFEST fingerprint changed");
        free(t);
        free(dir);

        /* A root's validity changed in the MANIFEST. */
        dir = copy_store("validity");
        t = strdup(manifest);
        assert_non_null(t);
        {
                char *line = strstr(t, "\nroot\t"), *date;
                assert_non_null(line);
                date = line + 1;
                for (int f = 0; f < 5; f++)
                        date = strchr(date, '\t') + 1;
                date[3] = date[3] == '9' ? '8' : '9';
        }
        rewrite(dir, TG_EK_STORE_MANIFEST, t);
        assert_store_fails(dir, "a MANIFEST notAfter changed");
        free(t);
        free(dir);

        free(src);
        free(roots);
        free(ints_src);
        free(ints);
        free(msrc);
        free(manifest);
}

/* ---- real EK certificates ---- */

static const struct {
        const char *file;
        const char *vendor;       /* the MANIFEST's vendor of the anchor */
        const char *anchor_cn;    /* in the anchor's subject */
        uint32_t nv_index;        /* the EK template whose key type the certificate must fit */
} samples[] = {
        { "stm-st33htph-rsa2048.der", "STMicroelectronics", "GlobalSign Trusted Platform Module Root CA", 0x01C00002 },
        { "stm-st33htph-eccp256.der", "STMicroelectronics", "GlobalSign Trusted Platform Module ECC Root CA", 0x01C0000A },
};

static X509 *load_sample(const char *file) {
        char *path = path_in(samples_dir, file);
        uint8_t *buf = NULL;
        size_t size = 0;
        X509 *cert = NULL;

        assert_int_equal(tg_read_file(path, 8192, &buf, &size), 0);
        /* As provision reads it from NV: DER with the TPM's padding. */
        assert_int_equal(tg_ek_cert_parse(buf, size, &cert), 0);
        free(buf);
        free(path);
        return cert;
}

static void test_real_ek_certificates(void **state) {
        time_t now = time(NULL);

        for (size_t i = 0; i < ELEMENTSOF(samples); i++) {
                _cleanup_(tg_ek_trust_freep) tg_ek_trust *trust = NULL;
                tg_ek_anchor anchor = {};
                X509 *cert = load_sample(samples[i].file);
                char hex[96];

                if (X509_cmp_time(X509_get0_notAfter(cert), &now) < 0) {
                        printf("# %s has expired: replace it with a current sample (tests/data/ek-samples/SOURCES)\n",
                               samples[i].file);
                        X509_free(cert);
                        fail();
                }
                assert_true(tg_ek_template_fits_key(tg_ek_template_by_nv_index(samples[i].nv_index),
                                                    X509_get0_pubkey(cert)));
                assert_int_equal(tg_ek_trust_load(store_dir, NULL, &trust), 0);
                errors[0] = '\0';
                if (tg_ek_cert_verify_anchor(trust, cert, &anchor) != 0)
                        fail_msg("%s does not verify against the default store: %s", samples[i].file, errors);
                assert_string_equal(anchor.vendor, samples[i].vendor);
                assert_non_null(strstr(anchor.subject, samples[i].anchor_cn));
                tg_ek_fingerprint_format(anchor.sha256, hex, sizeof hex);
                printf("# %s: anchored by the %s root \"%s\" (SHA-256 %s)\n", samples[i].file, anchor.vendor,
                       anchor.subject, hex);
                tg_ek_anchor_done(&anchor);
                X509_free(cert);
        }
}

static void test_real_ek_needs_store(void **state) {
        X509 *cert = load_sample(samples[0].file);
        char *roots = path_in(store_dir, "roots.pem"), *local = path_in(tmpdir, "local"), *distrust, *list = NULL;
        tg_ek_trust *trust = NULL;
        tg_ek_anchor anchor = {};
        char hex[96];

        /* The roots alone: the intermediate is missing, and the message names it. */
        assert_int_equal(tg_ek_trust_load(roots, NULL, &trust), 0);
        errors[0] = '\0';
        assert_int_equal(tg_ek_cert_verify(trust, cert), -TG_ERR_EK_CERT);
        assert_errors_mention("STM TPM EK Intermediate CA 05");
        /* ... and where STMicro publishes it (the EK certificate's AIA), which is not fetched. */
        assert_errors_mention("http://secure.globalsign.com/stmtpmekint05.crt");
        assert_errors_mention("downloads nothing");
        tg_ek_trust_free(TAKE_PTR(trust));

        /* The administrator distrusts the anchor in the local directory: the shipped root no longer anchors. */
        assert_int_equal(tg_ek_trust_load(store_dir, NULL, &trust), 0);
        assert_int_equal(tg_ek_cert_verify_anchor(trust, cert, &anchor), 0);
        tg_ek_trust_free(TAKE_PTR(trust));
        tg_ek_fingerprint_format(anchor.sha256, hex, sizeof hex);
        assert_int_equal(mkdir(local, 0700), 0);
        distrust = path_in(local, TG_EK_STORE_DISTRUST);
        {
                char *text = NULL;
                assert_true(asprintf(&text, "# GlobalSign TPM root, distrusted for the test\n%s\n", hex) > 0);
                write_text(distrust, text);
                free(text);
        }
        assert_true(asprintf(&list, "%s %s", store_dir, local) > 0);
        assert_int_equal(tg_ek_trust_load(list, NULL, &trust), 0);
        errors[0] = '\0';
        assert_int_equal(tg_ek_cert_verify(trust, cert), -TG_ERR_EK_CERT);
        assert_errors_mention("distrusted");
        tg_ek_trust_free(TAKE_PTR(trust));
        /* The other vendor's chain is untouched by it. */
        {
                X509 *ecc = load_sample(samples[1].file);
                assert_int_equal(tg_ek_trust_load(list, NULL, &trust), 0);
                assert_int_equal(tg_ek_cert_verify(trust, ecc), 0);
                tg_ek_trust_free(TAKE_PTR(trust));
                X509_free(ecc);
        }
        /* A malformed distrust line fails closed. */
        write_text(distrust, "not-a-fingerprint\n");
        errors[0] = '\0';
        assert_int_equal(tg_ek_trust_load(list, NULL, &trust), -TG_ERR_EK_CERT);
        assert_errors_mention("not a SHA-256 fingerprint");

        tg_ek_anchor_done(&anchor);
        X509_free(cert);
        free(roots);
        free(local);
        free(distrust);
        free(list);
}

static int remove_tree(const char *dir) {
        char *cmd = NULL;
        int r;
        if (asprintf(&cmd, "rm -rf -- '%s'", dir) < 0)
                return -1;
        r = system(cmd);
        free(cmd);
        return r;
}

int main(int argc, char *argv[]) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_shipped_store),
                cmocka_unit_test(test_loads_as_provision_does),
                cmocka_unit_test(test_checker_catches_changes),
                cmocka_unit_test(test_real_ek_certificates),
                cmocka_unit_test(test_real_ek_needs_store),
        };
        int r;

        if (argc != 3) {
                fprintf(stderr, "usage: %s STORE_DIR SAMPLES_DIR\n", argv[0]);
                return 2;
        }
        store_dir = argv[1];
        samples_dir = argv[2];
        if (!mkdtemp(tmpdir))
                return 2;
        tg_log_set_sink(capture_sink, NULL);
        r = cmocka_run_group_tests(tests, NULL, NULL);
        remove_tree(tmpdir);
        return r;
}
