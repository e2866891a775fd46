/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tg_certify_verify against a real TPM (a private swtpm from
 * tests/fixture/swtpm-fixture): the EK signing key certifies the NULL
 * primary, whose expected name comes from the fixture's independent client
 * (tpm2-tools, the kernel's template), as it would from sysfs null_name.
 * Exits 77 (skipped) when swtpm or tpm2-tools are not installed.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <errno.h>
#include <spawn.h>
#include <sys/wait.h>
#include <openssl/rand.h>

#include "attest.h"
#include "error.h"
#include "tpm.h"
#include "util.h"
#include "log.h"

extern char **environ;

typedef struct fixture {
        char dir[64];
        const char *script;
        tg_tpm *tpm;
        TPM2B_NAME null_name;      /* kernel-style, from the independent client */
        TPMT_PUBLIC signer;        /* the EK signing key as created */
        TPM2B_NAME signer_qn;
} fixture;

/* The qualified name of a NULL-hierarchy primary of this name (a static buffer: one per call site). */
static const TPM2B_NAME *qn_of(const TPM2B_NAME *name) {
        static TPM2B_NAME qn;

        assert_int_equal(tg_null_key_qualified_name(name, &qn), 0);
        return &qn;
}

static int run(char *const argv[]) {
        pid_t pid;
        int status;

        if (posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ) != 0)
                return -1;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static bool have_program(const char *name) {
        char *argv[] = { "sh", "-c", "command -v \"$0\" >/dev/null 2>&1", (char *) name, NULL };
        return run(argv) == 0;
}

/* Reads DIR/FILE's KEY='value' line (the fixture's env file). */
static char *read_env_value(const char *dir, const char *key) {
        char path[128], line[512];
        size_t klen = strlen(key);
        FILE *f;
        char *value = NULL;

        snprintf(path, sizeof path, "%s/env", dir);
        f = fopen(path, "re");
        if (!f)
                return NULL;
        while (!value && fgets(line, sizeof line, f)) {
                if (strncmp(line, key, klen) != 0 || line[klen] != '=' || line[klen + 1] != '\'')
                        continue;
                char *start = line + klen + 2, *end = strrchr(start, '\'');
                if (end)
                        value = strndup(start, (size_t) (end - start));
        }
        fclose(f);
        return value;
}

static void read_null_name(fixture *f, TPM2B_NAME *ret) {
        char out[128];
        char *argv[] = { (char *) f->script, "null-name", f->dir, out, NULL };
        _cleanup_free_ uint8_t *text = NULL, *bytes = NULL;
        size_t text_size = 0, size = 0;

        snprintf(out, sizeof out, "%s/null_name", f->dir);
        assert_int_equal(run(argv), 0);
        assert_int_equal(tg_read_file(out, 4096, &text, &text_size), 0);
        assert_true(text_size == 2 * 34 + 1 && text[text_size - 1] == '\n');
        assert_int_equal(tg_hex_decode((const char *) text, text_size - 1, &bytes, &size), 0);
        assert_int_equal(size, 34);
        ret->size = 34;
        memcpy(ret->name, bytes, 34);
}

static void create_primary(fixture *f, ESYS_TR hierarchy, const TPM2B_PUBLIC *tmpl,
                           tg_handle *ret, TPMT_PUBLIC *ret_public) {
        TPM2B_SENSITIVE_CREATE sensitive = {};
        TPM2B_DATA outside = {};
        TPML_PCR_SELECTION pcrs = {};
        TPM2B_PUBLIC *out_public = NULL;
        ESYS_TR tr = ESYS_TR_NONE;

        assert_int_equal(tg_tpm_rc(Esys_CreatePrimary(f->tpm->esys, hierarchy, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                                      ESYS_TR_NONE, &sensitive, tmpl, &outside, &pcrs, &tr,
                                                      &out_public, NULL, NULL, NULL),
                                   "CreatePrimary"), 0);
        *ret = (tg_handle) { .esys = f->tpm->esys, .tr = tr };
        *ret_public = out_public->publicArea;
        Esys_Free(out_public);
}

/* Creates both keys, certifies the NULL key with nonce, returns the TPM's answer. */
static void certify(fixture *f, const uint8_t *nonce, size_t nonce_size,
                    TPM2B_ATTEST *ret_attest, TPMT_SIGNATURE *ret_sig, TPMT_PUBLIC *ret_null_public) {
        _cleanup_handle_ tg_handle null_key = TG_HANDLE_NULL, signer = TG_HANDLE_NULL;
        TPM2B_PUBLIC srk_tmpl, signer_tmpl;
        TPM2B_DATA qualifying = { .size = (UINT16) nonce_size };
        TPMT_SIG_SCHEME scheme = { .scheme = TPM2_ALG_NULL };
        TPM2B_ATTEST *attest = NULL;
        TPMT_SIGNATURE *sig = NULL;
        TPM2B_NAME signer_name;

        tg_template_srk_ecc(&srk_tmpl);
        tg_template_ek_signing_key(&signer_tmpl);
        create_primary(f, ESYS_TR_RH_NULL, &srk_tmpl, &null_key, ret_null_public);
        create_primary(f, ESYS_TR_RH_ENDORSEMENT, &signer_tmpl, &signer, &f->signer);
        assert_int_equal(tg_public_name(&f->signer, &signer_name), 0);
        assert_int_equal(tg_ek_signing_key_qualified_name(&signer_name, &f->signer_qn), 0);

        memcpy(qualifying.buffer, nonce, nonce_size);
        assert_int_equal(tg_tpm_rc(Esys_Certify(f->tpm->esys, null_key.tr, signer.tr,
                                                ESYS_TR_PASSWORD, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                                &qualifying, &scheme, &attest, &sig),
                                   "Certify"), 0);
        *ret_attest = *attest;
        *ret_sig = *sig;
        Esys_Free(attest);
        Esys_Free(sig);
}

static int group_teardown(void **state) {
        fixture *f = *state;
        char *stop[] = { (char *) f->script, "stop", f->dir, NULL };
        char *rm[] = { "rm", "-rf", "--", f->dir, NULL };
        int r = 0;

        tg_tpm_free(f->tpm);
        if (run(stop) != 0)
                r = -1;
        (void) run(rm);
        free(f);
        return r;
}

static int group_setup(void **state) {
        fixture *f = calloc(1, sizeof *f);
        _cleanup_free_ char *tcti = NULL;

        if (!f)
                return -1;
        f->script = getenv("TPMGUARD_SWTPM_FIXTURE");
        snprintf(f->dir, sizeof f->dir, "/tmp/tpmguard-certify-XXXXXX");
        if (!f->script || !mkdtemp(f->dir)) {
                free(f);
                return -1;
        }
        *state = f;

        char *start[] = { (char *) f->script, "start", f->dir, NULL };
        if (run(start) == 0 && (tcti = read_env_value(f->dir, "TPMGUARD_TEST_TCTI")) &&
            tg_tpm_open(tcti, &f->tpm) == 0)
                return 0;

        /* cmocka does not run the group teardown after a failed setup: stop swtpm here. */
        (void) group_teardown(state);
        return -1;
}

static void test_certify_verifies(void **state) {
        fixture *f = *state;
        uint8_t nonce[32], other[32];
        TPM2B_ATTEST attest;
        TPMT_SIGNATURE sig;
        TPMT_PUBLIC null_public;
        TPM2B_NAME computed;
        tg_attest_info info = {}, info2 = {};

        read_null_name(f, &f->null_name);
        assert_int_equal(RAND_bytes(nonce, sizeof nonce), 1);
        certify(f, nonce, sizeof nonce, &attest, &sig, &null_public);

        /* Our NULL key is the kernel's: same template, same name. */
        assert_int_equal(tg_public_name(&null_public, &computed), 0);
        assert_int_equal(computed.size, f->null_name.size);
        assert_memory_equal(computed.name, f->null_name.name, computed.size);
        /* What a real TPM returns for the NULL key is exactly the template with its point. */
        assert_int_equal(tg_null_key_public_check(&null_public), 0);

        assert_int_equal(tg_certify_verify(&attest, &sig, &f->signer, &f->signer_qn, nonce, sizeof nonce,
                                           &f->null_name, qn_of(&f->null_name), &info), 0);
        assert_true(info.clock > 0);

        /* The same genuine answer presented for another call's nonce is a replay. */
        memcpy(other, nonce, sizeof other);
        other[0] ^= 0x01;
        assert_int_equal(tg_certify_verify(&attest, &sig, &f->signer, &f->signer_qn, other, sizeof other,
                                           &f->null_name, qn_of(&f->null_name), &info2), -TG_ERR_INTERPOSER);

        /* A genuine attestation, tampered with on the way. */
        attest.attestationData[attest.size - 1] ^= 0x01;
        assert_int_equal(tg_certify_verify(&attest, &sig, &f->signer, &f->signer_qn, nonce, sizeof nonce,
                                           &f->null_name, qn_of(&f->null_name), &info2), -TG_ERR_INTERPOSER);
}

/* After a TPM reset the NULL seed is new: the certified key no longer matches the boot-time name. */
static void test_reset_detected(void **state) {
        fixture *f = *state;
        char *reset[] = { (char *) f->script, "reset", f->dir, NULL };
        uint8_t nonce[32];
        TPM2B_ATTEST attest;
        TPMT_SIGNATURE sig;
        TPMT_PUBLIC null_public;
        TPM2B_NAME boot_name, after_reset;
        tg_attest_info before = {}, after = {};

        read_null_name(f, &boot_name);
        assert_int_equal(RAND_bytes(nonce, sizeof nonce), 1);
        certify(f, nonce, sizeof nonce, &attest, &sig, &null_public);
        assert_int_equal(tg_certify_verify(&attest, &sig, &f->signer, &f->signer_qn, nonce, sizeof nonce,
                                           &boot_name, qn_of(&boot_name), &before), 0);

        assert_int_equal(run(reset), 0);

        assert_int_equal(RAND_bytes(nonce, sizeof nonce), 1);
        certify(f, nonce, sizeof nonce, &attest, &sig, &null_public);
        assert_int_equal(tg_certify_verify(&attest, &sig, &f->signer, &f->signer_qn, nonce, sizeof nonce,
                                           &boot_name, qn_of(&boot_name), &after), -TG_ERR_INTERPOSER);

        /* The attestation itself is genuine: it verifies against the new NULL key's name,
         * and the TPM's reset counter has moved on. */
        assert_int_equal(tg_public_name(&null_public, &after_reset), 0);
        assert_memory_not_equal(after_reset.name, boot_name.name, 34);
        assert_int_equal(tg_certify_verify(&attest, &sig, &f->signer, &f->signer_qn, nonce, sizeof nonce,
                                           &after_reset, qn_of(&after_reset), &after), 0);
        assert_int_equal(after.reset_count, before.reset_count + 1);
}

int main(void) {
        tg_log_set_journal(false); /* test alerts never reach the host's journal */
        const char *needed[] = { "swtpm", "swtpm_setup", "swtpm_ioctl", "tpm2_startup", "tpm2_createprimary" };
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_certify_verifies),
                cmocka_unit_test(test_reset_detected),
        };

        for (size_t i = 0; i < ELEMENTSOF(needed); i++)
                if (!have_program(needed[i])) {
                        fprintf(stderr, "%s not installed (apt-get install swtpm swtpm-tools tpm2-tools): skipping\n",
                                needed[i]);
                        return 77;
                }
        if (!getenv("TPMGUARD_SWTPM_FIXTURE")) {
                fprintf(stderr, "TPMGUARD_SWTPM_FIXTURE is not set: run this test through 'meson test'.\n");
                return 1;
        }
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
