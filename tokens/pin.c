/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <argon2.h>
#include <assert.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <sys/mman.h>
#include <time.h>

#include "error.h"
#include "log.h"
#include "pin.h"

/*
 * Threat model for this file: the PIN as typed is a low-entropy secret. It
 * never reaches the TPM; only a KDF output does (format 1: PBKDF2; format 2:
 * HKDF of an Argon2id), inside parameter-encrypted sessions salted to the
 * verified key (seal.c). Format 2 also keys the mask of the sealed secret
 * from the same Argon2id, so a TPM that leaks what it holds (firmware flaw,
 * fault attack, decapped chip) leaves an offline search at Argon2id cost per
 * PIN guess, never at PBKDF2 or HMAC cost. Every derived value is a
 * tg_secret (locked, not dumped, wiped on free), and Argon2id's own memory is
 * mapped undumpable and wiped by libargon2.
 */

int tg_pin_derive_auth(const tg_secret *pin, const uint8_t *salt, size_t salt_size, uint32_t iterations, tg_secret **ret) {
        _cleanup_secret_ tg_secret *auth = NULL;
        int r;

        assert(pin);
        assert(salt || salt_size == 0);

        if (iterations == 0 || iterations > INT_MAX)
                return log_error_rc(-TG_ERR_INVALID, "PIN KDF iteration count %u is out of range.", iterations);
        if (salt_size == 0 || salt_size > INT_MAX)
                return log_error_rc(-TG_ERR_INVALID, "PIN KDF salt of %zu bytes is invalid.", salt_size);
        if (pin->size > INT_MAX)
                return log_error_rc(-TG_ERR_INVALID, "The PIN is too long.");

        r = tg_secret_new(TG_PIN_AUTH_SIZE, &auth);
        if (r < 0)
                return r;
        if (PKCS5_PBKDF2_HMAC((const char *) pin->data, (int) pin->size, salt, (int) salt_size, (int) iterations,
                              EVP_sha256(), TG_PIN_AUTH_SIZE, auth->data) != 1)
                return log_error_rc(-TG_ERR_INVALID, "PBKDF2-HMAC-SHA256 failed in OpenSSL.");
        *ret = TAKE_PTR(auth);
        return 0;
}


/* ---- format 2: Argon2id, then HKDF-SHA256 ---- */

int tg_argon2_params_check(const tg_argon2_params *p) {
        if (p->memory_kib < TG_ARGON2_MEMORY_MIN || p->memory_kib > TG_ARGON2_MEMORY_MAX)
                return log_error_rc(-TG_ERR_INVALID, "Argon2id memory of %" PRIu32 " KiB is out of range [%u, %u].",
                                    p->memory_kib, TG_ARGON2_MEMORY_MIN, TG_ARGON2_MEMORY_MAX);
        if (p->time_cost < TG_ARGON2_TIME_MIN || p->time_cost > TG_ARGON2_TIME_MAX)
                return log_error_rc(-TG_ERR_INVALID, "Argon2id time cost %" PRIu32 " is out of range [%u, %u].",
                                    p->time_cost, TG_ARGON2_TIME_MIN, TG_ARGON2_TIME_MAX);
        if (p->parallel < TG_ARGON2_PARALLEL_MIN || p->parallel > TG_ARGON2_PARALLEL_MAX)
                return log_error_rc(-TG_ERR_INVALID, "Argon2id parallelism %" PRIu32 " is out of range [%u, %u].",
                                    p->parallel, TG_ARGON2_PARALLEL_MIN, TG_ARGON2_PARALLEL_MAX);
        return 0;
}

/*
 * Argon2id's memory (up to a GiB of blocks derived from the PIN) stays out of
 * core dumps: mapped by us with MADV_DONTDUMP. libargon2 wipes it before
 * calling the free callback (clear_internal_memory; FLAG_clear_internal_memory
 * is on by default), and munmap returns the pages to the kernel.
 */
static int argon2_allocate(uint8_t **memory, size_t size) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

        if (p == MAP_FAILED)
                return ARGON2_MEMORY_ALLOCATION_ERROR;
        (void) madvise(p, size, MADV_DONTDUMP);
        /* Best effort: Argon2id's first blocks allow a cheap PIN test, so keep them out of swap too
         * (root, as cryptsetup and tpmguard run, may lock this much; anyone else may not). */
        (void) mlock(p, size);
        *memory = p;
        return ARGON2_OK;
}

static void argon2_deallocate(uint8_t *memory, size_t size) {
        if (memory)
                (void) munmap(memory, size);
}

/* A = Argon2id(pin, salt, params), 32 bytes (RFC 9106, version 0x13). */
static int argon2id(const tg_secret *pin, const uint8_t *salt, size_t salt_size, const tg_argon2_params *params,
                    tg_secret **ret) {
        _cleanup_secret_ tg_secret *a = NULL;
        argon2_context ctx;
        int r;

        r = tg_argon2_params_check(params);
        if (r < 0)
                return r;
        if (salt_size < ARGON2_MIN_SALT_LENGTH || salt_size > UINT32_MAX)
                return log_error_rc(-TG_ERR_INVALID, "Argon2id salt of %zu bytes is invalid.", salt_size);
        if (pin->size > TG_PIN_MAX)
                return log_error_rc(-TG_ERR_INVALID, "The PIN is too long.");
        r = tg_secret_new(TG_ARGON2_OUT_SIZE, &a);
        if (r < 0)
                return r;
        ctx = (argon2_context) {
                .out = a->data, .outlen = TG_ARGON2_OUT_SIZE,
                .pwd = pin->data, .pwdlen = (uint32_t) pin->size,
                .salt = (uint8_t *) salt, .saltlen = (uint32_t) salt_size,
                .t_cost = params->time_cost, .m_cost = params->memory_kib,
                .lanes = params->parallel, .threads = params->parallel,
                .version = ARGON2_VERSION_13,
                .allocate_cbk = argon2_allocate, .free_cbk = argon2_deallocate,
                .flags = ARGON2_DEFAULT_FLAGS,
        };
        r = argon2_ctx(&ctx, Argon2_id);
        explicit_bzero(&ctx, sizeof ctx);
        if (r == ARGON2_MEMORY_ALLOCATION_ERROR)
                return log_error_rc(-TG_ERR_NOMEM, "Argon2id of the PIN needs %" PRIu32 " MiB of memory, which is not "
                                    "available.", params->memory_kib / 1024);
        if (r != ARGON2_OK)
                return log_error_rc(-TG_ERR_INVALID, "Argon2id of the PIN failed: %s.", argon2_error_message(r));
        *ret = TAKE_PTR(a);
        return 0;
}

/* HKDF-SHA256(IKM = ikm, no salt, info = label), size bytes, into a tg_secret (OpenSSL EVP_KDF "HKDF"). */
static int hkdf_sha256(const tg_secret *ikm, const char *label, size_t size, tg_secret **ret) {
        _cleanup_secret_ tg_secret *out = NULL;
        EVP_KDF *kdf = NULL;
        EVP_KDF_CTX *kctx = NULL;
        OSSL_PARAM params[4];
        int r;

        r = tg_secret_new(size, &out);
        if (r < 0)
                return r;
        params[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *) "SHA256", 0);
        params[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, ikm->data, ikm->size);
        params[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *) label, strlen(label));
        params[3] = OSSL_PARAM_construct_end();
        kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
        kctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
        r = kctx && EVP_KDF_derive(kctx, out->data, size, params) == 1 ? 0 : -TG_ERR_INVALID;
        EVP_KDF_CTX_free(kctx);
        EVP_KDF_free(kdf);
        if (r < 0)
                return log_error_rc(r, "HKDF-SHA256 failed in OpenSSL.");
        *ret = TAKE_PTR(out);
        return 0;
}

int tg_pin_derive_v2(const tg_secret *pin, const uint8_t *salt, size_t salt_size, const tg_argon2_params *params,
                     size_t mask_size, tg_secret **ret_auth, tg_secret **ret_mask) {
        _cleanup_secret_ tg_secret *a = NULL, *auth = NULL, *mask = NULL;
        int r;

        assert(pin);
        assert(salt);

        if (mask_size == 0 || mask_size > 255u * 32u)
                return log_error_rc(-TG_ERR_INVALID, "A PIN mask of %zu bytes is out of range.", mask_size);
        r = argon2id(pin, salt, salt_size, params, &a);
        if (r < 0)
                return r;
        /* Two labels, one Argon2id: neither output says anything about A or the other (HKDF is a PRF in IKM = A). */
        r = hkdf_sha256(a, TG_PIN_AUTH_LABEL, TG_PIN_AUTH_SIZE, &auth);
        if (r < 0)
                return r;
        r = hkdf_sha256(a, TG_PIN_MASK_LABEL, mask_size, &mask);
        if (r < 0)
                return r;
        *ret_auth = TAKE_PTR(auth);
        *ret_mask = TAKE_PTR(mask);
        return 0;
}

int tg_pin_tag(const tg_secret *pin, const uint8_t *salt, size_t salt_size, tg_secret **ret) {
        static const tg_argon2_params floor = {
                .time_cost = TG_ARGON2_TIME_MIN, .memory_kib = TG_ARGON2_MEMORY_MIN, .parallel = TG_ARGON2_PARALLEL_MIN,
        };

        return argon2id(pin, salt, salt_size, &floor, ret);
}

static uint64_t now_usec(void) {
        struct timespec ts;

        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

int tg_argon2_benchmark(uint32_t memory_kib, uint32_t parallel, unsigned target_ms, uint32_t *ret_time_cost,
                        unsigned *ret_ms) {
        static const uint8_t salt[32] = { 't', 'p', 'm', 'g', 'u', 'a', 'r', 'd', ' ', 'b', 'e', 'n', 'c', 'h' };
        _cleanup_secret_ tg_secret *pin = NULL;
        tg_argon2_params p = { .time_cost = 1, .memory_kib = memory_kib, .parallel = parallel };
        uint64_t usec = 0;
        int r;

        r = tg_secret_new_copy("benchmark", 9, &pin);
        if (r < 0)
                return r;
        /* One pass, timed; Argon2id's time is linear in the passes at fixed memory. Then the result, timed. */
        for (int round = 0; round < 2; round++) {
                _cleanup_secret_ tg_secret *a = NULL;
                uint64_t start = now_usec();

                r = argon2id(pin, salt, sizeof salt, &p, &a);
                if (r < 0)
                        return r;
                usec = now_usec() - start;
                if (round == 0) {
                        uint64_t per_pass = usec ? usec : 1, passes = (uint64_t) target_ms * 1000u / per_pass;

                        p.time_cost = (uint32_t) (passes < TG_ARGON2_TIME_MIN ? TG_ARGON2_TIME_MIN :
                                                  passes > TG_ARGON2_TIME_MAX ? TG_ARGON2_TIME_MAX : passes);
                        if (p.time_cost == 1)
                                break;
                }
        }
        *ret_time_cost = p.time_cost;
        if (ret_ms)
                *ret_ms = (unsigned) (usec / 1000u);
        return 0;
}
