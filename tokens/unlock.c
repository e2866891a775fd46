/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "binding.h"
#include "config.h"
#include "error.h"
#include "log.h"
#include "seal.h"
#include "token.h"
#include "unlock.h"
#include "verify.h"

int tg_unlock_token_json(struct crypt_device *cd, const char *token_json, const tg_secret *pin,
                         tg_secret **ret_passphrase) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_secret_ tg_secret *secret = NULL;
        tg_token token;
        int r;

        r = tg_token_from_string(token_json, &token);
        if (r < 0)
                return r;
        /* Asking for the PIN costs nothing; do it before touching the TPM. */
        if (token.pin && !pin)
                return -TG_ERR_PIN_NEEDED;

        r = tg_config_load(NULL, &config);
        if (r < 0)
                return r;
        /* One unseal and nothing after it: the session ends with its last command (no FlushContext). */
        r = tg_verify(config, &(tg_verify_options) { .use_cache = true, .one_shot = true }, NULL, &v);
        if (r < 0)
                return r;
        r = tg_unseal(v, &token, pin, &secret);
        if (r < 0)
                return r;
        /* The secret goes to libcryptsetup only for the volume enrolled here
         * (tokens/binding.h: decoy volumes). */
        if (cd) {
                r = tg_volume_binding_check(config->state_dir, cd, token.keyslot, secret);
                if (r < 0)
                        return r;
        }
        *ret_passphrase = TAKE_PTR(secret);
        return 0;
}
