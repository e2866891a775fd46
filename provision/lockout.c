/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The lockout hierarchy and the DA parameters: see lockout.h. Threat model:
 * an attacker with the TPM bus and, later, its own OS on this machine. It
 * must not learn the lockout password (it never crosses the bus in clear:
 * every use is an HMAC in a session salted to the verified NULL key, and
 * the new value of HierarchyChangeAuth is encrypted in that session), and it
 * must not make us set a weaker state than the configured one (the state we
 * decide on is read in the same salted session, as an audit session, so an
 * altered response fails its HMAC).
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>
#include <tss2/tss2_rc.h>

#include "da.h"
#include "error.h"
#include "lockout.h"
#include "vcache.h"
#include "log.h"
#include "tpm.h"
#include "util.h"

bool tg_lockout_params_weaker(const tg_da_state *s, const tg_config *config) {
        if (s->recovery_seconds == 0 && config->da_recovery_time != 0)
                return true; /* DA protection off: unlimited guesses */
        return s->max_failures > config->da_max_tries ||
               s->recovery_seconds < config->da_recovery_time ||
               s->lockout_recovery_seconds < config->da_lockout_recovery;
}

int tg_lockout_auth_from_text(const tg_secret *text, tg_secret **ret) {
        _cleanup_secret_ tg_secret *out = NULL;
        size_t n = text->size;
        bool hex = true;
        int r;

        while (n > 0 && (text->data[n - 1] == '\n' || text->data[n - 1] == '\r'))
                n--;
        if (n == 2 * TG_LOCKOUT_AUTH_SIZE)
                for (size_t i = 0; i < n; i++)
                        hex = hex && tg_hex_digit_value((char) text->data[i]) >= 0;
        if (n == 2 * TG_LOCKOUT_AUTH_SIZE && hex) {
                r = tg_secret_new(TG_LOCKOUT_AUTH_SIZE, &out);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < TG_LOCKOUT_AUTH_SIZE; i++)
                        out->data[i] = (uint8_t) (tg_hex_digit_value((char) text->data[2 * i]) << 4 | tg_hex_digit_value((char) text->data[2 * i + 1]));
        } else {
                if (n == 0)
                        return log_error_rc(-TG_ERR_INVALID, "The lockout password is empty.");
                r = tg_secret_new_copy(text->data, n, &out);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(out);
        return 0;
}

static int lockout_path(const char *state_dir, char **ret) {
        return tg_asprintf(ret, "%s/%s", state_dir, TG_LOCKOUT_FILE_NAME);
}

int tg_lockout_auth_load(const char *state_dir, tg_secret **ret) {
        _cleanup_secret_ tg_secret *text = NULL;
        _cleanup_free_ char *path = NULL;
        struct stat st;
        int r;

        r = lockout_path(state_dir, &path);
        if (r < 0)
                return r;
        if (stat(path, &st) < 0) {
                if (errno == ENOENT)
                        return log_debug_rc(-TG_ERR_NOT_FOUND, "No stored lockout password at %s.", path);
                return log_error_rc(-TG_ERR_IO, "Cannot read %s: %m", path);
        }
        /* Readable by others means it may be known to others: refuse it, and say how to fix it. */
        if (st.st_mode & (S_IRWXG | S_IRWXO))
                return log_error_rc(-TG_ERR_INVALID,
                                    "%s is accessible to other users than its owner (mode %04o): the lockout password "
                                    "may be known. Run 'chmod 0400 %s', and consider a new one (tpmguard(8), LOCKOUT).",
                                    path, (unsigned) (st.st_mode & 07777), path);
        r = tg_secret_read_file(path, 4 * TG_LOCKOUT_AUTH_SIZE, &text);
        if (r < 0)
                return r;
        return tg_lockout_auth_from_text(text, ret);
}

/* Stores auth as 64 hex digits and a newline, root-only, atomically. */
static int lockout_auth_save(const char *state_dir, const tg_secret *auth) {
        static const char digits[] = "0123456789abcdef";
        _cleanup_secret_ tg_secret *text = NULL;
        _cleanup_free_ char *path = NULL;
        int r;

        assert(auth->size == TG_LOCKOUT_AUTH_SIZE);
        r = lockout_path(state_dir, &path);
        if (r < 0)
                return r;
        if (mkdir(state_dir, 0755) < 0 && errno != EEXIST)
                return log_error_rc(-TG_ERR_IO, "Cannot create %s: %m", state_dir);
        r = tg_secret_new(2 * auth->size + 1, &text);
        if (r < 0)
                return r;
        for (size_t i = 0; i < auth->size; i++) {
                text->data[2 * i] = (uint8_t) digits[auth->data[i] >> 4];
                text->data[2 * i + 1] = (uint8_t) digits[auth->data[i] & 0xf];
        }
        text->data[2 * auth->size] = '\n';
        return tg_write_file_atomic(path, text->data, text->size, 0400);
}

static int lockout_rc(TSS2_RC rc, const char *what, const tg_da_state *st, bool stored) {
        TSS2_RC base = tg_tpm_rc_base(rc);

        if ((rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER && (base == TPM2_RC_BAD_AUTH || base == TPM2_RC_AUTH_FAIL))
                return log_error_rc(-TG_ERR_AUTH_NEEDED,
                                    "%s: the TPM refused the %s lockout password. It now refuses the lockout "
                                    "hierarchy for %u s. Give the right one with --lockout-auth-file F.",
                                    what, stored ? "stored" : "given", st->lockout_recovery_seconds);
        if ((rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER && base == TPM2_RC_LOCKOUT)
                return log_error_rc(-TG_ERR_LOCKOUT,
                                    "%s: the TPM refuses the lockout hierarchy after a wrong lockout password. "
                                    "Try again in %u s (its lockout recovery time), or after a reboot on some TPMs.",
                                    what, st->lockout_recovery_seconds);
        return tg_tpm_rc(rc, what);
}

/* The lockout hierarchy's auth value in ESAPI: auth, or empty (NULL). */
static int set_lockout_auth(ESYS_CONTEXT *esys, const tg_secret *auth) {
        TSS2_RC rc;

        if (auth)
                return tg_tpm_set_hierarchy_auth(esys, ESYS_TR_RH_LOCKOUT, auth, "lockout");
        rc = Esys_TR_SetAuth(esys, ESYS_TR_RH_LOCKOUT, &(TPM2B_AUTH) {});
        return rc == TSS2_RC_SUCCESS ? 0 : tg_tpm_rc(rc, "Esys_TR_SetAuth");
}

int tg_lockout_setup(tg_verified_tpm *v, const tg_config *config, const char *state_dir, const tg_secret *supplied,
                     tg_lockout_result *ret) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_secret_ tg_secret *stored = NULL, *fresh = NULL;
        _cleanup_free_ char *path = NULL;
        tg_lockout_result result = {};
        const tg_secret *auth = NULL, *new_auth = NULL;
        tg_da_state st;
        TSS2_RC rc;
        int r;

        assert(v && config && state_dir && ret);
        /* The DA parameters may change here: the plugin's cached DA state (vcache.h) would be stale. */
        tg_vcache_da_drop(config);

        /* In the salted session, audited: an interposer cannot make "no password" out of "someone's". */
        r = tg_da_read(esys, tg_vtpm_audit_session(v), &st);
        if (r < 0)
                return r;
        r = tg_lockout_auth_load(state_dir, &stored);
        if (r < 0 && r != -TG_ERR_NOT_FOUND)
                return r;

        if (!st.lockout_auth_set) {
                /*
                 * No password: anyone could reset the DA counter. Take it. A value stored
                 * earlier whose HierarchyChangeAuth never happened (interrupted) is reused,
                 * so the file and the TPM never disagree; otherwise a new random one,
                 * stored before the TPM has it, so that no crash can lose it.
                 */
                if (supplied)
                        log_info("The lockout hierarchy has no password: --lockout-auth-file is not needed.");
                if (stored && stored->size == TG_LOCKOUT_AUTH_SIZE)
                        new_auth = stored;
                else {
                        r = tg_secret_new_random(TG_LOCKOUT_AUTH_SIZE, &fresh);
                        if (r < 0)
                                return r;
                        r = lockout_auth_save(state_dir, fresh);
                        if (r < 0)
                                return log_error_rc(r, "Cannot store the new lockout password: the lockout hierarchy "
                                                    "was left as it was.");
                        new_auth = fresh;
                }
                result.ownership = TG_LOCKOUT_TAKEN;
        } else if (supplied || stored) {
                auth = supplied ?: stored;
                result.ownership = TG_LOCKOUT_HELD;
        } else {
                log_warning("The TPM's lockout hierarchy has a password that tpmguard does not know (set by another "
                            "owner). The DA parameters were not checked or set: give it with --lockout-auth-file F "
                            "to 'tpmguard lockout setup', or leave it to that owner.");
                result.ownership = TG_LOCKOUT_FOREIGN;
                result.state = st;
                *ret = result;
                return 0;
        }

        /*
         * Held, no new password to prove, and the parameters are already the configured
         * ones: nothing to do. Not touching the lockout hierarchy keeps a re-provisioning
         * working while the TPM refuses it (after someone tried a wrong lockout password).
         */
        if (!new_auth && !supplied && st.max_failures == config->da_max_tries &&
            st.recovery_seconds == config->da_recovery_time &&
            st.lockout_recovery_seconds == config->da_lockout_recovery) {
                result.params_set = true;
                result.state = st;
                *ret = result;
                return 0;
        }

        /* The DA parameters first, with the current password (empty when taking it). */
        r = set_lockout_auth(esys, auth);
        if (r < 0)
                return r;
        rc = Esys_DictionaryAttackParameters(esys, ESYS_TR_RH_LOCKOUT, tg_vtpm_session(v, false, false), ESYS_TR_NONE,
                                             ESYS_TR_NONE, config->da_max_tries, config->da_recovery_time,
                                             config->da_lockout_recovery);
        if (rc != TSS2_RC_SUCCESS)
                return lockout_rc(rc, "DictionaryAttackParameters", &st, auth && auth == stored);
        result.params_set = true;
        /* The TPM applies lockoutRecovery from now on: messages name the new value. */
        st.lockout_recovery_seconds = config->da_lockout_recovery;

        if (new_auth) {
                /* newAuth is the command's first parameter: encrypted in the salted session (decrypt). */
                TPM2B_AUTH a = { .size = (UINT16) new_auth->size };

                memcpy(a.buffer, new_auth->data, new_auth->size);
                rc = Esys_HierarchyChangeAuth(esys, ESYS_TR_RH_LOCKOUT, tg_vtpm_session(v, true, false), ESYS_TR_NONE,
                                              ESYS_TR_NONE, &a);
                explicit_bzero(&a, sizeof a);
                if (rc != TSS2_RC_SUCCESS) {
                        /* A refusal by the TPM: it kept no password, so neither do we (a new one only). */
                        if (fresh && (rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER &&
                            lockout_path(state_dir, &path) >= 0)
                                (void) unlink(path);
                        return lockout_rc(rc, "HierarchyChangeAuth (lockout)", &st, false);
                }
                r = set_lockout_auth(esys, new_auth);
                if (r < 0)
                        return r;
                log_debug("Took the TPM's lockout hierarchy: its password is stored in %s/%s.", state_dir,
                         TG_LOCKOUT_FILE_NAME);
        } else if (supplied && !(stored && stored->size == supplied->size &&
                                 memcmp(stored->data, supplied->data, supplied->size) == 0)) {
                /* The TPM just proved the given password (the HMAC of its answer): keep it for lockout-reset. */
                if (supplied->size == TG_LOCKOUT_AUTH_SIZE) {
                        r = lockout_auth_save(state_dir, supplied);
                        if (r < 0)
                                return r;
                        log_info("Stored the given lockout password in %s/%s.", state_dir, TG_LOCKOUT_FILE_NAME);
                } else
                        log_notice("The given lockout password is not tpmguard's 32-byte format and was not stored: "
                                   "'tpmguard lockout-reset' will need --lockout-auth-file.");
        }

        r = tg_da_read(esys, tg_vtpm_audit_session(v), &result.state);
        if (r < 0)
                return r;
        *ret = result;
        return 0;
}

int tg_lockout_reset(tg_verified_tpm *v, const char *state_dir, const tg_secret *supplied, tg_da_state *ret) {
        ESYS_CONTEXT *esys = tg_vtpm_esys(v);
        _cleanup_secret_ tg_secret *stored = NULL;
        const tg_secret *auth = supplied;
        tg_da_state st;
        TSS2_RC rc;
        int r;

        r = tg_da_read(esys, tg_vtpm_audit_session(v), &st);
        if (r < 0)
                return r;
        if (!st.lockout_auth_set)
                log_warning("The lockout hierarchy has no password: anyone can reset the DA counter. "
                            "Run 'tpmguard lockout setup'.");
        else if (!auth) {
                r = tg_lockout_auth_load(state_dir, &stored);
                if (r == -TG_ERR_NOT_FOUND)
                        return log_error_rc(-TG_ERR_AUTH_NEEDED,
                                            "tpmguard holds no lockout password (%s/%s). Give it with "
                                            "--lockout-auth-file F.", state_dir, TG_LOCKOUT_FILE_NAME);
                if (r < 0)
                        return r;
                auth = stored;
        }
        r = set_lockout_auth(esys, st.lockout_auth_set ? auth : NULL);
        if (r < 0)
                return r;
        rc = Esys_DictionaryAttackLockReset(esys, ESYS_TR_RH_LOCKOUT, tg_vtpm_session(v, false, false), ESYS_TR_NONE,
                                            ESYS_TR_NONE);
        if (rc != TSS2_RC_SUCCESS)
                return lockout_rc(rc, "DictionaryAttackLockReset", &st, auth && auth == stored);
        r = tg_da_read(esys, tg_vtpm_audit_session(v), &st);
        if (r < 0)
                return r;
        if (ret)
                *ret = st;
        return 0;
}
