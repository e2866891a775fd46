/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <openssl/evp.h>

#include "error.h"
#include "macro.h"

/* A TPM reached through a TCTI configuration string ("device:/dev/tpmrm0", "swtpm:path=..."). */
typedef struct tg_tpm {
        ESYS_CONTEXT *esys;
        TSS2_TCTI_CONTEXT *tcti;      /* what ESAPI uses: our checking layer (tcti.h) over transport */
        TSS2_TCTI_CONTEXT *transport; /* tss2-tctildr's context for the configured TCTI */
        /*
         * The TCTI reaches the TPM through a resource manager that flushes this connection's
         * transient objects and sessions when it closes (tg_tpm_free() closes it): the kernel's
         * /dev/tpmrmN or tpm2-abrmd (tpmguard.conf's resource_manager). Only the plugin's
         * one-shot unlock relies on it (tg_vtpm_rm_flushes()).
         */
        bool resource_manager;
} tg_tpm;

/* Opens the TCTI; resource_manager is guessed from the string (tg_tcti_is_resource_manager()). */
int tg_tpm_open(const char *tcti_conf, tg_tpm **ret);
/* Opens config's tcti, with its resource_manager setting applied. */
struct tg_config;
int tg_tpm_open_config(const struct tg_config *config, tg_tpm **ret);
void tg_tpm_free(tg_tpm *t);
/*
 * What a resource manager does when a connection closes, for a TPM without
 * one (a bare /dev/tpm0, a test's swtpm): flushes every transient object and
 * loaded session. Only for use when no one else holds the TPM: without a
 * resource manager it takes one connection at a time, and the one that left
 * these (another library's, e.g. systemd's token plugin) has closed.
 */
int tg_tpm_flush_left_over(tg_tpm *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(tg_tpm *, tg_tpm_free);
#define _cleanup_tpm_ _cleanup_(tg_tpm_freep)

/*
 * Maps a TSS2 return code onto the tpmguard error space and logs it with the
 * operation that failed. Transport errors become TG_ERR_TPM_UNREACHABLE, a
 * failed response HMAC becomes TG_ERR_INTERPOSER, lockout TG_ERR_LOCKOUT.
 */
int tg_tpm_rc_map(TSS2_RC rc, const char *operation);
/* 0 for TSS2_RC_SUCCESS, a negative -TG_ERR_* otherwise: visibly so to the
 * compiler and static analyzers, which cannot see into tg_tpm_rc_map(). */
#define tg_tpm_rc(rc, operation)                                                        \
        ({                                                                              \
                TSS2_RC _tg_tpm_rc_ = (rc);                                             \
                int _tg_tpm_r_ = tg_tpm_rc_map(_tg_tpm_rc_, (operation));               \
                _tg_tpm_rc_ == TSS2_RC_SUCCESS ? 0 : _tg_tpm_r_ < 0 ? _tg_tpm_r_ : -TG_ERR_TPM; \
        })
/*
 * Wipes the last response in ESAPI's internal response buffer. ESAPI
 * decrypts an encrypted response parameter (Unseal's outData) in place there
 * and frees that buffer unwiped; call this right after a command whose
 * response carries a secret. The wipe covers the bytes the transport
 * delivered into that buffer (tcti.h), whatever the response's size fields say.
 */
void tg_tpm_wipe_last_response(ESYS_CONTEXT *esys);
/* Whether the last Unseal's resend after a "retry" answer was refused (trust/tcti.h); clears it. */
bool tg_tpm_unseal_resend_refused(ESYS_CONTEXT *esys);
/*
 * GetCapability(TPM2_CAP_TPM_PROPERTIES, first, count), the answer checked to
 * be that capability with at most count entries (a forged capability type
 * would make the union's tpmProperties unsafe to index). Esys_Free() *ret.
 */
int tg_tpm_get_properties(ESYS_CONTEXT *esys, TPM2_PT first, UINT32 count, TPMS_CAPABILITY_DATA **ret);
/* The TPM_RC format-one/zero code with session/parameter/handle bits removed. */
TSS2_RC tg_tpm_rc_base(TSS2_RC rc);
/* A TPM (not ESAPI) answer TPM_RC_BAD_AUTH or TPM_RC_AUTH_FAIL. */
bool tg_rc_is_auth_failure(TSS2_RC rc);
/*
 * After the TPM refused an endorsement hierarchy authorization (operation
 * names the command): asks the TPM whether an endorsement password is set
 * and says which cause is likely. -TG_ERR_AUTH_NEEDED when one is set (or the
 * TPM does not say); -TG_ERR_INTERPOSER, as an alert, when the TPM reports
 * none (the refusal was forged or the session altered on the bus).
 */
int tg_endorsement_auth_failed(ESYS_CONTEXT *esys, const char *operation);

/*
 * An ESYS_TR that is flushed (transient objects, sessions) or closed
 * (persistent objects, NV indices) when it goes out of scope, on every path.
 */
typedef struct tg_handle {
        ESYS_CONTEXT *esys;
        ESYS_TR tr;
        bool close_only; /* persistent/NV: Esys_TR_Close instead of FlushContext */
} tg_handle;
#define TG_HANDLE_NULL ((tg_handle) { .esys = NULL, .tr = ESYS_TR_NONE, .close_only = false })
void tg_handle_release(tg_handle *h);
#define _cleanup_handle_ _cleanup_(tg_handle_release)

/* The persistent SRK's handle (TCG Provisioning Guidance; systemd uses the same). */
#define TG_SRK_HANDLE UINT32_C(0x81000001)
/*
 * Where provisioning persists the EK signing key (docs/design.md §2.2 step 4: one CreatePrimary fewer per
 * verification): the first endorsement-hierarchy handle past the TCG's EK block
 * (0x81010000-0x810100FF, Registry of Reserved TPM 2.0 Handles). The pinned file records
 * the handle actually used; verification accepts only handles in the endorsement range.
 */
#define TG_EK_SIGNING_HANDLE UINT32_C(0x81010100)
#define TG_ENDORSEMENT_PERSISTENT_FIRST UINT32_C(0x81010000)
#define TG_ENDORSEMENT_PERSISTENT_LAST UINT32_C(0x8101FFFF)

/*
 * Sets a hierarchy's authValue in ESAPI from a secret (NULL: leave it empty),
 * wiping the copy. what names the hierarchy in the message ("owner", ...).
 */
struct tg_secret;
int tg_tpm_set_hierarchy_auth(ESYS_CONTEXT *esys, ESYS_TR hierarchy, const struct tg_secret *secret, const char *what);

/* Templates (design §3). */
/* TCG Provisioning Guidance SRK ECC "H" template: the kernel's NULL primary, and the owner SRK. */
void tg_template_srk_ecc(TPM2B_PUBLIC *ret);
/* The EK signing key: ECC P-256 restricted signing, ECDSA-SHA256, in the endorsement hierarchy. */
void tg_template_ek_signing_key(TPM2B_PUBLIC *ret);

/* Name of an object: nameAlg ‖ H_nameAlg(marshalled TPMT_PUBLIC). Only SHA-256 is accepted. */
int tg_public_name(const TPMT_PUBLIC *public, TPM2B_NAME *ret);
/*
 * Name equality, the one comparison of names every check uses: sizes first
 * (a size above the buffer is never equal), then the bytes in constant time.
 */
bool tg_name_equal(const TPM2B_NAME *a, const TPM2B_NAME *b);
bool tg_name_equal_bytes(const TPM2B_NAME *a, const uint8_t *bytes, size_t size);
/* Qualified name of a primary object in hierarchy: 0x000b ‖ SHA-256(hierarchy ‖ name). */
int tg_primary_qualified_name(TPM2_HANDLE hierarchy, const TPM2B_NAME *name, TPM2B_NAME *ret);
/* True when the public area has exactly the SRK ECC template's fields (unique ignored). */
bool tg_public_is_srk_ecc(const TPMT_PUBLIC *public);

/* Marshalling helpers: exact-consumption unmarshal of a TPM2B_PUBLIC / TPMT_PUBLIC. */
int tg_tpm2b_public_unmarshal_exact(const uint8_t *buf, size_t size, TPM2B_PUBLIC *ret);
int tg_tpm2b_public_marshal(const TPM2B_PUBLIC *pub, uint8_t **ret, size_t *ret_size);

/* An OpenSSL public key for an ECC (P-256, P-384) or RSA TPM public area. */
int tg_public_to_evp(const TPMT_PUBLIC *public, EVP_PKEY **ret);
/* True when the OpenSSL key and the TPM public area are the same public key. */
bool tg_public_equals_evp(const TPMT_PUBLIC *public, EVP_PKEY *pkey);

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_PKEY *, EVP_PKEY_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_MD_CTX *, EVP_MD_CTX_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_PKEY_CTX *, EVP_PKEY_CTX_free);
