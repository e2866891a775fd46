/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/param_build.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_sys.h>
#include <tss2/tss2_tctildr.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "config.h"
#include "log.h"
#include "secret.h"
#include "tcti.h"

#include "tpm.h"

/*
 * For a local device TCTI ("device:PATH", or the default /dev/tpmrm0), the
 * real reason the TPM does not answer: the device node missing (no TPM, or
 * its driver not loaded) or not accessible (not root, not in group tss).
 * Logs it and returns <0 when one of those is the cause; 0 otherwise.
 */
static int tcti_device_problem(const char *tcti_conf) {
        const char *path = NULL;

        if (!tcti_conf || *tcti_conf == '\0')
                path = "/dev/tpmrm0";
        else if (strcmp(tcti_conf, "device") == 0)
                path = "/dev/tpm0";
        else if (strncmp(tcti_conf, "device:", 7) == 0)
                path = tcti_conf + 7;
        if (!path || access(path, R_OK | W_OK) == 0)
                return 0;
        if (errno == EACCES || errno == EPERM)
                return log_error_rc(-TG_ERR_TPM_UNREACHABLE,
                                    "Permission denied on %s: this is not a driver problem, the TPM is there. It "
                                    "belongs to root and the group tss (mode 0660): run tpmguard as root (sudo), or "
                                    "add this user to the tss group ('usermod -aG tss USER', then log in again).",
                                    path);
        if (errno == ENOENT)
                return log_error_rc(-TG_ERR_TPM_UNREACHABLE,
                                    "%s does not exist: this machine has no TPM 2.0 enabled in the firmware setup, or its "
                                    "driver (tpm_crb, tpm_tis) is not loaded. Check the tcti setting in tpmguard.conf.",
                                    path);
        return log_error_rc(-TG_ERR_TPM_UNREACHABLE, "Cannot open %s: %m", path);
}

int tg_tpm_open(const char *tcti_conf, tg_tpm **ret) {
        _cleanup_(tg_tpm_freep) tg_tpm *t = NULL;
        TSS2_RC rc;
        int r;

        t = calloc(1, sizeof *t);
        if (!t)
                return -TG_ERR_NOMEM;

        rc = Tss2_TctiLdr_Initialize(tcti_conf, &t->transport);
        if (rc != TSS2_RC_SUCCESS && tcti_device_problem(tcti_conf) < 0)
                return -TG_ERR_TPM_UNREACHABLE;
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_TPM_UNREACHABLE,
                                    "No TPM answers on \"%s\" (%s). Is the TPM present and its driver loaded? "
                                    "Check the tcti setting in tpmguard.conf.",
                                    tcti_conf ? tcti_conf : "(default)", Tss2_RC_Decode(rc));
        tg_fault_tcti_hook(t->transport); /* test builds only: counts TPM commands as fault points */

        /* ESAPI talks to the transport only through our framing check and response wipe (tcti.h). */
        r = tg_tcti_wrap(t->transport, &t->tcti);
        if (r < 0)
                return r;

        rc = Esys_Initialize(&t->esys, t->tcti, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "Esys_Initialize");

        t->resource_manager = tg_tcti_is_resource_manager(tcti_conf);
        *ret = TAKE_PTR(t);
        return 0;
}

int tg_tpm_open_config(const tg_config *config, tg_tpm **ret) {
        tg_tpm *t = NULL;
        int r;

        r = tg_tpm_open(config->tcti, &t);
        if (r < 0)
                return r;
        t->resource_manager = tg_config_resource_manager(config);
        log_debug("TPM reached through \"%s\": %s.", config->tcti,
                  t->resource_manager ? "a resource manager that flushes this connection's handles when it closes"
                                      : "no resource manager that flushes at close");
        *ret = t;
        return 0;
}

void tg_tpm_free(tg_tpm *t) {
        if (!t)
                return;
        if (t->esys)
                Esys_Finalize(&t->esys);
        tg_tcti_free(t->tcti);
        if (t->transport)
                Tss2_TctiLdr_Finalize(&t->transport);
        free(t);
}

/* FlushContext(handle) through the SAPI context under ESAPI's: ESAPI has no object for another
 * connection's handles. It still goes through our framing check (tcti.h). */
/* FlushContext(handle) in a fresh SYS context on esys's transport, past ESAPI's state. */
static TSS2_RC sys_flush(ESYS_CONTEXT *esys, TPM2_HANDLE handle) {
        TSS2_ABI_VERSION abi = TSS2_ABI_VERSION_CURRENT;
        TSS2_TCTI_CONTEXT *tcti = NULL;
        _cleanup_free_ TSS2_SYS_CONTEXT *sys = NULL;
        size_t size = Tss2_Sys_GetContextSize(0);
        TSS2_RC rc;

        if (Esys_GetTcti(esys, &tcti) != TSS2_RC_SUCCESS || !tcti)
                return TSS2_ESYS_RC_BAD_REFERENCE;
        sys = calloc(1, size);
        if (!sys)
                return TSS2_ESYS_RC_MEMORY;
        rc = Tss2_Sys_Initialize(sys, size, tcti, &abi);
        if (rc != TSS2_RC_SUCCESS)
                return rc;
        rc = Tss2_Sys_FlushContext(sys, handle);
        Tss2_Sys_Finalize(sys);
        return rc;
}

static void flush_handle(tg_tpm *t, TPM2_HANDLE handle) {
        if (sys_flush(t->esys, handle) != TSS2_RC_SUCCESS)
                log_debug("FlushContext(0x%08x) failed.", handle);
}

int tg_tpm_flush_left_over(tg_tpm *t) {
        static const TPM2_HANDLE ranges[] = { TPM2_TRANSIENT_FIRST, TPM2_LOADED_SESSION_FIRST };

        for (size_t i = 0; i < ELEMENTSOF(ranges); i++) {
                TPMS_CAPABILITY_DATA *cap = NULL;
                TPMI_YES_NO more = TPM2_NO;
                TSS2_RC rc = Esys_GetCapability(t->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_HANDLES,
                                                ranges[i], TPM2_MAX_CAP_HANDLES, &more, &cap);
                if (rc != TSS2_RC_SUCCESS)
                        return tg_tpm_rc(rc, "GetCapability(handles)");
                if (cap->capability != TPM2_CAP_HANDLES) {
                        Esys_Free(cap);
                        return log_error_rc(-TG_ERR_INTERPOSER, "GetCapability(handles) answered with another "
                                            "capability: an interposer on the TPM bus is suspected.");
                }
                /* Only transient objects and sessions (HMAC 0x02, policy 0x03): a forged list never makes
                 * us flush a persistent key or anything else. */
                for (uint32_t k = 0; k < cap->data.handles.count && k < TPM2_MAX_CAP_HANDLES; k++) {
                        TPM2_HANDLE h = cap->data.handles.handle[k];
                        uint8_t type = (uint8_t) (h >> TPM2_HR_SHIFT);
                        if (i == 0 ? type == TPM2_HT_TRANSIENT :
                                     type == TPM2_HT_HMAC_SESSION || type == TPM2_HT_POLICY_SESSION)
                                flush_handle(t, h);
                }
                Esys_Free(cap);
        }
        return 0;
}

TSS2_RC tg_tpm_rc_base(TSS2_RC rc) {
        if ((rc & TSS2_RC_LAYER_MASK) != TSS2_TPM_RC_LAYER)
                return rc;
        if (rc & TPM2_RC_FMT1)
                return rc & (TPM2_RC_FMT1 | 0x3F);
        return rc & 0xFFF;
}

void tg_tpm_wipe_last_response(ESYS_CONTEXT *esys) {
        TSS2_TCTI_CONTEXT *tcti = NULL;

        /*
         * Not Tss2_Sys_GetRpBuffer(): the size it reports is the response's own parameterSize
         * field, which the bus chooses (docs/design.md §2.7: a huge one made this an out-of-bounds write of
         * the attacker's length, crashing the unlock). Our TCTI layer wipes the buffer the
         * response was received into, by the length the transport returned for it.
         */
        if (Esys_GetTcti(esys, &tcti) != TSS2_RC_SUCCESS)
                return;
        tg_tcti_wipe_last_response(tcti);
}

bool tg_tpm_unseal_resend_refused(ESYS_CONTEXT *esys) {
        TSS2_TCTI_CONTEXT *tcti = NULL;

        return Esys_GetTcti(esys, &tcti) == TSS2_RC_SUCCESS && tg_tcti_unseal_resend_refused(tcti);
}

int tg_tpm_rc_map(TSS2_RC rc, const char *operation) {
        TSS2_RC layer = rc & TSS2_RC_LAYER_MASK, base = tg_tpm_rc_base(rc);
        const char *decoded = Tss2_RC_Decode(rc);

        if (rc == TSS2_RC_SUCCESS)
                return 0;

        /* Before the transport check: a response that fails our framing check (tcti.h) is forged, not lost. */
        if (rc == TSS2_ESYS_RC_RSP_AUTH_FAILED || rc == TSS2_ESYS_RC_MALFORMED_RESPONSE ||
            (layer == TSS2_TCTI_RC_LAYER && (rc & 0xFFFF) == TSS2_BASE_RC_MALFORMED_RESPONSE) ||
            (layer == TSS2_SYS_RC_LAYER && (rc & 0xFFFF) == TSS2_BASE_RC_MALFORMED_RESPONSE))
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "%s: the TPM's response failed its integrity check (%s). "
                                    "An interposer on the TPM bus is suspected.", operation, decoded);

        if (layer == TSS2_TCTI_RC_LAYER ||
            (layer == TSS2_SYS_RC_LAYER && (rc & 0xFFFF) == TSS2_BASE_RC_IO_ERROR) ||
            (rc & ~TSS2_RC_LAYER_MASK) == TSS2_BASE_RC_NO_CONNECTION)
                return log_error_rc(-TG_ERR_TPM_UNREACHABLE,
                                    "%s: the TPM transport failed (%s). Is the TPM present?", operation, decoded);

        if (base == TPM2_RC_LOCKOUT)
                return log_error_rc(-TG_ERR_LOCKOUT,
                                    "%s: the TPM is in dictionary-attack lockout. Wait for the lockout to expire "
                                    "(see 'tpmguard status') or use the recovery passphrase.", operation);

        /*
         * Without a resource manager (/dev/tpm0, an emulator's socket) objects and sessions that a
         * run which ended early left loaded stay in the TPM's few slots; the next run then fails
         * here. Name the cause and the way out instead of a bare "TPM error".
         */
        if (base == TPM2_RC_OBJECT_MEMORY || base == TPM2_RC_SESSION_MEMORY || base == TPM2_RC_MEMORY ||
            base == TPM2_RC_SESSION_HANDLES)
                return log_error_rc(-TG_ERR_TPM,
                                    "%s: the TPM's memory for loaded objects or sessions is full (%s). Without a "
                                    "resource manager, what an earlier run that ended early (or another program) "
                                    "left loaded stays there: flush it ('tpm2_flushcontext -t' and "
                                    "'tpm2_flushcontext -s') or reboot, or use the kernel's resource manager "
                                    "(tcti = device:/dev/tpmrm0). 'tpmguard doctor' shows the TPM's free slots.",
                                    operation, decoded);

        if (base == TPM2_RC_RETRY || base == TPM2_RC_YIELDED || base == TPM2_RC_TESTING ||
            base == TPM2_RC_NV_RATE || base == TPM2_RC_INITIALIZE)
                return log_error_rc(-TG_ERR_TPM_UNREACHABLE,
                                    "%s: the TPM is not ready (%s). Try again in a moment; at boot its driver or "
                                    "self-test may still be running.", operation, decoded);

        return log_error_rc(-TG_ERR_TPM, "%s failed: %s. 'tpmguard doctor' shows the TPM's state.", operation,
                            decoded);
}

int tg_tpm_get_properties(ESYS_CONTEXT *esys, TPM2_PT first, UINT32 count, TPMS_CAPABILITY_DATA **ret) {
        TPMS_CAPABILITY_DATA *cap = NULL;
        TPMI_YES_NO more;
        TSS2_RC rc;

        assert(count > 0 && count <= TPM2_MAX_TPM_PROPERTIES);
        rc = Esys_GetCapability(esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES, first, count,
                                &more, &cap);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "GetCapability(TPM properties)");
        /*
         * ESAPI unmarshals whichever capability the response names, and TPMU_CAPABILITIES is a
         * union: a forged answer with another capability (TPML_HANDLE: up to 254 entries of 4
         * bytes) read as tpmProperties (8 bytes each) would send the caller's loop past the
         * end of the structure. Only the capability that was asked for, and no more entries.
         */
        if (cap->capability != TPM2_CAP_TPM_PROPERTIES || cap->data.tpmProperties.count > count) {
                TPM2_CAP got = cap->capability;
                Esys_Free(cap);
                return log_error_rc(-TG_ERR_INTERPOSER,
                                    "GetCapability(TPM properties) answered with capability 0x%08x and more entries "
                                    "than asked: an interposer on the TPM bus is suspected.", got);
        }
        *ret = cap;
        return 0;
}

void tg_handle_release(tg_handle *h) {
        if (!h->esys || h->tr == ESYS_TR_NONE)
                return;
        if (h->close_only)
                (void) Esys_TR_Close(h->esys, &h->tr);
        else {
                TSS2_RC rc = Esys_FlushContext(h->esys, h->tr);
                TPM2_HANDLE handle;

                /*
                 * ESAPI refuses every command after a response that failed its HMAC or framing
                 * (BAD_SEQUENCE): without a resource manager to flush at close, the object or session
                 * would stay in the TPM's few slots, and the next run (a retry of the unlock) would
                 * fail with "memory full", a mundane message after an attack. Flushed through the
                 * SYS layer, by the TPM handle ESAPI knows (no command of ESAPI's), in a SYS context of
                 * its own on the same transport: ESAPI's may be stuck mid-command too (a response our
                 * framing check refused never completed there).
                 */
                if (rc == TSS2_ESYS_RC_BAD_SEQUENCE && Esys_TR_GetTpmHandle(h->esys, h->tr, &handle) == TSS2_RC_SUCCESS &&
                    sys_flush(h->esys, handle) == TSS2_RC_SUCCESS) {
                        log_debug("Flushed 0x%08x past ESAPI, which refuses commands after a refused response.", handle);
                        (void) Esys_TR_Close(h->esys, &h->tr);
                } else if (rc != TSS2_RC_SUCCESS) {
                        log_debug("FlushContext failed: %s", Tss2_RC_Decode(rc));
                        /* Drop ESAPI's metadata even if the TPM did not answer. */
                        (void) Esys_TR_Close(h->esys, &h->tr);
                }
        }
        h->tr = ESYS_TR_NONE;
}

int tg_tpm_set_hierarchy_auth(ESYS_CONTEXT *esys, ESYS_TR hierarchy, const tg_secret *secret, const char *what) {
        TPM2B_AUTH auth = {};
        TSS2_RC rc;

        if (!secret)
                return 0;
        if (secret->size > sizeof auth.buffer)
                return log_error_rc(-TG_ERR_INVALID, "The %s password is too long.", what);
        auth.size = (UINT16) secret->size;
        memcpy(auth.buffer, secret->data, auth.size);
        rc = Esys_TR_SetAuth(esys, hierarchy, &auth);
        explicit_bzero(&auth, sizeof auth);
        return rc == TSS2_RC_SUCCESS ? 0 : tg_tpm_rc(rc, "Esys_TR_SetAuth");
}

void tg_template_srk_ecc(TPM2B_PUBLIC *ret) {
        *ret = (TPM2B_PUBLIC) {
                .publicArea = {
                        .type = TPM2_ALG_ECC,
                        .nameAlg = TPM2_ALG_SHA256,
                        .objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                            TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH |
                                            TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT,
                        .parameters.eccDetail = {
                                .symmetric = {
                                        .algorithm = TPM2_ALG_AES,
                                        .keyBits.aes = 128,
                                        .mode.aes = TPM2_ALG_CFB,
                                },
                                .scheme.scheme = TPM2_ALG_NULL,
                                .curveID = TPM2_ECC_NIST_P256,
                                .kdf.scheme = TPM2_ALG_NULL,
                        },
                },
        };
}

void tg_template_ek_signing_key(TPM2B_PUBLIC *ret) {
        *ret = (TPM2B_PUBLIC) {
                .publicArea = {
                        .type = TPM2_ALG_ECC,
                        .nameAlg = TPM2_ALG_SHA256,
                        .objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                            TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH |
                                            TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT,
                        .parameters.eccDetail = {
                                .symmetric.algorithm = TPM2_ALG_NULL,
                                .scheme = {
                                        .scheme = TPM2_ALG_ECDSA,
                                        .details.ecdsa.hashAlg = TPM2_ALG_SHA256,
                                },
                                .curveID = TPM2_ECC_NIST_P256,
                                .kdf.scheme = TPM2_ALG_NULL,
                        },
                },
        };
}

bool tg_public_is_srk_ecc(const TPMT_PUBLIC *public) {
        TPM2B_PUBLIC tmpl;
        const TPMS_ECC_PARMS *a = &public->parameters.eccDetail, *b;

        tg_template_srk_ecc(&tmpl);
        b = &tmpl.publicArea.parameters.eccDetail;
        return public->type == tmpl.publicArea.type &&
               public->nameAlg == tmpl.publicArea.nameAlg &&
               public->objectAttributes == tmpl.publicArea.objectAttributes &&
               public->authPolicy.size == 0 &&
               a->symmetric.algorithm == b->symmetric.algorithm &&
               a->symmetric.keyBits.aes == b->symmetric.keyBits.aes &&
               a->symmetric.mode.aes == b->symmetric.mode.aes &&
               a->scheme.scheme == b->scheme.scheme &&
               a->curveID == b->curveID &&
               a->kdf.scheme == b->kdf.scheme;
}

static int sha256(const void *a, size_t a_size, const void *b, size_t b_size, uint8_t out[32]) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        unsigned int len = 0;

        if (!md)
                return -TG_ERR_NOMEM;
        if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1 ||
            EVP_DigestUpdate(md, a, a_size) != 1 ||
            (b_size > 0 && EVP_DigestUpdate(md, b, b_size) != 1) ||
            EVP_DigestFinal_ex(md, out, &len) != 1 || len != 32)
                return log_error_rc(-TG_ERR_IO, "SHA-256 failed in OpenSSL.");
        return 0;
}

bool tg_name_equal_bytes(const TPM2B_NAME *a, const uint8_t *bytes, size_t size) {
        assert(a);
        assert(bytes || size == 0);
        return a->size == size && size <= sizeof a->name && CRYPTO_memcmp(a->name, bytes, size) == 0;
}

bool tg_name_equal(const TPM2B_NAME *a, const TPM2B_NAME *b) {
        assert(b);
        return b->size <= sizeof b->name && tg_name_equal_bytes(a, b->name, b->size);
}

int tg_public_name(const TPMT_PUBLIC *public, TPM2B_NAME *ret) {
        uint8_t buf[sizeof(TPMT_PUBLIC)];
        size_t off = 0;
        TPM2B_NAME name = {};
        TSS2_RC rc;
        int r;

        if (public->nameAlg != TPM2_ALG_SHA256)
                return log_error_rc(-TG_ERR_INVALID, "Object name algorithm 0x%04x is not SHA-256.", public->nameAlg);

        rc = Tss2_MU_TPMT_PUBLIC_Marshal(public, buf, sizeof buf, &off);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_INVALID, "Cannot marshal public area: %s", Tss2_RC_Decode(rc));

        name.name[0] = TPM2_ALG_SHA256 >> 8;
        name.name[1] = TPM2_ALG_SHA256 & 0xff;
        r = sha256(buf, off, NULL, 0, name.name + 2);
        if (r < 0)
                return r;
        name.size = 2 + 32;
        *ret = name;
        return 0;
}

int tg_primary_qualified_name(TPM2_HANDLE hierarchy, const TPM2B_NAME *name, TPM2B_NAME *ret) {
        uint8_t h[4] = { hierarchy >> 24, hierarchy >> 16, hierarchy >> 8, hierarchy };
        TPM2B_NAME qn = {};
        int r;

        qn.name[0] = TPM2_ALG_SHA256 >> 8;
        qn.name[1] = TPM2_ALG_SHA256 & 0xff;
        r = sha256(h, sizeof h, name->name, name->size, qn.name + 2);
        if (r < 0)
                return r;
        qn.size = 2 + 32;
        *ret = qn;
        return 0;
}

int tg_tpm2b_public_unmarshal_exact(const uint8_t *buf, size_t size, TPM2B_PUBLIC *ret) {
        TPM2B_PUBLIC pub = {};
        size_t off = 0;
        TSS2_RC rc;

        rc = Tss2_MU_TPM2B_PUBLIC_Unmarshal(buf, size, &off, &pub);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_INVALID, "Malformed TPM2B_PUBLIC: %s", Tss2_RC_Decode(rc));
        if (off != size)
                return log_error_rc(-TG_ERR_INVALID, "TPM2B_PUBLIC followed by %zu trailing bytes.", size - off);
        *ret = pub;
        return 0;
}

int tg_tpm2b_public_marshal(const TPM2B_PUBLIC *pub, uint8_t **ret, size_t *ret_size) {
        const size_t max_size = sizeof(TPM2B_PUBLIC); /* a marshalled TPM2B_PUBLIC is never larger */
        _cleanup_free_ uint8_t *buf = malloc(max_size);
        size_t off = 0;
        TSS2_RC rc;

        if (!buf)
                return -TG_ERR_NOMEM;
        rc = Tss2_MU_TPM2B_PUBLIC_Marshal(pub, buf, max_size, &off);
        if (rc != TSS2_RC_SUCCESS)
                return log_error_rc(-TG_ERR_INVALID, "Cannot marshal TPM2B_PUBLIC: %s", Tss2_RC_Decode(rc));
        *ret = TAKE_PTR(buf);
        *ret_size = off;
        return 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(OSSL_PARAM_BLD *, OSSL_PARAM_BLD_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(OSSL_PARAM *, OSSL_PARAM_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(BIGNUM *, BN_free);

int tg_public_to_evp(const TPMT_PUBLIC *public, EVP_PKEY **ret) {
        _cleanup_(OSSL_PARAM_BLD_freep) OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        _cleanup_(OSSL_PARAM_freep) OSSL_PARAM *params = NULL;
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = NULL;
        _cleanup_(BN_freep) BIGNUM *n = NULL, *e = NULL;
        EVP_PKEY *pkey = NULL;
        uint8_t point[1 + 2 * TPM2_MAX_ECC_KEY_BYTES];

        if (!bld)
                return -TG_ERR_NOMEM;

        switch (public->type) {
        case TPM2_ALG_ECC: {
                const TPMS_ECC_POINT *p = &public->unique.ecc;
                const char *group;
                size_t coord;

                switch (public->parameters.eccDetail.curveID) {
                case TPM2_ECC_NIST_P256: group = "prime256v1"; coord = 32; break;
                case TPM2_ECC_NIST_P384: group = "secp384r1"; coord = 48; break;
                default:
                        return log_error_rc(-TG_ERR_INVALID, "Unsupported ECC curve 0x%04x.",
                                            public->parameters.eccDetail.curveID);
                }
                if (p->x.size != coord || p->y.size != coord)
                        return log_error_rc(-TG_ERR_INVALID, "ECC point has coordinates of %u/%u bytes, expected %zu.",
                                            p->x.size, p->y.size, coord);
                point[0] = 0x04;
                memcpy(point + 1, p->x.buffer, coord);
                memcpy(point + 1 + coord, p->y.buffer, coord);
                if (!OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, group, 0) ||
                    !OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, 1 + 2 * coord))
                        return -TG_ERR_NOMEM;
                ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
                break;
        }
        case TPM2_ALG_RSA: {
                uint32_t exponent = public->parameters.rsaDetail.exponent ?: 65537;
                const TPM2B_PUBLIC_KEY_RSA *m = &public->unique.rsa;

                if (m->size == 0 || m->size * 8 != public->parameters.rsaDetail.keyBits)
                        return log_error_rc(-TG_ERR_INVALID, "RSA modulus of %u bytes does not match %u key bits.",
                                            m->size, public->parameters.rsaDetail.keyBits);
                n = BN_bin2bn(m->buffer, m->size, NULL);
                e = BN_new();
                if (!n || !e || !BN_set_word(e, exponent) ||
                    !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) ||
                    !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e))
                        return -TG_ERR_NOMEM;
                ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
                break;
        }
        default:
                return log_error_rc(-TG_ERR_INVALID, "Unsupported key type 0x%04x.", public->type);
        }

        params = OSSL_PARAM_BLD_to_param(bld);
        if (!ctx || !params)
                return -TG_ERR_NOMEM;
        if (EVP_PKEY_fromdata_init(ctx) != 1 ||
            EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1)
                return log_error_rc(-TG_ERR_INVALID, "OpenSSL rejected the TPM public key (not on its curve?).");
        *ret = pkey;
        return 0;
}

bool tg_public_equals_evp(const TPMT_PUBLIC *public, EVP_PKEY *pkey) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *mine = NULL;

        if (tg_public_to_evp(public, &mine) < 0)
                return false;
        return EVP_PKEY_eq(mine, pkey) == 1;
}

bool tg_rc_is_auth_failure(TSS2_RC rc) {
        TSS2_RC base = tg_tpm_rc_base(rc);

        return (rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER && (base == TPM2_RC_BAD_AUTH || base == TPM2_RC_AUTH_FAIL);
}

/*
 * Threat: an interposer that answers an endorsement authorization with a
 * forged TPM_RC_AUTH_FAIL makes "the hierarchy has a password" look like the
 * cause, and the user types a password he does not have, or gives up. The
 * TPM's TPMA_PERMANENT says whether one is set; that answer is the bus's word
 * too, so with "none" both causes are named, the bus first.
 */
int tg_endorsement_auth_failed(ESYS_CONTEXT *esys, const char *operation) {
        _cleanup_free_ TPMS_CAPABILITY_DATA *cap = NULL;

        if (tg_tpm_get_properties(esys, TPM2_PT_PERMANENT, 1, &cap) < 0 || cap->data.tpmProperties.count != 1 ||
            cap->data.tpmProperties.tpmProperty[0].property != TPM2_PT_PERMANENT)
                return log_error_rc(-TG_ERR_AUTH_NEEDED,
                                    "%s: the TPM refused the endorsement authorization. Either the endorsement "
                                    "hierarchy has a password (give it with --endorsement-auth-file; it is never "
                                    "stored) or the one given is wrong, or an interposer on the TPM bus altered the "
                                    "session.", operation);
        if (cap->data.tpmProperties.tpmProperty[0].value & TPMA_PERMANENT_ENDORSEMENTAUTHSET)
                return log_error_rc(-TG_ERR_AUTH_NEEDED,
                                    "%s: the endorsement hierarchy has a password (the TPM reports one set). Give "
                                    "it with --endorsement-auth-file (it is never stored), or check the one given, "
                                    "then retry.", operation);
        return log_alert_rc(-TG_ERR_INTERPOSER,
                            "%s: the TPM refused the endorsement authorization, yet it reports no endorsement "
                            "password: an interposer on the TPM bus may have altered the session or forged the "
                            "refusal. Nothing secret was sent. Investigate the TPM bus; only if you know the "
                            "hierarchy has a password after all, give it with --endorsement-auth-file.", operation);
}
