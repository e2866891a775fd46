/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * TPM2_MakeCredential in software (TPM 2.0 Part 1 §24, Part 3 ActivateCredential),
 * with the KDFs it needs (KDFa, KDFe), over OpenSSL. The credential is
 * wrapped to the EK public key taken from the verified certificate, never
 * to a key the TPM returned.
 */
#include <assert.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/kdf.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509v3.h>
#include <tss2/tss2_rc.h>

#include "error.h"
#include "log.h"
#include "makecred.h"
#include "tpm.h"
#include "tpmguard-config.h"
#include "util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_KDF *, EVP_KDF_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_KDF_CTX *, EVP_KDF_CTX_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_CIPHER_CTX *, EVP_CIPHER_CTX_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(BIGNUM *, BN_free);

/* ---- Hash algorithms ---- */

const char *tg_ek_hash_name(TPMI_ALG_HASH hash) {
        switch (hash) {
        case TPM2_ALG_SHA256: return "SHA256";
        case TPM2_ALG_SHA384: return "SHA384";
        case TPM2_ALG_SHA512: return "SHA512";
        default:              return NULL;
        }
}

size_t tg_ek_hash_size(TPMI_ALG_HASH hash) {
        switch (hash) {
        case TPM2_ALG_SHA256: return 32;
        case TPM2_ALG_SHA384: return 48;
        case TPM2_ALG_SHA512: return 64;
        default:              return 0;
        }
}

/* ---- Templates ---- */

/* ---- KDFs ---- */

static int kdf_run(const char *kdf_name, const OSSL_PARAM params[], uint8_t *out, size_t out_size) {
        _cleanup_(EVP_KDF_freep) EVP_KDF *kdf = EVP_KDF_fetch(NULL, kdf_name, NULL);
        _cleanup_(EVP_KDF_CTX_freep) EVP_KDF_CTX *ctx = NULL;

        if (!kdf)
                return log_error_rc(-TG_ERR_IO, "OpenSSL has no %s KDF.", kdf_name);
        ctx = EVP_KDF_CTX_new(kdf);
        if (!ctx)
                return -TG_ERR_NOMEM;
        if (EVP_KDF_derive(ctx, out, out_size, params) != 1) {
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "OpenSSL %s derivation failed.", kdf_name);
        }
        return 0;
}

/* label ‖ 00 ‖ u ‖ v, in a wiped buffer (it may hold secret-derived context). */
static int concat_label(const char *label, const uint8_t *u, size_t u_size, const uint8_t *v, size_t v_size,
                        bool with_label, tg_secret **ret) {
        size_t label_size = with_label ? strlen(label) + 1 : 0;
        tg_secret *s;
        int r;

        r = tg_secret_new(label_size + u_size + v_size, &s);
        if (r < 0)
                return r;
        if (label_size > 0)
                memcpy(s->data, label, label_size);
        if (u_size > 0)
                memcpy(s->data + label_size, u, u_size);
        if (v_size > 0)
                memcpy(s->data + label_size + u_size, v, v_size);
        *ret = s;
        return 0;
}

int tg_kdfa(TPMI_ALG_HASH hash, const uint8_t *key, size_t key_size, const char *label,
            const uint8_t *context_u, size_t u_size, const uint8_t *context_v, size_t v_size,
            size_t bits, uint8_t *out) {
        _cleanup_secret_ tg_secret *context = NULL;
        const char *md = tg_ek_hash_name(hash);
        int r;

        if (!md || bits == 0 || bits % 8 != 0 || key_size == 0 || !label)
                return log_error_rc(-TG_ERR_INVALID, "KDFa: invalid parameters.");
        r = concat_label(label, context_u, u_size, context_v, v_size, false, &context);
        if (r < 0)
                return r;
        /*
         * SP 800-108 counter mode with a 32-bit counter first, the label,
         * OpenSSL's 00 separator (= the label's NUL terminator in TPM terms),
         * the context and the 32-bit output length in bits: exactly KDFa.
         */
        OSSL_PARAM params[] = {
                OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_MODE, (char *) "COUNTER", 0),
                OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_MAC, (char *) "HMAC", 0),
                OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *) md, 0),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *) key, key_size),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *) label, strlen(label)),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, context->data, context->size),
                OSSL_PARAM_construct_end(),
        };
        return kdf_run("KBKDF", params, out, bits / 8);
}

int tg_kdfe(TPMI_ALG_HASH hash, const uint8_t *z, size_t z_size, const char *label,
            const uint8_t *party_u, size_t u_size, const uint8_t *party_v, size_t v_size,
            size_t bits, uint8_t *out) {
        _cleanup_secret_ tg_secret *info = NULL;
        const char *md = tg_ek_hash_name(hash);
        int r;

        if (!md || bits == 0 || bits % 8 != 0 || z_size == 0 || !label)
                return log_error_rc(-TG_ERR_INVALID, "KDFe: invalid parameters.");
        r = concat_label(label, party_u, u_size, party_v, v_size, true, &info);
        if (r < 0)
                return r;
        /* SP 800-56C one-step hash KDF: H([i]32 ‖ Z ‖ FixedInfo), FixedInfo = label ‖ 00 ‖ U ‖ V. */
        OSSL_PARAM params[] = {
                OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *) md, 0),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *) z, z_size),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info->data, info->size),
                OSSL_PARAM_construct_end(),
        };
        return kdf_run("SSKDF", params, out, bits / 8);
}

/* ---- MakeCredential in software ---- */

/* RSA (Part 1 B.10.4): seed = random, secret = OAEP(nameAlg, label "IDENTITY\0"). */
static int seed_rsa(const TPMT_PUBLIC *ek, EVP_PKEY *ek_key, size_t seed_size, tg_secret **ret_seed,
                    TPM2B_ENCRYPTED_SECRET *ret_secret) {
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, ek_key, NULL);
        _cleanup_secret_ tg_secret *seed = NULL;
        TPM2B_ENCRYPTED_SECRET secret = {};
        const char *md = tg_ek_hash_name(ek->nameAlg);
        unsigned char *label = NULL;
        size_t out = sizeof secret.secret;
        int r;

        if (!ctx)
                return -TG_ERR_NOMEM;
        r = tg_secret_new_random(seed_size, &seed);
        if (r < 0)
                return r;
        label = OPENSSL_memdup("IDENTITY", sizeof "IDENTITY");
        if (!label)
                return -TG_ERR_NOMEM;
        if (EVP_PKEY_encrypt_init(ctx) != 1 ||
            EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) != 1 ||
            EVP_PKEY_CTX_set_rsa_oaep_md_name(ctx, md, NULL) != 1 ||
            EVP_PKEY_CTX_set_rsa_mgf1_md_name(ctx, md, NULL) != 1) {
                OPENSSL_free(label);
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "OpenSSL cannot set up RSA-OAEP for the EK.");
        }
        if (EVP_PKEY_CTX_set0_rsa_oaep_label(ctx, label, sizeof "IDENTITY") != 1) {
                OPENSSL_free(label);
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "OpenSSL cannot set the RSA-OAEP label.");
        }
        if (EVP_PKEY_encrypt(ctx, secret.secret, &out, seed->data, seed->size) != 1) {
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "RSA-OAEP encryption of the credential seed failed.");
        }
        secret.size = (uint16_t) out;
        *ret_seed = TAKE_PTR(seed);
        *ret_secret = secret;
        return 0;
}

static int bn_to_padded(const BIGNUM *bn, uint8_t *out, size_t size) {
        return BN_bn2binpad(bn, out, (int) size) == (int) size ? 0 : -TG_ERR_INVALID;
}

/*
 * ECC (Part 1 C.6.4): an ephemeral key pair on the EK's curve, Z = x of
 * d_e·Q_EK, seed = KDFe(nameAlg, Z, "IDENTITY", x_e, x_EK); the secret is the
 * ephemeral public point.
 */
static int seed_ecc(const TPMT_PUBLIC *ek, EVP_PKEY *ek_key, size_t seed_size, tg_secret **ret_seed,
                    TPM2B_ENCRYPTED_SECRET *ret_secret) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *ephemeral = NULL;
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = NULL;
        _cleanup_(BN_freep) BIGNUM *x = NULL, *y = NULL;
        _cleanup_secret_ tg_secret *z = NULL, *seed = NULL;
        TPMS_ECC_POINT point = {};
        TPM2B_ENCRYPTED_SECRET secret = {};
        size_t coord = ek->unique.ecc.x.size, z_size = 0, off = 0;
        const char *group = ek->parameters.eccDetail.curveID == TPM2_ECC_NIST_P384 ? "P-384" : "P-256";
        TSS2_RC rc;
        int r;

        ephemeral = EVP_PKEY_Q_keygen(NULL, NULL, "EC", group);
        if (!ephemeral ||
            EVP_PKEY_get_bn_param(ephemeral, OSSL_PKEY_PARAM_EC_PUB_X, &x) != 1 ||
            EVP_PKEY_get_bn_param(ephemeral, OSSL_PKEY_PARAM_EC_PUB_Y, &y) != 1) {
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "OpenSSL cannot create an ephemeral %s key.", group);
        }
        point.x.size = point.y.size = (uint16_t) coord;
        if (bn_to_padded(x, point.x.buffer, coord) < 0 || bn_to_padded(y, point.y.buffer, coord) < 0)
                return log_error_rc(-TG_ERR_INVALID, "The ephemeral point does not fit the EK's curve.");

        r = tg_secret_new(coord, &z);
        if (r < 0)
                return r;
        ctx = EVP_PKEY_CTX_new_from_pkey(NULL, ephemeral, NULL);
        z_size = z->size;
        if (!ctx || EVP_PKEY_derive_init(ctx) != 1 || EVP_PKEY_derive_set_peer(ctx, ek_key) != 1 ||
            EVP_PKEY_derive(ctx, z->data, &z_size) != 1 || z_size != coord) {
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "ECDH with the EK public key failed.");
        }

        r = tg_secret_new(seed_size, &seed);
        if (r < 0)
                return r;
        r = tg_kdfe(ek->nameAlg, z->data, z->size, "IDENTITY", point.x.buffer, coord,
                    ek->unique.ecc.x.buffer, coord, seed_size * 8, seed->data);
        if (r < 0)
                return r;

        rc = Tss2_MU_TPMS_ECC_POINT_Marshal(&point, secret.secret, sizeof secret.secret, &off);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_INVALID, "Cannot marshal the ephemeral point: %s", Tss2_RC_Decode(rc));
        secret.size = (uint16_t) off;
        *ret_seed = TAKE_PTR(seed);
        *ret_secret = secret;
        return 0;
}

int tg_make_credential(const TPMT_PUBLIC *ek, const TPM2B_NAME *object_name, const tg_secret *credential,
                       TPM2B_ID_OBJECT *ret_blob, TPM2B_ENCRYPTED_SECRET *ret_secret) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *ek_key = NULL;
        _cleanup_(EVP_CIPHER_CTX_freep) EVP_CIPHER_CTX *cipher = NULL;
        _cleanup_secret_ tg_secret *seed = NULL, *sym_key = NULL, *hmac_key = NULL, *plain = NULL;
        const TPMT_SYM_DEF_OBJECT *sym;
        TPM2B_ENCRYPTED_SECRET secret = {};
        TPM2B_ID_OBJECT blob = {};
        const char *md = tg_ek_hash_name(ek->nameAlg);
        size_t digest = tg_ek_hash_size(ek->nameAlg), hmac_len = 0, enc_size;
        uint8_t iv[16] = {}, *enc;
        int r, outl = 0, finl = 0;

        if (!md)
                return log_error_rc(-TG_ERR_INVALID, "EK name algorithm 0x%04x is not supported.", ek->nameAlg);
        if (credential->size == 0 || credential->size > digest)
                return log_error_rc(-TG_ERR_INVALID, "A credential must hold 1..%zu bytes.", digest);
        if (object_name->size == 0)
                return log_error_rc(-TG_ERR_INVALID, "MakeCredential needs the name of the object to bind.");

        sym = ek->type == TPM2_ALG_RSA ? &ek->parameters.rsaDetail.symmetric : &ek->parameters.eccDetail.symmetric;
        if ((ek->type != TPM2_ALG_RSA && ek->type != TPM2_ALG_ECC) || sym->algorithm != TPM2_ALG_AES ||
            sym->mode.aes != TPM2_ALG_CFB || (sym->keyBits.aes != 128 && sym->keyBits.aes != 256))
                return log_error_rc(-TG_ERR_INVALID, "The EK is not a storage key with AES-CFB protection.");

        r = tg_public_to_evp(ek, &ek_key);
        if (r < 0)
                return r;
        r = ek->type == TPM2_ALG_RSA ? seed_rsa(ek, ek_key, digest, &seed, &secret)
                                     : seed_ecc(ek, ek_key, digest, &seed, &secret);
        if (r < 0)
                return r;

        /* symKey = KDFa(nameAlg, seed, "STORAGE", name, -, symmetric key bits). */
        r = tg_secret_new(sym->keyBits.aes / 8, &sym_key);
        if (r < 0)
                return r;
        r = tg_kdfa(ek->nameAlg, seed->data, seed->size, "STORAGE", object_name->name, object_name->size,
                    NULL, 0, sym->keyBits.aes, sym_key->data);
        if (r < 0)
                return r;

        /* encIdentity = AES-CFB(symKey, IV = 0, marshalled TPM2B_DIGEST(credential)). */
        r = tg_secret_new(2 + credential->size, &plain);
        if (r < 0)
                return r;
        plain->data[0] = (uint8_t) (credential->size >> 8);
        plain->data[1] = (uint8_t) credential->size;
        memcpy(plain->data + 2, credential->data, credential->size);
        enc_size = plain->size;
        /* The blob: TPM2B(outerHMAC) ‖ encIdentity. */
        if (2 + digest + enc_size > sizeof blob.credential)
                return log_error_rc(-TG_ERR_INVALID, "The credential blob would not fit a TPM2B_ID_OBJECT.");
        enc = blob.credential + 2 + digest;
        cipher = EVP_CIPHER_CTX_new();
        if (!cipher)
                return -TG_ERR_NOMEM;
        if (EVP_EncryptInit_ex(cipher, sym->keyBits.aes == 128 ? EVP_aes_128_cfb128() : EVP_aes_256_cfb128(),
                               NULL, sym_key->data, iv) != 1 ||
            EVP_EncryptUpdate(cipher, enc, &outl, plain->data, (int) plain->size) != 1 ||
            EVP_EncryptFinal_ex(cipher, enc + outl, &finl) != 1 || (size_t) outl + (size_t) finl != enc_size) {
                ERR_clear_error();
                return log_error_rc(-TG_ERR_IO, "AES-CFB encryption of the credential failed.");
        }

        /* HMACkey = KDFa(nameAlg, seed, "INTEGRITY", -, -, digest bits); outerHMAC over encIdentity ‖ name. */
        r = tg_secret_new(digest, &hmac_key);
        if (r < 0)
                return r;
        r = tg_kdfa(ek->nameAlg, seed->data, seed->size, "INTEGRITY", NULL, 0, NULL, 0, digest * 8, hmac_key->data);
        if (r < 0)
                return r;
        {
                uint8_t mac_input[sizeof blob.credential + sizeof object_name->name];
                memcpy(mac_input, enc, enc_size);
                memcpy(mac_input + enc_size, object_name->name, object_name->size);
                if (!EVP_Q_mac(NULL, "HMAC", NULL, md, NULL, hmac_key->data, hmac_key->size, mac_input,
                               enc_size + object_name->size, blob.credential + 2, digest, &hmac_len) ||
                    hmac_len != digest) {
                        ERR_clear_error();
                        return log_error_rc(-TG_ERR_IO, "HMAC of the credential failed.");
                }
        }
        blob.credential[0] = (uint8_t) (digest >> 8);
        blob.credential[1] = (uint8_t) digest;
        blob.size = (uint16_t) (2 + digest + enc_size);

        *ret_blob = blob;
        *ret_secret = secret;
        return 0;
}
