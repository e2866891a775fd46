/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libcryptsetup-token-tpmguard.so: the libcryptsetup token ABI and nothing
 * else. Every decision lives in the core (the floors lib/, trust/ and tokens/); this file translates
 * arguments in, and the core's error space out to libcryptsetup's errno
 * contract (lib/error.c), once.
 */
#include <errno.h>
#include <libcryptsetup.h>
#include <string.h>

#include "error.h"
#include "log.h"
#include "secret.h"
#include "splash.h"
#include "token.h"
#include "tpmguard-config.h"
#include "unlock.h"

#define TOKEN_EXPORT __attribute__((visibility("default")))

/* The ABI, declared here because libcryptsetup.h only names the symbols. */
TOKEN_EXPORT const char *cryptsetup_token_version(void);
TOKEN_EXPORT int cryptsetup_token_open(struct crypt_device *cd, int token, char **buffer, size_t *buffer_len, void *usrptr);
TOKEN_EXPORT int cryptsetup_token_open_pin(struct crypt_device *cd, int token, const char *pin, size_t pin_size,
                                           char **buffer, size_t *buffer_len, void *usrptr);
TOKEN_EXPORT void cryptsetup_token_buffer_free(void *buffer, size_t buffer_len);
TOKEN_EXPORT int cryptsetup_token_validate(struct crypt_device *cd, const char *json);
TOKEN_EXPORT void cryptsetup_token_dump(struct crypt_device *cd, const char *json);

/*
 * Wrong PINs per token in this process: cryptsetup (--tries) and
 * systemd-cryptsetup (which asks again on -ENOANO without a bound of its own)
 * call us once per PIN typed; tokens/unlock.c turns the count into "ask
 * again" or "give up to the passphrase".
 */
static tg_pin_attempts pin_attempts;

/*
 * The PIN-less call's prepared unseal (tokens/unlock.h) is flushed by the next call of any kind;
 * one that no call takes (the user gave up at the prompt, the process exits) is flushed here,
 * when libcryptsetup unloads the plugin or the process exits normally. A process killed by a
 * signal leaves it to the resource manager (/dev/tpmrm0 flushes a connection's objects and
 * sessions when it closes); on a TPM reached without one, the two handles stay loaded until the
 * TPM's next reset, as after any crashed TPM client: secret-free, and useless without the PIN.
 */
__attribute__((destructor)) static void release_prepared(void) {
        tg_unlock_prepared_release(&pin_attempts);
}

/*
 * What one unlock call told the user, for the splash (tokens/splash.h): under systemd-cryptsetup
 * libcryptsetup's log reaches only the journal and the console that plymouth hides.
 */
typedef struct log_target {
        struct crypt_device *cd;
        tg_splash *splash;   /* NULL: not an unlock call */
} log_target;

static log_target log_current;

static void log_to_cryptsetup(int level, const char *message, void *userdata) {
        log_target *t = userdata;
        struct crypt_device *cd = t->cd;
        int crypt_level;

        tg_splash_add(t->splash, level, message);
        if (level <= LOG_ERR)
                crypt_level = CRYPT_LOG_ERROR;
        else if (level <= LOG_WARNING)
                crypt_level = CRYPT_LOG_NORMAL;
        else if (level <= LOG_INFO)
                crypt_level = CRYPT_LOG_VERBOSE;
        else
                crypt_level = CRYPT_LOG_DEBUG;
        crypt_logf(cd, crypt_level, "tpmguard: %s\n", message);
}

static void log_attach(struct crypt_device *cd, tg_splash *splash) {
        log_current = (log_target) { .cd = cd, .splash = splash };
        tg_log_set_sink(log_to_cryptsetup, &log_current);
        tg_log_set_max_level(LOG_DEBUG);
}

static void log_detach(void) {
        tg_log_set_sink(NULL, NULL);
        log_current = (log_target) {};
}

const char *cryptsetup_token_version(void) {
        return TPMGUARD_VERSION;
}

int cryptsetup_token_open_pin(struct crypt_device *cd, int token, const char *pin, size_t pin_size,
                              char **buffer, size_t *buffer_len, void *usrptr) {
        _cleanup_secret_ tg_secret *pin_secret = NULL, *passphrase = NULL;
        tg_splash splash = {};
        const char *json = NULL;
        char *out;
        int r;

        if (!buffer || !buffer_len)
                return -EINVAL;
        log_attach(cd, &splash);

        r = crypt_token_json_get(cd, token, &json);
        if (r < 0) {
                log_detach();
                return -ENOENT;
        }
        /* An empty PIN (Enter at the prompt) is no PIN: it never reaches the
         * TPM, so it costs no dictionary-attack try (docs/design.md §9.1). */
        if (pin && pin_size > 0) {
                r = tg_secret_new_copy(pin, pin_size, &pin_secret);
                if (r < 0)
                        goto out;
        }

        r = tg_unlock_token_json(cd, json, pin_secret, &pin_attempts, &passphrase);
        if (r < 0)
                goto out;

        out = malloc(passphrase->size);
        if (!out) {
                r = -TG_ERR_NOMEM;
                goto out;
        }
        memcpy(out, passphrase->data, passphrase->size);
        *buffer = out;
        *buffer_len = passphrase->size;
        r = 0;
out:
        if (r < 0 && r != -TG_ERR_PIN_NEEDED)
                log_debug("Token %d: %s.", token, tg_err_str(r));
        /* The reasons of this call, for plymouth; what writing them logs is not one of them. */
        log_current.splash = NULL;
        tg_splash_record(&splash, cd ? crypt_get_device_name(cd) : NULL);
        log_detach();
        return r < 0 ? tg_err_to_cryptsetup_errno(r) : 0;
}

int cryptsetup_token_open(struct crypt_device *cd, int token, char **buffer, size_t *buffer_len, void *usrptr) {
        return cryptsetup_token_open_pin(cd, token, NULL, 0, buffer, buffer_len, usrptr);
}

void cryptsetup_token_buffer_free(void *buffer, size_t buffer_len) {
        tg_free_wiped(buffer, buffer_len);
}

int cryptsetup_token_validate(struct crypt_device *cd, const char *json) {
        tg_token t;
        int r;

        log_attach(cd, NULL);
        r = tg_token_from_string(json, &t);
        explicit_bzero(&t, sizeof t);
        log_detach();
        return r < 0 ? -EINVAL : 0;
}

static void dump_line(const char *line, void *userdata) {
        crypt_logf(userdata, CRYPT_LOG_NORMAL, "\t%s\n", line);
}

void cryptsetup_token_dump(struct crypt_device *cd, const char *json) {
        tg_token t;

        log_attach(cd, NULL);
        if (tg_token_from_string(json, &t) < 0)
                crypt_logf(cd, CRYPT_LOG_NORMAL, "\t(invalid tpmguard token)\n");
        else
                tg_token_dump(&t, dump_line, cd);
        log_detach();
}
