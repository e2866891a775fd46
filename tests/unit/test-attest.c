/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tg_certify_verify without a TPM: attestations are built here with tss2-mu
 * and signed with an OpenSSL P-256 key that plays the EK signing key. Each
 * negative case changes exactly one thing and re-signs the result with the
 * pinned key wherever the change is to the signed bytes, so that it is the
 * check under test, and not the signature, that rejects it.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include "attest.h"
#include "error.h"
#include "log.h"
#include "tpm.h"

typedef struct fixture {
        EVP_PKEY *key;            /* plays the EK signing key */
        EVP_PKEY *other_key;      /* a different P-256 key */
        TPMT_PUBLIC signer;       /* EK signing key template + key's point */
        TPM2B_NAME signer_qn;
        TPM2B_NAME null_name;     /* the name the kernel reports */
        TPM2B_NAME null_qn;       /* its qualified name as a NULL-hierarchy primary */
        uint8_t nonce[32];
        TPMS_ATTEST attest;       /* a valid Certify result, edited by each test */
        char last_log[1024];
        int last_level;
} fixture;

static void capture_log(int level, const char *message, void *userdata) {
        fixture *f = userdata;
        f->last_level = level;
        snprintf(f->last_log, sizeof f->last_log, "%s", message);
}

static void fill_point(EVP_PKEY *key, TPMT_PUBLIC *pub) {
        BIGNUM *x = NULL, *y = NULL;

        assert_int_equal(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &x), 1);
        assert_int_equal(EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &y), 1);
        assert_int_equal(BN_bn2binpad(x, pub->unique.ecc.x.buffer, 32), 32);
        assert_int_equal(BN_bn2binpad(y, pub->unique.ecc.y.buffer, 32), 32);
        pub->unique.ecc.x.size = pub->unique.ecc.y.size = 32;
        BN_free(x);
        BN_free(y);
}

static int setup(void **state) {
        fixture *f = calloc(1, sizeof *f);
        TPM2B_PUBLIC tmpl, null_key;
        TPM2B_NAME signer_name;

        assert_non_null(f);
        f->key = EVP_EC_gen("P-256");
        f->other_key = EVP_EC_gen("P-256");
        assert_non_null(f->key);
        assert_non_null(f->other_key);

        tg_template_ek_signing_key(&tmpl);
        f->signer = tmpl.publicArea;
        fill_point(f->key, &f->signer);
        assert_int_equal(tg_public_name(&f->signer, &signer_name), 0);
        assert_int_equal(tg_ek_signing_key_qualified_name(&signer_name, &f->signer_qn), 0);

        /* Any well-formed NULL key will do; its point need only be distinct. */
        tg_template_srk_ecc(&null_key);
        fill_point(f->other_key, &null_key.publicArea);
        assert_int_equal(tg_public_name(&null_key.publicArea, &f->null_name), 0);
        assert_int_equal(tg_null_key_qualified_name(&f->null_name, &f->null_qn), 0);

        for (size_t i = 0; i < sizeof f->nonce; i++)
                f->nonce[i] = (uint8_t) (0xc0 + i);

        f->attest = (TPMS_ATTEST) {
                .magic = TPM2_GENERATED_VALUE,
                .type = TPM2_ST_ATTEST_CERTIFY,
                .qualifiedSigner = f->signer_qn,
                .extraData.size = sizeof f->nonce,
                .clockInfo = {
                        .clock = 0x0123456789abULL,
                        .resetCount = 7,
                        .restartCount = 3,
                        .safe = TPM2_YES,
                },
                .firmwareVersion = 0x2023010100170006ULL,
                .attested.certify = {
                        .name = f->null_name,
                },
        };
        memcpy(f->attest.extraData.buffer, f->nonce, sizeof f->nonce);
        assert_int_equal(tg_primary_qualified_name(TPM2_RH_NULL, &f->null_name,
                                                   &f->attest.attested.certify.qualifiedName), 0);

        tg_log_set_sink(capture_log, f);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        fixture *f = *state;
        tg_log_set_sink(NULL, NULL);
        EVP_PKEY_free(f->key);
        EVP_PKEY_free(f->other_key);
        free(f);
        return 0;
}

static void marshal(const TPMS_ATTEST *a, TPM2B_ATTEST *out) {
        size_t off = 0;
        *out = (TPM2B_ATTEST) {};
        assert_int_equal(Tss2_MU_TPMS_ATTEST_Marshal(a, out->attestationData, sizeof out->attestationData, &off),
                         TSS2_RC_SUCCESS);
        out->size = (UINT16) off;
}

/* ECDSA-SHA256 over the raw bytes, as the TPM does, into a TPMT_SIGNATURE. */
static void sign(EVP_PKEY *key, const TPM2B_ATTEST *a, TPMT_SIGNATURE *out) {
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        uint8_t der[128];
        const uint8_t *p = der;
        size_t der_size = sizeof der;
        ECDSA_SIG *esig;

        assert_non_null(md);
        assert_int_equal(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key), 1);
        assert_int_equal(EVP_DigestSign(md, der, &der_size, a->attestationData, a->size), 1);
        EVP_MD_CTX_free(md);
        esig = d2i_ECDSA_SIG(NULL, &p, (long) der_size);
        assert_non_null(esig);

        *out = (TPMT_SIGNATURE) { .sigAlg = TPM2_ALG_ECDSA };
        out->signature.ecdsa.hash = TPM2_ALG_SHA256;
        assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_r(esig), out->signature.ecdsa.signatureR.buffer, 32), 32);
        assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_s(esig), out->signature.ecdsa.signatureS.buffer, 32), 32);
        out->signature.ecdsa.signatureR.size = out->signature.ecdsa.signatureS.size = 32;
        ECDSA_SIG_free(esig);
}

static const tg_attest_info sentinel = {
        .clock = 0xa5a5a5a5a5a5a5a5ULL, .reset_count = 0xa5a5a5a5, .restart_count = 0xa5a5a5a5,
        .safe = false, .firmware_version = 0xa5a5a5a5a5a5a5a5ULL,
};

/* Runs the verification; on failure also checks ret_info was untouched and the log names the check. */
static void expect(fixture *f, const TPM2B_ATTEST *a, const TPMT_SIGNATURE *sig, const TPMT_PUBLIC *signer,
                   const uint8_t *nonce, size_t nonce_size, int expected_rc, const char *log_substring) {
        tg_attest_info info = sentinel;

        f->last_log[0] = 0;
        assert_int_equal(tg_certify_verify(a, sig, signer, &f->signer_qn, nonce, nonce_size, &f->null_name, &f->null_qn, &info),
                         expected_rc);
        if (expected_rc == 0)
                return;
        /* Field by field: struct padding is not part of the contract. */
        assert_true(info.clock == sentinel.clock);
        assert_int_equal(info.reset_count, sentinel.reset_count);
        assert_int_equal(info.restart_count, sentinel.restart_count);
        assert_int_equal(info.safe, sentinel.safe);
        assert_true(info.firmware_version == sentinel.firmware_version);
        if (log_substring && !strstr(f->last_log, log_substring))
                fail_msg("log \"%s\" does not contain \"%s\"", f->last_log, log_substring);
        if (expected_rc == -TG_ERR_INTERPOSER)
                assert_int_equal(f->last_level, LOG_ALERT);
}

/* Marshal f->attest (as edited), sign with the pinned key, expect rc. */
static void expect_signed(fixture *f, int expected_rc, const char *log_substring) {
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        marshal(&f->attest, &a);
        sign(f->key, &a, &sig);
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, expected_rc, log_substring);
}

static void test_valid(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;
        tg_attest_info info = sentinel;

        marshal(&f->attest, &a);
        sign(f->key, &a, &sig);
        assert_int_equal(tg_certify_verify(&a, &sig, &f->signer, &f->signer_qn, f->nonce, sizeof f->nonce,
                                           &f->null_name, &f->null_qn, &info), 0);
        assert_true(info.clock == 0x0123456789abULL);
        assert_int_equal(info.reset_count, 7);
        assert_int_equal(info.restart_count, 3);
        assert_true(info.safe);
        assert_true(info.firmware_version == 0x2023010100170006ULL);

        /* ret_info is optional. */
        assert_int_equal(tg_certify_verify(&a, &sig, &f->signer, &f->signer_qn, f->nonce, sizeof f->nonce,
                                           &f->null_name, &f->null_qn, NULL), 0);

        /* Short r and s (leading zero bytes dropped, as a TPM may do) still verify. */
        TPMS_SIGNATURE_ECDSA *e = &sig.signature.ecdsa;
        /* One signature in 256 has r < 2^248; 100000 tries miss one with probability ~e^-390. */
        for (int tries = 0; tries < 100000 && e->signatureR.buffer[0] != 0; tries++)
                sign(f->key, &a, &sig);
        assert_int_equal(e->signatureR.buffer[0], 0);
        memmove(e->signatureR.buffer, e->signatureR.buffer + 1, 31);
        e->signatureR.size = 31;
        assert_int_equal(tg_certify_verify(&a, &sig, &f->signer, &f->signer_qn, f->nonce, sizeof f->nonce,
                                           &f->null_name, &f->null_qn, NULL), 0);
}

static void test_truncated(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        marshal(&f->attest, &a);
        a.size--;
        sign(f->key, &a, &sig);
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "malformed");
}

static void test_trailing_byte(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        marshal(&f->attest, &a);
        a.attestationData[a.size++] = 0x00;
        sign(f->key, &a, &sig);
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "1 trailing bytes");
}

static void test_oversized_tpm2b(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        marshal(&f->attest, &a);
        sign(f->key, &a, &sig);
        a.size = sizeof a.attestationData + 1;
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "more than a TPM2B_ATTEST");
}

static void test_bad_safe_flag(void **state) {
        fixture *f = *state;
        f->attest.clockInfo.safe = 2;
        expect_signed(f, -TG_ERR_INTERPOSER, "'safe' flag");
}

static void test_wrong_magic(void **state) {
        fixture *f = *state;
        f->attest.magic = TPM2_GENERATED_VALUE ^ 1;
        expect_signed(f, -TG_ERR_INTERPOSER, "magic");
}

/* Shorter than the magic itself: the parser refuses it, whatever the tpm2-tss version. */
static void test_shorter_than_magic(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        marshal(&f->attest, &a);
        a.size = 3;
        sign(f->key, &a, &sig);
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "malformed");
}

/* A wrong magic is refused as such before anything else is looked at: with
 * an unsigned (forged) attestation too, on tpm2-tss 3.2 and 4.x alike. */
static void test_wrong_magic_unsigned(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        f->attest.magic = 0;
        marshal(&f->attest, &a);
        sign(f->key, &a, &sig);
        a.attestationData[a.size - 1] ^= 1;
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "magic is 0x00000000");
}

static void test_wrong_type(void **state) {
        fixture *f = *state;
        /* A quote with the same header: the union is re-interpreted by type. */
        f->attest.type = TPM2_ST_ATTEST_QUOTE;
        f->attest.attested.quote = (TPMS_QUOTE_INFO) {
                .pcrSelect.count = 1,
                .pcrSelect.pcrSelections[0] = { .hash = TPM2_ALG_SHA256, .sizeofSelect = 3, .pcrSelect = { 0x80 } },
                .pcrDigest.size = 32,
        };
        expect_signed(f, -TG_ERR_INTERPOSER, "not a TPM2_Certify result");
}

static void test_wrong_nonce(void **state) {
        fixture *f = *state;
        f->attest.extraData.buffer[31] ^= 0x01;
        expect_signed(f, -TG_ERR_INTERPOSER, "nonce");
}

static void test_nonce_length(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        /* The attestation carries a prefix of our nonce. */
        f->attest.extraData.size = 31;
        expect_signed(f, -TG_ERR_INTERPOSER, "nonce");

        /* The attestation carries our nonce and one byte more. */
        f->attest.extraData.size = 33;
        f->attest.extraData.buffer[32] = 0;
        expect_signed(f, -TG_ERR_INTERPOSER, "nonce");

        /* The caller's nonce is a prefix of the signed one. */
        f->attest.extraData.size = 32;
        marshal(&f->attest, &a);
        sign(f->key, &a, &sig);
        expect(f, &a, &sig, &f->signer, f->nonce, 16, -TG_ERR_INTERPOSER, "nonce");

        /* No nonce at all is refused up front: an attestation without one may be a replay. */
        expect(f, &a, &sig, &f->signer, NULL, 0, -TG_ERR_INVALID, "nonce");
        expect(f, &a, &sig, &f->signer, f->nonce, 0, -TG_ERR_INVALID, "nonce");
}

static void test_wrong_certified_name(void **state) {
        fixture *f = *state;
        f->attest.attested.certify.name.name[33] ^= 0x80;
        expect_signed(f, -TG_ERR_INTERPOSER, "certifies a different key");
        /* Also said without the kernel's null_name (kernel_null_name = prefer) and for a pinned
         * persistent key: the refusal must not name a key the kernel never recorded. */
        if (strstr(f->last_log, "kernel"))
                fail_msg("log \"%s\" names the kernel", f->last_log);

        /* Same digest, shorter name. */
        f->attest.attested.certify.name = f->null_name;
        f->attest.attested.certify.name.size--;
        expect_signed(f, -TG_ERR_INTERPOSER, "certifies a different key");
}

/*
 * The certified key must be a primary of the NULL hierarchy. A key of the NULL key template that
 * lives elsewhere (an owner primary, whose seed survives a TPM reset; a child of the owner SRK)
 * has the same name but another qualified name, under a signature that is valid.
 */
static void test_wrong_certified_qualified_name(void **state) {
        fixture *f = *state;
        TPM2B_NAME srk_qn;

        assert_int_equal(tg_primary_qualified_name(TPM2_RH_OWNER, &f->null_name,
                                                   &f->attest.attested.certify.qualifiedName), 0);
        expect_signed(f, -TG_ERR_INTERPOSER, "not a primary of the NULL hierarchy");

        /* A child of a storage key: QN = H(QN(parent) ‖ name) (Part 1, 16). */
        assert_int_equal(tg_primary_qualified_name(TPM2_RH_OWNER, &f->signer_qn, &srk_qn), 0);
        assert_int_equal(tg_primary_qualified_name(0, &f->null_name, &f->attest.attested.certify.qualifiedName), 0);
        memcpy(f->attest.attested.certify.qualifiedName.name + 2, srk_qn.name + 2, 32);
        expect_signed(f, -TG_ERR_INTERPOSER, "not a primary of the NULL hierarchy");

        /* Empty, and one byte short. */
        f->attest.attested.certify.qualifiedName.size = 0;
        expect_signed(f, -TG_ERR_INTERPOSER, "qualifiedName differs");
        f->attest.attested.certify.qualifiedName = f->null_qn;
        f->attest.attested.certify.qualifiedName.size--;
        expect_signed(f, -TG_ERR_INTERPOSER, "qualifiedName differs");

        /* And the helper is H(TPM_RH_NULL ‖ name). */
        f->attest.attested.certify.qualifiedName = f->null_qn;
        expect_signed(f, 0, NULL);
}

static TPMT_PUBLIC null_key_public(fixture *f) {
        TPM2B_PUBLIC p;

        tg_template_srk_ecc(&p);
        fill_point(f->other_key, &p.publicArea);
        return p.publicArea;
}

static void expect_public_refused(fixture *f, const TPMT_PUBLIC *p, const char *what) {
        f->last_log[0] = 0;
        if (tg_null_key_public_check(p) != -TG_ERR_INTERPOSER)
                fail_msg("a NULL key public area with %s was accepted", what);
        assert_int_equal(f->last_level, LOG_ALERT);
        assert_non_null(strstr(f->last_log, "nterposer"));
}

/* Every field of the template is checked: one change at a time, each must be refused. */
static void test_null_key_public_check(void **state) {
        static const TPMA_OBJECT attrs[] = {
                TPMA_OBJECT_FIXEDTPM, TPMA_OBJECT_FIXEDPARENT, TPMA_OBJECT_SENSITIVEDATAORIGIN,
                TPMA_OBJECT_USERWITHAUTH, TPMA_OBJECT_NODA, TPMA_OBJECT_RESTRICTED, TPMA_OBJECT_DECRYPT,
                TPMA_OBJECT_SIGN_ENCRYPT, TPMA_OBJECT_ADMINWITHPOLICY, TPMA_OBJECT_ENCRYPTEDDUPLICATION,
        };
        fixture *f = *state;
        TPMT_PUBLIC good = null_key_public(f), p;

        assert_int_equal(tg_null_key_public_check(&good), 0);

        for (size_t i = 0; i < ELEMENTSOF(attrs); i++) {
                p = good;
                p.objectAttributes ^= attrs[i];
                expect_public_refused(f, &p, "one attribute toggled");
        }
        p = good; p.nameAlg = TPM2_ALG_SHA384; expect_public_refused(f, &p, "SHA-384 nameAlg");
        p = good; p.authPolicy.size = 32; expect_public_refused(f, &p, "an authPolicy");
        p = good; p.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
        expect_public_refused(f, &p, "no symmetric algorithm");
        p = good; p.parameters.eccDetail.symmetric.keyBits.aes = 256; expect_public_refused(f, &p, "AES-256");
        p = good; p.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CTR; expect_public_refused(f, &p, "CTR");
        p = good; p.parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDH;
        p.parameters.eccDetail.scheme.details.ecdh.hashAlg = TPM2_ALG_SHA256;
        expect_public_refused(f, &p, "an ECDH scheme");
        p = good; p.parameters.eccDetail.curveID = TPM2_ECC_NIST_P384; expect_public_refused(f, &p, "P-384");
        p = good; p.parameters.eccDetail.kdf.scheme = TPM2_ALG_KDF1_SP800_56A;
        p.parameters.eccDetail.kdf.details.kdf1_sp800_56a.hashAlg = TPM2_ALG_SHA256;
        expect_public_refused(f, &p, "a KDF");
        p = good; p.unique.ecc.x.size = 31; expect_public_refused(f, &p, "a 31-byte x");
        p = good; p.unique.ecc.y.size = 0; expect_public_refused(f, &p, "no y");
        p = good; p.type = TPM2_ALG_RSA; expect_public_refused(f, &p, "type RSA");
}

/*
 * The attacks of issue 13 in software: the interposer answers CreatePrimary(NULL) with another key
 * and hands out its handle, so that Certify certifies it. (1) Its own key, loaded with its private
 * part (decrypt, not fixedTPM/fixedParent/restricted), on a TPM that reports H(TPM_RH_NULL ‖ name)
 * as its qualified name; (2) a NULL primary of another template (decrypt, not restricted), which
 * the TPM runs ECDH_ZGen with for anyone. What the genuine signer signs passes every attestation
 * check, the qualified name included: only the template check on the public area stops them.
 */
static void test_loaded_key_substitution(void **state) {
        fixture *f = *state;
        TPMT_PUBLIC evil = null_key_public(f);
        TPM2B_NAME evil_name, evil_qn;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        evil.objectAttributes = TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_DECRYPT;
        evil.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
        assert_int_equal(tg_public_name(&evil, &evil_name), 0);
        assert_int_equal(tg_null_key_qualified_name(&evil_name, &evil_qn), 0);
        f->attest.attested.certify.name = evil_name;
        f->attest.attested.certify.qualifiedName = evil_qn;
        marshal(&f->attest, &a);
        sign(f->key, &a, &sig);
        assert_int_equal(tg_certify_verify(&a, &sig, &f->signer, &f->signer_qn, f->nonce, sizeof f->nonce,
                                           &evil_name, &evil_qn, NULL), 0);
        expect_public_refused(f, &evil, "the interposer's loadable key");

        /* (2) fixedTPM, fixedParent, sensitiveDataOrigin: TPM-made, but not restricted. */
        evil.objectAttributes |= TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN;
        expect_public_refused(f, &evil, "an unrestricted NULL primary (ECDH_ZGen)");
}

static void test_wrong_qualified_signer(void **state) {
        fixture *f = *state;
        TPM2B_NAME signer_name;

        /* The same key, but as a primary in the owner hierarchy: a different qualified name. */
        assert_int_equal(tg_public_name(&f->signer, &signer_name), 0);
        assert_int_equal(tg_primary_qualified_name(TPM2_RH_OWNER, &signer_name, &f->attest.qualifiedSigner), 0);
        expect_signed(f, -TG_ERR_INTERPOSER, "qualifiedSigner");
}

static void test_other_key(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        marshal(&f->attest, &a);
        sign(f->other_key, &a, &sig);
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "does not verify");
}

static void test_flipped_bit(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        marshal(&f->attest, &a);
        sign(f->key, &a, &sig);
        sig.signature.ecdsa.signatureS.buffer[17] ^= 0x04;
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "does not verify");

        /* A flipped bit in the signed data instead: the last byte of the certified qualifiedName,
         * which no field check looks at, so only the signature can catch it. */
        sign(f->key, &a, &sig);
        a.attestationData[a.size - 1] ^= 0x01;
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "does not verify");
}

static void test_sigalg_rsassa(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        marshal(&f->attest, &a);
        sign(f->key, &a, &sig);
        sig.sigAlg = TPM2_ALG_RSASSA;
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "not ECDSA");

        sig.sigAlg = TPM2_ALG_ECSCHNORR;
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "not ECDSA");
}

static void test_hash_sha1(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        marshal(&f->attest, &a);
        sign(f->key, &a, &sig);
        sig.signature.ecdsa.hash = TPM2_ALG_SHA1;
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "not SHA-256");
}

static void test_r_33_bytes(void **state) {
        fixture *f = *state;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;
        TPMS_SIGNATURE_ECDSA *e = &sig.signature.ecdsa;

        marshal(&f->attest, &a);
        sign(f->key, &a, &sig);
        /* Same value with a leading zero byte: numerically valid, but not a P-256 encoding. */
        memmove(e->signatureR.buffer + 1, e->signatureR.buffer, 32);
        e->signatureR.buffer[0] = 0;
        e->signatureR.size = 33;
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "r/s of 33/32 bytes");

        sign(f->key, &a, &sig);
        e->signatureS.size = 0;
        expect(f, &a, &sig, &f->signer, f->nonce, sizeof f->nonce, -TG_ERR_INTERPOSER, "r/s of 32/0 bytes");
}

static void test_signer_wrong_curve(void **state) {
        fixture *f = *state;
        TPMT_PUBLIC signer = f->signer;
        TPM2B_ATTEST a;
        TPMT_SIGNATURE sig;

        marshal(&f->attest, &a);
        sign(f->key, &a, &sig);

        signer.parameters.eccDetail.curveID = TPM2_ECC_NIST_P384;
        expect(f, &a, &sig, &signer, f->nonce, sizeof f->nonce, -TG_ERR_INVALID, "not an ECC P-256 key");

        signer = f->signer;
        signer.type = TPM2_ALG_RSA;
        expect(f, &a, &sig, &signer, f->nonce, sizeof f->nonce, -TG_ERR_INVALID, "not an ECC P-256 key");

        /* P-256 but not restricted: such a key could sign a forged TPM_GENERATED_VALUE structure. */
        signer = f->signer;
        signer.objectAttributes &= ~TPMA_OBJECT_RESTRICTED;
        expect(f, &a, &sig, &signer, f->nonce, sizeof f->nonce, -TG_ERR_INVALID, "EK signing key template");

        /* The right template with a point that is not on the curve. */
        signer = f->signer;
        signer.unique.ecc.y.buffer[31] ^= 0x01;
        expect(f, &a, &sig, &signer, f->nonce, sizeof f->nonce, -TG_ERR_INVALID, "point is unusable");
}

static void test_qualified_name_helper(void **state) {
        fixture *f = *state;
        TPM2B_NAME name, qn, owner_qn;

        assert_int_equal(tg_public_name(&f->signer, &name), 0);
        assert_int_equal(tg_ek_signing_key_qualified_name(&name, &qn), 0);
        assert_int_equal(tg_primary_qualified_name(TPM2_RH_ENDORSEMENT, &name, &owner_qn), 0);
        assert_int_equal(qn.size, 34);
        assert_memory_equal(qn.name, owner_qn.name, 34);
        assert_memory_equal(qn.name, f->signer_qn.name, 34);
        assert_int_equal(tg_primary_qualified_name(TPM2_RH_OWNER, &name, &owner_qn), 0);
        assert_memory_not_equal(qn.name + 2, owner_qn.name + 2, 32);
}

static void test_info_json(void **state) {
        tg_attest_info info = {
                .clock = 18446744073709551615ULL, .reset_count = 7, .restart_count = 3,
                .safe = true, .firmware_version = 0x2023010100170006ULL,
        };
        json_object *o = NULL, *v;

        assert_int_equal(tg_attest_info_to_json(&info, &o), 0);
        assert_true(json_object_object_get_ex(o, "clock", &v));
        assert_true(json_object_get_uint64(v) == 18446744073709551615ULL);
        assert_true(json_object_object_get_ex(o, "reset_count", &v));
        assert_int_equal(json_object_get_int64(v), 7);
        assert_true(json_object_object_get_ex(o, "restart_count", &v));
        assert_int_equal(json_object_get_int64(v), 3);
        assert_true(json_object_object_get_ex(o, "safe", &v));
        assert_true(json_object_get_boolean(v));
        assert_true(json_object_object_get_ex(o, "firmware_version_hex", &v));
        assert_string_equal(json_object_get_string(v), "0x2023010100170006");
        assert_string_equal(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
                            "{\"clock\":18446744073709551615,\"reset_count\":7,\"restart_count\":3,\"safe\":true,"
                            "\"firmware_version\":2315695737206669318,\"firmware_version_hex\":\"0x2023010100170006\"}");
        json_object_put(o);
}

int main(void) {
        tg_log_set_journal(false); /* test alerts never reach the host's journal */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_valid, setup, teardown),
                cmocka_unit_test_setup_teardown(test_truncated, setup, teardown),
                cmocka_unit_test_setup_teardown(test_trailing_byte, setup, teardown),
                cmocka_unit_test_setup_teardown(test_oversized_tpm2b, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_safe_flag, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wrong_magic, setup, teardown),
                cmocka_unit_test_setup_teardown(test_shorter_than_magic, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wrong_magic_unsigned, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wrong_type, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wrong_nonce, setup, teardown),
                cmocka_unit_test_setup_teardown(test_nonce_length, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wrong_certified_name, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wrong_certified_qualified_name, setup, teardown),
                cmocka_unit_test_setup_teardown(test_null_key_public_check, setup, teardown),
                cmocka_unit_test_setup_teardown(test_loaded_key_substitution, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wrong_qualified_signer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_other_key, setup, teardown),
                cmocka_unit_test_setup_teardown(test_flipped_bit, setup, teardown),
                cmocka_unit_test_setup_teardown(test_sigalg_rsassa, setup, teardown),
                cmocka_unit_test_setup_teardown(test_hash_sha1, setup, teardown),
                cmocka_unit_test_setup_teardown(test_r_33_bytes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_signer_wrong_curve, setup, teardown),
                cmocka_unit_test_setup_teardown(test_qualified_name_helper, setup, teardown),
                cmocka_unit_test(test_info_json),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
