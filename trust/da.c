/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The DA state (see da.h). Threat model: an interposer on the TPM bus forges
 * the GetCapability reply. Without a session it can make us refuse (it can
 * do that anyway) or spend tries the TPM itself still counts and bounds;
 * with the audit session an altered reply fails its HMAC. What it must not
 * do with a short reply is turn a missing property into a zero: "no lockout
 * password", "0 failures", "DA protection off" (recovery time 0) all read as
 * safer or weaker than the TPM is.
 */
#include "da.h"
#include "error.h"
#include "log.h"
#include "tpm.h"

int tg_da_read(ESYS_CONTEXT *esys, ESYS_TR audit_session, tg_da_state *ret) {
        _cleanup_free_ TPMS_CAPABILITY_DATA *cap = NULL;
        const UINT32 count = TPM2_PT_LOCKOUT_RECOVERY - TPM2_PT_PERMANENT + 1;
        tg_da_state st = {};
        unsigned seen = 0;
        TPMI_YES_NO more;
        TSS2_RC rc;

        rc = Esys_GetCapability(esys, audit_session, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES,
                                TPM2_PT_PERMANENT, count, &more, &cap);
        if (rc != TSS2_RC_SUCCESS)
                return tg_tpm_rc(rc, "GetCapability (lockout and DA state)");
        /*
         * ESAPI unmarshals whichever capability the response names, and TPMU_CAPABILITIES is a
         * union: a forged answer with another capability read as tpmProperties would send the
         * loop past the end of the structure. Only the capability that was asked for, and no
         * more entries (tg_tpm_get_properties() checks the same).
         */
        if (cap->capability != TPM2_CAP_TPM_PROPERTIES || cap->data.tpmProperties.count > count)
                return log_error_rc(-TG_ERR_INTERPOSER,
                                    "GetCapability(TPM properties) answered with capability 0x%08x and more entries "
                                    "than asked: an interposer on the TPM bus is suspected.", cap->capability);
        for (UINT32 i = 0; i < cap->data.tpmProperties.count; i++) {
                const TPMS_TAGGED_PROPERTY *p = &cap->data.tpmProperties.tpmProperty[i];
                switch (p->property) {
                case TPM2_PT_PERMANENT:
                        st.lockout_auth_set = p->value & TPMA_PERMANENT_LOCKOUTAUTHSET;
                        st.in_lockout = p->value & TPMA_PERMANENT_INLOCKOUT;
                        seen |= 1;
                        break;
                case TPM2_PT_LOCKOUT_COUNTER: st.failures = p->value; seen |= 2; break;
                case TPM2_PT_MAX_AUTH_FAIL: st.max_failures = p->value; seen |= 4; break;
                case TPM2_PT_LOCKOUT_INTERVAL: st.recovery_seconds = p->value; seen |= 8; break;
                case TPM2_PT_LOCKOUT_RECOVERY: st.lockout_recovery_seconds = p->value; seen |= 16; break;
                default: break;
                }
        }
        /*
         * Fail closed: a forged short reply (a property left out) would otherwise read as "no
         * password, 0 failures, DA off" and let the plugin spend the reserved tries or status
         * and doctor report a safe TPM. Say so instead.
         */
        if (seen != 31)
                return log_error_rc(-TG_ERR_TPM, "The TPM did not report all of its lockout and DA properties.");
        *ret = st;
        return 0;
}
