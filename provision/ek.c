/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The TPM side of the EK (X.509 trust is ek-cert.c, MakeCredential
 * makecred.c): EK templates, certificates from NV, EK re-creation and the
 * EK-bound proof of the EK signing key.
 * See ek.h for the threat model. In short: nothing the TPM returns is
 * trusted until the certified TPM has proven possession of the EK's private
 * key by returning a challenge only it could unwrap, bound to the name of the
 * key being attested.
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

#include "ek-cert.h"
#include "ek.h"
#include "error.h"
#include "log.h"
#include "makecred.h"
#include "tpmguard-config.h"
#include "util.h"

/* A certificate larger than this in NV or in a file is not an EK certificate. */
#define EK_CERT_MAX_SIZE 8192

/* TCG EK Credential Profile v2.5, Table 2 ("L" templates) and Tables 3-7 ("H" templates). */
static const tg_ek_template ek_templates[] = {
        { "L-2 (ECC P-256)", 0x01C0000A, TPM2_ALG_ECC, 0,    TPM2_ECC_NIST_P256, TPM2_ALG_SHA256, 128, false },
        { "H-2 (ECC P-256)", 0x01C00014, TPM2_ALG_ECC, 0,    TPM2_ECC_NIST_P256, TPM2_ALG_SHA256, 128, true },
        { "H-3 (ECC P-384)", 0x01C00016, TPM2_ALG_ECC, 0,    TPM2_ECC_NIST_P384, TPM2_ALG_SHA384, 256, true },
        { "L-1 (RSA-2048)",  0x01C00002, TPM2_ALG_RSA, 2048, 0,                  TPM2_ALG_SHA256, 128, false },
        { "H-1 (RSA-2048)",  0x01C00012, TPM2_ALG_RSA, 2048, 0,                  TPM2_ALG_SHA256, 128, true },
        { "H-6 (RSA-3072)",  0x01C0001C, TPM2_ALG_RSA, 3072, 0,                  TPM2_ALG_SHA384, 256, true },
        { "H-7 (RSA-4096)",  0x01C0001E, TPM2_ALG_RSA, 4096, 0,                  TPM2_ALG_SHA384, 256, true },
};

/*
 * Policy digests of the EK Credential Profile. PolicyA = PolicySecret(TPM_RH_ENDORSEMENT);
 * PolicyC = PolicyAuthorizeNV(0x01C07F01); PolicyB = PolicyOR(PolicyA, PolicyC).
 * The unit tests recompute PolicyA and PolicyB from their definitions.
 */
static const uint8_t policy_a_sha256[32] = {
        0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xb3, 0xf8, 0x1a, 0x90, 0xcc, 0x8d, 0x46, 0xa5, 0xd7, 0x24,
        0xfd, 0x52, 0xd7, 0x6e, 0x06, 0x52, 0x0b, 0x64, 0xf2, 0xa1, 0xda, 0x1b, 0x33, 0x14, 0x69, 0xaa,
};
static const uint8_t policy_c_sha256[32] = {
        0x37, 0x67, 0xe2, 0xed, 0xd4, 0x3f, 0xf4, 0x5a, 0x3a, 0x7e, 0x1e, 0xae, 0xfc, 0xef, 0x78, 0x64,
        0x3d, 0xca, 0x96, 0x46, 0x32, 0xe7, 0xaa, 0xd8, 0x2c, 0x67, 0x3a, 0x30, 0xd8, 0x63, 0x3f, 0xde,
};
static const uint8_t policy_b_sha256[32] = {
        0xca, 0x3d, 0x0a, 0x99, 0xa2, 0xb9, 0x39, 0x06, 0xf7, 0xa3, 0x34, 0x24, 0x14, 0xef, 0xcf, 0xb3,
        0xa3, 0x85, 0xd4, 0x4c, 0xd1, 0xfd, 0x45, 0x90, 0x89, 0xd1, 0x9b, 0x50, 0x71, 0xc0, 0xb7, 0xa0,
};
static const uint8_t policy_a_sha384[48] = {
        0x8b, 0xbf, 0x22, 0x66, 0x53, 0x7c, 0x17, 0x1c, 0xb5, 0x6e, 0x40, 0x3c, 0x4d, 0xc1, 0xd4, 0xb6,
        0x4f, 0x43, 0x26, 0x11, 0xdc, 0x38, 0x6e, 0x6f, 0x53, 0x20, 0x50, 0xc3, 0x27, 0x8c, 0x93, 0x0e,
        0x14, 0x3e, 0x8b, 0xb1, 0x13, 0x38, 0x24, 0xcc, 0xb4, 0x31, 0x05, 0x38, 0x71, 0xc6, 0xdb, 0x53,
};
static const uint8_t policy_c_sha384[48] = {
        0xd6, 0x03, 0x2c, 0xe6, 0x1f, 0x2f, 0xb3, 0xc2, 0x40, 0xeb, 0x3c, 0xf6, 0xa3, 0x32, 0x37, 0xef,
        0x2b, 0x6a, 0x16, 0xf4, 0x29, 0x3c, 0x22, 0xb4, 0x55, 0xe2, 0x61, 0xcf, 0xfd, 0x21, 0x7a, 0xd5,
        0xb4, 0x94, 0x7c, 0x2d, 0x73, 0xe6, 0x30, 0x05, 0xee, 0xd2, 0xdc, 0x2b, 0x35, 0x93, 0xd1, 0x65,
};
static const uint8_t policy_b_sha384[48] = {
        0xb2, 0x6e, 0x7d, 0x28, 0xd1, 0x1a, 0x50, 0xbc, 0x53, 0xd8, 0x82, 0xbc, 0xf5, 0xfd, 0x3a, 0x1a,
        0x07, 0x41, 0x48, 0xbb, 0x35, 0xd3, 0xb4, 0xe4, 0xcb, 0x1c, 0x0a, 0xd9, 0xbd, 0xe4, 0x19, 0xca,
        0xcb, 0x47, 0xba, 0x09, 0x69, 0x96, 0x46, 0x15, 0x0f, 0x9f, 0xc0, 0x00, 0xf3, 0xf8, 0x0e, 0x12,
};

static inline void esys_freep(void *p) {
        Esys_Free(*(void **) p);
}
#define _cleanup_esys_ _cleanup_(esys_freep)

void tg_ek_result_done(tg_ek_result *r) {
        if (!r)
                return;
        free(r->cert_subject);
        free(r->cert_issuer);
        tg_ek_anchor_done(&r->anchor);
        *r = (tg_ek_result) {};
}

const tg_ek_template *tg_ek_templates(size_t *ret_n) {
        *ret_n = ELEMENTSOF(ek_templates);
        return ek_templates;
}

const tg_ek_template *tg_ek_template_by_nv_index(uint32_t nv_index) {
        for (size_t i = 0; i < ELEMENTSOF(ek_templates); i++)
                if (ek_templates[i].nv_index == nv_index)
                        return &ek_templates[i];
        return NULL;
}

bool tg_ek_template_fits_key(const tg_ek_template *t, EVP_PKEY *key) {
        char group[64];
        size_t group_len = 0;

        switch (t->type) {
        case TPM2_ALG_RSA:
                return EVP_PKEY_is_a(key, "RSA") && EVP_PKEY_get_bits(key) == t->rsa_bits;
        case TPM2_ALG_ECC:
                if (!EVP_PKEY_is_a(key, "EC") ||
                    EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof group, &group_len) != 1)
                        return false;
                switch (t->curve) {
                case TPM2_ECC_NIST_P256: return OBJ_sn2nid(group) == NID_X9_62_prime256v1;
                case TPM2_ECC_NIST_P384: return OBJ_sn2nid(group) == NID_secp384r1;
                default:                 return false;
                }
        default:
                return false;
        }
}

static void ek_policy_digests(TPMI_ALG_HASH hash, const uint8_t **a, const uint8_t **b, const uint8_t **c) {
        if (hash == TPM2_ALG_SHA384) {
                *a = policy_a_sha384;
                *b = policy_b_sha384;
                *c = policy_c_sha384;
        } else {
                assert(hash == TPM2_ALG_SHA256);
                *a = policy_a_sha256;
                *b = policy_b_sha256;
                *c = policy_c_sha256;
        }
}

int tg_ek_template_public(const tg_ek_template *t, TPM2B_PUBLIC *ret) {
        TPM2B_PUBLIC pub = {};
        TPMT_PUBLIC *p = &pub.publicArea;
        const uint8_t *policy_a, *policy_b, *policy_c;
        size_t digest = tg_ek_hash_size(t->name_alg);
        TPMT_SYM_DEF_OBJECT sym = {
                .algorithm = TPM2_ALG_AES,
                .keyBits.aes = t->aes_bits,
                .mode.aes = TPM2_ALG_CFB,
        };

        if (digest != 32 && digest != 48)
                return log_error_rc(-TG_ERR_INVALID, "EK template %s: unsupported name algorithm.", t->name);
        ek_policy_digests(t->name_alg, &policy_a, &policy_b, &policy_c);

        p->type = t->type;
        p->nameAlg = t->name_alg;
        /* fixedTPM, fixedParent, sensitiveDataOrigin, adminWithPolicy, restricted, decrypt (0x000300B2);
         * the high range adds userWithAuth (0x000300F2). */
        p->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                              TPMA_OBJECT_ADMINWITHPOLICY | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
        if (t->high_range)
                p->objectAttributes |= TPMA_OBJECT_USERWITHAUTH;
        p->authPolicy.size = (uint16_t) digest;
        memcpy(p->authPolicy.buffer, t->high_range ? policy_b : policy_a, digest);

        switch (t->type) {
        case TPM2_ALG_RSA:
                p->parameters.rsaDetail.symmetric = sym;
                p->parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
                p->parameters.rsaDetail.keyBits = t->rsa_bits;
                p->parameters.rsaDetail.exponent = 0;
                /* Low range: a zero-filled unique of the modulus size. High range: empty. */
                if (!t->high_range)
                        p->unique.rsa.size = t->rsa_bits / 8;
                break;
        case TPM2_ALG_ECC:
                p->parameters.eccDetail.symmetric = sym;
                p->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
                p->parameters.eccDetail.curveID = t->curve;
                p->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
                if (!t->high_range) {
                        p->unique.ecc.x.size = 32;
                        p->unique.ecc.y.size = 32;
                }
                break;
        default:
                return log_error_rc(-TG_ERR_INVALID, "EK template %s: unsupported key type.", t->name);
        }
        *ret = pub;
        return 0;
}

/* ---- TPM side ---- */

static int endorsement_rc(ESYS_CONTEXT *esys, TSS2_RC rc, const char *operation) {
        if (tg_rc_is_auth_failure(rc))
                return tg_endorsement_auth_failed(esys, operation);
        return tg_tpm_rc(rc, operation);
}

/*
 * Calls visit(handle, userdata) for every NV index in [first, last] the TPM lists, in ascending
 * order. audit_session: ESYS_TR_NONE, or a salted HMAC session the listing is read in as an audit
 * session, so that the TPM's answer is authenticated by the session key (an interposer can forge
 * an unauthenticated "nothing here"). Every answer must be of the capability asked for and list
 * handles in ascending order from where it was asked: a forged "more data" that repeats itself or
 * goes backwards would otherwise keep this loop asking forever.
 */
static int nv_indices_walk(tg_tpm *tpm, ESYS_TR audit_session, TPM2_HANDLE first, TPM2_HANDLE last,
                           void (*visit)(TPM2_HANDLE handle, void *userdata), void *userdata) {
        TPM2_HANDLE next = first;
        TPMI_YES_NO more = TPM2_YES;

        if (audit_session != ESYS_TR_NONE)
                (void) Esys_TRSess_SetAttributes(tpm->esys, audit_session,
                                                 TPMA_SESSION_CONTINUESESSION | TPMA_SESSION_AUDIT, 0xff);
        while (more == TPM2_YES) {
                _cleanup_esys_ TPMS_CAPABILITY_DATA *cap = NULL;
                TSS2_RC rc = Esys_GetCapability(tpm->esys, audit_session, ESYS_TR_NONE, ESYS_TR_NONE,
                                                TPM2_CAP_HANDLES, next, TPM2_MAX_CAP_HANDLES, &more, &cap);
                /* An audited answer that fails its HMAC is an interposer alert (tg_tpm_rc). */
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "GetCapability(NV indices)");
                if (cap->capability != TPM2_CAP_HANDLES)
                        return log_error_rc(-TG_ERR_INTERPOSER,
                                            "GetCapability(NV indices) answered with capability 0x%08x: "
                                            "an interposer on the TPM bus is suspected.", cap->capability);
                const TPML_HANDLE *h = &cap->data.handles;
                if (h->count == 0)
                        break;
                for (uint32_t i = 0; i < h->count; i++) {
                        if (h->handle[i] < next || (i > 0 && h->handle[i] <= h->handle[i - 1]))
                                return log_error_rc(-TG_ERR_INTERPOSER,
                                                    "GetCapability(NV indices) listed handle 0x%08x out of order: "
                                                    "an interposer on the TPM bus is suspected.", h->handle[i]);
                        if (h->handle[i] <= last)
                                visit(h->handle[i], userdata);
                }
                if (h->handle[h->count - 1] >= last)
                        break;
                next = h->handle[h->count - 1] + 1;
        }
        if (audit_session != ESYS_TR_NONE)
                (void) Esys_TRSess_SetAttributes(tpm->esys, audit_session, TPMA_SESSION_CONTINUESESSION, 0xff);
        return 0;
}

static void visit_ek_cert_index(TPM2_HANDLE handle, void *userdata) {
        bool *present = userdata;

        for (size_t t = 0; t < ELEMENTSOF(ek_templates); t++)
                if (handle == ek_templates[t].nv_index)
                        present[t] = true;
}

/* The EK certificate NV indices that exist in this TPM (of those we know). */
static int nv_indices_present(tg_tpm *tpm, ESYS_TR audit_session, bool present[static ELEMENTSOF(ek_templates)]) {
        memset(present, 0, sizeof(bool) * ELEMENTSOF(ek_templates));
        return nv_indices_walk(tpm, audit_session, 0x01C00000, 0x01C0001F, visit_ek_cert_index, present);
}

static uint16_t nv_buffer_max(tg_tpm *tpm) {
        _cleanup_esys_ TPMS_CAPABILITY_DATA *cap = NULL;

        if (tg_tpm_get_properties(tpm->esys, TPM2_PT_NV_BUFFER_MAX, 1, &cap) == 0 &&
            cap->data.tpmProperties.count == 1 &&
            cap->data.tpmProperties.tpmProperty[0].property == TPM2_PT_NV_BUFFER_MAX) {
                uint32_t v = cap->data.tpmProperties.tpmProperty[0].value;
                if (v >= 64)
                        return (uint16_t) (v < TPM2_MAX_NV_BUFFER_SIZE ? v : TPM2_MAX_NV_BUFFER_SIZE);
        }
        return 512; /* every TPM 2.0 supports at least this much */
}

/* owner_session: authorizes an owner-read index (a session salted to a trusted key; the owner password is never
 * sent in clear). An index that authorizes its own read (TPMA_NV_AUTHREAD, empty auth value) needs none. */
static int nv_read(tg_tpm *tpm, ESYS_TR owner_session, uint32_t index, size_t max_size, uint8_t **ret,
                   size_t *ret_size) {
        _cleanup_handle_ tg_handle nv = { .esys = tpm->esys, .tr = ESYS_TR_NONE, .close_only = true };
        _cleanup_esys_ TPM2B_NV_PUBLIC *pub = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        uint16_t chunk = nv_buffer_max(tpm), size;
        ESYS_TR auth, session = ESYS_TR_PASSWORD;
        TSS2_RC rc;

        rc = Esys_TR_FromTPMPublic(tpm->esys, index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &nv.tr);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "Opening the EK certificate NV index");
        rc = Esys_NV_ReadPublic(tpm->esys, nv.tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &pub, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "NV_ReadPublic(EK certificate)");
        size = pub->nvPublic.dataSize;
        if (size == 0 || size > max_size)
                return log_error_rc(-TG_ERR_EK_CERT, "The EK certificate NV index 0x%08x has an implausible size (%u).",
                                    index, size);
        /*
         * EK certificate indices are TPMA_NV_AUTHREAD with an empty auth value:
         * the index authorizes its own read. An index readable only by the
         * owner is read with the owner hierarchy (its auth as set by the caller).
         */
        if (pub->nvPublic.attributes & TPMA_NV_AUTHREAD)
                auth = nv.tr;
        else if (pub->nvPublic.attributes & TPMA_NV_OWNERREAD) {
                auth = ESYS_TR_RH_OWNER;
                session = owner_session;
        } else
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "The EK certificate NV index 0x%08x is readable neither with its own nor with "
                                    "owner authorization.", index);
        buf = malloc(size);
        if (!buf)
                return -TG_ERR_NOMEM;
        for (uint16_t off = 0; off < size;) {
                _cleanup_esys_ TPM2B_MAX_NV_BUFFER *data = NULL;
                uint16_t want = size - off < chunk ? size - off : chunk;
                rc = Esys_NV_Read(tpm->esys, auth, nv.tr, session, ESYS_TR_NONE, ESYS_TR_NONE,
                                  want, off, &data);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "NV_Read(EK certificate)");
                if (data->size != want)
                        return log_error_rc(-TG_ERR_TPM, "NV_Read returned %u bytes instead of %u.", data->size, want);
                memcpy(buf + off, data->buffer, want);
                off += want;
        }
        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

/*
 * TCG EK Credential Profile 2.5, 2.2.1.5: NV indices 0x01C00100 to
 * 0x01C001FF may hold certificates of the EK certificate's chain, DER,
 * concatenated, padded. Intel PTT keeps its per-platform CAs (below the
 * "On Die CSME P_MCC" issuing CA) there, so its chains cannot be built
 * without them.
 */
#define EK_CHAIN_NV_FIRST 0x01C00100
#define EK_CHAIN_NV_LAST 0x01C001FF
#define EK_CHAIN_MAX_SIZE 16384

typedef struct chain_indices {
        uint32_t *indices;
        size_t max, n;
} chain_indices;

static void visit_chain_index(TPM2_HANDLE handle, void *userdata) {
        chain_indices *c = userdata;

        if (c->n < c->max)
                c->indices[c->n++] = handle;
}

static int nv_chain_indices(tg_tpm *tpm, uint32_t *indices, size_t max, size_t *ret_n) {
        chain_indices c = { .indices = indices, .max = max };
        int r;

        r = nv_indices_walk(tpm, ESYS_TR_NONE, EK_CHAIN_NV_FIRST, EK_CHAIN_NV_LAST, visit_chain_index, &c);
        if (r < 0)
                return r;
        *ret_n = c.n;
        return 0;
}

static bool all_padding(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (p[i] != p[0] || (p[i] != 0x00 && p[i] != 0xff))
                        return false;
        return true;
}

/* Adds the concatenated DER certificates of buf (padding after the last one allowed) to the trust's helpers. */
static int add_der_chain(tg_ek_trust *t, const uint8_t *buf, size_t size, uint32_t index, unsigned *ret_added) {
        const uint8_t *p = buf;

        while ((size_t) (p - buf) < size) {
                size_t left = size - (size_t) (p - buf);
                X509 *c;
                int r;

                if (all_padding(p, left))
                        break;
                c = *p == 0x30 ? d2i_X509(NULL, &p, (long) left) : NULL;
                ERR_clear_error();
                if (!c) {
                        log_info("NV index 0x%08x holds no certificate at offset %zu: the rest of it is ignored.",
                                 index, size - left);
                        return -TG_ERR_EK_CERT;
                }
                r = tg_ek_trust_add_untrusted(t, c);
                X509_free(c);
                if (r < 0)
                        return r;
                *ret_added += (unsigned) r;
        }
        return 0;
}

int tg_ek_trust_add_nv_chain(tg_ek_trust *t, tg_tpm *tpm) {
        uint32_t indices[32];
        size_t n = 0;
        unsigned added = 0;
        int r;

        r = nv_chain_indices(tpm, indices, ELEMENTSOF(indices), &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ uint8_t *buf = NULL;
                size_t size = 0;

                /* Chain indices authorize their own read; an owner-read one gets the empty owner password,
                 * as no owner password is ever given to provisioning or doctor. */
                r = nv_read(tpm, ESYS_TR_PASSWORD, indices[i], EK_CHAIN_MAX_SIZE, &buf, &size);
                if (r == -TG_ERR_NOMEM || r == -TG_ERR_TPM_UNREACHABLE)
                        return r;
                if (r < 0) {
                        /* Unreadable or implausible: it only ever helps, so it is skipped. */
                        log_info("The EK chain NV index 0x%08x is not readable: ignored.", indices[i]);
                        continue;
                }
                r = add_der_chain(t, buf, size, indices[i], &added);
                if (r == -TG_ERR_NOMEM)
                        return r;
        }
        if (added > 0)
                log_debug("%u intermediate certificates from the TPM's EK chain NV indices.", added);
        return 0;
}

int tg_ek_cert_read_nv(tg_tpm *tpm, uint32_t nv_index, X509 **ret) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t size;
        int r;

        /* doctor's re-check: no owner password is given to it, so an owner-read index is read with the
         * empty one (nothing to protect). */
        r = nv_read(tpm, ESYS_TR_PASSWORD, nv_index, EK_CERT_MAX_SIZE, &buf, &size);
        if (r < 0)
                return r;
        return tg_ek_cert_parse(buf, size, ret);
}

/*
 * CreatePrimary(endorsement, template) and compare with the certified key.
 * Returns 0 with the EK loaded in ret_ek, -TG_ERR_EK_CERT on a key mismatch.
 */
static int ek_create_matching(tg_tpm *tpm, ESYS_TR auth_session, const tg_ek_template *t, EVP_PKEY *cert_key,
                              tg_handle *ret_ek, TPM2B_PUBLIC *ret_public) {
        _cleanup_handle_ tg_handle ek = { .esys = tpm->esys, .tr = ESYS_TR_NONE };
        _cleanup_esys_ TPM2B_PUBLIC *out = NULL;
        TPM2B_SENSITIVE_CREATE sensitive = {};
        TPM2B_DATA outside = {};
        TPML_PCR_SELECTION pcrs = {};
        TPM2B_PUBLIC in;
        TSS2_RC rc;
        int r;

        r = tg_ek_template_public(t, &in);
        if (r < 0)
                return r;
        rc = Esys_CreatePrimary(tpm->esys, ESYS_TR_RH_ENDORSEMENT, auth_session, ESYS_TR_NONE, ESYS_TR_NONE,
                                &sensitive, &in, &outside, &pcrs, &ek.tr, &out, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return endorsement_rc(tpm->esys, rc, "CreatePrimary(EK)");
        if (out->publicArea.type != in.publicArea.type || out->publicArea.nameAlg != in.publicArea.nameAlg ||
            out->publicArea.objectAttributes != in.publicArea.objectAttributes ||
            out->publicArea.authPolicy.size != in.publicArea.authPolicy.size ||
            memcmp(out->publicArea.authPolicy.buffer, in.publicArea.authPolicy.buffer, in.publicArea.authPolicy.size) != 0)
                return log_error_rc(-TG_ERR_EK_CERT, "The TPM returned an EK that does not follow template %s.", t->name);
        if (!tg_public_equals_evp(&out->publicArea, cert_key))
                return log_debug_rc(-TG_ERR_EK_CERT, "EK from template %s differs from the certified key.", t->name);
        *ret_public = *out;
        *ret_ek = ek;
        ek.tr = ESYS_TR_NONE;
        return 0;
}

/* A verified EK certificate, the template that re-creates its key, and that EK loaded. */
typedef struct ek_candidate {
        X509 *cert;
        const tg_ek_template *template;
        uint32_t nv_index;
        tg_handle ek;
        TPM2B_PUBLIC ek_public;
        tg_ek_anchor anchor;
} ek_candidate;

static void ek_candidate_done(ek_candidate *c) {
        tg_handle_release(&c->ek);
        tg_ek_anchor_done(&c->anchor);
        X509_free(c->cert);
        c->cert = NULL;
}

/* Verifies cert and finds the template (among those allowed for nv_index, 0 = any) that re-creates its key. */
static int ek_candidate_try(tg_tpm *tpm, ESYS_TR auth_session, const tg_ek_trust *trust, X509 *cert,
                            uint32_t nv_index, const char *origin, ek_candidate *ret) {
        _cleanup_(tg_ek_anchor_done) tg_ek_anchor anchor = {};
        EVP_PKEY *key;
        int r;

        r = tg_ek_cert_verify_anchor(trust, cert, &anchor);
        if (r < 0)
                return r;
        key = X509_get0_pubkey(cert);
        if (!key)
                return log_error_rc(-TG_ERR_EK_CERT, "The EK certificate from %s has no usable public key.", origin);

        bool fits_any = false;
        for (size_t i = 0; i < ELEMENTSOF(ek_templates); i++) {
                const tg_ek_template *t = &ek_templates[i];
                if ((nv_index != 0 && t->nv_index != nv_index) || !tg_ek_template_fits_key(t, key))
                        continue;
                fits_any = true;
                r = ek_create_matching(tpm, auth_session, t, key, &ret->ek, &ret->ek_public);
                if (r == -TG_ERR_EK_CERT)
                        continue;
                if (r < 0)
                        return r;
                ret->template = t;
                ret->nv_index = nv_index;
                if (!X509_up_ref(cert))
                        return -TG_ERR_NOMEM;
                ret->cert = cert;
                ret->anchor = anchor;
                anchor = (tg_ek_anchor) {};
                return 0;
        }
        if (!fits_any)
                return log_error_rc(-TG_ERR_EK_CERT,
                                    "The EK certificate from %s holds a key type no EK template of its index has.", origin);
        return log_error_rc(-TG_ERR_EK_CERT,
                            "The EK certificate from %s does not belong to this TPM: the EK the TPM re-creates has "
                            "another public key. Use this TPM's own EK certificate.", origin);
}

static int ek_candidate_from_file(tg_tpm *tpm, ESYS_TR auth_session, const tg_ek_trust *trust,
                                  const char *cert_file, ek_candidate *ret) {
        _cleanup_free_ uint8_t *buf = NULL;
        _cleanup_(X509_freep) X509 *cert = NULL;
        size_t size = 0;
        int r;

        r = tg_read_file(cert_file, EK_CERT_MAX_SIZE, &buf, &size);
        if (r < 0)
                return log_error_rc(-TG_ERR_EK_CERT, "Cannot read the EK certificate file %s (%s).", cert_file,
                                    tg_err_str(r));
        r = tg_ek_cert_parse(buf, size, &cert);
        if (r < 0)
                return r;
        return ek_candidate_try(tpm, auth_session, trust, cert, 0, cert_file, ret);
}

static int ek_candidate_from_nv(tg_tpm *tpm, ESYS_TR auth_session, const tg_ek_trust *trust, ek_candidate *ret) {
        bool present[ELEMENTSOF(ek_templates)];
        int r, first_error = 0;

        r = nv_indices_present(tpm, ESYS_TR_NONE, present);
        if (r < 0)
                return r;
        /* In order of preference; a certificate that fails lets the next one try. */
        for (size_t i = 0; i < ELEMENTSOF(ek_templates); i++) {
                _cleanup_free_ uint8_t *buf = NULL;
                _cleanup_(X509_freep) X509 *cert = NULL;
                char origin[64];
                size_t size = 0;

                if (!present[i])
                        continue;
                snprintf(origin, sizeof origin, "NV index 0x%08x", ek_templates[i].nv_index);
                r = nv_read(tpm, auth_session, ek_templates[i].nv_index, EK_CERT_MAX_SIZE, &buf, &size);
                if (r >= 0)
                        r = tg_ek_cert_parse(buf, size, &cert);
                if (r >= 0)
                        r = ek_candidate_try(tpm, auth_session, trust, cert, ek_templates[i].nv_index, origin, ret);
                if (r >= 0)
                        return 0;
                if (r != -TG_ERR_EK_CERT)
                        return r;
                if (first_error == 0)
                        first_error = r;
                log_info("The EK certificate at %s is not usable; trying the next one.", origin);
        }
        if (first_error < 0)
                return first_error;
        return log_error_rc(-TG_ERR_EK_CERT,
                            "This TPM has no EK certificate in NV (firmware TPMs often have none). Give the EK "
                            "certificate as a file with --ek-cert (tpm2_getekcertificate fetches it from the "
                            "vendor's service: docs/hardware.md), or pin the EK signing key unproven with "
                            "'tpmguard provision --trust-on-first-use' (docs/security.md says what that does "
                            "not protect).");
}

int tg_ek_cert_in_nv(tg_tpm *tpm, ESYS_TR audit_session, bool *ret_present) {
        bool present[ELEMENTSOF(ek_templates)];
        int r;

        assert(tpm && ret_present);
        r = nv_indices_present(tpm, audit_session, present);
        if (r < 0)
                return r;
        *ret_present = false;
        for (size_t i = 0; i < ELEMENTSOF(ek_templates); i++)
                if (present[i])
                        *ret_present = true;
        return 0;
}

/* auth_session: authorizes PolicySecret(endorsement), salted to the certified EK. */
static int ek_policy_session(tg_tpm *tpm, ESYS_TR auth_session, const tg_ek_template *t, tg_handle *ret) {
        _cleanup_handle_ tg_handle session = { .esys = tpm->esys, .tr = ESYS_TR_NONE };
        TPMT_SYM_DEF no_symmetric = { .algorithm = TPM2_ALG_NULL };
        TSS2_RC rc;

        rc = Esys_StartAuthSession(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                   NULL, TPM2_SE_POLICY, &no_symmetric, t->name_alg, &session.tr);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "StartAuthSession(EK policy)");
        rc = Esys_PolicySecret(tpm->esys, ESYS_TR_RH_ENDORSEMENT, session.tr, auth_session, ESYS_TR_NONE,
                               ESYS_TR_NONE, NULL, NULL, NULL, 0, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return endorsement_rc(tpm->esys, rc, "PolicySecret(endorsement)");
        if (t->high_range) {
                const uint8_t *a, *b, *c;
                size_t n = tg_ek_hash_size(t->name_alg);
                TPML_DIGEST branches = { .count = 2 };

                ek_policy_digests(t->name_alg, &a, &b, &c);
                branches.digests[0].size = branches.digests[1].size = (uint16_t) n;
                memcpy(branches.digests[0].buffer, a, n);
                memcpy(branches.digests[1].buffer, c, n);
                rc = Esys_PolicyOR(tpm->esys, session.tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &branches);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "PolicyOR(EK policy B)");
        }
        *ret = session;
        session.tr = ESYS_TR_NONE;
        return 0;
}

static int ek_activate(tg_tpm *tpm, ek_candidate *c, ESYS_TR auth_session, ESYS_TR key, const TPM2B_NAME *key_name) {
        _cleanup_secret_ tg_secret *challenge = NULL;
        _cleanup_handle_ tg_handle session = TG_HANDLE_NULL;
        TPM2B_DIGEST *cert_info = NULL;
        TPM2B_ID_OBJECT blob;
        TPM2B_ENCRYPTED_SECRET secret;
        TSS2_RC rc;
        bool equal;
        int r;

        r = tg_secret_new_random(32, &challenge);
        if (r < 0)
                return r;
        r = tg_make_credential(&c->ek_public.publicArea, key_name, challenge, &blob, &secret);
        if (r < 0)
                return r;
        r = ek_policy_session(tpm, auth_session, c->template, &session);
        if (r < 0)
                return r;

        /* activateHandle: the key (admin role, empty password); keyHandle: the EK (its policy). */
        rc = Esys_ActivateCredential(tpm->esys, key, c->ek.tr, ESYS_TR_PASSWORD, session.tr, ESYS_TR_NONE,
                                     &blob, &secret, &cert_info);
        if (rc != TSS2_RC_SUCCESS) {
                TSS2_RC base = tg_tpm_rc_base(rc);
                if ((rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER &&
                    (base == TPM2_RC_INTEGRITY || base == TPM2_RC_VALUE || base == TPM2_RC_SIZE ||
                     base == TPM2_RC_ECC_POINT || base == TPM2_RC_POLICY_FAIL))
                        return log_alert_rc(-TG_ERR_EK_PROOF,
                                            "The TPM answering is not the TPM of this EK certificate: interposer "
                                            "suspected (ActivateCredential refused: %s). Do not provision this machine "
                                            "until the TPM bus has been inspected.", Tss2_RC_Decode(rc));
                return tg_tpm_rc(rc, "ActivateCredential");
        }
        equal = cert_info->size == challenge->size && memeq_const(cert_info->buffer, challenge->data, challenge->size);
        explicit_bzero(cert_info, sizeof *cert_info);
        Esys_Free(cert_info);
        if (!equal)
                return log_alert_rc(-TG_ERR_EK_PROOF,
                                    "The TPM answering is not the TPM of this EK certificate: interposer suspected "
                                    "(ActivateCredential returned a wrong challenge). Do not provision this machine "
                                    "until the TPM bus has been inspected.");
        return 0;
}

struct tg_ek_certified {
        tg_ek_trust *trust;
        ek_candidate candidate;
        tg_handle session; /* HMAC session salted to the certified EK */
};

void tg_ek_certified_free(tg_ek_certified *ek) {
        if (!ek)
                return;
        tg_handle_release(&ek->session);
        ek_candidate_done(&ek->candidate);
        tg_ek_trust_free(ek->trust);
        free(ek);
}

ESYS_TR tg_ek_certified_session(const tg_ek_certified *ek) {
        return ek->session.tr;
}

int tg_ek_certified_load(tg_tpm *tpm, const tg_ek_options *opts, ESYS_TR auth_session, tg_ek_certified **ret) {
        static const TPMT_SYM_DEF aes128cfb = {
                .algorithm = TPM2_ALG_AES,
                .keyBits.aes = 128,
                .mode.aes = TPM2_ALG_CFB,
        };
        _cleanup_(tg_ek_certified_freep) tg_ek_certified *ek = NULL;
        TSS2_RC rc;
        int r;

        assert(tpm && opts && ret);
        ek = calloc(1, sizeof *ek);
        if (!ek)
                return -TG_ERR_NOMEM;
        ek->candidate.ek = (tg_handle) { .esys = tpm->esys, .tr = ESYS_TR_NONE };
        ek->session = (tg_handle) { .esys = tpm->esys, .tr = ESYS_TR_NONE };

        /* The CA store first: a broken store is reported once, before any TPM work. */
        r = tg_ek_trust_load(opts->ca_store, opts->intermediates_file, &ek->trust);
        if (r < 0)
                return r;
        /* The TPM's own chain certificates, as helpers only: the chain must still end at a store root. */
        r = tg_ek_trust_add_nv_chain(ek->trust, tpm);
        if (r < 0)
                return r;
        r = opts->cert_file ? ek_candidate_from_file(tpm, auth_session, ek->trust, opts->cert_file, &ek->candidate)
                            : ek_candidate_from_nv(tpm, auth_session, ek->trust, &ek->candidate);
        if (r < 0)
                return r;
        log_debug("EK certificate verified; EK re-created from template %s.", ek->candidate.template->name);

        /*
         * A session salted to the EK, whose public key we just checked against the
         * certificate: only the certified TPM can recover the salt, so an endorsement
         * password authorized in it (an HMAC, never the password) is safe from the bus.
         */
        rc = Esys_StartAuthSession(tpm->esys, ek->candidate.ek.tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                   ESYS_TR_NONE, NULL, TPM2_SE_HMAC, &aes128cfb, TPM2_ALG_SHA256, &ek->session.tr);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "StartAuthSession (salted to the certified EK)");
        (void) Esys_TRSess_SetAttributes(tpm->esys, ek->session.tr, TPMA_SESSION_CONTINUESESSION, 0xff);
        *ret = TAKE_PTR(ek);
        return 0;
}

int tg_ek_certified_prove(tg_tpm *tpm, tg_ek_certified *ek, ESYS_TR key, const TPM2B_NAME *key_name,
                          tg_ek_result *ret) {
        ek_candidate *c = &ek->candidate;
        tg_ek_result result = {};
        unsigned digest_len = 0;
        int r;

        assert(tpm && ek && key_name && ret);
        r = ek_activate(tpm, c, ek->session.tr, key, key_name);
        if (r < 0)
                return r;

        result.nv_index = c->nv_index;
        result.template_name = c->template->name;
        result.cert_subject = tg_ek_name_oneline(X509_get_subject_name(c->cert));
        result.cert_issuer = tg_ek_name_oneline(X509_get_issuer_name(c->cert));
        result.anchor = c->anchor;
        c->anchor = (tg_ek_anchor) {};
        if (!result.cert_subject || !result.cert_issuer ||
            X509_digest(c->cert, EVP_sha256(), result.cert_sha256, &digest_len) != 1 || digest_len != 32) {
                tg_ek_result_done(&result);
                return -TG_ERR_NOMEM;
        }
        *ret = result;
        return 0;
}

int tg_ek_attest_key(tg_tpm *tpm, const tg_ek_options *opts, ESYS_TR auth_session, ESYS_TR key,
                     const TPM2B_NAME *key_name, tg_ek_result *ret) {
        _cleanup_(tg_ek_certified_freep) tg_ek_certified *ek = NULL;
        int r;

        r = tg_ek_certified_load(tpm, opts, auth_session, &ek);
        if (r < 0)
                return r;
        return tg_ek_certified_prove(tpm, ek, key, key_name, ret);
}
