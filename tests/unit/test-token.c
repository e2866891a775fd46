/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <openssl/evp.h>
#include <tss2/tss2_mu.h>

#include "error.h"
#include "log.h"
#include "policy.h"
#include "token.h"
#include "util.h"

/*
 * The blob is real TPM output: tpm2-tools 5.4 against a fixture swtpm 0.7.1,
 *   tpm2_createprimary -C o -g sha256 -G ecc256:aes128cfb \
 *       -a "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|decrypt" -c prim.ctx
 *   tpm2_create -C prim.ctx -g sha256 -i secret.bin -L policy.digest -a "fixedtpm|fixedparent" -u seal.pub -r seal.priv
 *   cat seal.priv seal.pub | base64 -w0
 * with policy.digest = PolicyPCR(sha256:7, SHA-256(00..1f)) then PolicyAuthValue
 * (see test-policy.c), and parent_name = the primary's name (tpm2_readpublic -n).
 */
#define BLOB_B64 \
        "AJ4AICp4Hi9b6HMrKX2triONRyQ5RuUpmoxLNyPJEv9VU53uABAnQJ6PXhO1ZnC85lQUoDP0XnQTd4KqpBjnlNQFvz7xfbiuyu6z" \
        "pmtjN/3wsTUreN1Vk/umDHH/E9h0JxYoqUtnHMgo9T3wOD2ZNI/357gHK8d6lu+Mww1/sPHIuSYRXSGuPkfxh6u3dS8WxXTWFdBD" \
        "7d12ZS5jQaiMNABOAAgACwAAABIAIKyKVxwaYUPIw6nmwMfAjs3kJYKFFgada2Ld75WsdLvyABAAIHHKtYcC9avVK9EYqSxDSAjP" \
        "7YDA2ttd40TlCuxvDrQy"
#define POLICY_HEX "ac8a571c1a6143c8c3a9e6c0c7c08ecde425828516069d6b62ddef95ac74bbf2"
#define PARENT_HEX "000b02abc1272bc7594612e41ae14294ba006715efd869752821704fffd426431f66"
#define EKSK_HEX   "000b0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20"
#define SALT_B64   "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

static const char base_token[] =
        "{\"type\":\"tpmguard\",\"keyslots\":[\"1\"],\"version\":1,"
        "\"blob\":\"" BLOB_B64 "\","
        "\"pcr_bank\":\"sha256\",\"pcrs\":[7],"
        "\"policy_hash\":\"" POLICY_HEX "\","
        "\"pin\":true,"
        "\"pin_kdf\":{\"type\":\"pbkdf2-sha256\",\"iterations\":100000,\"salt\":\"" SALT_B64 "\"},"
        "\"parent_name\":\"" PARENT_HEX "\","
        "\"ek_signing_key_name\":\"" EKSK_HEX "\"}";

/* Format 2: the same sealed object, the PIN's Argon2id named in pin_kdf (docs/token-format.md). */
static const char base_token_v2[] =
        "{\"type\":\"tpmguard\",\"keyslots\":[\"1\"],\"version\":2,"
        "\"blob\":\"" BLOB_B64 "\","
        "\"pcr_bank\":\"sha256\",\"pcrs\":[7],"
        "\"policy_hash\":\"" POLICY_HEX "\","
        "\"pin\":true,"
        "\"pin_kdf\":{\"type\":\"argon2id\",\"time\":3,\"memory\":65536,\"parallel\":1,\"salt\":\"" SALT_B64 "\"},"
        "\"parent_name\":\"" PARENT_HEX "\","
        "\"ek_signing_key_name\":\"" EKSK_HEX "\"}";

static char last_message[2048];

static void capture_sink(int level, const char *message, void *userdata) {
        snprintf(last_message, sizeof last_message, "%s", message);
}

static int setup(void **state) {
        tg_log_set_sink(capture_sink, NULL);
        return 0;
}

static int teardown(void **state) {
        tg_log_set_sink(NULL, NULL);
        return 0;
}

/* Sets (or with value NULL deletes) the field at "key" or "object.key"; value is JSON text. */
static void json_set_path(json_object *o, const char *path, const char *value) {
        char buf[64];
        char *dot, *key = buf;

        snprintf(buf, sizeof buf, "%s", path);
        dot = strchr(buf, '.');
        if (dot) {
                *dot = '\0';
                assert_true(json_object_object_get_ex(o, buf, &o));
                key = dot + 1;
        }
        if (!value) {
                json_object_object_del(o, key);
                return;
        }
        json_object *v = json_tokener_parse(value);
        assert_true(v || strcmp(value, "null") == 0);
        assert_int_equal(json_object_object_add(o, key, v), 0);
}

static char *token_with(const char *path, const char *value) {
        _cleanup_(json_object_putp) json_object *o = json_tokener_parse(base_token);
        assert_non_null(o);
        if (path)
                json_set_path(o, path, value);
        char *s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        assert_non_null(s);
        return s;
}

static void expect_reject_string(const char *json, const char *field, const char *needle, const char *what) {
        tg_token t = { .version = 77 };
        char prefix[64];
        int r;

        last_message[0] = '\0';
        r = tg_token_from_string(json, &t);
        snprintf(prefix, sizeof prefix, "token field \"%s\"", field);
        if (r != -TG_ERR_TOKEN || !strstr(last_message, prefix) || (needle && !strstr(last_message, needle)))
                fail_msg("case %s: r=%d, message \"%s\", expected %s%s%s", what, r, last_message, prefix,
                         needle ? " and " : "", needle ? needle : "");
        assert_int_equal(t.version, 77); /* ret untouched on failure */
}

static void expect_reject(const char *path, const char *value, const char *field, const char *needle) {
        _cleanup_free_ char *json = token_with(path, value);
        char what[256];
        snprintf(what, sizeof what, "%s = %.100s", path, value ? value : "(deleted)");
        expect_reject_string(json, field, needle, what);
}

static void test_parse_base(void **state) {
        tg_token t;
        _cleanup_free_ char *hex = NULL;

        assert_int_equal(tg_token_from_string(base_token, &t), 0);
        assert_int_equal(t.version, 1);
        assert_int_equal(t.keyslot, 1);
        assert_int_equal(t.pcr_bank, TPM2_ALG_SHA256);
        assert_int_equal(t.pcr_mask, 1u << 7);
        assert_true(t.pin);
        assert_int_equal(t.pin_kdf_iterations, 100000);
        for (int i = 0; i < 32; i++)
                assert_int_equal(t.pin_salt[i], i);
        assert_int_equal(t.policy_hash.size, 32);
        assert_int_equal(tg_hex_encode(t.policy_hash.buffer, 32, &hex), 0);
        assert_string_equal(hex, POLICY_HEX);
        assert_int_equal(t.parent_name.size, 34);
        assert_int_equal(t.ek_signing_key_name.size, 34);
        assert_int_equal(t.private_blob.size, 158);
        assert_int_equal(t.public_blob.size, 78);
        assert_int_equal(t.public_blob.publicArea.type, TPM2_ALG_KEYEDHASH);
        assert_int_equal(t.public_blob.publicArea.objectAttributes, TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT);
        assert_memory_equal(t.public_blob.publicArea.authPolicy.buffer, t.policy_hash.buffer, 32);
}

static void assert_tokens_equal(const tg_token *a, const tg_token *b) {
        assert_int_equal(a->version, b->version);
        assert_int_equal(a->keyslot, b->keyslot);
        assert_int_equal(a->private_blob.size, b->private_blob.size);
        assert_memory_equal(a->private_blob.buffer, b->private_blob.buffer, a->private_blob.size);
        assert_int_equal(a->public_blob.size, b->public_blob.size);
        assert_memory_equal(&a->public_blob.publicArea.unique, &b->public_blob.publicArea.unique, sizeof(TPMU_PUBLIC_ID));
        assert_int_equal(a->pcr_bank, b->pcr_bank);
        assert_int_equal(a->pcr_mask, b->pcr_mask);
        assert_int_equal(a->policy_hash.size, b->policy_hash.size);
        assert_memory_equal(a->policy_hash.buffer, b->policy_hash.buffer, a->policy_hash.size);
        assert_int_equal(a->pin, b->pin);
        assert_int_equal(a->pin_kdf_iterations, b->pin_kdf_iterations);
        assert_memory_equal(a->pin_salt, b->pin_salt, sizeof a->pin_salt);
        assert_int_equal(a->parent_name.size, b->parent_name.size);
        assert_memory_equal(a->parent_name.name, b->parent_name.name, a->parent_name.size);
        assert_int_equal(a->ek_signing_key_name.size, b->ek_signing_key_name.size);
        assert_memory_equal(a->ek_signing_key_name.name, b->ek_signing_key_name.name, a->ek_signing_key_name.size);
}

static void test_round_trip(void **state) {
        _cleanup_free_ char *out = NULL, *out2 = NULL;
        tg_token t, t2;

        assert_int_equal(tg_token_from_string(base_token, &t), 0);
        assert_int_equal(tg_token_to_string(&t, &out), 0);
        /* Key order and encoding are ours: the writer reproduces the reference text byte for byte. */
        assert_string_equal(out, base_token);
        assert_int_equal(tg_token_from_string(out, &t2), 0);
        assert_tokens_equal(&t, &t2);

        /* Without PIN (noDA allowed), without EK signing key name, without keyslot, several PCRs. */
        t.pin = false;
        t.public_blob.publicArea.objectAttributes |= TPMA_OBJECT_NODA;
        t.ek_signing_key_name.size = 0;
        t.keyslot = -1;
        t.pcr_mask = (1u << 0) | (1u << 7) | (1u << 23);
        t.pcr_bank = TPM2_ALG_SHA384;
        assert_int_equal(tg_token_to_string(&t, &out2), 0);
        assert_null(strstr(out2, "pin_kdf"));
        assert_null(strstr(out2, "ek_signing_key_name"));
        assert_non_null(strstr(out2, "\"keyslots\":[]"));
        assert_non_null(strstr(out2, "\"pcrs\":[0,7,23]"));
        assert_non_null(strstr(out2, "\"pcr_bank\":\"sha384\""));
        assert_non_null(strstr(out2, "\"pin\":false"));
        assert_int_equal(tg_token_from_string(out2, &t2), 0);
        t.pin_kdf_iterations = 0;
        memset(t.pin_salt, 0, sizeof t.pin_salt);
        assert_tokens_equal(&t, &t2);

        /* tg_token_to_json gives the same object, including type and keyslots. */
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *v;
        assert_int_equal(tg_token_to_json(&t2, &o), 0);
        assert_true(json_object_object_get_ex(o, "type", &v));
        assert_string_equal(json_object_get_string(v), "tpmguard");
        assert_true(json_object_object_get_ex(o, "keyslots", &v));
        assert_true(json_object_is_type(v, json_type_array));
}

static void test_writer_refuses_invalid(void **state) {
        tg_token t, bad;
        char *out = NULL;
        json_object *o = NULL;

        assert_int_equal(tg_token_from_string(base_token, &t), 0);

        bad = t; bad.pcr_mask = 0;
        assert_int_equal(tg_token_to_string(&bad, &out), -TG_ERR_TOKEN);
        assert_non_null(strstr(last_message, "Refusing to write"));
        bad = t; bad.pcr_mask = 1u << 24;
        assert_int_equal(tg_token_to_json(&bad, &o), -TG_ERR_TOKEN);
        bad = t; bad.pcr_bank = 0x1234;
        assert_int_equal(tg_token_to_json(&bad, &o), -TG_ERR_TOKEN);
        bad = t; bad.pin_kdf_iterations = 10;
        assert_int_equal(tg_token_to_json(&bad, &o), -TG_ERR_TOKEN);
        bad = t; bad.public_blob.publicArea.objectAttributes |= TPMA_OBJECT_NODA; /* with pin */
        assert_int_equal(tg_token_to_json(&bad, &o), -TG_ERR_TOKEN);
        bad = t; bad.policy_hash.buffer[0] ^= 1;
        assert_int_equal(tg_token_to_json(&bad, &o), -TG_ERR_TOKEN);
        bad = t; bad.parent_name.size = 0;
        assert_int_equal(tg_token_to_json(&bad, &o), -TG_ERR_TOKEN);
        bad = t; bad.keyslot = 32;
        assert_int_equal(tg_token_to_json(&bad, &o), -TG_ERR_TOKEN);
        bad = t; bad.version = 2;
        assert_int_equal(tg_token_to_json(&bad, &o), -TG_ERR_TOKEN);
        assert_null(out);
        assert_null(o);
}

static void test_unknown_keys_ignored(void **state) {
        _cleanup_(json_object_putp) json_object *o = json_tokener_parse(base_token);
        tg_token t;

        json_set_path(o, "future_field", "{\"nested\":[1,2,3]}");
        json_set_path(o, "pin_kdf.memory", "65536");
        json_set_path(o, "tpm2-blob", "\"some other token's key\"");
        assert_int_equal(tg_token_from_json(o, &t), 0);
        assert_int_equal(tg_token_from_string(json_object_to_json_string(o), &t), 0);
        assert_int_equal(t.pcr_mask, 1u << 7);
}

static void test_optional_fields(void **state) {
        _cleanup_free_ char *no_eksk = token_with("ek_signing_key_name", NULL);
        _cleanup_free_ char *no_slot = token_with("keyslots", "[]");
        _cleanup_free_ char *slot31 = token_with("keyslots", "[\"31\"]");
        _cleanup_free_ char *slot0 = token_with("keyslots", "[\"0\"]");
        tg_token t;

        assert_int_equal(tg_token_from_string(no_eksk, &t), 0);
        assert_int_equal(t.ek_signing_key_name.size, 0);
        assert_int_equal(tg_token_from_string(no_slot, &t), 0);
        assert_int_equal(t.keyslot, -1);
        assert_int_equal(tg_token_from_string(slot31, &t), 0);
        assert_int_equal(t.keyslot, 31);
        assert_int_equal(tg_token_from_string(slot0, &t), 0);
        assert_int_equal(t.keyslot, 0);
}

static void test_reject_fields(void **state) {
        expect_reject("type", "\"systemd-tpm2\"", "type", "tpmguard");
        expect_reject("type", "1", "type", "string");
        expect_reject("type", NULL, "type", "missing");

        expect_reject("version", "3", "version", "newer tpmguard");
        expect_reject("version", "0", "version", NULL);
        expect_reject("version", "-1", "version", NULL);
        expect_reject("version", "\"1\"", "version", "integer");
        expect_reject("version", "1.0", "version", "integer");
        expect_reject("version", "null", "version", "null");
        expect_reject("version", NULL, "version", "missing");

        expect_reject("keyslots", "\"1\"", "keyslots", "array");
        expect_reject("keyslots", "[\"1\",\"2\"]", "keyslots", "exactly one");
        expect_reject("keyslots", "[1]", "keyslots", "string");
        expect_reject("keyslots", "[\"01\"]", "keyslots", "canonical");
        expect_reject("keyslots", "[\"\"]", "keyslots", NULL);
        expect_reject("keyslots", "[\"a\"]", "keyslots", "decimal");
        expect_reject("keyslots", "[\"-1\"]", "keyslots", "decimal");
        expect_reject("keyslots", "[\"32\"]", "keyslots", "out of range");
        expect_reject("keyslots", "[\"123\"]", "keyslots", NULL);
        expect_reject("keyslots", NULL, "keyslots", "missing");

        expect_reject("pcr_bank", "\"md5\"", "pcr_bank", "unknown");
        expect_reject("pcr_bank", "11", "pcr_bank", "string");
        expect_reject("pcr_bank", NULL, "pcr_bank", "missing");

        expect_reject("pcrs", "[]", "pcrs", "empty");
        expect_reject("pcrs", "[0,1,2,24]", "pcrs", "element 3 is 24, PCRs are 0..23");
        expect_reject("pcrs", "[-1]", "pcrs", "element 0 is -1");
        expect_reject("pcrs", "[7,7]", "pcrs", "twice");
        expect_reject("pcrs", "[\"7\"]", "pcrs", "not an integer");
        expect_reject("pcrs", "[7.0]", "pcrs", "not an integer");
        expect_reject("pcrs", "[4294967303]", "pcrs", "PCRs are 0..23"); /* 2^32 + 7 must not wrap to 7 */
        expect_reject("pcrs", "7", "pcrs", "array");
        expect_reject("pcrs", NULL, "pcrs", "missing");

        expect_reject("policy_hash", "\"" POLICY_HEX "00\"", "policy_hash", "66 hex digits");
        expect_reject("policy_hash", "\"ac8a\"", "policy_hash", "expected 64");
        expect_reject("policy_hash", "\"zz8a571c1a6143c8c3a9e6c0c7c08ecde425828516069d6b62ddef95ac74bbf2\"", "policy_hash", "hex");
        expect_reject("policy_hash", "\"bc8a571c1a6143c8c3a9e6c0c7c08ecde425828516069d6b62ddef95ac74bbf2\"", "blob",
                      "blob policy does not match policy_hash");
        expect_reject("policy_hash", "[]", "policy_hash", "string");
        expect_reject("policy_hash", NULL, "policy_hash", "missing");

        expect_reject("pin", "\"yes\"", "pin", "boolean");
        expect_reject("pin", "1", "pin", "boolean");
        expect_reject("pin", NULL, "pin", "missing");

        expect_reject("pin_kdf", NULL, "pin_kdf", "\"pin\" is true");
        expect_reject("pin_kdf", "\"pbkdf2-sha256\"", "pin_kdf", "object");
        expect_reject("pin_kdf.type", "\"argon2id\"", "pin_kdf.type", "unknown KDF");
        expect_reject("pin_kdf.type", NULL, "pin_kdf.type", "missing");
        expect_reject("pin_kdf.iterations", "999", "pin_kdf.iterations", "out of range");
        expect_reject("pin_kdf.iterations", "10000001", "pin_kdf.iterations", "out of range");
        expect_reject("pin_kdf.iterations", "4294968296", "pin_kdf.iterations", "out of range");
        expect_reject("pin_kdf.iterations", "\"100000\"", "pin_kdf.iterations", "integer");
        expect_reject("pin_kdf.iterations", NULL, "pin_kdf.iterations", "missing");
        expect_reject("pin_kdf.salt", "\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==\"", "pin_kdf.salt", "31 bytes");
        expect_reject("pin_kdf.salt", "\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8g\"", "pin_kdf.salt", "33 bytes");
        expect_reject("pin_kdf.salt", "\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIj\"", "pin_kdf.salt", "at most");
        expect_reject("pin_kdf.salt", "\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh9=\"", "pin_kdf.salt", "non-canonical");
        expect_reject("pin_kdf.salt", "\"AAECAwQFBgcICQoLDA0O DxAREhMUFRYXGBkaGxwdHh8=\"", "pin_kdf.salt", NULL);
        expect_reject("pin_kdf.salt", "\"\\nAAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8\"", "pin_kdf.salt", "invalid base64 character");
        expect_reject("pin_kdf.salt", "7", "pin_kdf.salt", "string");
        expect_reject("pin_kdf.salt", NULL, "pin_kdf.salt", "missing");

        expect_reject("parent_name", "\"000b02abc1272bc7594612e41ae14294ba006715efd869752821704fffd426431f\"", "parent_name", "expected 68");
        expect_reject("parent_name", "\"000402abc1272bc7594612e41ae14294ba006715efd869752821704fffd426431f66\"", "parent_name", "000b");
        expect_reject("parent_name", "\"000b02abc1272bc7594612e41ae14294ba006715efd869752821704fffd426431f6\"", "parent_name", NULL);
        expect_reject("parent_name", "\"000b02abc1272bc7594612e41ae14294ba006715efd869752821704fffd426431fgg\"", "parent_name", "hex");
        expect_reject("parent_name", NULL, "parent_name", "missing");

        expect_reject("ek_signing_key_name", "\"\"", "ek_signing_key_name", "expected 68");
        expect_reject("ek_signing_key_name", "\"0001" "0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20\"",
                      "ek_signing_key_name", "000b");
        expect_reject("ek_signing_key_name", "false", "ek_signing_key_name", "string");
}

/* Base64 strictness and size bounds on the blob. */
static void test_reject_blob_encoding(void **state) {
        char big[4 * 1024 + 64];

        expect_reject("blob", "\"\"", "blob", "TPM2B_PRIVATE");
        expect_reject("blob", "\"" BLOB_B64 " \"", "blob", NULL);
        expect_reject("blob", "\" " BLOB_B64 "\"", "blob", "invalid base64 character at offset 0");
        expect_reject("blob", "\"AJ4A\\nICp4\"", "blob", NULL);
        expect_reject("blob", "\"AJ4AI\"", "blob", "multiple of 4");
        expect_reject("blob", "\"AJ4AICp=\"", "blob", "non-canonical");   /* p = 41: low 2 bits set */
        expect_reject("blob", "\"AJ4AIB==\"", "blob", "non-canonical");   /* B = 1: low 4 bits set */
        expect_reject("blob", "\"AJ4AI===\"", "blob", "invalid base64");
        expect_reject("blob", "\"AJ=AICp4\"", "blob", "invalid base64 character at offset 2");
        expect_reject("blob", "\"AJ4A-_p4\"", "blob", "invalid base64 character"); /* base64url is not base64 */
        expect_reject("blob", "{}", "blob", "string");
        expect_reject("blob", NULL, "blob", "missing");

        /* Bounded before decoding: a string longer than any valid blob is refused by length. */
        big[0] = '"';
        memset(big + 1, 'A', sizeof big - 3);
        big[sizeof big - 2] = '"';
        big[sizeof big - 1] = '\0';
        expect_reject("blob", big, "blob", "at most");
}

enum blob_edit {
        EDIT_TRAILING_BYTE,
        EDIT_TRUNCATE,
        EDIT_PRIVATE_ONLY,
        EDIT_EMPTY_PRIVATE,
        EDIT_PUBLIC_SIZE,
        EDIT_TYPE,
        EDIT_NAME_ALG,
        EDIT_SCHEME,
        EDIT_ADD_USERWITHAUTH,
        EDIT_ADD_SENSITIVEDATAORIGIN,
        EDIT_ADD_NODA,
        EDIT_DROP_FIXEDTPM,
        EDIT_ADD_ADMINWITHPOLICY,
        EDIT_ADD_DECRYPT,
        EDIT_UNIQUE_SIZE,
        EDIT_AUTH_POLICY,
};

/* Re-marshals the reference blob with one edit and returns it as a quoted JSON string. */
static char *blob_edited(enum blob_edit edit) {
        tg_token t;
        uint8_t buf[sizeof(TPM2B_PRIVATE) + sizeof(TPM2B_PUBLIC) + 4];
        char b64[sizeof buf * 2];
        size_t off = 0;
        char *s;

        assert_int_equal(tg_token_from_string(base_token, &t), 0);
        TPMT_PUBLIC *p = &t.public_blob.publicArea;
        switch (edit) {
        case EDIT_EMPTY_PRIVATE:           t.private_blob.size = 0; break;
        case EDIT_TYPE:                    p->type = TPM2_ALG_SYMCIPHER; p->parameters.symDetail.sym.algorithm = TPM2_ALG_NULL; break;
        case EDIT_NAME_ALG:                p->nameAlg = TPM2_ALG_SHA384; break;
        case EDIT_SCHEME:                  p->parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_HMAC;
                                           p->parameters.keyedHashDetail.scheme.details.hmac.hashAlg = TPM2_ALG_SHA256; break;
        case EDIT_ADD_USERWITHAUTH:        p->objectAttributes |= TPMA_OBJECT_USERWITHAUTH; break;
        case EDIT_ADD_SENSITIVEDATAORIGIN: p->objectAttributes |= TPMA_OBJECT_SENSITIVEDATAORIGIN; break;
        case EDIT_ADD_NODA:                p->objectAttributes |= TPMA_OBJECT_NODA; break;
        case EDIT_DROP_FIXEDTPM:           p->objectAttributes &= ~TPMA_OBJECT_FIXEDTPM; break;
        case EDIT_ADD_ADMINWITHPOLICY:     p->objectAttributes |= TPMA_OBJECT_ADMINWITHPOLICY; break;
        case EDIT_ADD_DECRYPT:             p->objectAttributes |= TPMA_OBJECT_DECRYPT; break;
        case EDIT_UNIQUE_SIZE:             p->unique.keyedHash.size = 20; break;
        case EDIT_AUTH_POLICY:             p->authPolicy.buffer[31] ^= 0x80; break;
        default: break;
        }
        assert_int_equal(Tss2_MU_TPM2B_PRIVATE_Marshal(&t.private_blob, buf, sizeof buf, &off), TSS2_RC_SUCCESS);
        if (edit != EDIT_PRIVATE_ONLY)
                assert_int_equal(Tss2_MU_TPM2B_PUBLIC_Marshal(&t.public_blob, buf, sizeof buf, &off), TSS2_RC_SUCCESS);
        switch (edit) {
        case EDIT_TRAILING_BYTE:
                buf[off++] = 0;
                break;
        case EDIT_TRUNCATE:
                off -= 3;
                break;
        case EDIT_PUBLIC_SIZE: {
                /* Claim two more public bytes than the area has, and supply them. */
                size_t pub = 2u + t.private_blob.size;
                uint16_t size = (uint16_t) (buf[pub] << 8 | buf[pub + 1]) + 2;
                buf[pub] = (uint8_t) (size >> 8);
                buf[pub + 1] = (uint8_t) size;
                buf[off++] = 0;
                buf[off++] = 0;
                break;
        }
        default:
                break;
        }
        EVP_EncodeBlock((unsigned char *) b64, buf, (int) off);
        assert_true(asprintf(&s, "\"%s\"", b64) > 0);
        return s;
}

static void expect_blob_reject(enum blob_edit edit, const char *needle) {
        _cleanup_free_ char *blob = blob_edited(edit);
        _cleanup_free_ char *json = token_with("blob", blob);
        char what[64];
        snprintf(what, sizeof what, "blob edit %d", (int) edit);
        expect_reject_string(json, "blob", needle, what);
}

static void test_reject_blob_content(void **state) {
        expect_blob_reject(EDIT_TRAILING_BYTE, "1 trailing bytes");
        expect_blob_reject(EDIT_TRUNCATE, "TPM2B_PUBLIC");
        expect_blob_reject(EDIT_PRIVATE_ONLY, "TPM2B_PUBLIC");
        expect_blob_reject(EDIT_EMPTY_PRIVATE, "empty TPM2B_PRIVATE");
        expect_blob_reject(EDIT_PUBLIC_SIZE, "TPM2B_PUBLIC");
        expect_blob_reject(EDIT_TYPE, "KEYEDHASH");
        expect_blob_reject(EDIT_NAME_ALG, "nameAlg");
        expect_blob_reject(EDIT_SCHEME, "scheme");
        expect_blob_reject(EDIT_ADD_USERWITHAUTH, "userWithAuth");
        expect_blob_reject(EDIT_ADD_SENSITIVEDATAORIGIN, "sensitiveDataOrigin");
        expect_blob_reject(EDIT_ADD_NODA, "noDA");
        expect_blob_reject(EDIT_DROP_FIXEDTPM, "fixedTPM");
        expect_blob_reject(EDIT_ADD_DECRYPT, "never sets");
        expect_blob_reject(EDIT_UNIQUE_SIZE, "unique");
        expect_blob_reject(EDIT_AUTH_POLICY, "blob policy does not match policy_hash");

        /* The unedited re-marshalling is accepted: the edits, not the helper, cause the rejections. */
        _cleanup_free_ char *blob = blob_edited(-1);
        _cleanup_free_ char *json = token_with("blob", blob);
        tg_token t;
        assert_int_equal(tg_token_from_string(json, &t), 0);
        /* adminWithPolicy: set by tpmguard since December 2026; the tokens sealed before lack it. */
        _cleanup_free_ char *admin_blob = blob_edited(EDIT_ADD_ADMINWITHPOLICY);
        _cleanup_free_ char *admin_json = token_with("blob", admin_blob);
        assert_int_equal(tg_token_from_string(admin_json, &t), 0);
        assert_true(t.public_blob.publicArea.objectAttributes & TPMA_OBJECT_ADMINWITHPOLICY);
}

/* pin false: pin_kdf must be absent, and then noDA is acceptable. */
static void test_pin_false(void **state) {
        _cleanup_free_ char *with_kdf = token_with("pin", "false");
        _cleanup_(json_object_putp) json_object *o = json_tokener_parse(base_token);
        _cleanup_free_ char *noda = blob_edited(EDIT_ADD_NODA);
        tg_token t;

        expect_reject_string(with_kdf, "pin_kdf", "\"pin\" is false", "pin false with pin_kdf");
        json_set_path(o, "pin", "false");
        json_set_path(o, "pin_kdf", NULL);
        assert_int_equal(tg_token_from_json(o, &t), 0);
        assert_false(t.pin);
        json_set_path(o, "blob", noda);
        assert_int_equal(tg_token_from_json(o, &t), 0);
        assert_true(t.public_blob.publicArea.objectAttributes & TPMA_OBJECT_NODA);
}

static void test_reject_document(void **state) {
        static const char *bad[] = {
                "",
                "[]",
                "\"tpmguard\"",
                "{\"type\":\"tpmguard\"",
                "{'type':'tpmguard'}",
        };
        tg_token t;
        _cleanup_free_ char *huge = NULL;
        size_t base_len = strlen(base_token), n;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(tg_token_from_string(bad[i], &t), -TG_ERR_TOKEN);

        /* Trailing data after the object. */
        _cleanup_free_ char *trailing = NULL;
        assert_true(asprintf(&trailing, "%s{}", base_token) > 0);
        assert_int_equal(tg_token_from_string(trailing, &t), -TG_ERR_TOKEN);
        assert_non_null(strstr(last_message, "token JSON")); /* json-c's strict mode or our end-of-parse check */
        _cleanup_free_ char *trailing_ws = NULL;
        assert_true(asprintf(&trailing_ws, "%s\n", base_token) > 0);
        assert_int_equal(tg_token_from_string(trailing_ws, &t), 0);

        /* Exactly 64 KiB is accepted, one byte more is not (padding in an unknown key). */
        n = TG_TOKEN_JSON_MAX;
        huge = malloc(n + 2);
        assert_non_null(huge);
        memcpy(huge, base_token, base_len - 1);
        memcpy(huge + base_len - 1, ",\"pad\":\"", 8);
        memset(huge + base_len + 7, 'x', n - (base_len + 7) - 2);
        memcpy(huge + n - 2, "\"}", 3);
        assert_int_equal(strlen(huge), n);
        assert_int_equal(tg_token_from_string(huge, &t), 0);
        memmove(huge + base_len + 8, huge + base_len + 7, n - (base_len + 7) + 1);
        assert_int_equal(strlen(huge), n + 1);
        assert_int_equal(tg_token_from_string(huge, &t), -TG_ERR_TOKEN);
        assert_non_null(strstr(last_message, "65536"));

        /* tg_token_from_json on a non-object. */
        _cleanup_(json_object_putp) json_object *arr = json_object_new_array();
        assert_int_equal(tg_token_from_json(arr, &t), -TG_ERR_TOKEN);
}

static void expect_reject_v2(const char *path, const char *value, const char *field, const char *needle) {
        _cleanup_(json_object_putp) json_object *o = json_tokener_parse(base_token_v2);
        char what[256];

        assert_non_null(o);
        json_set_path(o, path, value);
        snprintf(what, sizeof what, "format 2: %s = %.100s", path, value ? value : "(deleted)");
        expect_reject_string(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE),
                             field, needle, what);
}

static void test_format2(void **state) {
        _cleanup_free_ char *out = NULL;
        tg_token t, t2;

        assert_int_equal(tg_token_from_string(base_token_v2, &t), 0);
        assert_int_equal(t.version, 2);
        assert_true(t.pin);
        assert_int_equal(t.argon2.time_cost, 3);
        assert_int_equal(t.argon2.memory_kib, 65536);
        assert_int_equal(t.argon2.parallel, 1);
        for (int i = 0; i < 32; i++)
                assert_int_equal(t.pin_salt[i], i);
        assert_false(tg_token_exposed_to_leaking_tpm(&t));
        assert_int_equal(tg_token_to_string(&t, &out), 0);
        assert_string_equal(out, base_token_v2);
        assert_int_equal(tg_token_from_string(out, &t2), 0);
        assert_tokens_equal(&t, &t2);
        assert_memory_equal(&t.argon2, &t2.argon2, sizeof t.argon2);

        /* Format 1 with a PIN is the exposed one; without a PIN format 2 does not exist. */
        assert_int_equal(tg_token_from_string(base_token, &t2), 0);
        assert_true(tg_token_exposed_to_leaking_tpm(&t2));

        /* The bounds, each before any TPM command (parsing is all the plugin does before it). */
        expect_reject_v2("pin_kdf.time", "0", "pin_kdf.time", "out of range [1, 64]");
        expect_reject_v2("pin_kdf.time", "65", "pin_kdf.time", "out of range");
        expect_reject_v2("pin_kdf.time", "4294967297", "pin_kdf.time", "out of range"); /* 2^32 + 1 must not wrap */
        expect_reject_v2("pin_kdf.time", "\"3\"", "pin_kdf.time", "integer");
        expect_reject_v2("pin_kdf.time", NULL, "pin_kdf.time", "missing");
        expect_reject_v2("pin_kdf.memory", "32767", "pin_kdf.memory", "out of range [32768, 1048576]");
        expect_reject_v2("pin_kdf.memory", "1048577", "pin_kdf.memory", "out of range");
        expect_reject_v2("pin_kdf.memory", "-65536", "pin_kdf.memory", "out of range");
        expect_reject_v2("pin_kdf.memory", NULL, "pin_kdf.memory", "missing");
        expect_reject_v2("pin_kdf.parallel", "0", "pin_kdf.parallel", "out of range [1, 4]");
        expect_reject_v2("pin_kdf.parallel", "5", "pin_kdf.parallel", "out of range");
        expect_reject_v2("pin_kdf.parallel", NULL, "pin_kdf.parallel", "missing");
        expect_reject_v2("pin_kdf.salt", "\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg==\"", "pin_kdf.salt", "31 bytes");
        expect_reject_v2("pin_kdf.salt", "\"AAECAwQ=\"", "pin_kdf.salt", "5 bytes");
        expect_reject_v2("pin_kdf.salt", NULL, "pin_kdf.salt", "missing");
        expect_reject_v2("pin_kdf.type", "\"pbkdf2-sha256\"", "pin_kdf.type", "format 2 supports only \"argon2id\"");
        expect_reject_v2("pin_kdf.type", "\"argon2i\"", "pin_kdf.type", "unknown KDF");
        expect_reject_v2("pin", "false", "pin", "exists only for PIN tokens");
        /* The writer refuses what the reader would. */
        t2 = t;
        t2.argon2.memory_kib = 1024;
        free(TAKE_PTR(out));
        assert_int_equal(tg_token_to_string(&t2, &out), -TG_ERR_TOKEN);
        assert_null(out);
}

/*
 * An alternate's blob: the base blob with its public area's authPolicy set to policy (the
 * parser checks the public area; the private part is the TPM's to check at Load).
 */
static char *alt_blob(const TPM2B_DIGEST *policy) {
        uint8_t raw[2048], out[2048];
        TPM2B_PRIVATE priv = {};
        TPM2B_PUBLIC pub = {};
        size_t off = 0, n;
        char *b64;
        int len;

        len = EVP_DecodeBlock(raw, (const unsigned char *) BLOB_B64, (int) strlen(BLOB_B64));
        assert_true(len > 0);
        n = (size_t) len - (BLOB_B64[strlen(BLOB_B64) - 1] == '=') - (BLOB_B64[strlen(BLOB_B64) - 2] == '=');
        assert_int_equal(Tss2_MU_TPM2B_PRIVATE_Unmarshal(raw, n, &off, &priv), TSS2_RC_SUCCESS);
        assert_int_equal(Tss2_MU_TPM2B_PUBLIC_Unmarshal(raw, n, &off, &pub), TSS2_RC_SUCCESS);
        pub.publicArea.authPolicy = *policy;
        pub.size = 0; /* recomputed by the marshaller */
        off = 0;
        assert_int_equal(Tss2_MU_TPM2B_PRIVATE_Marshal(&priv, out, sizeof out, &off), TSS2_RC_SUCCESS);
        assert_int_equal(Tss2_MU_TPM2B_PUBLIC_Marshal(&pub, out, sizeof out, &off), TSS2_RC_SUCCESS);
        b64 = malloc(off / 3 * 4 + 8);
        assert_non_null(b64);
        EVP_EncodeBlock((unsigned char *) b64, out, (int) off);
        return b64;
}

#define PCR_DIGEST_HEX "0101010101010101010101010101010101010101010101010101010101010101"

/* text with every @X@ replaced by values[X - 'A']. */
static char *substitute(const char *text, const char *const values[3]) {
        size_t size = strlen(text) + 1;
        char *out, *p;

        for (const char *q = text; *q; q++)
                if (q[0] == '@' && q[1] >= 'A' && q[1] <= 'C' && q[2] == '@')
                        size += strlen(values[q[1] - 'A']);
        out = p = malloc(size);
        assert_non_null(out);
        for (const char *q = text; *q;)
                if (q[0] == '@' && q[1] >= 'A' && q[1] <= 'C' && q[2] == '@') {
                        p = stpcpy(p, values[q[1] - 'A']);
                        q += 3;
                } else
                        *p++ = *q++;
        *p = '\0';
        return out;
}

/* base_token_v2 with "alternates" set to the JSON text alternates (@A@: a grace blob for 42, @B@: a predicted
 * blob for PCR_DIGEST_HEX, @C@: the main blob). */
static char *token_with_alternates(const char *alternates) {
        _cleanup_(json_object_putp) json_object *o = json_tokener_parse(base_token_v2);
        _cleanup_free_ char *grace = NULL, *predicted = NULL, *text = NULL;
        TPM2B_DIGEST policy, pcr_digest = { .size = 32 };
        char *s;

        assert_int_equal(tg_policy_digest_grace(42, TPM2_ALG_SHA256, 0, NULL, &policy), 0);
        grace = alt_blob(&policy);
        memset(pcr_digest.buffer, 0x01, 32);
        assert_int_equal(tg_policy_digest_compute(TPM2_ALG_SHA256, 1u << 7, &pcr_digest, true, &policy), 0);
        predicted = alt_blob(&policy);
        text = substitute(alternates, (const char *const[3]) { grace, predicted, BLOB_B64 });
        json_set_path(o, "alternates", text);
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        assert_non_null(s);
        return s;
}

static void expect_reject_alternates(const char *alternates, const char *field, const char *needle) {
        _cleanup_free_ char *json = token_with_alternates(alternates);
        expect_reject_string(json, field, needle, alternates);
}

#define GRACE(n) "{\"kind\":\"grace\",\"reset_count_max\":" #n ",\"blob\":\"@A@\"}"
#define PREDICTED "{\"kind\":\"predicted\",\"pcr_digest\":\"" PCR_DIGEST_HEX "\",\"blob\":\"@B@\"}"

static void test_alternates(void **state) {
        _cleanup_free_ char *json = token_with_alternates("[" GRACE(42) "," PREDICTED "]"), *out = NULL;
        const tg_token_alt *a;
        tg_token t, t2, view;

        assert_int_equal(tg_token_from_string(json, &t), 0);
        assert_int_equal(t.n_alt, 2);
        a = tg_token_alt_find(&t, TG_ALT_GRACE);
        assert_non_null(a);
        assert_int_equal(a->reset_count_max, 42);
        a = tg_token_alt_find(&t, TG_ALT_PREDICTED);
        assert_non_null(a);
        assert_int_equal(a->pcr_digest.buffer[0], 0x01);
        /* Written back byte for byte, and read again. */
        assert_int_equal(tg_token_to_string(&t, &out), 0);
        assert_string_equal(out, json);
        assert_int_equal(tg_token_from_string(out, &t2), 0);
        assert_int_equal(t2.n_alt, 2);
        /* A grace view: the PCRs it keeps (none here), the bound, the main token's PIN KDF. */
        tg_token_alt_view(&t, tg_token_alt_find(&t, TG_ALT_GRACE), &view);
        assert_true(view.grace);
        assert_int_equal(view.pcr_mask, 0);
        assert_int_equal(view.reset_count_max, 42);
        assert_int_equal(view.n_alt, 0);
        assert_memory_equal(view.pin_salt, t.pin_salt, sizeof t.pin_salt);

        /* An edited bound or digest no longer describes the blob's policy: a longer grace is refused. */
        expect_reject_alternates("[" GRACE(43) "]", "alternates[0].blob", "the policy its fields describe");
        expect_reject_alternates("[" GRACE(4294967295) "]", "alternates[0].blob", "the policy its fields describe");
        expect_reject_alternates("[{\"kind\":\"predicted\",\"pcr_digest\":\"" POLICY_HEX "\",\"blob\":\"@B@\"}]",
                                 "alternates[0].blob", "the policy its fields describe");
        /* A blob under another policy: the main one (PCR 7 + PIN, other values), or a grace as predicted. */
        expect_reject_alternates("[{\"kind\":\"grace\",\"reset_count_max\":42,\"blob\":\"@C@\"}]",
                                 "alternates[0].blob", "the policy its fields describe");
        expect_reject_alternates("[{\"kind\":\"predicted\",\"pcr_digest\":\"" PCR_DIGEST_HEX "\",\"blob\":\"@A@\"}]",
                                 "alternates[0].blob", "the policy its fields describe");
        /* Bounded: at most two, one of each kind, each field checked and named. */
        expect_reject_alternates("[" GRACE(42) "," PREDICTED "," GRACE(42) "]", "alternates", "1..2 allowed");
        expect_reject_alternates("[]", "alternates", "1..2 allowed");
        expect_reject_alternates("[" GRACE(42) "," GRACE(42) "]", "alternates[1].kind", "a second \"grace\"");
        expect_reject_alternates("{}", "alternates", "array");
        expect_reject_alternates("[7]", "alternates[0]", "not an object");
        expect_reject_alternates("[{\"kind\":\"forever\",\"blob\":\"@A@\"}]", "alternates[0].kind", "unknown kind");
        expect_reject_alternates("[{\"blob\":\"@A@\"}]", "alternates[0].kind", "missing");
        expect_reject_alternates("[" GRACE(-1) "]", "alternates[0].reset_count_max", "not a TPM resetCount");
        expect_reject_alternates("[" GRACE(4294967296) "]", "alternates[0].reset_count_max", "not a TPM resetCount");
        expect_reject_alternates("[" GRACE("42") "]", "alternates[0].reset_count_max", "integer");
        expect_reject_alternates("[{\"kind\":\"grace\",\"blob\":\"@A@\"}]", "alternates[0].reset_count_max", "missing");
        expect_reject_alternates("[{\"kind\":\"grace\",\"reset_count_max\":42,\"pcr_digest\":\"" PCR_DIGEST_HEX
                                 "\",\"blob\":\"@A@\"}]", "alternates[0]", "no \"pcr_digest\"");
        /* The PCRs a grace keeps: a strict subset of the token's, with their digest. */
        expect_reject_alternates("[{\"kind\":\"grace\",\"reset_count_max\":42,\"pcrs\":[7],\"pcr_digest\":\""
                                 PCR_DIGEST_HEX "\",\"blob\":\"@A@\"}]", "alternates[0].pcrs", "strict subset");
        expect_reject_alternates("[{\"kind\":\"grace\",\"reset_count_max\":42,\"pcrs\":[4],\"pcr_digest\":\""
                                 PCR_DIGEST_HEX "\",\"blob\":\"@A@\"}]", "alternates[0].pcrs", "strict subset");
        expect_reject_alternates("[{\"kind\":\"grace\",\"reset_count_max\":42,\"pcrs\":[],\"blob\":\"@A@\"}]",
                                 "alternates[0].pcrs", "empty");
        expect_reject_alternates("[{\"kind\":\"predicted\",\"blob\":\"@B@\"}]", "alternates[0].pcr_digest", "missing");
        expect_reject_alternates("[{\"kind\":\"grace\",\"reset_count_max\":42}]", "alternates[0].blob", "missing");
        expect_reject_alternates("[{\"kind\":\"grace\",\"reset_count_max\":42,\"blob\":\"AAAA\"}]",
                                 "alternates[0].blob", "empty TPM2B_PRIVATE");

        /* Only a format 2 PIN token: a seal without PCRs must need the PIN, masked by its Argon2id. */
        {
                _cleanup_(json_object_putp) json_object *o = json_tokener_parse(base_token);
                _cleanup_free_ char *grace = NULL;
                TPM2B_DIGEST policy;
                char alt[1024];

                assert_int_equal(tg_policy_digest_grace(42, TPM2_ALG_SHA256, 0, NULL, &policy), 0);
                grace = alt_blob(&policy);
                snprintf(alt, sizeof alt, "[{\"kind\":\"grace\",\"reset_count_max\":42,\"blob\":\"%s\"}]", grace);
                json_set_path(o, "alternates", alt);
                expect_reject_string(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN), "alternates",
                                     "format 1", "format 1 with alternates");
        }

        /* The writer refuses what the reader would: a grace whose bound was changed after sealing. */
        t2 = t;
        t2.alt[0].reset_count_max = 1000;
        free(TAKE_PTR(out));
        assert_int_equal(tg_token_to_string(&t2, &out), -TG_ERR_TOKEN);
        assert_null(out);
        explicit_bzero(&t2, sizeof t2);
        /* tg_token_alt_put replaces an alternate of its kind, and refuses a format 1 token. */
        t2 = t;
        assert_int_equal(tg_token_alt_put(&t2, &t.alt[0]), 0);
        assert_int_equal(t2.n_alt, 2);
        t2.version = 1;
        assert_int_equal(tg_token_alt_put(&t2, &t.alt[0]), -TG_ERR_INVALID);
}

static char dump_text[2048];

static void dump_collect(const char *line, void *userdata) {
        int *count = userdata;
        (*count)++;
        strncat(dump_text, line, sizeof dump_text - strlen(dump_text) - 2);
        strcat(dump_text, "\n");
}

static void test_dump(void **state) {
        tg_token t;
        int lines = 0;

        assert_int_equal(tg_token_from_string(base_token, &t), 0);
        dump_text[0] = '\0';
        tg_token_dump(&t, dump_collect, &lines);
        assert_int_equal(lines, 5);
        assert_non_null(strstr(dump_text, "format: 1\n"));
        assert_non_null(strstr(dump_text, "sha256:7\n"));
        assert_non_null(strstr(dump_text, "yes (pbkdf2-sha256, 100000 iterations; format 1: a leaking TPM"));
        assert_non_null(strstr(dump_text, PARENT_HEX "\n"));
        assert_non_null(strstr(dump_text, EKSK_HEX " (informational"));
        assert_null(strstr(dump_text, BLOB_B64));

        t.pin = false;
        t.ek_signing_key_name.size = 0;
        t.pcr_mask = 0x00800081;
        dump_text[0] = '\0';
        tg_token_dump(&t, dump_collect, &lines);
        assert_non_null(strstr(dump_text, "sha256:0,7,23\n"));
        assert_non_null(strstr(dump_text, "PIN:             no\n"));
        assert_non_null(strstr(dump_text, "(not recorded)"));
}

int main(void) {
        tg_log_set_journal(false); /* test alerts never reach the host's journal */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_base),
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_writer_refuses_invalid),
                cmocka_unit_test(test_unknown_keys_ignored),
                cmocka_unit_test(test_optional_fields),
                cmocka_unit_test(test_reject_fields),
                cmocka_unit_test(test_reject_blob_encoding),
                cmocka_unit_test(test_reject_blob_content),
                cmocka_unit_test(test_pin_false),
                cmocka_unit_test(test_reject_document),
                cmocka_unit_test(test_dump),
                cmocka_unit_test(test_format2),
                cmocka_unit_test(test_alternates),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
