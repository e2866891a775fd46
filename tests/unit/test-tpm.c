/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include "error.h"
#include "tcti.h"
#include "tpm.h"
#include "util.h"
#include "log.h"

static void assert_marshals_to(const TPM2B_PUBLIC *pub, const char *hex) {
        uint8_t buf[sizeof(TPMT_PUBLIC)];
        size_t off = 0;
        _cleanup_free_ char *got = NULL;

        assert_int_equal(Tss2_MU_TPMT_PUBLIC_Marshal(&pub->publicArea, buf, sizeof buf, &off), TSS2_RC_SUCCESS);
        assert_int_equal(tg_hex_encode(buf, off, &got), 0);
        assert_string_equal(got, hex);
}

/* Design §3: the kernel's NULL primary = TCG SRK ECC "H" template, byte for byte. */
static void test_srk_template_bytes(void **state) {
        TPM2B_PUBLIC t;
        tg_template_srk_ecc(&t);
        assert_marshals_to(&t,
                "0023" "000b" "00030472" "0000"   /* ECC, SHA-256, attributes, empty policy */
                "0006" "0080" "0043"              /* AES-128-CFB */
                "0010" "0003" "0010"              /* scheme NULL, P-256, kdf NULL */
                "0000" "0000");                   /* empty unique */
        assert_true(tg_public_is_srk_ecc(&t.publicArea));
}

static void test_ek_signing_template_bytes(void **state) {
        TPM2B_PUBLIC t;
        tg_template_ek_signing_key(&t);
        assert_marshals_to(&t,
                "0023" "000b" "00050472" "0000"
                "0010"                            /* symmetric NULL */
                "0018" "000b"                     /* ECDSA-SHA256 */
                "0003" "0010"
                "0000" "0000");
        assert_false(tg_public_is_srk_ecc(&t.publicArea));
}

static void test_name_of_template(void **state) {
        TPM2B_PUBLIC t;
        TPM2B_NAME name;
        uint8_t buf[sizeof(TPMT_PUBLIC)], digest[32];
        size_t off = 0;
        unsigned dlen = 0;

        tg_template_srk_ecc(&t);
        assert_int_equal(tg_public_name(&t.publicArea, &name), 0);
        assert_int_equal(name.size, 34);
        assert_int_equal(name.name[0], 0x00);
        assert_int_equal(name.name[1], 0x0b);

        /* Independently: SHA-256 over the marshalled area. */
        assert_int_equal(Tss2_MU_TPMT_PUBLIC_Marshal(&t.publicArea, buf, sizeof buf, &off), TSS2_RC_SUCCESS);
        assert_int_equal(EVP_Digest(buf, off, digest, &dlen, EVP_sha256(), NULL), 1);
        assert_memory_equal(name.name + 2, digest, 32);

        t.publicArea.nameAlg = TPM2_ALG_SHA1;
        assert_int_equal(tg_public_name(&t.publicArea, &name), -TG_ERR_INVALID);
}

static void test_qualified_name(void **state) {
        TPM2B_NAME name = { .size = 34 }, qn;
        uint8_t in[4 + 34], digest[32];
        unsigned dlen = 0;

        for (int i = 0; i < 34; i++)
                name.name[i] = (uint8_t) i;
        assert_int_equal(tg_primary_qualified_name(TPM2_RH_ENDORSEMENT, &name, &qn), 0);
        in[0] = 0x40; in[1] = 0x00; in[2] = 0x00; in[3] = 0x0b;
        memcpy(in + 4, name.name, 34);
        assert_int_equal(EVP_Digest(in, sizeof in, digest, &dlen, EVP_sha256(), NULL), 1);
        assert_int_equal(qn.size, 34);
        assert_memory_equal(qn.name + 2, digest, 32);
}

static void test_public_roundtrip_exact(void **state) {
        TPM2B_PUBLIC t, back;
        _cleanup_free_ uint8_t *buf = NULL;
        size_t size;

        tg_template_ek_signing_key(&t);
        assert_int_equal(tg_tpm2b_public_marshal(&t, &buf, &size), 0);
        assert_int_equal(tg_tpm2b_public_unmarshal_exact(buf, size, &back), 0);
        assert_int_equal(back.publicArea.objectAttributes, t.publicArea.objectAttributes);
        /* truncated and trailing bytes both fail */
        assert_int_equal(tg_tpm2b_public_unmarshal_exact(buf, size - 1, &back), -TG_ERR_INVALID);
        buf = realloc(buf, size + 1);
        buf[size] = 0;
        assert_int_equal(tg_tpm2b_public_unmarshal_exact(buf, size + 1, &back), -TG_ERR_INVALID);
}

static void test_public_to_evp_ecc(void **state) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = EVP_EC_gen("P-256"), *other = EVP_EC_gen("P-256"), *conv = NULL;
        TPM2B_PUBLIC t;
        uint8_t point[65];
        size_t plen = 0;

        assert_non_null(key);
        assert_int_equal(EVP_PKEY_get_octet_string_param(key, "encoded-pub-key", point, sizeof point, &plen), 1);
        assert_int_equal(plen, 65);
        tg_template_ek_signing_key(&t);
        t.publicArea.unique.ecc.x.size = 32;
        memcpy(t.publicArea.unique.ecc.x.buffer, point + 1, 32);
        t.publicArea.unique.ecc.y.size = 32;
        memcpy(t.publicArea.unique.ecc.y.buffer, point + 33, 32);
        assert_int_equal(tg_public_to_evp(&t.publicArea, &conv), 0);
        assert_true(tg_public_equals_evp(&t.publicArea, key));
        assert_false(tg_public_equals_evp(&t.publicArea, other));

        /* y flipped: a point not on the curve is refused, not compared */
        t.publicArea.unique.ecc.y.buffer[5] ^= 1;
        assert_false(tg_public_equals_evp(&t.publicArea, key));
        t.publicArea.unique.ecc.y.size = 31;
        assert_int_equal(tg_public_to_evp(&t.publicArea, &conv), -TG_ERR_INVALID);
}

static void test_hex(void **state) {
        _cleanup_free_ uint8_t *b = NULL;
        size_t n;
        assert_int_equal(tg_hex_decode("00ff10Ab", 8, &b, &n), 0);
        assert_int_equal(n, 4);
        assert_int_equal(b[1], 0xff);
        assert_int_equal(b[3], 0xab);
        free(b);
        b = NULL;
        assert_int_equal(tg_hex_decode("0", 1, &b, &n), -TG_ERR_INVALID);
        assert_int_equal(tg_hex_decode("0g", 2, &b, &n), -TG_ERR_INVALID);
        assert_int_equal(tg_hex_decode("0 ", 2, &b, &n), -TG_ERR_INVALID);
}


/* Issue 22: the framing of a response is checked against the bytes the transport delivered. */
static void test_response_framing(void **state) {
        /* Unseal (no response handles), ST_SESSIONS: parameterSize 4 ‖ 4 parameter bytes ‖ a password auth (5 bytes). */
        uint8_t ok[] = { 0x80, 0x02, 0, 0, 0, 27, 0, 0, 0, 0, 0, 0, 0, 4, 0, 2, 0xaa, 0xbb, 0, 0, 1, 0, 0,
                         0xde, 0xad, 0xbe, 0xef };
        uint8_t r[sizeof ok];

        ok[5] = sizeof ok;
        assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_Unseal, ok, sizeof ok), 0);
        /* The transport delivered fewer or more bytes than the header says. */
        assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_Unseal, ok, sizeof ok - 1), -TG_ERR_INTERPOSER);
        assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_Unseal, ok, 9), -TG_ERR_INTERPOSER);
        /* parameterSize: the largest that fits, one more, and huge (the crash of issue 22). */
        memcpy(r, ok, sizeof r);
        r[13] = sizeof ok - 14;
        assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_Unseal, r, sizeof r), 0);
        r[13]++;
        assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_Unseal, r, sizeof r), -TG_ERR_INTERPOSER);
        r[10] = r[11] = r[12] = r[13] = 0xff;
        assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_Unseal, r, sizeof r), -TG_ERR_INTERPOSER);
        /* The same bytes as a response to Load: its handle takes 4 of them, the parameters no longer fit. */
        assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_Load, ok, sizeof ok), -TG_ERR_INTERPOSER);
        /* A bad tag; an error code with a body; an error code alone. */
        memcpy(r, ok, sizeof r);
        r[1] = 0x03;
        assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_Unseal, r, sizeof r), -TG_ERR_INTERPOSER);
        memcpy(r, ok, sizeof r);
        r[9] = 0x01;
        assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_Unseal, r, sizeof r), -TG_ERR_INTERPOSER);
        {
                const uint8_t err[] = { 0x80, 0x01, 0, 0, 0, 10, 0, 0, 0x09, 0x22 };
                assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_Unseal, err, sizeof err), 0);
        }
        /* No sessions, and a handle area cut short. */
        {
                const uint8_t cut[] = { 0x80, 0x01, 0, 0, 0, 12, 0, 0, 0, 0, 0x80, 0x00 };
                assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_CreatePrimary, cut, sizeof cut),
                                 -TG_ERR_INTERPOSER);
                assert_int_equal(tg_tpm_response_framing_check(TPM2_CC_GetRandom, cut, sizeof cut), 0);
        }
}

/* A successful response keeps its command's tag: sessions are neither removed nor added. */
static void test_response_tag(void **state) {
        const uint8_t with[] = { 0x80, 0x02, 0, 0, 0, 10, 0, 0, 0, 0 };
        const uint8_t without[] = { 0x80, 0x01, 0, 0, 0, 10, 0, 0, 0, 0 };
        const uint8_t error[] = { 0x80, 0x01, 0, 0, 0, 10, 0, 0, 0x09, 0x8e };

        assert_int_equal(tg_tpm_response_tag_check(TPM2_ST_SESSIONS, with, sizeof with), 0);
        assert_int_equal(tg_tpm_response_tag_check(TPM2_ST_NO_SESSIONS, without, sizeof without), 0);
        assert_int_equal(tg_tpm_response_tag_check(TPM2_ST_SESSIONS, without, sizeof without), -TG_ERR_INTERPOSER);
        assert_int_equal(tg_tpm_response_tag_check(TPM2_ST_NO_SESSIONS, with, sizeof with), -TG_ERR_INTERPOSER);
        /* An error response never has sessions (Part 1 §18), whatever the command had. */
        assert_int_equal(tg_tpm_response_tag_check(TPM2_ST_SESSIONS, error, sizeof error), 0);
}

/* A transport that answers with fixed bytes, for the wrapper. */
typedef struct fixed_tcti {
        TSS2_TCTI_CONTEXT_COMMON_V2 common;
        const uint8_t *response;
        size_t size;
} fixed_tcti;

static TSS2_RC fixed_transmit(TSS2_TCTI_CONTEXT *tcti, size_t size, const uint8_t *command) {
        return TSS2_RC_SUCCESS;
}

static TSS2_RC fixed_receive(TSS2_TCTI_CONTEXT *tcti, size_t *size, uint8_t *response, int32_t timeout) {
        fixed_tcti *f = (fixed_tcti *) tcti;

        if (response) {
                if (*size < f->size)
                        return TSS2_TCTI_RC_INSUFFICIENT_BUFFER;
                memcpy(response, f->response, f->size);
        }
        *size = f->size;
        return TSS2_RC_SUCCESS;
}

/* The wrapper refuses a forged parameterSize and wipes exactly the bytes received, never more. */
static void test_tcti_wrapper(void **state) {
        uint8_t forged[] = { 0x80, 0x02, 0, 0, 0, 20, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0, 2, 0x5e, 0xc2, 0, 0 };
        const uint8_t command[] = { 0x80, 0x02, 0, 0, 0, 10, 0, 0, 0x01, 0x5e };
        fixed_tcti inner = {
                .common.v1 = { .magic = 1, .version = 1, .transmit = fixed_transmit, .receive = fixed_receive },
                .response = forged, .size = sizeof forged,
        };
        TSS2_TCTI_CONTEXT *t = NULL;
        /* Exactly as large as the response plus a guard: a wipe past it would show. */
        uint8_t buf[sizeof forged + 8];
        size_t size = sizeof forged;

        memset(buf, 0x77, sizeof buf);
        assert_int_equal(tg_tcti_wrap((TSS2_TCTI_CONTEXT *) &inner, &t), 0);
        assert_int_equal(Tss2_Tcti_Transmit(t, sizeof command, command), TSS2_RC_SUCCESS);
        assert_int_equal(Tss2_Tcti_Receive(t, &size, buf, -1), TSS2_TCTI_RC_MALFORMED_RESPONSE);
        for (size_t i = 0; i < sizeof forged; i++)
                assert_int_equal(buf[i], 0); /* what arrived is wiped at once */
        for (size_t i = sizeof forged; i < sizeof buf; i++)
                assert_int_equal(buf[i], 0x77);

        /* A well-formed response is delivered; the wipe covers it and nothing after it. */
        forged[10] = forged[11] = forged[12] = 0;
        forged[13] = 4;
        memset(buf, 0x77, sizeof buf);
        size = sizeof buf;
        assert_int_equal(Tss2_Tcti_Transmit(t, sizeof command, command), TSS2_RC_SUCCESS);
        assert_int_equal(Tss2_Tcti_Receive(t, &size, buf, -1), TSS2_RC_SUCCESS);
        assert_int_equal(size, sizeof forged);
        assert_memory_equal(buf, forged, sizeof forged);
        tg_tcti_wipe_last_response(t);
        for (size_t i = 0; i < sizeof forged; i++)
                assert_int_equal(buf[i], 0);
        for (size_t i = sizeof forged; i < sizeof buf; i++)
                assert_int_equal(buf[i], 0x77);
        tg_tcti_free(t);
}

int main(void) {
        tg_log_set_journal(false); /* test alerts never reach the host's journal */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_srk_template_bytes),
                cmocka_unit_test(test_ek_signing_template_bytes),
                cmocka_unit_test(test_name_of_template),
                cmocka_unit_test(test_qualified_name),
                cmocka_unit_test(test_public_roundtrip_exact),
                cmocka_unit_test(test_public_to_evp_ecc),
                cmocka_unit_test(test_hex),
                cmocka_unit_test(test_response_framing),
                cmocka_unit_test(test_response_tag),
                cmocka_unit_test(test_tcti_wrapper),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
