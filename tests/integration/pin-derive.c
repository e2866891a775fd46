/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * test-pin-derive TOKEN_JSON_FILE PIN_FILE: what tokens/pin.c derives from
 * the PIN for a token, in hex: the authValue (line 1) and, for format 2, the
 * mask K (line 2, 128 bytes). For the integration tests that drive the TPM
 * with tpm2-tools as an attacker who knows the PIN would (python has no
 * Argon2id). Test code only.
 */
#include <stdio.h>
#include <stdlib.h>

#include "error.h"
#include "pin.h"
#include "secret.h"
#include "token.h"
#include "util.h"

int main(int argc, char *argv[]) {
        _cleanup_secret_ tg_secret *pin = NULL, *auth = NULL, *mask = NULL;
        _cleanup_free_ char *json = NULL, *hex = NULL;
        size_t size = 0;
        tg_token t;
        FILE *f;

        if (argc != 3)
                return 2;
        f = fopen(argv[1], "re");
        if (!f)
                return 1;
        json = calloc(1, TG_TOKEN_JSON_MAX + 1);
        if (!json)
                return 1;
        size = fread(json, 1, TG_TOKEN_JSON_MAX, f);
        fclose(f);
        if (size == 0 || tg_token_from_string(json, &t) < 0 || !t.pin)
                return 1;
        if (tg_secret_read_file(argv[2], TG_PIN_MAX + 1, &pin) < 0)
                return 1;
        while (pin->size > 0 && pin->data[pin->size - 1] == '\n')
                pin->size--;
        if (t.version >= 2 ? tg_pin_derive_v2(pin, t.pin_salt, sizeof t.pin_salt, &t.argon2, 128, &auth, &mask) < 0 :
            tg_pin_derive_auth(pin, t.pin_salt, sizeof t.pin_salt, t.pin_kdf_iterations, &auth) < 0)
                return 1;
        if (tg_hex_encode(auth->data, auth->size, &hex) < 0)
                return 1;
        printf("%s\n", hex);
        if (mask) {
                free(hex);
                hex = NULL;
                if (tg_hex_encode(mask->data, mask->size, &hex) < 0)
                        return 1;
                printf("%s\n", hex);
        }
        return 0;
}
