/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The response fuzzer's driver (issue 22), shared by the libFuzzer target
 * (fuzz-tpm-response.c) and the plain replay/record tool (tpm-response.c).
 *
 * An input is a scenario byte and a script of TPM responses:
 *
 *   'U' verify + unseal   tg_verify (one-shot, no cache) then tg_unseal of the
 *                         recorded token with PIN 1234: the plugin's cold
 *                         unlock after its configuration is read
 *   'S' verify + seal     tg_verify then tg_seal (PCR 7, PIN 1234): enroll
 *   'P' provision         tg_provision into a scratch directory
 *   'V' verify            tg_verify alone, with its report
 *   'R' verify + prepared tg_verify (one-shot, no cache), tg_unseal_prepare (the
 *                         token plugin's PIN-less call: Load, policy session,
 *                         policy, the PCR check from the policy digest), then
 *                         tg_unseal_prepared with PIN 1234 (its PIN call)
 *
 *   then u16 length (big endian) ‖ response, repeated: the Nth command of
 *   the run gets the Nth response, whatever the command was.
 *
 *   The same letters in lower case ('u', 's', 'p', 'v', 'r') patch one response of
 *   the recorded session instead: a byte K, then the replacement for
 *   response K (its bytes as they are, no length prefix); every other
 *   response is the recorded one. Every response before K is then genuine,
 *   so a mutation of response K is always reached, however deep in the
 *   session K lies (HMAC-protected responses before it stay valid).
 *
 * Everything runs the real code: tg_tpm_open() loads tests/fuzz/tcti-script.c
 * through tss2-tctildr as it would load the device TCTI, so tpmguard's own
 * TCTI layer, ESAPI, tss2-sys and tss2-mu parse every response.
 *
 * Seeds are recorded against swtpm (tests/fuzz/make-seeds: tpm-response
 * record). For a recorded response to verify again on replay, the commands
 * must be the same bytes, which needs the same random numbers: this driver,
 * and only it (test builds; tpmguard itself never does this), replaces
 * OpenSSL's RNG with a deterministic generator reset at the start of every
 * run (RAND_set_rand_method, so that ESAPI's nonces and salt ECDH keys and
 * tpmguard's Certify nonce repeat). The context the recordings were made in
 * (the pinned EK signing key, the kernel-style null_name, the CA, the sealed
 * token) lives in tests/fuzz/tpm-response/.
 *
 * Oracle, beyond "no crash, no sanitizer report, no hang": an unseal that
 * succeeds must return the secret that was sealed (a forged response must
 * never produce another one), and a verification that succeeds must report
 * the recorded null_name.
 */
#define OPENSSL_SUPPRESS_DEPRECATED /* RAND_set_rand_method: test builds only, see above */
#include <ftw.h>
#include <dlfcn.h>
#include <errno.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "error.h"
#include "log.h"
#include "provision.h"
#include "secret.h"
#include "seal.h"
#include "token.h"
#include "verify.h"

#define TGR_PIN "1234"
#define TGR_SECRET_BYTE 0x5a
#define TGR_SECRET_SIZE 32

static struct {
        char *context_dir;
        char *scratch_dir;
        char *module_path;
        tg_config *config;
        char *token_json;
        TPM2B_NAME null_name;
        void (*replay)(const uint8_t *data, size_t size);
        struct {
                uint8_t *data;              /* the recorded script of each scenario, from corpus/tpm-response */
                size_t size;
        } recorded_scripts[5];
        int (*record)(const char *inner_conf);
        const uint8_t *(*recorded)(size_t *ret_size);
} tgr;

static uint64_t tgr_rng_state;

static int tgr_rng_bytes(unsigned char *buf, int num) {
        for (int i = 0; i < num; i++) {
                /* splitmix64: deterministic, and different bytes for every call. */
                uint64_t z = (tgr_rng_state += UINT64_C(0x9e3779b97f4a7c15));
                z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
                z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
                buf[i] = (unsigned char) (z ^ (z >> 31));
        }
        return 1;
}

static int tgr_rng_status(void) {
        return 1;
}

static const RAND_METHOD tgr_rand_method = {
        .bytes = tgr_rng_bytes,
        .pseudorand = tgr_rng_bytes,
        .status = tgr_rng_status,
};

static char *tgr_path(const char *dir, const char *name) {
        char *p;

        if (asprintf(&p, "%s/%s", dir, name) < 0)
                abort();
        return p;
}

static char *tgr_read_file(const char *path) {
        FILE *f = fopen(path, "re");
        char *buf = NULL;
        size_t n = 0;

        if (!f)
                return NULL;
        if (getdelim(&buf, &n, '\0', f) < 0) {
                free(buf);
                buf = NULL;
        }
        fclose(f);
        return buf;
}

/* 'R': the token plugin's two calls (issue 33): tg_unseal_prepare() without the PIN, then
 * tg_unseal_prepared() with it. */
static const char tgr_scenarios[5] = { 'U', 'S', 'P', 'V', 'R' };
static const char *const tgr_seed_names[5] = { "unseal", "seal", "provision", "verify", "prepared" };

static uint8_t *tgr_read_binary(const char *path, size_t *ret_size) {
        FILE *f = fopen(path, "re");
        uint8_t *buf;
        size_t n;

        if (!f)
                return NULL;
        buf = malloc(1 << 16);
        if (!buf)
                abort();
        n = fread(buf, 1, 1 << 16, f);
        fclose(f);
        *ret_size = n;
        return buf;
}

/* Reads the context, writes the configuration, loads the TCTI module. 0 or -1. */
static int tgr_setup(const char *context_dir, const char *module_path) {
        char tmpl[] = "/tmp/tpmguard-tpm-response.XXXXXX", *conf = NULL, *null_name_path, *hex;
        void *module;
        int r;

        /* tss2's own logging goes to stderr: a fuzzer makes thousands of errors a second. */
        setenv("TSS2_LOG", "all+none", 0);
        if (RAND_set_rand_method(&tgr_rand_method) != 1)
                return -1;
        tgr.context_dir = strdup(context_dir);
        tgr.module_path = strdup(module_path);
        if (!tgr.context_dir || !tgr.module_path || !mkdtemp(tmpl) || !(tgr.scratch_dir = strdup(tmpl)))
                return -1;

        module = dlopen(module_path, RTLD_NOW | RTLD_GLOBAL);
        if (!module) {
                fprintf(stderr, "tpm-response: cannot load %s: %s\n", module_path, dlerror());
                return -1;
        }
        tgr.replay = (void (*)(const uint8_t *, size_t)) dlsym(module, "tgfuzz_tcti_replay");
        tgr.record = (int (*)(const char *)) dlsym(module, "tgfuzz_tcti_record");
        tgr.recorded = (const uint8_t *(*)(size_t *)) dlsym(module, "tgfuzz_tcti_recorded");
        if (!tgr.replay || !tgr.record || !tgr.recorded)
                return -1;

        null_name_path = tgr_path(context_dir, "null_name");
        if (asprintf(&conf,
                     "tcti = %s\nstate_dir = %s\nnull_name_path = %s\nkernel_null_name = required\n"
                     "ek_ca = %s/ca-bundle.pem\ncache_dir = %s\n",
                     module_path, context_dir, null_name_path, context_dir, tgr.scratch_dir) < 0)
                return -1;
        r = tg_config_parse(conf, "tpm-response", &tgr.config);
        free(conf);
        if (r < 0)
                return -1;

        /* Optional until recorded: the token (for 'U') and the null_name (for the 'V' oracle). */
        {
                char *token_path = tgr_path(context_dir, "token.json");
                tgr.token_json = tgr_read_file(token_path);
                free(token_path);
        }
        /* The recorded sessions, for the patch mode (lower-case scenarios). */
        for (size_t i = 0; i < 5; i++) {
                char *seed, *seed_path;
                if (asprintf(&seed, "../corpus/tpm-response/%s", tgr_seed_names[i]) < 0)
                        abort();
                seed_path = tgr_path(context_dir, seed);
                tgr.recorded_scripts[i].data = tgr_read_binary(seed_path, &tgr.recorded_scripts[i].size);
                free(seed_path);
                free(seed);
        }
        hex = tgr_read_file(null_name_path);
        free(null_name_path);
        if (hex) {
                size_t n = strspn(hex, "0123456789abcdefABCDEF") / 2;
                if (n <= sizeof tgr.null_name.name) {
                        for (size_t i = 0; i < n; i++)
                                sscanf(hex + 2 * i, "%2hhx", &tgr.null_name.name[i]);
                        tgr.null_name.size = (UINT16) n;
                }
                free(hex);
        }
        return 0;
}

static int tgr_pin(tg_secret **ret) {
        return tg_secret_new_copy(TGR_PIN, strlen(TGR_PIN), ret);
}

/*
 * One scenario against whatever the TCTI module answers. Returns the
 * operation's result (0 or -TG_ERR_*); aborts when the oracle fails.
 * record_dir: when recording, where 'S' writes token.json and 'P' the pinned key.
 */
/* Every scenario starts from an empty scratch directory: what an earlier run
 * left there (the pinned key, the lockout password, the boot anchor, the
 * per-boot cache) would change the commands a later run sends. */
static int tgr_scratch_rm(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) st;
        (void) flag;
        if (ftw->level > 0)
                (void) remove(path);
        return 0;
}

/* The oracle of the unseal scenarios: only the secret 'S' sealed may come out. */
static void tgr_check_secret(const tg_secret *out) {
        bool same = out->size == TGR_SECRET_SIZE;

        for (size_t i = 0; same && i < out->size; i++)
                same = out->data[i] == TGR_SECRET_BYTE;
        if (!same) {
                fprintf(stderr, "tpm-response: unseal returned a secret that was never sealed\n");
                abort();
        }
}

static int tgr_scenario(char scenario, const char *record_dir) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_secret_ tg_secret *pin = NULL, *secret = NULL, *out = NULL;
        tg_verify_report report = {};
        int r;

        tgr_rng_state = 0;
        (void) nftw(tgr.scratch_dir, tgr_scratch_rm, 16, FTW_DEPTH | FTW_PHYS);
        if (tgr_pin(&pin) < 0)
                abort();

        switch (scenario) {
        case 'V':
                r = tg_verify(tgr.config, &(tg_verify_options) {}, &report, NULL);
                if (r == 0 && tgr.null_name.size > 0 &&
                    (report.null_name.size != tgr.null_name.size ||
                     memcmp(report.null_name.name, tgr.null_name.name, tgr.null_name.size) != 0)) {
                        fprintf(stderr, "tpm-response: verification passed with another NULL key's name\n");
                        abort();
                }
                return r;
        case 'U': {
                tg_token token;

                if (!tgr.token_json || tg_token_from_string(tgr.token_json, &token) < 0)
                        return -TG_ERR_TOKEN;
                r = tg_verify(tgr.config, &(tg_verify_options) { .one_shot = true }, NULL, &v);
                if (r < 0)
                        return r;
                r = tg_unseal(v, &token, pin, &out);
                if (r < 0)
                        return r;
                tgr_check_secret(out);
                return 0;
        }
        case 'R': {
                tg_handle object = TG_HANDLE_NULL, policy = TG_HANDLE_NULL;
                bool satisfied = false;
                tg_token token;

                if (!tgr.token_json || tg_token_from_string(tgr.token_json, &token) < 0)
                        return -TG_ERR_TOKEN;
                r = tg_verify(tgr.config, &(tg_verify_options) { .one_shot = true }, NULL, &v);
                if (r < 0)
                        return r;
                r = tg_unseal_prepare(v, &token, &satisfied, &object, &policy);
                if (r < 0)
                        return r;
                if (!satisfied) {
                        tg_handle_release(&object);
                        tg_handle_release(&policy);
                        return -TG_ERR_PCR_MISMATCH;
                }
                r = tg_unseal_prepared(v, &token, pin, NULL, &object, &policy, &out);
                if (r < 0)
                        return r;
                tgr_check_secret(out);
                return 0;
        }
        case 'S': {
                uint8_t raw[TGR_SECRET_SIZE];
                tg_token token = {};
                char *json = NULL;

                memset(raw, TGR_SECRET_BYTE, sizeof raw);
                if (tg_secret_new_copy(raw, sizeof raw, &secret) < 0)
                        abort();
                r = tg_verify(tgr.config, &(tg_verify_options) {}, NULL, &v);
                if (r < 0)
                        return r;
                /* swtpm's PCR 7 is never extended: allowed explicitly, as tpmguard seal --allow-unextended-pcrs. */
                r = tg_seal(v, &(tg_seal_params) { .pcr_bank = TPM2_ALG_SHA256, .pcr_mask = UINT32_C(1) << 7,
                                                   .pin = pin,
                                                   /* The cheapest format 2 the parser accepts: no benchmark. */
                                                   .argon2 = { .time_cost = TG_ARGON2_TIME_MIN,
                                                               .memory_kib = TG_ARGON2_MEMORY_MIN, .parallel = 1 },
                                                   .allow_unextended = true },
                            secret, &token);
                if (r < 0 || !record_dir)
                        return r;
                token.keyslot = 1;
                if (tg_token_to_string(&token, &json) >= 0) {
                        char *path = tgr_path(record_dir, "token.json");
                        FILE *f = fopen(path, "we");
                        if (f) {
                                fputs(json, f);
                                fclose(f);
                        }
                        free(path);
                        free(json);
                }
                return r;
        }
        case 'P': {
                tg_pinned_key pinned;
                /* Provisioning writes its state (the lockout password) into state_dir: the scratch
                 * directory, never the committed context (a checkout makes its files 0644, which
                 * the lockout password's permission check refuses, and a test must not write
                 * into the source tree). The pinned key goes to record_dir when recording. */
                tg_config scratch_config = *tgr.config;

                scratch_config.state_dir = tgr.scratch_dir;
                return tg_provision(&scratch_config,
                                    &(tg_provision_options) { .output_dir = record_dir ?: tgr.scratch_dir }, &pinned,
                                    NULL);
        }
        default:
                return -TG_ERR_INVALID;
        }
}

/* Patch mode: the recorded script of scenario with response k replaced by patch. */
static uint8_t *tgr_patched(char scenario, unsigned k, const uint8_t *patch, size_t patch_size, size_t *ret_size) {
        const uint8_t *rec = NULL;
        size_t rec_size = 0, in = 1, out = 0;
        uint8_t *buf;

        for (size_t i = 0; i < 5; i++)
                if (tgr_scenarios[i] == scenario) {
                        rec = tgr.recorded_scripts[i].data;
                        rec_size = tgr.recorded_scripts[i].size;
                }
        if (!rec || rec_size < 1 || patch_size > 0xffff)
                return NULL;
        buf = malloc(rec_size + patch_size + 2);
        if (!buf)
                abort();
        for (unsigned i = 0; in + 2 <= rec_size; i++) {
                size_t n = (size_t) rec[in] << 8 | rec[in + 1];
                if (n > rec_size - in - 2)
                        break;
                if (i == k) {
                        buf[out++] = (uint8_t) (patch_size >> 8);
                        buf[out++] = (uint8_t) patch_size;
                        memcpy(buf + out, patch, patch_size);
                        out += patch_size;
                } else {
                        memcpy(buf + out, rec + in, 2 + n);
                        out += 2 + n;
                }
                in += 2 + n;
        }
        *ret_size = out;
        return buf;
}

static int tgr_run(const uint8_t *data, size_t size) {
        char scenario;
        uint8_t *script;
        size_t script_size;
        int r;

        if (size < 1)
                return -TG_ERR_INVALID;
        scenario = (char) data[0];
        if (scenario < 'a') {
                tgr.replay(data + 1, size - 1);
                return tgr_scenario(scenario, NULL);
        }
        if (size < 2)
                return -TG_ERR_INVALID;
        scenario = (char) (scenario - 'a' + 'A');
        script = tgr_patched(scenario, data[1], data + 2, size - 2, &script_size);
        if (!script)
                return -TG_ERR_INVALID;
        tgr.replay(script, script_size);
        r = tgr_scenario(scenario, NULL);
        free(script);
        return r;
}
