/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tg_ek_attest_key against a real TPM: a private swtpm per test with EK
 * certificates issued by the fixture's private "manufacturer" CA.
 * Skipped (exit 77) when swtpm is not installed.
 *
 * usage: test-ek-swtpm PATH-TO-swtpm-fixture
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "ek.h"
#include "error.h"
#include "tpm.h"
#include "util.h"
#include "log.h"

static const char *fixture_script;

typedef struct fixture {
        char dir[PATH_MAX];
        char tcti[PATH_MAX + 32];
        char ca_root[PATH_MAX], ca_intermediate[PATH_MAX], ca_bundle[PATH_MAX];
        bool started;
} fixture;

static int run(const char *fmt, ...) _printf_(1, 2);
static int run(const char *fmt, ...) {
        _cleanup_free_ char *cmd = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&cmd, fmt, ap);
        va_end(ap);
        assert_true(r >= 0);
        r = system(cmd);
        return WIFEXITED(r) ? WEXITSTATUS(r) : -1;
}

static void env_value(const char *env, const char *key, char *out, size_t size) {
        _cleanup_free_ char *needle = NULL;
        const char *p, *end;

        assert_true(asprintf(&needle, "%s='", key) > 0);
        p = strstr(env, needle);
        assert_non_null(p);
        p += strlen(needle);
        end = strchr(p, '\'');
        assert_non_null(end);
        assert_true((size_t) (end - p) < size);
        memcpy(out, p, (size_t) (end - p));
        out[end - p] = '\0';
}

static void fixture_start(fixture *f, bool ecc) {
        _cleanup_free_ char *env_path = NULL;
        _cleanup_free_ uint8_t *env = NULL;
        size_t env_size;

        *f = (fixture) {};
        snprintf(f->dir, sizeof f->dir, "/tmp/tpmguard-test-ek.XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        assert_int_equal(run("'%s' start '%s' %s", fixture_script, f->dir, ecc ? "--ecc" : ""), 0);
        f->started = true;
        assert_true(asprintf(&env_path, "%s/env", f->dir) > 0);
        assert_int_equal(tg_read_file(env_path, 65536, &env, &env_size), 0);
        env = realloc(env, env_size + 1);
        assert_non_null(env);
        env[env_size] = '\0';
        env_value((char *) env, "TPMGUARD_TEST_TCTI", f->tcti, sizeof f->tcti);
        env_value((char *) env, "TPMGUARD_TEST_CA_ROOT", f->ca_root, sizeof f->ca_root);
        env_value((char *) env, "TPMGUARD_TEST_CA_INTERMEDIATE", f->ca_intermediate, sizeof f->ca_intermediate);
        env_value((char *) env, "TPMGUARD_TEST_CA_BUNDLE", f->ca_bundle, sizeof f->ca_bundle);
}

static void fixture_stop(fixture *f) {
        if (f->started)
                (void) run("'%s' stop '%s'", fixture_script, f->dir);
        f->started = false;
        if (f->dir[0])
                (void) run("rm -rf '%s'", f->dir);
        f->dir[0] = '\0';
}

/* Each test gets its own fixtures; teardown stops them whatever the test did. */
typedef struct test_state {
        fixture a, b;
        tg_tpm *tpm;
} test_state;

static int setup(void **state) {
        test_state *s = calloc(1, sizeof *s);
        assert_non_null(s);
        *state = s;
        return 0;
}

static int teardown(void **state) {
        test_state *s = *state;
        tg_tpm_free(s->tpm); /* closes the connection before the TPM is shut down */
        fixture_stop(&s->a);
        fixture_stop(&s->b);
        free(s);
        return 0;
}

/* The EK signing key, created the way provisioning creates it. */
static void create_primary(tg_tpm *tpm, ESYS_TR hierarchy, const TPM2B_PUBLIC *template, tg_handle *ret,
                           TPM2B_NAME *ret_name) {
        TPM2B_SENSITIVE_CREATE sensitive = {};
        TPM2B_DATA outside = {};
        TPML_PCR_SELECTION pcrs = {};
        TPM2B_PUBLIC *out = NULL;

        *ret = (tg_handle) { .esys = tpm->esys, .tr = ESYS_TR_NONE };
        assert_int_equal(Esys_CreatePrimary(tpm->esys, hierarchy, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                            &sensitive, template, &outside, &pcrs, &ret->tr, &out, NULL, NULL, NULL),
                         TSS2_RC_SUCCESS);
        assert_int_equal(tg_public_name(&out->publicArea, ret_name), 0);
        Esys_Free(out);
}

static void create_ek_signing_key(tg_tpm *tpm, tg_handle *ret, TPM2B_NAME *ret_name) {
        TPM2B_PUBLIC t;
        tg_template_ek_signing_key(&t);
        create_primary(tpm, ESYS_TR_RH_ENDORSEMENT, &t, ret, ret_name);
}

/* The number of loaded transient objects and sessions: everything must be flushed. */
static void assert_no_leftover_handles(tg_tpm *tpm, uint32_t transient_expected) {
        static const TPM2_HANDLE ranges[] = { TPM2_TRANSIENT_FIRST, TPM2_HMAC_SESSION_FIRST, TPM2_POLICY_SESSION_FIRST };
        for (size_t i = 0; i < ELEMENTSOF(ranges); i++) {
                TPMS_CAPABILITY_DATA *cap = NULL;
                TPMI_YES_NO more;
                assert_int_equal(Esys_GetCapability(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                                    TPM2_CAP_HANDLES, ranges[i], 64, &more, &cap),
                                 TSS2_RC_SUCCESS);
                uint32_t n = 0;
                for (uint32_t j = 0; j < cap->data.handles.count; j++)
                        if ((cap->data.handles.handle[j] >> 24) == (ranges[i] >> 24))
                                n++;
                assert_int_equal(n, i == 0 ? transient_expected : 0);
                Esys_Free(cap);
        }
}

static void attest_ok(test_state *s, const tg_ek_options *opts, uint32_t nv_index, const char *template_name) {
        _cleanup_handle_ tg_handle key = TG_HANDLE_NULL;
        TPM2B_NAME name;
        tg_ek_result res = {};
        static const uint8_t zero[32] = {};

        create_ek_signing_key(s->tpm, &key, &name);
        assert_int_equal(tg_ek_attest_key(s->tpm, opts, ESYS_TR_PASSWORD, key.tr, &name, &res), 0);
        assert_int_equal(res.nv_index, nv_index);
        assert_string_equal(res.template_name, template_name);
        assert_string_equal(res.cert_subject, "CN=unknown");
        assert_string_equal(res.cert_issuer, "CN=swtpm-localca");
        assert_memory_not_equal(res.cert_sha256, zero, 32);
        tg_ek_result_done(&res);
        assert_null(res.cert_subject);
        assert_no_leftover_handles(s->tpm, 1); /* only the caller's key */
}

static void attest_fails(test_state *s, const tg_ek_options *opts, int expected) {
        _cleanup_handle_ tg_handle key = TG_HANDLE_NULL;
        TPM2B_NAME name;
        tg_ek_result res = { .nv_index = 0xdeadbeef };

        create_ek_signing_key(s->tpm, &key, &name);
        assert_int_equal(tg_ek_attest_key(s->tpm, opts, ESYS_TR_PASSWORD, key.tr, &name, &res), expected);
        assert_int_equal(res.nv_index, 0xdeadbeef); /* ret untouched on failure */
        assert_no_leftover_handles(s->tpm, 1);
}

/*
 * swtpm_setup 0.7.1 always writes two EK certificates, RSA-2048 at 0x01C00002
 * and ECC P-384 at 0x01C00016 (--ecc only changes the SRK type). ECC is
 * preferred; a broken or absent ECC certificate falls back to RSA.
 */
static void test_ek_from_nv_and_fallback(void **state) {
        test_state *s = *state;
        char dir[PATH_MAX];

        fixture_start(&s->a, false);
        assert_int_equal(tg_tpm_open(s->a.tcti, &s->tpm), 0);
        attest_ok(s, &(tg_ek_options) { .ca_store = s->a.ca_bundle }, 0x01C00016, "H-3 (ECC P-384)");
        /* The root as the store, the intermediate given separately. */
        attest_ok(s, &(tg_ek_options) { .ca_store = s->a.ca_root, .intermediates_file = s->a.ca_intermediate },
                  0x01C00016, "H-3 (ECC P-384)");
        /* A directory store holding root and intermediate as separate files. */
        snprintf(dir, sizeof dir, "%s/castore", s->a.dir);
        assert_int_equal(run("mkdir '%s' && cp '%s' '%s' '%s/'", dir, s->a.ca_root, s->a.ca_intermediate, dir), 0);
        attest_ok(s, &(tg_ek_options) { .ca_store = dir }, 0x01C00016, "H-3 (ECC P-384)");

        /* Corrupt the ECC certificate (platform auth is empty on swtpm): RSA takes over. */
        tg_tpm_free(TAKE_PTR(s->tpm)); /* swtpm serves one connection at a time */
        assert_int_equal(run("printf 'garbage!' | TPM2TOOLS_TCTI='%s' tpm2_nvwrite -C p -i - 0x01C00016",
                             s->a.tcti), 0);
        assert_int_equal(tg_tpm_open(s->a.tcti, &s->tpm), 0);
        attest_ok(s, &(tg_ek_options) { .ca_store = s->a.ca_bundle }, 0x01C00002, "L-1 (RSA-2048)");

        /* No ECC certificate at all. */
        tg_tpm_free(TAKE_PTR(s->tpm));
        assert_int_equal(run("TPM2TOOLS_TCTI='%s' tpm2_nvundefine -C p 0x01C00016", s->a.tcti), 0);
        assert_int_equal(tg_tpm_open(s->a.tcti, &s->tpm), 0);
        attest_ok(s, &(tg_ek_options) { .ca_store = s->a.ca_bundle }, 0x01C00002, "L-1 (RSA-2048)");

        /* No EK certificate at all (a firmware TPM, typically). */
        tg_tpm_free(TAKE_PTR(s->tpm));
        assert_int_equal(run("TPM2TOOLS_TCTI='%s' tpm2_nvundefine -C p 0x01C00002", s->a.tcti), 0);
        assert_int_equal(tg_tpm_open(s->a.tcti, &s->tpm), 0);
        attest_fails(s, &(tg_ek_options) { .ca_store = s->a.ca_bundle }, -TG_ERR_EK_CERT);
}

/* swtpm --ecc writes its ECC EK certificate at 0x01C00016 (P-384): the H-3 template must re-create it. */
static void test_ecc_ek_from_nv(void **state) {
        test_state *s = *state;
        fixture_start(&s->a, true);
        assert_int_equal(tg_tpm_open(s->a.tcti, &s->tpm), 0);
        attest_ok(s, &(tg_ek_options) { .ca_store = s->a.ca_bundle }, 0x01C00016, "H-3 (ECC P-384)");
}

static void test_ek_cert_from_file(void **state) {
        test_state *s = *state;
        char der[PATH_MAX], pem[PATH_MAX], padded[PATH_MAX];

        fixture_start(&s->a, true);
        snprintf(der, sizeof der, "%s/ek384.der", s->a.dir);
        snprintf(pem, sizeof pem, "%s/ek2048.pem", s->a.dir);
        snprintf(padded, sizeof padded, "%s/ek384.padded", s->a.dir);
        assert_int_equal(run("TPM2TOOLS_TCTI='%s' tpm2_nvread 0x01C00016 -o '%s' 2>/dev/null", s->a.tcti, der), 0);
        assert_int_equal(run("TPM2TOOLS_TCTI='%s' tpm2_nvread 0x01C00002 2>/dev/null | "
                             "openssl x509 -inform der -out '%s'", s->a.tcti, pem), 0);
        assert_int_equal(run("{ cat '%s'; head -c 100 /dev/zero; } > '%s'", der, padded), 0);
        assert_int_equal(tg_tpm_open(s->a.tcti, &s->tpm), 0);
        attest_ok(s, &(tg_ek_options) { .cert_file = der, .ca_store = s->a.ca_bundle }, 0, "H-3 (ECC P-384)");
        attest_ok(s, &(tg_ek_options) { .cert_file = pem, .ca_store = s->a.ca_bundle }, 0, "L-1 (RSA-2048)");
        attest_ok(s, &(tg_ek_options) { .cert_file = padded, .ca_store = s->a.ca_bundle }, 0, "H-3 (ECC P-384)");
}

/* A valid certificate of another TPM (chain fine, key not this TPM's) and a CA store of another manufacturer. */
static void test_other_tpm_and_other_ca(void **state) {
        test_state *s = *state;
        char other_cert[PATH_MAX];

        fixture_start(&s->a, false);
        fixture_start(&s->b, false);
        snprintf(other_cert, sizeof other_cert, "%s/ek-b.der", s->b.dir);
        assert_int_equal(run("TPM2TOOLS_TCTI='%s' tpm2_nvread 0x01C00002 -o '%s' 2>/dev/null", s->b.tcti, other_cert), 0);
        assert_int_equal(tg_tpm_open(s->a.tcti, &s->tpm), 0);

        attest_fails(s, &(tg_ek_options) { .ca_store = s->b.ca_bundle }, -TG_ERR_EK_CERT);
        attest_fails(s, &(tg_ek_options) { .cert_file = other_cert, .ca_store = s->b.ca_bundle }, -TG_ERR_EK_CERT);
        /* Positive control: the same TPM with its own CA. */
        attest_ok(s, &(tg_ek_options) { .ca_store = s->a.ca_bundle }, 0x01C00016, "H-3 (ECC P-384)");
}

static void test_missing_intermediate(void **state) {
        test_state *s = *state;
        fixture_start(&s->a, false);
        assert_int_equal(tg_tpm_open(s->a.tcti, &s->tpm), 0);
        attest_fails(s, &(tg_ek_options) { .ca_store = s->a.ca_root }, -TG_ERR_EK_CERT);
        /* The intermediate alone is no trust anchor. */
        attest_fails(s, &(tg_ek_options) { .ca_store = s->a.ca_intermediate }, -TG_ERR_EK_CERT);
}

/* The credential is bound to another key's name: the TPM must refuse to release it. */
static void test_wrong_key_name(void **state) {
        test_state *s = *state;
        _cleanup_handle_ tg_handle key = TG_HANDLE_NULL;
        TPM2B_NAME name, other_name;
        TPM2B_PUBLIC srk;
        tg_ek_result res = {};

        fixture_start(&s->a, true);
        assert_int_equal(tg_tpm_open(s->a.tcti, &s->tpm), 0);
        {
                _cleanup_handle_ tg_handle other = TG_HANDLE_NULL;
                tg_template_srk_ecc(&srk);
                create_primary(s->tpm, ESYS_TR_RH_OWNER, &srk, &other, &other_name);
        }
        create_ek_signing_key(s->tpm, &key, &name);
        assert_memory_not_equal(name.name, other_name.name, name.size);
        assert_int_equal(tg_ek_attest_key(s->tpm, &(tg_ek_options) { .ca_store = s->a.ca_bundle }, ESYS_TR_PASSWORD,
                                          key.tr, &other_name, &res),
                         -TG_ERR_EK_PROOF);
        assert_no_leftover_handles(s->tpm, 1);

        /* One flipped bit in the right name fails the same way. */
        name.name[name.size - 1] ^= 1;
        assert_int_equal(tg_ek_attest_key(s->tpm, &(tg_ek_options) { .ca_store = s->a.ca_bundle }, ESYS_TR_PASSWORD,
                                          key.tr, &name, &res),
                         -TG_ERR_EK_PROOF);
        name.name[name.size - 1] ^= 1;
        assert_int_equal(tg_ek_attest_key(s->tpm, &(tg_ek_options) { .ca_store = s->a.ca_bundle }, ESYS_TR_PASSWORD,
                                          key.tr, &name, &res),
                         0);
        tg_ek_result_done(&res);
        assert_no_leftover_handles(s->tpm, 1);
}

static void test_endorsement_password(void **state) {
        test_state *s = *state;
        _cleanup_handle_ tg_handle key = TG_HANDLE_NULL;
        TPM2B_NAME name;
        TPM2B_AUTH auth = { .size = 6, .buffer = "ehpass" };
        tg_ek_result res = {};
        tg_ek_options o = {};

        fixture_start(&s->a, false);
        o.ca_store = s->a.ca_bundle;
        assert_int_equal(tg_tpm_open(s->a.tcti, &s->tpm), 0);
        create_ek_signing_key(s->tpm, &key, &name);
        /* Set the endorsement password only now, so that the key above exists (test setup). */
        assert_int_equal(Esys_HierarchyChangeAuth(s->tpm->esys, ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD,
                                                  ESYS_TR_NONE, ESYS_TR_NONE, &auth),
                         TSS2_RC_SUCCESS);
        assert_int_equal(Esys_TR_SetAuth(s->tpm->esys, ESYS_TR_RH_ENDORSEMENT, &(TPM2B_AUTH) {}), TSS2_RC_SUCCESS);
        assert_int_equal(tg_ek_attest_key(s->tpm, &o, ESYS_TR_PASSWORD, key.tr, &name, &res), -TG_ERR_AUTH_NEEDED);
        assert_no_leftover_handles(s->tpm, 1);
        assert_int_equal(Esys_TR_SetAuth(s->tpm->esys, ESYS_TR_RH_ENDORSEMENT, &auth), TSS2_RC_SUCCESS);
        assert_int_equal(tg_ek_attest_key(s->tpm, &o, ESYS_TR_PASSWORD, key.tr, &name, &res), 0);
        tg_ek_result_done(&res);
        assert_no_leftover_handles(s->tpm, 1);
}

int main(int argc, char **argv) {
        tg_log_set_journal(false); /* test alerts never reach the host's journal */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_ek_from_nv_and_fallback, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ecc_ek_from_nv, setup, teardown),
                cmocka_unit_test_setup_teardown(test_ek_cert_from_file, setup, teardown),
                cmocka_unit_test_setup_teardown(test_other_tpm_and_other_ca, setup, teardown),
                cmocka_unit_test_setup_teardown(test_missing_intermediate, setup, teardown),
                cmocka_unit_test_setup_teardown(test_wrong_key_name, setup, teardown),
                cmocka_unit_test_setup_teardown(test_endorsement_password, setup, teardown),
        };

        if (argc != 2) {
                fprintf(stderr, "usage: %s PATH-TO-swtpm-fixture\n", argv[0]);
                return 2;
        }
        fixture_script = argv[1];
        if (run("command -v swtpm >/dev/null && command -v swtpm_setup >/dev/null && "
                "command -v tpm2_startup >/dev/null") != 0) {
                fprintf(stderr, "swtpm, swtpm_setup or tpm2-tools not installed: skipping.\n");
                return 77;
        }
        return cmocka_run_group_tests(tests, NULL, NULL);
}
