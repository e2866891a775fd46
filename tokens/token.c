/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <openssl/evp.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>

#include "config.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "policy.h"
#include "token.h"
#include "util.h"

/*
 * Threat model for this file: the token JSON is attacker-controlled (an evil
 * maid can rewrite the LUKS2 header). Every field is bounded before it is
 * decoded, every binary field is decoded strictly (canonical base64, exact
 * hex lengths, tss2-mu unmarshalling that must consume the input exactly),
 * and the sealed object's public area must be what tpmguard creates, so an
 * edited token can only make unlocking fail. Nothing here is secret: the
 * sealed blob is encrypted to the TPM's storage hierarchy.
 */

#define PCR_COUNT 24
#define LUKS2_KEYSLOTS_MAX 32
#define NAME_SIZE 34                            /* 0x000b ‖ SHA-256 */
#define BLOB_MAX (sizeof(TPM2B_PRIVATE) + sizeof(TPM2B_PUBLIC))
#define BASE64_LEN(n) (((n) + 2) / 3 * 4)

#define token_error(field, fmt, ...) \
        log_error_rc(-TG_ERR_TOKEN, "token field \"%s\": " fmt, field, ##__VA_ARGS__)

static const char base64_alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int base64_value(char c) {
        const char *p = c ? strchr(base64_alphabet, c) : NULL;
        return p ? (int) (p - base64_alphabet) : -1;
}

/*
 * Canonical base64 (RFC 4648 §4, §3.5): alphabet characters only, no
 * whitespace, length a multiple of 4, at most two '=' and only at the end,
 * and the unused bits before the padding zero. EVP_DecodeBlock alone would
 * skip whitespace and count padding as decoded zero bytes.
 */
static int base64_decode_strict(const char *field, const char *s, size_t max_size, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t len = strlen(s), pad = 0;
        int n;

        if (len > BASE64_LEN(max_size))
                return token_error(field, "%zu characters of base64, at most %zu allowed", len, (size_t) BASE64_LEN(max_size));
        for (size_t i = 0; i < len; i++) {
                /* '=' only as the last character, or as the last two. */
                bool padding = s[i] == '=' && (i + 1 == len || (i + 2 == len && s[i + 1] == '='));
                if (padding)
                        pad++;
                else if (base64_value(s[i]) < 0)
                        return token_error(field, "invalid base64 character at offset %zu", i);
        }
        if (len % 4 != 0)
                return token_error(field, "base64 length %zu is not a multiple of 4", len);
        if (pad == 1 && (base64_value(s[len - 2]) & 0x03) != 0)
                return token_error(field, "non-canonical base64 padding");
        if (pad == 2 && (base64_value(s[len - 3]) & 0x0f) != 0)
                return token_error(field, "non-canonical base64 padding");

        buf = malloc(len / 4 * 3 + 1);
        if (!buf)
                return -TG_ERR_NOMEM;
        n = EVP_DecodeBlock(buf, (const unsigned char *) s, (int) len);
        if (n < 0 || (size_t) n != len / 4 * 3)
                return token_error(field, "invalid base64");
        /* EVP_DecodeBlock counts the padding as decoded zero bytes. */
        *ret_size = (size_t) n - pad;
        *ret = TAKE_PTR(buf);
        return 0;
}

static int base64_encode(const uint8_t *data, size_t size, char **ret) {
        char *s;

        if (size > INT_MAX / 2)
                return -TG_ERR_INVALID;
        s = malloc(BASE64_LEN(size) + 1);
        if (!s)
                return -TG_ERR_NOMEM;
        (void) EVP_EncodeBlock((unsigned char *) s, data, (int) size);
        *ret = s;
        return 0;
}

/* Looks up key in obj and checks its JSON type (lib/json-util.h); a missing key is an error only when required. */
static int field_get(json_object *obj, const char *key, const char *field, json_type type, bool required,
                     json_object **ret) {
        char problem[TG_JSON_PROBLEM_MAX];
        int r;

        r = tg_json_get(obj, key, type, required, ret, problem, sizeof problem);
        return r == -TG_ERR_INVALID ? token_error(field, "%s", problem) : r;
}

static int hex_field_named(json_object *obj, const char *key, const char *field, size_t size, bool required, uint8_t *buf,
                           bool *ret_present) {
        _cleanup_free_ uint8_t *bytes = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        size_t n = 0;
        int r;

        r = tg_json_get_hex(obj, key, size, size, required, &bytes, &n, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return token_error(field, "%s", problem);
        if (r < 0)
                return r;
        *ret_present = bytes != NULL;
        if (bytes)
                memcpy(buf, bytes, size);
        return 0;
}

static int hex_field(json_object *obj, const char *key, size_t size, bool required, uint8_t *buf, bool *ret_present) {
        return hex_field_named(obj, key, key, size, required, buf, ret_present);
}

static int name_field(json_object *obj, const char *key, bool required, TPM2B_NAME *ret) {
        TPM2B_NAME name = { .size = NAME_SIZE };
        bool present = false;
        int r;

        r = hex_field(obj, key, NAME_SIZE, required, name.name, &present);
        if (r < 0)
                return r;
        if (!present) {
                *ret = (TPM2B_NAME) { .size = 0 };
                return 0;
        }
        if (name.name[0] != 0x00 || name.name[1] != 0x0b)
                return token_error(key, "TPM name must start with 000b (SHA-256), found %02x%02x",
                                   name.name[0], name.name[1]);
        *ret = name;
        return 0;
}

static int keyslots_field(json_object *obj, int *ret) {
        json_object *v, *e;
        const char *s;
        size_t n;
        long slot = 0;
        int r;

        r = field_get(obj, "keyslots", "keyslots", json_type_array, true, &v);
        if (r < 0)
                return r;
        n = json_object_array_length(v);
        if (n == 0) {
                /* Not yet assigned to a keyslot (libcryptsetup allows this while enrolling). */
                *ret = -1;
                return 0;
        }
        if (n != 1)
                return token_error("keyslots", "%zu keyslots, a tpmguard token unlocks exactly one", n);
        e = json_object_array_get_idx(v, 0);
        if (!json_object_is_type(e, json_type_string))
                return token_error("keyslots", "element 0 must be a string holding a keyslot number");
        s = json_object_get_string(e);
        if (s[0] == '\0' || strlen(s) > 2 || (s[0] == '0' && s[1] != '\0'))
                return token_error("keyslots", "\"%.16s\" is not a canonical decimal keyslot number", s);
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return token_error("keyslots", "\"%.16s\" is not a decimal keyslot number", s);
                slot = slot * 10 + (*p - '0');
        }
        if (slot >= LUKS2_KEYSLOTS_MAX)
                return token_error("keyslots", "keyslot %ld out of range, LUKS2 has keyslots 0..%d", slot,
                                   LUKS2_KEYSLOTS_MAX - 1);
        *ret = (int) slot;
        return 0;
}

/* "pcrs" of obj, named field in errors (the token's, or an alternate's). */
static int pcrs_field(json_object *obj, const char *field, uint32_t *ret) {
        json_object *v;
        uint32_t mask = 0;
        size_t n;
        int r;

        r = field_get(obj, "pcrs", field, json_type_array, true, &v);
        if (r < 0)
                return r;
        n = json_object_array_length(v);
        if (n == 0)
                return token_error(field, "empty, at least one PCR is required");
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(v, i);
                int64_t pcr;

                if (!json_object_is_type(e, json_type_int))
                        return token_error(field, "element %zu is not an integer", i);
                pcr = json_object_get_int64(e);
                if (pcr < 0 || pcr >= PCR_COUNT)
                        return token_error(field, "element %zu is %" PRId64 ", PCRs are 0..23", i, pcr);
                if (mask & (UINT32_C(1) << pcr))
                        return token_error(field, "element %zu: PCR %" PRId64 " is listed twice", i, pcr);
                mask |= UINT32_C(1) << pcr;
        }
        *ret = mask;
        return 0;
}

static int kdf_uint_field(json_object *kdf, const char *key, const char *field, uint32_t min, uint32_t max,
                          uint32_t *ret) {
        json_object *v;
        int64_t n;
        int r;

        r = field_get(kdf, key, field, json_type_int, true, &v);
        if (r < 0)
                return r;
        n = json_object_get_int64(v);
        if (n < min || n > max)
                return token_error(field, "%" PRId64 " is out of range [%" PRIu32 ", %" PRIu32 "]", n, min, max);
        *ret = (uint32_t) n;
        return 0;
}

/*
 * Format 1: PBKDF2 iterations. Format 2: Argon2id time, memory (KiB) and
 * lanes, each bounded (pin.h TG_ARGON2_*): below the floor an attacker with
 * the TPM's data searches the PIN faster than enroll chose, above the
 * ceiling an edited token makes the initrd allocate or spin without end.
 */
static int pin_kdf_field(json_object *obj, tg_token *t) {
        _cleanup_free_ uint8_t *salt = NULL;
        const char *type = t->version >= 2 ? TG_PIN_KDF_TYPE_V2 : TG_PIN_KDF_TYPE;
        json_object *kdf, *v;
        size_t salt_size = 0;
        int r;

        if (!json_object_object_get_ex(obj, "pin_kdf", NULL)) {
                if (t->pin)
                        return token_error("pin_kdf", "missing, required because \"pin\" is true");
                t->pin_kdf_iterations = 0;
                t->argon2 = (tg_argon2_params) {};
                memset(t->pin_salt, 0, sizeof t->pin_salt);
                return 0;
        }
        if (!t->pin)
                return token_error("pin_kdf", "present although \"pin\" is false");
        r = field_get(obj, "pin_kdf", "pin_kdf", json_type_object, true, &kdf);
        if (r < 0)
                return r;

        r = field_get(kdf, "type", "pin_kdf.type", json_type_string, true, &v);
        if (r < 0)
                return r;
        if (strcmp(json_object_get_string(v), type) != 0)
                return token_error("pin_kdf.type", "unknown KDF \"%.32s\", format %u supports only \"%s\"",
                                   json_object_get_string(v), t->version, type);

        if (t->version >= 2) {
                r = kdf_uint_field(kdf, "time", "pin_kdf.time", TG_ARGON2_TIME_MIN, TG_ARGON2_TIME_MAX,
                                   &t->argon2.time_cost);
                if (r < 0)
                        return r;
                r = kdf_uint_field(kdf, "memory", "pin_kdf.memory", TG_ARGON2_MEMORY_MIN, TG_ARGON2_MEMORY_MAX,
                                   &t->argon2.memory_kib);
                if (r < 0)
                        return r;
                r = kdf_uint_field(kdf, "parallel", "pin_kdf.parallel", TG_ARGON2_PARALLEL_MIN,
                                   TG_ARGON2_PARALLEL_MAX, &t->argon2.parallel);
                if (r < 0)
                        return r;
        } else {
                r = kdf_uint_field(kdf, "iterations", "pin_kdf.iterations", TG_PIN_KDF_ITERATIONS_MIN,
                                   TG_PIN_KDF_ITERATIONS_MAX, &t->pin_kdf_iterations);
                if (r < 0)
                        return r;
        }

        r = field_get(kdf, "salt", "pin_kdf.salt", json_type_string, true, &v);
        if (r < 0)
                return r;
        r = base64_decode_strict("pin_kdf.salt", json_object_get_string(v), TG_PIN_SALT_SIZE, &salt, &salt_size);
        if (r < 0)
                return r;
        if (salt_size != TG_PIN_SALT_SIZE)
                return token_error("pin_kdf.salt", "%zu bytes, expected %u", salt_size, TG_PIN_SALT_SIZE);
        memcpy(t->pin_salt, salt, TG_PIN_SALT_SIZE);
        return 0;
}

static const char blob_name[] = "blob";

/* The sealed object must be exactly the kind of object tpmguard creates (see token.h). */
static int sealed_public_check(const char *field, const TPMT_PUBLIC *p, bool pin, const TPM2B_DIGEST *policy_hash) {
        TPMA_OBJECT allowed = TG_SEALED_ATTRIBUTES_REQUIRED | TG_SEALED_ATTRIBUTES_OPTIONAL |
                              (pin ? 0 : TG_SEALED_ATTRIBUTES_NO_PIN_OPTIONAL);
        TPMA_OBJECT a = p->objectAttributes;

        if (p->type != TPM2_ALG_KEYEDHASH)
                return token_error(field, "sealed object has type 0x%04x, expected KEYEDHASH (0x0008)", p->type);
        if (p->nameAlg != TPM2_ALG_SHA256)
                return token_error(field, "sealed object has nameAlg 0x%04x, expected SHA-256 (0x000b)", p->nameAlg);
        if (p->parameters.keyedHashDetail.scheme.scheme != TPM2_ALG_NULL)
                return token_error(field, "sealed object has scheme 0x%04x, expected NULL (a sealed data object)",
                                   p->parameters.keyedHashDetail.scheme.scheme);
        if ((a & TG_SEALED_ATTRIBUTES_REQUIRED) != TG_SEALED_ATTRIBUTES_REQUIRED)
                return token_error(field, "sealed object attributes 0x%08" PRIx32 " lack fixedTPM or fixedParent", a);
        if (a & TPMA_OBJECT_USERWITHAUTH)
                return token_error(field, "sealed object has userWithAuth set, which would bypass the PCR policy");
        if (a & TPMA_OBJECT_SENSITIVEDATAORIGIN)
                return token_error(field, "sealed object has sensitiveDataOrigin set, it cannot hold our key");
        if (pin && (a & TPMA_OBJECT_NODA))
                return token_error(field, "sealed object has noDA set although \"pin\" is true: PIN guesses would not be rate-limited");
        if (a & ~allowed)
                return token_error(field, "sealed object attributes 0x%08" PRIx32 " include bits tpmguard never sets (0x%08" PRIx32 ")",
                                   a, a & ~allowed);
        if (p->unique.keyedHash.size != 32)
                return token_error(field, "sealed object unique is %u bytes, expected 32", p->unique.keyedHash.size);
        if (p->authPolicy.size != policy_hash->size ||
            memcmp(p->authPolicy.buffer, policy_hash->buffer, policy_hash->size) != 0)
                return token_error(field, "blob policy does not match %s", field == blob_name ? "policy_hash" : "the policy its fields describe");
        return 0;
}

/* base64(TPM2B_PRIVATE ‖ TPM2B_PUBLIC), each unmarshalled with nothing left over. */
static int blob_field(json_object *obj, const char *field, TPM2B_PRIVATE *priv, TPM2B_PUBLIC *pub) {
        _cleanup_free_ uint8_t *blob = NULL;
        json_object *v;
        size_t size = 0, off = 0, public_start;
        TSS2_RC rc;
        int r;

        r = field_get(obj, "blob", field, json_type_string, true, &v);
        if (r < 0)
                return r;
        r = base64_decode_strict(field, json_object_get_string(v), BLOB_MAX, &blob, &size);
        if (r < 0)
                return r;

        *priv = (TPM2B_PRIVATE) {};
        rc = Tss2_MU_TPM2B_PRIVATE_Unmarshal(blob, size, &off, priv);
        if (rc != TSS2_RC_SUCCESS)
                return token_error(field, "malformed TPM2B_PRIVATE: %s", Tss2_RC_Decode(rc));
        if (priv->size == 0)
                return token_error(field, "empty TPM2B_PRIVATE");

        public_start = off;
        *pub = (TPM2B_PUBLIC) {};
        rc = Tss2_MU_TPM2B_PUBLIC_Unmarshal(blob, size, &off, pub);
        if (rc != TSS2_RC_SUCCESS)
                return token_error(field, "malformed TPM2B_PUBLIC: %s", Tss2_RC_Decode(rc));
        if (off - public_start != 2u + pub->size)
                return token_error(field, "TPM2B_PUBLIC size %u does not match its %zu-byte public area",
                                   pub->size, off - public_start - 2);
        if (off != size)
                return token_error(field, "%zu trailing bytes after TPM2B_PRIVATE ‖ TPM2B_PUBLIC", size - off);
        return 0;
}

const char *tg_alt_kind_to_string(tg_alt_kind kind) {
        return kind == TG_ALT_GRACE ? "grace" : kind == TG_ALT_PREDICTED ? "predicted" : NULL;
}

/*
 * One element of "alternates". Its policy is recomputed from its own fields (the grace's bound,
 * the predicted pcrDigest under the main token's bank and PCRs) and must be the blob's authPolicy:
 * an edited bound or digest is refused here, and a blob under another policy (a widened one, or a
 * template rewritten in flight at prepare) too. Nothing else is trusted from it.
 */
static int alt_field(json_object *e, size_t i, const tg_token *t, tg_token_alt *ret) {
        char field[64], sub[80];
        tg_token_alt a = {};
        json_object *v;
        const char *kind;
        int r;

        (void) snprintf(field, sizeof field, "alternates[%zu]", i);
        if (!json_object_is_type(e, json_type_object))
                return token_error(field, "is not an object");
        (void) snprintf(sub, sizeof sub, "%s.kind", field);
        r = field_get(e, "kind", sub, json_type_string, true, &v);
        if (r < 0)
                return r;
        kind = json_object_get_string(v);
        if (strcmp(kind, "grace") == 0)
                a.kind = TG_ALT_GRACE;
        else if (strcmp(kind, "predicted") == 0)
                a.kind = TG_ALT_PREDICTED;
        else
                return token_error(sub, "unknown kind \"%.32s\" (grace, predicted)", kind);
        if (tg_token_alt_find(t, a.kind))
                return token_error(sub, "a second \"%s\" alternate", kind);

        if (a.kind == TG_ALT_GRACE) {
                int64_t n;

                (void) snprintf(sub, sizeof sub, "%s.reset_count_max", field);
                r = field_get(e, "reset_count_max", sub, json_type_int, true, &v);
                if (r < 0)
                        return r;
                n = json_object_get_int64(v);
                if (n < 0 || n > UINT32_MAX)
                        return token_error(sub, "%" PRId64 " is not a TPM resetCount (0..%" PRIu32 ")", n, UINT32_MAX);
                a.reset_count_max = (uint32_t) n;
                /* The PCRs it keeps: what the update does not change, at their values at prepare. */
                if (json_object_object_get_ex(e, "pcrs", NULL)) {
                        bool present;

                        (void) snprintf(sub, sizeof sub, "%s.pcrs", field);
                        r = pcrs_field(e, sub, &a.pcr_mask);
                        if (r < 0)
                                return r;
                        if ((a.pcr_mask & ~t->pcr_mask) || a.pcr_mask == t->pcr_mask)
                                return token_error(sub, "not a strict subset of the token's \"pcrs\"");
                        (void) snprintf(sub, sizeof sub, "%s.pcr_digest", field);
                        a.pcr_digest.size = 32;
                        r = hex_field_named(e, "pcr_digest", sub, 32, true, a.pcr_digest.buffer, &present);
                        if (r < 0)
                                return r;
                } else if (json_object_object_get_ex(e, "pcr_digest", NULL))
                        return token_error(field, "a grace alternate without \"pcrs\" has no \"pcr_digest\"");
                r = tg_policy_digest_grace(a.reset_count_max, t->pcr_bank, a.pcr_mask, &a.pcr_digest, &a.policy_hash);
        } else {
                bool present;

                (void) snprintf(sub, sizeof sub, "%s.pcr_digest", field);
                a.pcr_digest.size = 32;
                r = hex_field_named(e, "pcr_digest", sub, 32, true, a.pcr_digest.buffer, &present);
                if (r < 0)
                        return r;
                if (json_object_object_get_ex(e, "reset_count_max", NULL))
                        return token_error(field, "a predicted alternate has no \"reset_count_max\"");
                r = tg_policy_digest_compute(t->pcr_bank, t->pcr_mask, &a.pcr_digest, true, &a.policy_hash);
        }
        if (r < 0)
                return r;

        (void) snprintf(sub, sizeof sub, "%s.blob", field);
        r = blob_field(e, sub, &a.private_blob, &a.public_blob);
        if (r < 0)
                return r;
        r = sealed_public_check(sub, &a.public_blob.publicArea, true, &a.policy_hash);
        if (r < 0)
                return r;
        *ret = a;
        return 0;
}

/* "alternates": absent, or 1..TG_ALT_MAX alternates of a format 2 PIN token with PCRs. */
static int alternates_field(json_object *obj, tg_token *t) {
        json_object *v;
        size_t n;
        int r;

        t->n_alt = 0;
        if (!json_object_object_get_ex(obj, "alternates", NULL))
                return 0;
        r = field_get(obj, "alternates", "alternates", json_type_array, true, &v);
        if (r < 0)
                return r;
        /* A seal that opens without the PCR policy must need the PIN, and a format 2 one: what the
         * TPM holds for it is masked by the PIN's Argon2id like the main seal's. */
        if (!t->pin || t->version < 2)
                return token_error("alternates", "present in a %s token; only a format 2 PIN token has them",
                                   t->pin ? "format 1" : "no-PIN");
        if (t->pcr_mask == 0)
                return token_error("alternates", "present in a token sealed to no PCR, which needs none");
        n = json_object_array_length(v);
        if (n == 0 || n > TG_ALT_MAX)
                return token_error("alternates", "%zu alternates, 1..%u allowed", n, TG_ALT_MAX);
        for (size_t i = 0; i < n; i++) {
                r = alt_field(json_object_array_get_idx(v, i), i, t, &t->alt[t->n_alt]);
                if (r < 0)
                        return r;
                t->n_alt++;
        }
        return 0;
}

const tg_token_alt *tg_token_alt_find(const tg_token *t, tg_alt_kind kind) {
        for (unsigned i = 0; i < t->n_alt && i < TG_ALT_MAX; i++)
                if (t->alt[i].kind == kind)
                        return &t->alt[i];
        return NULL;
}

void tg_token_alt_view(const tg_token *t, const tg_token_alt *a, tg_token *ret) {
        tg_token view = *t;

        view.n_alt = 0;
        memset(view.alt, 0, sizeof view.alt);
        view.private_blob = a->private_blob;
        view.public_blob = a->public_blob;
        view.policy_hash = a->policy_hash;
        view.pcr_digest = a->pcr_digest;
        view.grace = a->kind == TG_ALT_GRACE;
        view.reset_count_max = a->reset_count_max;
        if (view.grace)
                view.pcr_mask = a->pcr_mask;
        *ret = view;
        explicit_bzero(&view, sizeof view);
}

int tg_token_alt_put(tg_token *t, const tg_token_alt *a) {
        unsigned i;

        if (!t->pin || t->version < 2 || t->pcr_mask == 0)
                return log_error_rc(-TG_ERR_INVALID, "Only a format 2 PIN token sealed to PCRs takes an update seal "
                                    "(format 1: 'tpmguard change-pin' upgrades it).");
        for (i = 0; i < t->n_alt; i++)
                if (t->alt[i].kind == a->kind)
                        break;
        if (i >= TG_ALT_MAX)
                return log_error_rc(-TG_ERR_INVALID, "The token holds %u update seals already.", TG_ALT_MAX);
        t->alt[i] = *a;
        if (i == t->n_alt)
                t->n_alt++;
        return 0;
}

int tg_token_from_json(json_object *jobj, tg_token *ret) {
        tg_token t = { .keyslot = -1 };
        json_object *v;
        int64_t version;
        bool present;
        int r;

        if (!json_object_is_type(jobj, json_type_object))
                return log_error_rc(-TG_ERR_TOKEN, "The tpmguard token is not a JSON object.");

        r = field_get(jobj, "type", "type", json_type_string, true, &v);
        if (r < 0)
                return r;
        if (strcmp(json_object_get_string(v), TG_TOKEN_TYPE) != 0)
                return token_error("type", "\"%.32s\" is not \"" TG_TOKEN_TYPE "\"", json_object_get_string(v));

        r = field_get(jobj, "version", "version", json_type_int, true, &v);
        if (r < 0)
                return r;
        version = json_object_get_int64(v);
        if (version > TG_TOKEN_VERSION)
                return token_error("version", "format %" PRId64 " was written by a newer tpmguard; this one reads format %u. "
                                   "Upgrade tpmguard (in the initrd too) to unlock with this token.", version, TG_TOKEN_VERSION);
        if (version < 1)
                return token_error("version", "%" PRId64 " is not a valid format version", version);
        t.version = (unsigned) version;

        r = keyslots_field(jobj, &t.keyslot);
        if (r < 0)
                return r;

        r = field_get(jobj, "pcr_bank", "pcr_bank", json_type_string, true, &v);
        if (r < 0)
                return r;
        if (tg_pcr_bank_from_string(json_object_get_string(v), &t.pcr_bank) < 0)
                return token_error("pcr_bank", "unknown PCR bank \"%.32s\" (sha1, sha256, sha384, sha512)",
                                   json_object_get_string(v));

        r = pcrs_field(jobj, "pcrs", &t.pcr_mask);
        if (r < 0)
                return r;

        t.policy_hash.size = 32;
        r = hex_field(jobj, "policy_hash", 32, true, t.policy_hash.buffer, &present);
        if (r < 0)
                return r;

        r = field_get(jobj, "pin", "pin", json_type_boolean, true, &v);
        if (r < 0)
                return r;
        t.pin = json_object_get_boolean(v);
        /* Format 2 masks the secret with a key of the PIN: without a PIN there is nothing to mask with. */
        if (t.version >= 2 && !t.pin)
                return token_error("pin", "false in a format %u token, which exists only for PIN tokens", t.version);

        r = pin_kdf_field(jobj, &t);
        if (r < 0)
                return r;

        r = name_field(jobj, "parent_name", true, &t.parent_name);
        if (r < 0)
                return r;
        r = name_field(jobj, "ek_signing_key_name", false, &t.ek_signing_key_name);
        if (r < 0)
                return r;

        r = blob_field(jobj, blob_name, &t.private_blob, &t.public_blob);
        if (r < 0)
                return r;
        r = sealed_public_check(blob_name, &t.public_blob.publicArea, t.pin, &t.policy_hash);
        if (r < 0)
                return r;
        r = alternates_field(jobj, &t);
        if (r < 0)
                return r;

        *ret = t;
        return 0;
}


int tg_token_from_string(const char *json, tg_token *ret) {
        _cleanup_json_ json_object *jobj = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        size_t len = strnlen(json, TG_TOKEN_JSON_MAX + 1);
        int r;

        if (len > TG_TOKEN_JSON_MAX)
                return log_error_rc(-TG_ERR_TOKEN, "The tpmguard token JSON is larger than %u bytes.", TG_TOKEN_JSON_MAX);
        r = tg_json_parse_object(json, len, &jobj, problem, sizeof problem);
        if (r == -TG_ERR_INVALID)
                return log_error_rc(-TG_ERR_TOKEN, "The tpmguard token JSON %s.", problem);
        if (r < 0)
                return r;
        return tg_token_from_json(jobj, ret);
}

static int json_add(json_object *obj, const char *key, json_object *v) {
        if (!v)
                return -TG_ERR_NOMEM;
        if (json_object_object_add(obj, key, v) < 0) {
                json_object_put(v);
                return -TG_ERR_NOMEM;
        }
        return 0;
}

static int json_add_hex(json_object *obj, const char *key, const uint8_t *data, size_t size) {
        _cleanup_free_ char *hex = NULL;
        int r = tg_hex_encode(data, size, &hex);
        if (r < 0)
                return r;
        return json_add(obj, key, json_object_new_string(hex));
}

static int json_add_base64(json_object *obj, const char *key, const uint8_t *data, size_t size) {
        _cleanup_free_ char *b64 = NULL;
        int r = base64_encode(data, size, &b64);
        if (r < 0)
                return r;
        return json_add(obj, key, json_object_new_string(b64));
}

static int blob_marshal(const TPM2B_PRIVATE *priv, const TPM2B_PUBLIC *pub, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ uint8_t *buf = malloc(BLOB_MAX);
        size_t off = 0;
        TSS2_RC rc;

        if (!buf)
                return -TG_ERR_NOMEM;
        rc = Tss2_MU_TPM2B_PRIVATE_Marshal(priv, buf, BLOB_MAX, &off);
        if (rc == TSS2_RC_SUCCESS)
                rc = Tss2_MU_TPM2B_PUBLIC_Marshal(pub, buf, BLOB_MAX, &off);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_TOKEN, "Cannot marshal the sealed object for the token: %s", Tss2_RC_Decode(rc));
        *ret = TAKE_PTR(buf);
        *ret_size = off;
        return 0;
}

static int alternates_to_json(const tg_token *t, json_object *obj) {
        json_object *arr;
        int r;

        if (t->n_alt == 0)
                return 0;
        if (t->n_alt > TG_ALT_MAX)
                return log_error_rc(-TG_ERR_TOKEN, "token field \"alternates\": %u alternates", t->n_alt);
        arr = json_object_new_array();
        r = json_add(obj, "alternates", arr);
        if (r < 0)
                return r;
        for (unsigned i = 0; i < t->n_alt; i++) {
                const tg_token_alt *a = &t->alt[i];
                _cleanup_free_ uint8_t *blob = NULL;
                json_object *e = json_object_new_object();
                size_t blob_size = 0;

                if (!e || json_object_array_add(arr, e) < 0) {
                        json_object_put(e);
                        return -TG_ERR_NOMEM;
                }
                r = json_add(e, "kind", json_object_new_string(tg_alt_kind_to_string(a->kind) ?: "?"));
                if (r < 0)
                        return r;
                if (a->kind == TG_ALT_GRACE) {
                        r = json_add(e, "reset_count_max", json_object_new_int64(a->reset_count_max));
                        if (r >= 0 && a->pcr_mask) {
                                json_object *pcrs = json_object_new_array();

                                r = json_add(e, "pcrs", pcrs);
                                for (int p = 0; r >= 0 && p < 24; p++)
                                        if ((a->pcr_mask & (UINT32_C(1) << p)) &&
                                            json_object_array_add(pcrs, json_object_new_int(p)) < 0)
                                                r = -TG_ERR_NOMEM;
                                if (r >= 0)
                                        r = json_add_hex(e, "pcr_digest", a->pcr_digest.buffer,
                                                         a->pcr_digest.size <= sizeof a->pcr_digest.buffer ?
                                                         a->pcr_digest.size : 0);
                        }
                } else
                        r = json_add_hex(e, "pcr_digest", a->pcr_digest.buffer,
                                         a->pcr_digest.size <= sizeof a->pcr_digest.buffer ? a->pcr_digest.size : 0);
                if (r < 0)
                        return r;
                r = blob_marshal(&a->private_blob, &a->public_blob, &blob, &blob_size);
                if (r < 0)
                        return r;
                r = json_add_base64(e, "blob", blob, blob_size);
                if (r < 0)
                        return r;
        }
        return 0;
}

int tg_token_to_json(const tg_token *t, json_object **ret) {
        _cleanup_(json_object_putp) json_object *obj = NULL;
        _cleanup_free_ uint8_t *blob = NULL;
        json_object *arr;
        const char *bank;
        size_t blob_size = 0;
        tg_token check;
        char slot[16];
        int r;

        bank = tg_pcr_bank_to_string(t->pcr_bank);
        if (!bank)
                return log_error_rc(-TG_ERR_TOKEN, "token field \"pcr_bank\": unknown PCR bank 0x%04x", t->pcr_bank);
        r = blob_marshal(&t->private_blob, &t->public_blob, &blob, &blob_size);
        if (r < 0)
                return r;

        obj = json_object_new_object();
        if (!obj)
                return -TG_ERR_NOMEM;
        r = json_add(obj, "type", json_object_new_string(TG_TOKEN_TYPE));
        if (r < 0)
                return r;
        arr = json_object_new_array();
        r = json_add(obj, "keyslots", arr);
        if (r < 0)
                return r;
        if (t->keyslot >= 0) {
                (void) snprintf(slot, sizeof slot, "%d", t->keyslot);
                r = json_object_array_add(arr, json_object_new_string(slot));
                if (r < 0)
                        return -TG_ERR_NOMEM;
        }
        r = json_add(obj, "version", json_object_new_int64(t->version));
        if (r < 0)
                return r;
        r = json_add_base64(obj, "blob", blob, blob_size);
        if (r < 0)
                return r;
        r = json_add(obj, "pcr_bank", json_object_new_string(bank));
        if (r < 0)
                return r;
        arr = json_object_new_array();
        r = json_add(obj, "pcrs", arr);
        if (r < 0)
                return r;
        for (int i = 0; i < 32; i++)
                if (t->pcr_mask & (UINT32_C(1) << i))
                        if (json_object_array_add(arr, json_object_new_int(i)) < 0)
                                return -TG_ERR_NOMEM;
        r = json_add_hex(obj, "policy_hash", t->policy_hash.buffer,
                         t->policy_hash.size <= sizeof t->policy_hash.buffer ? t->policy_hash.size : 0);
        if (r < 0)
                return r;
        r = json_add(obj, "pin", json_object_new_boolean(t->pin));
        if (r < 0)
                return r;
        if (t->pin) {
                json_object *kdf = json_object_new_object();
                r = json_add(obj, "pin_kdf", kdf);
                if (r < 0)
                        return r;
                r = json_add(kdf, "type", json_object_new_string(t->version >= 2 ? TG_PIN_KDF_TYPE_V2 : TG_PIN_KDF_TYPE));
                if (r < 0)
                        return r;
                if (t->version >= 2) {
                        r = json_add(kdf, "time", json_object_new_int64(t->argon2.time_cost));
                        if (r >= 0)
                                r = json_add(kdf, "memory", json_object_new_int64(t->argon2.memory_kib));
                        if (r >= 0)
                                r = json_add(kdf, "parallel", json_object_new_int64(t->argon2.parallel));
                } else
                        r = json_add(kdf, "iterations", json_object_new_int64(t->pin_kdf_iterations));
                if (r < 0)
                        return r;
                r = json_add_base64(kdf, "salt", t->pin_salt, sizeof t->pin_salt);
                if (r < 0)
                        return r;
        }
        r = json_add_hex(obj, "parent_name", t->parent_name.name,
                         t->parent_name.size <= sizeof t->parent_name.name ? t->parent_name.size : 0);
        if (r < 0)
                return r;
        if (t->ek_signing_key_name.size > 0) {
                r = json_add_hex(obj, "ek_signing_key_name", t->ek_signing_key_name.name,
                                 t->ek_signing_key_name.size <= sizeof t->ek_signing_key_name.name ?
                                 t->ek_signing_key_name.size : 0);
                if (r < 0)
                        return r;
        }

        r = alternates_to_json(t, obj);
        if (r < 0)
                return r;

        /* Never write a token that the reader would reject. */
        r = tg_token_from_json(obj, &check);
        if (r < 0)
                return log_error_rc(r, "Refusing to write an invalid tpmguard token.");

        *ret = TAKE_PTR(obj);
        return 0;
}

int tg_token_to_string(const tg_token *t, char **ret) {
        _cleanup_(json_object_putp) json_object *obj = NULL;
        const char *s;
        char *copy;
        int r;

        r = tg_token_to_json(t, &obj);
        if (r < 0)
                return r;
        s = json_object_to_json_string_ext(obj, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!s)
                return -TG_ERR_NOMEM;
        copy = strdup(s);
        if (!copy)
                return -TG_ERR_NOMEM;
        *ret = copy;
        return 0;
}

static void hex_to_buf(const uint8_t *data, size_t size, char *buf, size_t buf_size) {
        static const char digits[] = "0123456789abcdef";
        size_t i;

        for (i = 0; i < size && 2 * i + 2 < buf_size; i++) {
                buf[2 * i] = digits[data[i] >> 4];
                buf[2 * i + 1] = digits[data[i] & 0xf];
        }
        buf[2 * i] = '\0';
}

bool tg_token_policy_weaker(const tg_token *t, const tg_config *config, char *why, size_t size) {
        char want[96], have[96];
        uint32_t missing;

        assert(t);
        assert(config);

        if (!t->pin && !config->allow_no_pin) {
                snprintf(why, size, "it has no PIN, and %s requires one (allow_no_pin = no)",
                         config->path ?: "tpmguard.conf");
                return true;
        }
        if (t->pcr_bank != config->pcr_bank) {
                snprintf(why, size, "it is sealed to the %s PCR bank, %s configures %s", tg_pcr_bank_to_string(t->pcr_bank),
                         config->path ?: "tpmguard.conf", tg_pcr_bank_to_string(config->pcr_bank));
                return true;
        }
        missing = config->pcr_mask & ~t->pcr_mask;
        if (missing) {
                tg_pcr_list_format(t->pcr_mask, have, sizeof have);
                tg_pcr_list_format(missing, want, sizeof want);
                snprintf(why, size, "it is sealed to PCRs %s, without PCR %s that %s configures", have[0] ? have : "(none)",
                         want, config->path ?: "tpmguard.conf");
                return true;
        }
        return false;
}

bool tg_token_pin_edited(const tg_token *t) {
        return !t->pin && !(t->public_blob.publicArea.objectAttributes & TPMA_OBJECT_NODA);
}

bool tg_token_exposed_to_leaking_tpm(const tg_token *t) {
        return t->pin && t->version < 2;
}

void tg_token_policy_format(const tg_token *t, char *buf, size_t size) {
        char pcrs[96];

        tg_pcr_list_format(t->pcr_mask, pcrs, sizeof pcrs);
        snprintf(buf, size, "%s PCRs %s, %s", tg_pcr_bank_to_string(t->pcr_bank), pcrs[0] ? pcrs : "(none)",
                 t->pin ? "PIN" : "no PIN");
}

void tg_token_dump(const tg_token *t, void (*print)(const char *line, void *userdata), void *userdata) {
        char line[256], pcrs[128], hex[2 * sizeof(TPMU_NAME) + 1];
        const char *bank = tg_pcr_bank_to_string(t->pcr_bank);

        (void) snprintf(line, sizeof line, "\ttpmguard format: %u", t->version);
        print(line, userdata);
        tg_pcr_list_format(t->pcr_mask, pcrs, sizeof pcrs);
        (void) snprintf(line, sizeof line, "\tPCRs:            %s:%s", bank ? bank : "unknown", pcrs);
        print(line, userdata);
        if (t->pin && t->version >= 2)
                (void) snprintf(line, sizeof line, "\tPIN:             yes (" TG_PIN_KDF_TYPE_V2 ", time %" PRIu32
                                ", memory %" PRIu32 " KiB, parallel %" PRIu32 "; mixed into the keyslot passphrase)",
                                t->argon2.time_cost, t->argon2.memory_kib, t->argon2.parallel);
        else if (t->pin)
                (void) snprintf(line, sizeof line, "\tPIN:             yes (" TG_PIN_KDF_TYPE ", %" PRIu32 " iterations; "
                                "format 1: a leaking TPM opens the volume without it, 'tpmguard change-pin' upgrades)",
                                t->pin_kdf_iterations);
        else
                (void) snprintf(line, sizeof line, "\tPIN:             no");
        print(line, userdata);
        hex_to_buf(t->parent_name.name, t->parent_name.size, hex, sizeof hex);
        (void) snprintf(line, sizeof line, "\tParent name:     %s", hex);
        print(line, userdata);
        if (t->ek_signing_key_name.size > 0) {
                hex_to_buf(t->ek_signing_key_name.name, t->ek_signing_key_name.size, hex, sizeof hex);
                (void) snprintf(line, sizeof line, "\tEK signing key:  %s (informational; the pinned key is in /etc/tpmguard)", hex);
        } else
                (void) snprintf(line, sizeof line, "\tEK signing key:  (not recorded)");
        print(line, userdata);
        for (unsigned i = 0; i < t->n_alt && i < TG_ALT_MAX; i++) {
                if (t->alt[i].kind == TG_ALT_GRACE) {
                        char kept[96] = "no PCR";

                        if (t->alt[i].pcr_mask) {
                                memcpy(kept, "PCR ", 5);
                                tg_pcr_list_format(t->alt[i].pcr_mask, kept + 4, sizeof kept - 4);
                        }
                        (void) snprintf(line, sizeof line, "\tUpdate seal:     grace, PIN alone while the TPM's "
                                        "resetCount <= %" PRIu32 " in a boot without a TPM Restart, keeping %s "
                                        "('tpmguard update finish' ends it)", t->alt[i].reset_count_max, kept);
                } else {
                        hex_to_buf(t->alt[i].pcr_digest.buffer, t->alt[i].pcr_digest.size, hex, sizeof hex);
                        (void) snprintf(line, sizeof line, "\tUpdate seal:     predicted PCR values (digest %s)", hex);
                }
                print(line, userdata);
        }
}
