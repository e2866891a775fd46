/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <limits.h>
#include <openssl/evp.h>

#include "error.h"
#include "log.h"
#include "pin.h"

/*
 * Threat model for this file: the PIN as typed is a low-entropy secret. It
 * never reaches the TPM; only its PBKDF2 output does, inside parameter-
 * encrypted sessions salted to the verified key (seal.c). The derived
 * authValue is a tg_secret (locked, not dumped, wiped on free).
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

