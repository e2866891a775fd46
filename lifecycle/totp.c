/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Genuine before typed (totp.h): the TOTP secret sealed to the boot chain, its
 * file, and the code the initrd shows before the PIN prompt.
 *
 * Threat model: an evil maid who replaces the boot chain (boot loader, kernel,
 * initrd) shows a fake PIN prompt and reads the PIN typed into it. A code that
 * only the measured chain can compute tells the user before they type: the
 * fake chain changes the PCRs, so the TPM refuses the Unseal. The secret
 * crosses the bus only encrypted in sessions salted to the verified NULL key
 * (tokens/seal.c): a passive recorder of the bus learns nothing, a substituted
 * NULL key fails the verification before any Unseal, and a substituted sealed
 * object (the TPM checks no command HMAC for a policy without PolicyAuthValue)
 * releases a secret whose check value differs, refused here. What this does
 * not stop (docs/security.md, "Genuine before typed"): an active interposer
 * that runs an Unseal of its own on a genuine boot (the secret has no PIN),
 * and a code shoulder-surfed and replayed within its period on a fake screen.
 *
 * The file is hostile on read (the initrd's copy sits on an unencrypted /boot):
 * it holds only the sealed blob, which opens nothing without the TPM in the
 * sealed state, and the check value, an HMAC under a 160-bit random key.
 */
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "json-util.h"
#include "log.h"
#include "totp.h"
#include "util.h"

#define CHECK_LABEL "tpmguard totp check"

int tg_totp_path(const tg_config *config, char **ret) {
        return tg_asprintf(ret, "%s/%s", config->state_dir, TG_TOTP_FILE_NAME);
}

/* HMAC-SHA256(secret, CHECK_LABEL): tells the enrolled secret from any other, reveals nothing of it. */
static int check_compute(const tg_secret *secret, uint8_t ret[32]) {
        unsigned size = 0;

        if (!HMAC(EVP_sha256(), secret->data, (int) secret->size, (const uint8_t *) CHECK_LABEL, strlen(CHECK_LABEL),
                  ret, &size) || size != 32)
                return log_error_rc(-TG_ERR_IO, "HMAC-SHA256 failed while checking the TOTP secret.");
        return 0;
}

static int file_error(const char *path, const char *field, const char *problem) {
        return log_error_rc(-TG_ERR_TOKEN, "The TOTP file %s is unusable: field \"%s\" %s. Remove it ('tpmguard totp "
                            "remove') and enroll again.", path, field, problem);
}

/* Printable ASCII without control characters: what a label and a time may hold (they reach terminals and URIs). */
static bool text_ok(const char *s, size_t max) {
        size_t n = strnlen(s, max + 1);

        if (n == 0 || n > max)
                return false;
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) s[i] < 0x20 || (unsigned char) s[i] > 0x7e)
                        return false;
        return true;
}

static int text_field(json_object *o, const char *path, const char *key, bool required, size_t max, char *buf) {
        char problem[TG_JSON_PROBLEM_MAX];
        json_object *v;
        int r;

        r = tg_json_get(o, key, json_type_string, required, &v, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return file_error(path, key, problem);
        if (r < 0)
                return r;
        if (!v) {
                buf[0] = '\0';
                return 0;
        }
        if (!text_ok(json_object_get_string(v), max)) {
                (void) snprintf(problem, sizeof problem, "must be 1..%zu printable ASCII characters", max);
                return file_error(path, key, problem);
        }
        (void) snprintf(buf, max + 1, "%s", json_object_get_string(v));
        return 0;
}

static int uint_field(json_object *o, const char *path, const char *key, unsigned min, unsigned max, unsigned *ret) {
        char problem[TG_JSON_PROBLEM_MAX];
        int64_t v = 0;
        bool present = false;
        int r;

        r = tg_json_get_int(o, key, min, max, true, &v, &present, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return file_error(path, key, problem);
        if (r < 0)
                return r;
        *ret = (unsigned) v;
        return 0;
}

/* A sealed TOTP secret (field "sealed" or "predicted"): a token object with no PIN, some PCR, no keyslot. */
static int sealed_from_json(json_object *v, const char *path, const char *field, tg_token *ret) {
        char name[32];

        if (tg_token_from_json(v, ret) < 0)
                return log_error_rc(-TG_ERR_TOKEN, "The TOTP file %s is unusable: field \"%s\" (above). Remove it "
                                    "('tpmguard totp remove') and enroll again.", path, field);
        /* No PIN: the code must show before the PIN is typed. No PCR: it would prove nothing. */
        (void) snprintf(name, sizeof name, "%s.pin", field);
        if (ret->pin)
                return file_error(path, name, "is true; a TOTP secret is sealed without a PIN");
        (void) snprintf(name, sizeof name, "%s.pcrs", field);
        if (ret->pcr_mask == 0)
                return file_error(path, name, "is empty; a TOTP secret sealed to no PCR proves nothing");
        (void) snprintf(name, sizeof name, "%s.keyslots", field);
        if (ret->keyslot >= 0)
                return file_error(path, name, "names a keyslot; a TOTP secret opens none");
        return 0;
}

static int totp_from_json(json_object *o, const char *path, tg_totp_file *ret) {
        _cleanup_free_ uint8_t *check = NULL;
        char problem[TG_JSON_PROBLEM_MAX], alg[16];
        tg_totp_file t = {};
        unsigned version;
        json_object *v;
        size_t n = 0;
        int r;

        r = uint_field(o, path, "version", 1, 1000, &version);
        if (r < 0)
                return r;
        if (version != TG_TOTP_FILE_VERSION)
                return log_error_rc(-TG_ERR_TOKEN, "The TOTP file %s has version %u; this tpmguard reads version %u. "
                                    "Upgrade tpmguard (in the initrd too), or remove it and enroll again.",
                                    path, version, TG_TOTP_FILE_VERSION);

        r = tg_json_get(o, "sealed", json_type_object, true, &v, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return file_error(path, "sealed", problem);
        if (r < 0)
                return r;
        r = sealed_from_json(v, path, "sealed", &t.sealed);
        if (r < 0)
                return r;
        /* The update path's seal to predicted values: the same kind of object, the same PCRs. */
        r = tg_json_get(o, "predicted", json_type_object, false, &v, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return file_error(path, "predicted", problem);
        if (r < 0)
                return r;
        if (v) {
                r = sealed_from_json(v, path, "predicted", &t.predicted);
                if (r < 0)
                        return r;
                if (t.predicted.pcr_bank != t.sealed.pcr_bank || t.predicted.pcr_mask != t.sealed.pcr_mask)
                        return file_error(path, "predicted.pcrs", "differs from sealed.pcrs; both seal one secret "
                                          "to the same PCRs");
                t.has_predicted = true;
        }

        r = text_field(o, path, "algorithm", true, sizeof alg - 1, alg);
        if (r < 0)
                return r;
        if (tg_totp_alg_from_string(alg, &t.alg) < 0)
                return file_error(path, "algorithm", "is not SHA1, SHA256 or SHA512");
        r = uint_field(o, path, "digits", TG_TOTP_DIGITS_MIN, TG_TOTP_DIGITS_MAX, &t.digits);
        if (r < 0)
                return r;
        r = uint_field(o, path, "period", TG_TOTP_PERIOD_MIN, TG_TOTP_PERIOD_MAX, &t.period);
        if (r < 0)
                return r;
        r = text_field(o, path, "label", true, TG_TOTP_LABEL_MAX, t.label);
        if (r < 0)
                return r;
        r = text_field(o, path, "created", false, sizeof t.created - 1, t.created);
        if (r < 0)
                return r;
        r = text_field(o, path, "update_pending", false, sizeof t.update_pending - 1, t.update_pending);
        if (r < 0)
                return r;
        r = tg_json_get_hex(o, "check", sizeof t.check, sizeof t.check, true, &check, &n, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return file_error(path, "check", problem);
        if (r < 0)
                return r;
        memcpy(t.check, check, sizeof t.check);
        *ret = t;
        return 0;
}

int tg_totp_load(const char *path, tg_totp_file *ret) {
        _cleanup_json_ json_object *o = NULL;
        _cleanup_free_ uint8_t *data = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        size_t size = 0;
        int r;

        /* Whoever could write it would choose what the machine shows as its proof: root only. */
        r = tg_read_trusted_file(path, "TOTP file", TG_TOTP_FILE_MAX, &data, &size);
        if (r == -TG_ERR_NOT_FOUND || r == -TG_ERR_CONFIG)
                return r;
        if (r < 0)
                return log_error_rc(r, "Cannot read the TOTP file %s (at most %u bytes).", path, TG_TOTP_FILE_MAX);
        r = tg_json_parse_object((const char *) data, size, &o, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(-TG_ERR_TOKEN, "The TOTP file %s is not one JSON object: %s. Remove it ('tpmguard "
                                    "totp remove') and enroll again.", path, problem);
        if (r < 0)
                return r;
        return totp_from_json(o, path, ret);
}

static int json_add(json_object *o, const char *key, json_object *v) {
        if (!v)
                return -TG_ERR_NOMEM;
        if (json_object_object_add(o, key, v) < 0) {
                json_object_put(v);
                return -TG_ERR_NOMEM;
        }
        return 0;
}

int tg_totp_format(const tg_totp_file *t, char **ret) {
        _cleanup_json_ json_object *o = json_object_new_object(), *sealed = NULL, *predicted = NULL, *reread = NULL;
        _cleanup_free_ char *check = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        const char *s;
        tg_totp_file back;
        int r;

        if (!o)
                return -TG_ERR_NOMEM;
        r = tg_token_to_json(&t->sealed, &sealed);
        if (r < 0)
                return r;
        if (t->has_predicted) {
                r = tg_token_to_json(&t->predicted, &predicted);
                if (r < 0)
                        return r;
        }
        if (tg_hex_encode(t->check, sizeof t->check, &check) < 0)
                return -TG_ERR_NOMEM;
        r = json_add(o, "version", json_object_new_int(TG_TOTP_FILE_VERSION));
        if (r >= 0)
                r = json_add(o, "sealed", TAKE_PTR(sealed));
        if (r >= 0)
                r = json_add(o, "algorithm", json_object_new_string(tg_totp_alg_to_string(t->alg) ?: "?"));
        if (r >= 0)
                r = json_add(o, "digits", json_object_new_int((int) t->digits));
        if (r >= 0)
                r = json_add(o, "period", json_object_new_int((int) t->period));
        if (r >= 0)
                r = json_add(o, "label", json_object_new_string(t->label));
        if (r >= 0)
                r = json_add(o, "check", json_object_new_string(check));
        if (r >= 0 && t->created[0])
                r = json_add(o, "created", json_object_new_string(t->created));
        if (r >= 0 && t->has_predicted)
                r = json_add(o, "predicted", TAKE_PTR(predicted));
        if (r >= 0 && t->update_pending[0])
                r = json_add(o, "update_pending", json_object_new_string(t->update_pending));
        if (r < 0)
                return r;
        s = tg_json_pretty(o);
        if (!s)
                return -TG_ERR_NOMEM;
        /* Never write a file the reader would refuse. */
        r = tg_json_parse_object(s, strlen(s), &reread, problem, sizeof problem);
        if (r >= 0)
                r = totp_from_json(reread, "(to be written)", &back);
        explicit_bzero(&back, sizeof back);
        if (r < 0)
                return log_error_rc(r == -TG_ERR_NOMEM ? r : -TG_ERR_INVALID, "Refusing to write an invalid TOTP file.");
        return tg_asprintf(ret, "%s\n", s);
}

/* RFC 3986 unreserved characters and ':' (the label's issuer separator) as they are, the rest %XX. */
static int uri_escape(const char *s, char **ret) {
        static const char hex[] = "0123456789ABCDEF";
        size_t n = strlen(s);
        char *out = malloc(3 * n + 1), *p = out;

        if (!out)
                return -TG_ERR_NOMEM;
        for (const unsigned char *c = (const unsigned char *) s; *c; c++) {
                if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
                    strchr("-._~:", *c))
                        *p++ = (char) *c;
                else {
                        *p++ = '%';
                        *p++ = hex[*c >> 4];
                        *p++ = hex[*c & 0xf];
                }
        }
        *p = '\0';
        *ret = out;
        return 0;
}

/* otpauth://totp/LABEL?secret=BASE32&issuer=tpmguard&algorithm=SHA1&digits=6&period=30 (Key Uri Format). */
static int uri_build(const tg_totp_file *t, const tg_secret *secret, tg_secret **ret) {
        _cleanup_secret_ tg_secret *b32 = NULL, *uri = NULL;
        _cleanup_free_ char *label = NULL;
        int r, n;

        r = tg_base32_encode(secret->data, secret->size, &b32);
        if (r < 0)
                return r;
        r = uri_escape(t->label, &label);
        if (r < 0)
                return r;
        r = tg_secret_new(strlen(label) + b32->size + 128, &uri);
        if (r < 0)
                return r;
        n = snprintf((char *) uri->data, uri->size, "otpauth://totp/%s?secret=%s&issuer=%s&algorithm=%s&digits=%u&period=%u",
                     label, (const char *) b32->data, TG_TOTP_ISSUER, tg_totp_alg_to_string(t->alg), t->digits, t->period);
        if (n < 0 || (size_t) n >= uri->size)
                return -TG_ERR_NOMEM;
        uri->size = (size_t) n;
        *ret = TAKE_PTR(uri);
        return 0;
}

/* Seals secret with params into *sealed, proves it when no PCR value is predicted, and fills check. */
static int seal_proven(tg_verified_tpm *v, const tg_seal_params *params, const tg_secret *secret, tg_token *sealed,
                       uint8_t check[32]) {
        _cleanup_handle_ tg_handle object = TG_HANDLE_NULL;
        _cleanup_secret_ tg_secret *back = NULL;
        int r;

        if (params->pin)
                return log_error_rc(-TG_ERR_INVALID, "A TOTP secret is sealed without a PIN: its code is shown "
                                    "before the PIN is typed.");
        if (params->pcr_mask == 0)
                return log_error_rc(-TG_ERR_INVALID, "A TOTP secret sealed to no PCR proves nothing: choose the PCRs "
                                    "that measure your boot chain (--pcrs).");
        if (params->explicit_values)
                r = tg_seal(v, params, secret, sealed);
        else
                r = tg_seal_loaded(v, params, secret, sealed, &object);
        if (r < 0)
                return r;
        if (!params->explicit_values) {
                /* Prove it: the TPM gives the same secret back over the verified session. */
                r = tg_unseal_loaded(v, sealed, NULL, &object, &back);
                if (r < 0)
                        return log_error_rc(r, "The test unseal of the new TOTP secret failed; nothing was written.");
                if (back->size != secret->size || !memeq_const(back->data, secret->data, secret->size))
                        return log_alert_rc(-TG_ERR_INTERPOSER, "The test unseal returned a different TOTP secret; "
                                            "nothing was written.");
        }
        return check_compute(secret, check);
}

static void now_iso(char *buf, size_t size) {
        time_t now = time(NULL);
        struct tm tm;

        if (!gmtime_r(&now, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                buf[0] = '\0';
}

int tg_totp_enroll(const tg_config *config, const tg_seal_params *params, const tg_secret *endorsement_auth,
                   const char *label, tg_secret **ret_uri) {
        _cleanup_secret_ tg_secret *secret = NULL, *uri = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_free_ char *path = NULL, *json = NULL;
        tg_totp_file t = { .alg = TG_TOTP_SHA1, .digits = TG_TOTP_DIGITS_DEFAULT, .period = TG_TOTP_PERIOD_DEFAULT };
        int r;

        if (!text_ok(label, TG_TOTP_LABEL_MAX))
                return log_error_rc(-TG_ERR_INVALID, "The TOTP label must be 1..%u printable ASCII characters.",
                                    TG_TOTP_LABEL_MAX);
        (void) snprintf(t.label, sizeof t.label, "%s", label);
        r = tg_totp_path(config, &path);
        if (r < 0)
                return r;
        if (access(path, F_OK) == 0)
                return log_error_rc(-TG_ERR_INVALID, "A TOTP is already enrolled (%s). A new secret would no longer "
                                    "match your authenticator's entry: run 'tpmguard totp remove' first, and delete "
                                    "the old entry in the app.", path);

        /* First the TPM: the secret is made and sealed only for a verified one. */
        r = tg_verify(config, &(tg_verify_options) { .endorsement_auth = endorsement_auth }, NULL, &v);
        if (r < 0)
                return log_error_rc(r, "No TOTP enrolled: the TPM could not be verified (see above).");
        r = tg_secret_new_random(TG_TOTP_SECRET_SIZE, &secret);
        if (r < 0)
                return r;
        r = seal_proven(v, params, secret, &t.sealed, t.check);
        if (r < 0)
                goto finish;
        now_iso(t.created, sizeof t.created);
        r = uri_build(&t, secret, &uri);
        if (r < 0)
                goto finish;
        r = tg_totp_format(&t, &json);
        if (r < 0)
                goto finish;
        r = tg_write_file_atomic(path, json, strlen(json), 0600);
        if (r < 0)
                goto finish;
        log_info("TOTP secret sealed to %s PCRs 0x%06" PRIx32 " and written to %s.",
                 tg_pcr_bank_to_string(t.sealed.pcr_bank), t.sealed.pcr_mask, path);
        *ret_uri = TAKE_PTR(uri);
finish:
        explicit_bzero(&t, sizeof t);
        return r;
}

/*
 * The seal that holds now, chosen before the Unseal from the PCR values read over the audited
 * session: the main one, else the one 'update prepare' sealed to predicted values. Neither: why
 * no code can be shown (a check that cannot run leaves it to the main seal's Unseal).
 */
static int seal_choose(tg_verified_tpm *v, const tg_totp_file *t, const tg_token **ret) {
        bool satisfied = true;
        char pcrs[96];

        if (tg_token_policy_satisfied(v, &t->sealed, &satisfied) < 0 || satisfied) {
                *ret = &t->sealed;
                return 0;
        }
        if (t->has_predicted && (tg_token_policy_satisfied(v, &t->predicted, &satisfied) < 0 || satisfied)) {
                log_info("The TOTP secret opens through its seal to the PCR values 'tpmguard update prepare' "
                         "predicted; 'tpmguard update finish' binds it to them.");
                *ret = &t->predicted;
                return 0;
        }
        tg_pcr_list_format(t->sealed.pcr_mask, pcrs, sizeof pcrs);
        if (t->update_pending[0])
                /* A grace carries no TOTP (tg_totp_update_prepare()): say so, rather than a bare mismatch. */
                return log_error_rc(-TG_ERR_PCR_MISMATCH,
                                    "No TOTP code: the %s values of PCR %s are not those the TOTP secret is sealed to "
                                    "(a PCR mismatch), and an update with a grace is pending ('tpmguard update "
                                    "prepare' at %s): a grace carries no TOTP, since a code shown without a PIN on "
                                    "any boot chain would prove nothing. If you installed that update, this is "
                                    "expected: type your PIN, then once booted 'tpmguard update finish', 'tpmguard "
                                    "totp remove' and 'tpmguard totp enroll'. Otherwise do not type your PIN.",
                                    tg_pcr_bank_to_string(t->sealed.pcr_bank), pcrs, t->update_pending);
        return log_error_rc(-TG_ERR_PCR_MISMATCH,
                            "No TOTP code: the %s values of PCR %s are not those the TOTP secret is sealed to (a PCR "
                            "mismatch): this is not the boot chain (firmware, boot loader, kernel, initrd, Secure Boot "
                            "settings) it was sealed under. If you did not update it before this boot, suspect "
                            "tampering: type neither the PIN nor the recovery passphrase here. After an update of your "
                            "own, 'tpmguard pcrs' once booted shows what changed; then enroll the TOTP again ('tpmguard "
                            "totp remove', 'tpmguard totp enroll'), and before the next update run 'tpmguard update "
                            "prepare', which carries it.",
                            tg_pcr_bank_to_string(t->sealed.pcr_bank), pcrs);
}

/* The enrolled secret, unsealed on v and checked against the file's check value. */
static int unseal_checked(tg_verified_tpm *v, const tg_totp_file *t, tg_secret **ret) {
        _cleanup_secret_ tg_secret *secret = NULL;
        const tg_token *sealed = NULL;
        uint8_t check[32];
        int r;


        r = seal_choose(v, t, &sealed);
        if (r < 0)
                return r;
        r = tg_unseal(v, sealed, NULL, &secret);
        if (r == -TG_ERR_PCR_MISMATCH)
                return log_error_rc(r, "No TOTP code: the TPM refuses the sealed PCR policy (above): this is not the "
                                    "boot chain the TOTP was enrolled under. Do not type your PIN unless you know why.");
        if (r < 0)
                return log_error_rc(r, "No TOTP code (above).");
        r = check_compute(secret, check);
        if (r < 0)
                return r;
        if (!memeq_const(check, t->check, sizeof check)) {
                explicit_bzero(check, sizeof check);
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "No TOTP code: the TPM released a secret that is not the enrolled one (its check "
                                    "value differs): a sealed object swapped on the TPM bus, or an edited TOTP file. "
                                    "Interposer suspected; do not type your PIN.");
        }
        *ret = TAKE_PTR(secret);
        return 0;
}

int tg_totp_show(const tg_config *config, uint64_t unix_time, tg_totp_code *ret) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_secret_ tg_secret *secret = NULL;
        _cleanup_free_ char *path = NULL;
        tg_totp_code code = {};
        tg_totp_file t;
        int r;

        r = tg_totp_path(config, &path);
        if (r < 0)
                return r;
        r = tg_totp_load(path, &t);
        if (r == -TG_ERR_NOT_FOUND)
                return log_debug_rc(r, "No TOTP enrolled (%s does not exist).", path);
        if (r < 0)
                return r;

        /* Not one-shot: Load in the salted HMAC session, whose response HMAC covers the object's name. */
        r = tg_verify(config, &(tg_verify_options) { .use_cache = true }, NULL, &v);
        if (r < 0) {
                r = log_error_rc(r, "No TOTP code: the TPM could not be verified (see above), so this machine cannot "
                                 "prove itself. Do not type your PIN unless you know why; 'tpmguard doctor' once "
                                 "booted with the recovery passphrase.");
                goto finish;
        }
        r = unseal_checked(v, &t, &secret);
        if (r < 0)
                goto finish;
        code = (tg_totp_code) { .digits = t.digits, .period = t.period, .alg = t.alg,
                                .pcr_bank = t.sealed.pcr_bank, .pcr_mask = t.sealed.pcr_mask };
        r = tg_totp(secret->data, secret->size, t.alg, t.digits, t.period, unix_time, &code.code, &code.window_start);
        if (r < 0)
                goto finish;
        *ret = code;
finish:
        explicit_bzero(&t, sizeof t);
        return r;
}

int tg_totp_remove(const tg_config *config) {
        _cleanup_free_ char *path = NULL;
        int r;

        r = tg_totp_path(config, &path);
        if (r < 0)
                return r;
        if (unlink(path) < 0) {
                if (errno == ENOENT)
                        return log_error_rc(-TG_ERR_NOT_FOUND, "No TOTP is enrolled (%s does not exist).", path);
                return log_error_rc(-TG_ERR_IO, "Cannot remove %s: %m", path);
        }
        return 0;
}

/* This machine's TOTP file: its path (*ret_path, the caller frees it) and its contents. */
static int totp_load_enrolled(const tg_config *config, char **ret_path, tg_totp_file *ret) {
        _cleanup_free_ char *path = NULL;
        int r;

        r = tg_totp_path(config, &path);
        if (r < 0)
                return r;
        r = tg_totp_load(path, ret);
        if (r < 0)
                return r;
        *ret_path = TAKE_PTR(path);
        return 0;
}

int tg_totp_reseal(const tg_config *config, tg_verified_tpm *v, const tg_seal_params *params) {
        _cleanup_secret_ tg_secret *secret = NULL;
        _cleanup_free_ char *path = NULL, *json = NULL;
        tg_seal_params p = *params;
        tg_totp_file t, next;
        int r;

        r = totp_load_enrolled(config, &path, &t);
        if (r < 0)
                return r;
        r = unseal_checked(v, &t, &secret);
        if (r < 0)
                goto finish;
        if (p.pcr_mask == 0) {
                p.pcr_bank = t.sealed.pcr_bank;
                p.pcr_mask = t.sealed.pcr_mask;
        }
        /* Bound to the values of a booted chain (or given ones): the update's seal and note are done with. */
        next = t;
        next.has_predicted = false;
        explicit_bzero(&next.predicted, sizeof next.predicted);
        next.update_pending[0] = '\0';
        r = seal_proven(v, &p, secret, &next.sealed, next.check);
        if (r < 0)
                goto finish;
        r = tg_totp_format(&next, &json);
        if (r >= 0)
                r = tg_write_file_atomic(path, json, strlen(json), 0600);
        explicit_bzero(&next, sizeof next);
finish:
        explicit_bzero(&t, sizeof t);
        return r;
}

int tg_totp_update_prepare(const tg_config *config, const tg_pcr_values *predicted) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_secret_ tg_secret *secret = NULL;
        _cleanup_free_ char *path = NULL, *json = NULL;
        tg_seal_params p = { .allow_unextended = config->allow_unextended_pcrs };
        tg_pcr_values values;
        tg_totp_file t, next;
        int r;

        r = totp_load_enrolled(config, &path, &t);
        if (r < 0)
                return r;
        next = t;
        if (!predicted) {
                /*
                 * A grace opens a token with its PIN on whatever boot chain comes next. The TOTP has
                 * no PIN: sealed under a grace it would show its code on ANY chain for those boots,
                 * an evil maid's included, and prove nothing. So no seal, a note: the boot through
                 * the grace says that an update is pending instead of a bare PCR mismatch.
                 */
                now_iso(next.update_pending, sizeof next.update_pending);
                if (next.update_pending[0] == '\0')
                        (void) snprintf(next.update_pending, sizeof next.update_pending, "an unknown time");
        } else {
                if (predicted->bank != t.sealed.pcr_bank) {
                        r = log_error_rc(-TG_ERR_INVALID, "The predicted PCR values are for the %s bank, the TOTP is "
                                         "sealed to %s.", tg_pcr_bank_to_string(predicted->bank),
                                         tg_pcr_bank_to_string(t.sealed.pcr_bank));
                        goto finish;
                }
                values = *predicted;
                values.given_mask &= t.sealed.pcr_mask;
                if (values.given_mask == 0) {
                        log_info("The update changes none of the PCRs the TOTP is sealed to: it shows its code after "
                                 "the update as before.");
                        r = 0;
                        goto finish;
                }
                r = tg_verify(config, NULL, NULL, &v);
                if (r < 0)
                        goto finish;
                r = unseal_checked(v, &t, &secret);
                if (r < 0)
                        goto finish;
                p.pcr_bank = t.sealed.pcr_bank;
                p.pcr_mask = t.sealed.pcr_mask;
                p.explicit_values = &values;
                r = seal_proven(v, &p, secret, &next.predicted, next.check);
                if (r < 0)
                        goto finish;
                next.has_predicted = true;
        }
        r = tg_totp_format(&next, &json);
        if (r >= 0)
                r = tg_write_file_atomic(path, json, strlen(json), 0600);
finish:
        explicit_bzero(&t, sizeof t);
        explicit_bzero(&next, sizeof next);
        return r;
}

int tg_totp_follow(const tg_config *config, const tg_pcr_values *explicit_values, bool always, bool *ret_changed) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_free_ char *path = NULL;
        tg_seal_params p = { .allow_unextended = config->allow_unextended_pcrs };
        tg_pcr_values values;
        tg_totp_file t;
        bool pending;
        int r;

        r = totp_load_enrolled(config, &path, &t);
        if (r < 0)
                return r;
        pending = t.has_predicted || t.update_pending[0];
        if (explicit_values) {
                if (explicit_values->bank != t.sealed.pcr_bank) {
                        uint16_t bank = t.sealed.pcr_bank;

                        explicit_bzero(&t, sizeof t);
                        return log_error_rc(-TG_ERR_INVALID, "The PCR values are for the %s bank, the TOTP is sealed "
                                            "to %s.", tg_pcr_bank_to_string(explicit_values->bank),
                                            tg_pcr_bank_to_string(bank));
                }
                values = *explicit_values;
                values.given_mask &= t.sealed.pcr_mask;
                if (values.given_mask)
                        p.explicit_values = &values;
        }
        explicit_bzero(&t, sizeof t);
        if (!always && !pending && !p.explicit_values) {
                if (ret_changed)
                        *ret_changed = false;
                return 0;
        }
        r = tg_verify(config, NULL, NULL, &v);
        if (r < 0)
                return r;
        /* pcr_mask 0: the file's bank and PCRs. */
        r = tg_totp_reseal(config, v, &p);
        if (r < 0)
                return r;
        if (ret_changed)
                *ret_changed = true;
        return 0;
}
