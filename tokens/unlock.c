/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/stat.h>

#include "binding.h"
#include "config.h"
#include "da.h"
#include "error.h"
#include "log.h"
#include "pin-cache.h"
#include "seal.h"
#include "token.h"
#include "unlock.h"
#include "util.h"
#include "vcache.h"
#include "verify.h"

unsigned tg_pin_da_spendable(bool in_lockout, uint32_t failures, uint32_t max_failures, unsigned reserve) {
        uint32_t remaining;

        if (in_lockout || failures >= max_failures)
                return 0;
        remaining = max_failures - failures;
        return remaining > reserve ? remaining - reserve : 0;
}

struct tg_unlock_prepared {
        uint8_t token_digest[32];
        tg_verified_tpm *v;
        tg_handle object;     /* the sealed object, loaded */
        tg_handle policy;     /* its policy session, salted, proven, the token's policy run */
};

static int token_digest(const char *token_json, uint8_t digest[static 32]) {
        unsigned int digest_size = 0;

        if (EVP_Digest(token_json, strlen(token_json), digest, &digest_size, EVP_sha256(), NULL) != 1 ||
            digest_size != 32)
                return -TG_ERR_IO;
        return 0;
}

void tg_unlock_prepared_release(tg_pin_attempts *attempts) {
        tg_unlock_prepared *p;

        if (!attempts || !attempts->prepared)
                return;
        p = TAKE_PTR(attempts->prepared);
        tg_handle_release(&p->object);
        tg_handle_release(&p->policy);
        tg_verified_tpm_free(p->v);
        free(p);
}

/* The PIN-less call's work for this token JSON, handed over (NULL when there is none); any other is flushed. */
static tg_unlock_prepared *prepared_take(tg_pin_attempts *attempts, const char *token_json) {
        uint8_t digest[32];

        if (!attempts || !attempts->prepared)
                return NULL;
        if (token_digest(token_json, digest) >= 0 &&
            memcmp(attempts->prepared->token_digest, digest, sizeof digest) == 0)
                return TAKE_PTR(attempts->prepared);
        tg_unlock_prepared_release(attempts);
        return NULL;
}

/* This token JSON's slot (its wrong PINs); NULL when the table is full or on error. */
static tg_pin_attempt_slot *attempts_slot(tg_pin_attempts *attempts, const char *token_json) {
        uint8_t digest[32];

        if (!attempts)
                return NULL;
        if (token_digest(token_json, digest) < 0)
                return NULL;
        for (size_t i = 0; i < TG_PIN_ATTEMPTS_SLOTS; i++)
                if (attempts->slot[i].used && memcmp(attempts->slot[i].token_digest, digest, sizeof digest) == 0)
                        return &attempts->slot[i];
        for (size_t i = 0; i < TG_PIN_ATTEMPTS_SLOTS; i++)
                if (!attempts->slot[i].used) {
                        attempts->slot[i] = (tg_pin_attempt_slot) { .used = true };
                        memcpy(attempts->slot[i].token_digest, digest, sizeof digest);
                        return &attempts->slot[i];
                }
        return NULL;
}

/* See unlock.h: one typed PIN, one Unseal. */
int tg_unlock_choose_seal(tg_verified_tpm *v, const tg_token *token, tg_token *ret, tg_alt_kind *ret_kind,
                          bool *ret_usable, tg_tpm_counters *ret_counters) {
        const tg_token_alt *predicted = tg_token_alt_find(token, TG_ALT_PREDICTED),
                           *grace = tg_token_alt_find(token, TG_ALT_GRACE);
        bool satisfied = false;
        tg_tpm_counters counters;
        tg_token view;
        int r;

        r = tg_token_policy_satisfied(v, token, &satisfied);
        if (r < 0)
                return r;
        if (!satisfied && predicted) {
                tg_token_alt_view(token, predicted, &view);
                r = tg_token_policy_satisfied(v, &view, &satisfied);
                if (r < 0)
                        return r;
                if (satisfied) {
                        *ret = view;
                        *ret_kind = TG_ALT_PREDICTED;
                        if (ret_usable)
                                *ret_usable = true;
                        return 0;
                }
        }
        if (!satisfied && grace) {
                /* The TPM checks the bounds itself (PolicyCounterTimer); this read only says whether
                 * they can hold, and how many boots are left (the caller's message), in one ReadClock. */
                r = tg_vtpm_counters(v, &counters);
                if (r < 0)
                        return r;
                tg_token_alt_view(token, grace, &view);
                satisfied = counters.reset_count <= grace->reset_count_max && counters.restart_count == 0;
                /* The PCRs the grace keeps (those the update does not change), as the TPM will check them. */
                if (satisfied && view.pcr_mask) {
                        r = tg_token_policy_satisfied(v, &view, &satisfied);
                        if (r < 0)
                                return r;
                }
                *ret = view;
                *ret_kind = TG_ALT_GRACE;
                if (ret_usable)
                        *ret_usable = satisfied;
                if (ret_counters)
                        *ret_counters = counters;
                return 0;
        }
        *ret = *token;
        *ret_kind = 0;
        if (ret_usable)
                *ret_usable = satisfied;
        return 0;
}

/* A LUKS UUID fit for a file name: hex digits and dashes (the header is the attacker's). */
static bool uuid_ok(const char *uuid) {
        size_t n = uuid ? strlen(uuid) : 0;

        if (n == 0 || n > 36)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((uuid[i] >= '0' && uuid[i] <= '9') || (uuid[i] >= 'a' && uuid[i] <= 'f') ||
                      (uuid[i] >= 'A' && uuid[i] <= 'F') || uuid[i] == '-'))
                        return false;
        return true;
}

/*
 * After an unlock through an update seal: cache_dir/update-pending/<LUKS UUID>, which
 * tpmguard-update-finish.service waits for (ConditionDirectoryNotEmpty). It holds no secret,
 * only which seal opened the volume and the device path of this boot; its presence only makes
 * the unit ask for the PIN and run 'tpmguard update finish', which checks everything again.
 * Best effort: the unlock succeeded.
 */
static void update_marker_write(const tg_config *config, struct crypt_device *cd, tg_alt_kind kind) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *data = NULL;
        const char *uuid = cd ? crypt_get_uuid(cd) : NULL, *device = cd ? crypt_get_device_name(cd) : NULL;

        if (!uuid_ok(uuid) || !config->cache_dir)
                return;
        /* The device path this boot opened (a line of its own: no newline in it), for the unit. */
        if (device && (device[0] != '/' || strchr(device, '\n')))
                device = NULL;
        if (tg_asprintf(&dir, "%s/" TG_UPDATE_PENDING_DIR, config->cache_dir) < 0 ||
            tg_asprintf(&path, "%s/%s", dir, uuid) < 0 ||
            tg_asprintf(&data, "seal=%s\n%s%s%s", tg_alt_kind_to_string(kind), device ? "device=" : "",
                        device ?: "", device ? "\n" : "") < 0)
                return;
        (void) mkdir(config->cache_dir, 0700);
        if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
                log_debug("Cannot create %s: %m", dir);
                return;
        }
        if (tg_write_file_atomic(path, data, strlen(data), 0600) < 0)
                log_debug("Cannot write %s.", path);
}

/* "PCR 4, 9" of mask, or "no PCR". */
static void pcr_phrase(uint32_t mask, char *buf, size_t size) {
        if (!mask) {
                (void) snprintf(buf, size, "no PCR");
                return;
        }
        (void) snprintf(buf, size, "PCR ");
        tg_pcr_list_format(mask, buf + strlen(buf), size - strlen(buf));
}

/* The message after an unlock through an update seal: which seal, what it was prepared for, how long
 * the grace lasts, what to run; at the normal level (libcryptsetup shows it without -v): the user has
 * something to run, and a change that was not theirs to notice. */
static void update_notice(struct crypt_device *cd, const tg_token *token, const tg_token *view, tg_alt_kind kind,
                          uint32_t reset_count) {
        const char *device = cd ? crypt_get_device_name(cd) : NULL;
        char changing[96], kept[96];

        if (kind == TG_ALT_PREDICTED) {
                log_warning("Unlocked with the predicted update seal (the PCR values changed as 'tpmguard update "
                            "prepare' was told). Run 'tpmguard update finish %s' (tpmguard-update-finish.service "
                            "does after this boot).", device ?: "DEVICE");
                return;
        }
        pcr_phrase(token->pcr_mask & ~view->pcr_mask, changing, sizeof changing);
        pcr_phrase(view->pcr_mask, kept, sizeof kept);
        log_warning("Unlocked with the update grace, which 'tpmguard update prepare' made for a change of %s (it "
                    "checks %s), %" PRIu32 " boot(s) left after this one. If you did not just update firmware or "
                    "the boot chain, suspect tampering: run 'tpmguard pcrs'. Else run 'tpmguard update finish %s' "
                    "(tpmguard-update-finish.service does after this boot; it refuses a change that was not "
                    "prepared).", changing, kept,
                    reset_count <= view->reset_count_max ? view->reset_count_max - reset_count : 0,
                    device ?: "DEVICE");
}

/*
 * Called without a PIN (libcryptsetup's first call): -TG_ERR_PIN_NEEDED, which makes
 * systemd-cryptsetup and cryptsetup ask for one, only when a PIN can work. A user asked for a
 * PIN that cannot work types it, is told it failed, and learns that refusals are noise. So
 * what is known before the prompt is checked first, and said, with an error that sends
 * the caller on to the recovery passphrase without a PIN prompt (lib/error.c: -ENOENT, -EAGAIN):
 *  - the verification (a failed one is an alarm, and the PIN would only be refused);
 *  - the TPM's dictionary-attack state (lockout, or only the reserve left);
 *  - the token's PCR policy against the PCR values read now, over the verified session's
 *    audit HMAC (a substituted value could only make us refuse, which dropping the command
 *    does too, or ask, which is what happened before).
 * A check that cannot run (a PCR bank the TPM lacks) asks for the PIN, as before.
 */
static int not_verified(int r) {
        return log_error_rc(r, "Not asking for the PIN: the TPM could not be verified (see above), so no "
                            "PIN could unlock. Use the recovery passphrase, then run 'tpmguard doctor'.");
}

/*
 * Threat: an evil maid's change (Secure Boot off, her chain) read as a firmware update, and the
 * advice to reseal or prepare an update, which would bind the token to her chain. So the message
 * names the tool that shows what changed first, and tampering before the routine fix.
 */
static int pcr_mismatch(struct crypt_device *cd, const tg_token *token, tg_alt_kind kind, const tg_token *view,
                        const tg_tpm_counters *counters) {
        const char *device = cd ? crypt_get_device_name(cd) : NULL;
        char pcrs[96], why[256] = "";

        tg_pcr_list_format(token->pcr_mask, pcrs, sizeof pcrs);
        if (kind == TG_ALT_GRACE && view && counters && counters->reset_count <= view->reset_count_max &&
            view->pcr_mask) {
                char kept[96];

                pcr_phrase(view->pcr_mask, kept, sizeof kept);
                (void) snprintf(why, sizeof why, ", and %s, which its update grace keeps, changed too (the update "
                                "was prepared for a change of the others only)", kept);
        } else if (kind == TG_ALT_GRACE)
                (void) snprintf(why, sizeof why, ", and its update grace has expired");
        return log_error_rc(-TG_ERR_PCR_MISMATCH,
                            "Not asking for the PIN: the %s values of PCR %s no longer match the token's "
                            "sealed policy (a PCR mismatch)%s, so no PIN can unlock it. Run 'tpmguard pcrs' "
                            "to see which boot events changed. If you did not update firmware, the boot loader, "
                            "the kernel or the Secure Boot settings, suspect tampering and do not type your PIN. "
                            "If you did: unlock with the recovery passphrase, then run 'tpmguard reseal %s' (it "
                            "asks for that passphrase); before the next update, 'tpmguard update prepare %s' "
                            "lets the boots after it unlock with the PIN alone.",
                            tg_pcr_bank_to_string(token->pcr_bank), pcrs, why, device ?: "DEVICE",
                            device ?: "DEVICE");
}

static int pin_can_work(struct crypt_device *cd, const tg_config *config, const tg_token *token) {
        const char *device = cd ? crypt_get_device_name(cd) : NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        bool satisfied = true;
        tg_alt_kind kind = 0;
        tg_tpm_counters counters = {};
        tg_token view;
        tg_da_state da;
        int r;

        r = tg_verify(config, &(tg_verify_options) { .use_cache = true }, NULL, &v);
        if (r < 0)
                return not_verified(r);
        if (tg_vcache_da_load(config, &da) < 0 || da.max_failures == 0 ||
            tg_pin_da_spendable(da.in_lockout, da.failures, da.max_failures, config->pin_da_reserve) == 0) {
                /* Over the verified session: a forged "in lockout" would send the user to the recovery
                 * passphrase with a message that looks legitimate. A read that fails its audit is that
                 * forgery caught: the alarm, never a PIN prompt after it. */
                r = tg_da_read(tg_vtpm_esys(v), tg_vtpm_audit_session(v), &da);
                if (r == -TG_ERR_INTERPOSER)
                        return r;
                if (r >= 0 && da.max_failures > 0)
                        (void) tg_vcache_da_store(config, &da);
                else
                        da.max_failures = 0;
        }
        if (da.max_failures > 0 &&
            tg_pin_da_spendable(da.in_lockout, da.failures, da.max_failures, config->pin_da_reserve) == 0)
                return log_error_rc(-TG_ERR_LOCKOUT,
                                    "Not asking for the PIN: %s. tpmguard never spends the TPM's last %u "
                                    "dictionary-attack tries at the boot prompt (pin_da_reserve in %s). "
                                    "Use the recovery passphrase; the TPM forgives one failure every %u s.",
                                    da.in_lockout ? "the TPM is in dictionary-attack lockout" :
                                    "only the reserved TPM dictionary-attack tries remain",
                                    config->pin_da_reserve, config->path, da.recovery_seconds);
        r = token->pcr_mask ? tg_unlock_choose_seal(v, token, &view, &kind, &satisfied, &counters) : 0;
        if (r == -TG_ERR_INTERPOSER)
                return r;   /* an audited read or the policy session's proof caught the bus: no PIN prompt */
        if (r >= 0 && !satisfied) {
                if (kind == TG_ALT_GRACE && counters.restart_count != 0)
                        return log_error_rc(-TG_ERR_PCR_MISMATCH, "Not asking for the PIN. %s", TG_GRACE_RESTART_MESSAGE);
                return pcr_mismatch(cd, token, kind, &view, &counters);
        }
        if (kind == TG_ALT_GRACE) {
                char changing[96];

                pcr_phrase(token->pcr_mask & ~view.pcr_mask, changing, sizeof changing);
                log_notice("The PCR values changed; the update grace of 'tpmguard update prepare', made for a change "
                           "of %s, opens %s with the PIN. If you did not just update firmware or the boot chain, "
                           "suspect tampering, do not type the PIN, and run 'tpmguard pcrs'.", changing,
                           device ?: "the volume");
        }
        else if (kind == TG_ALT_PREDICTED)
                log_notice("The PCR values changed as predicted; the update seal opens %s with the PIN.",
                           device ?: "the volume");
        return -TG_ERR_PIN_NEEDED;
}

/* The TPM device itself, one opener at a time: tcti "device" or "device:PATH", not a /dev/tpmrmN. */
static bool tcti_exclusive(const tg_config *config) {
        const char *t = config->tcti;

        return t && strncmp(t, "device", 6) == 0 && (t[6] == '\0' || t[6] == ':') && !tg_config_resource_manager(config);
}

/*
 * The DA state over a verified session of its own, for a refusal. The one-shot path reads it without
 * a session (it has none to audit with); that read may let us try the PIN (a forged "tries left"
 * spends tries the TPM itself still counts and bounds), but a refusal from it would send the user to
 * the recovery passphrase with words an interposer chose ("in lockout"). A failed audit is the
 * alarm; any other failure (a second connection refused by a TPM without a resource manager) leaves
 * *ret alone, and the unaudited read stands. Only on the refusal path: one verification more there.
 */
static int da_read_audited(const tg_config *config, tg_da_state *ret) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        tg_da_state da;
        int r;

        r = tg_verify(config, &(tg_verify_options) { .use_cache = true }, NULL, &v);
        if (r < 0)
                return r == -TG_ERR_INTERPOSER ? r : log_debug_rc(r, "No verified session to read the DA state over.");
        r = tg_da_read(tg_vtpm_esys(v), tg_vtpm_audit_session(v), &da);
        if (r < 0)
                return r;
        *ret = da;
        return 0;
}

/* The end of this unlock's PIN tries (pin_tries): the recovery passphrase next. */
static int no_more_pin_tries(const tg_config *config) {
        return log_error_rc(-TG_ERR_BAD_PIN, "No more PIN tries for this unlock (pin_tries = %u): use the recovery "
                            "passphrase.", config->pin_tries);
}

/*
 * da_read_audited() once this call's own connection, and what it loaded, are gone: the audited read
 * opens one of its own, and a TPM reached without a resource manager (swtpm's socket, /dev/tpmN)
 * serves one connection at a time.
 */
static int da_reread_audited(const tg_config *config, tg_verified_tpm **v, tg_handle *object, tg_handle *policy,
                             tg_da_state *ret) {
        tg_handle_release(object);
        tg_handle_release(policy);
        tg_verified_tpm_free(TAKE_PTR(*v));
        return da_read_audited(config, ret);
}

/*
 * The PIN-less call (issue 33): pin_can_work()'s checks, and with them all of the unseal that needs
 * no PIN value, on a one-shot verified TPM, kept in attempts->prepared for the call with the PIN,
 * which then sends only the Unseal (and the object's flush). What the user waits for after typing
 * the PIN is that, and the PIN's Argon2id. Why each check is still bound to the session that
 * unseals: docs/design.md §2.4, "Work before the PIN". Where this cannot be done cheaply or
 * safely it falls back to pin_can_work(), and the call with the PIN does the whole unseal as before.
 */
static int prepare_unlock(struct crypt_device *cd, const tg_config *config, const tg_token *token,
                          const char *token_json, tg_pin_attempts *attempts) {
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_handle_ tg_handle object = TG_HANDLE_NULL, policy = TG_HANDLE_NULL;
        _cleanup_free_ tg_unlock_prepared *p = NULL;
        bool satisfied = true;
        tg_da_state da;
        int r;

        /* A previous PIN-less call's work that no PIN call took (another token tried in between). */
        tg_unlock_prepared_release(attempts);
        /* A token with update seals chooses its seal from audited reads (tg_unlock_choose_seal()):
         * rare (between 'update prepare' and 'update finish'), so it is not prepared. Nor through
         * /dev/tpmN itself (tcti "device" without a resource manager), which has one opener at a
         * time: kept open across the PIN prompt, every other volume's unlock (and 'tpmguard verify')
         * would meet EBUSY, read as a missing TPM, until the PIN is typed. */
        if (!attempts || token->n_alt > 0 || tcti_exclusive(config))
                return pin_can_work(cd, config, token);

        r = tg_verify(config, &(tg_verify_options) { .use_cache = true, .one_shot = true }, NULL, &v);
        if (r < 0)
                return not_verified(r);
        if (tg_vcache_da_load(config, &da) < 0 || da.max_failures == 0 ||
            tg_pin_da_spendable(da.in_lockout, da.failures, da.max_failures, config->pin_da_reserve) == 0) {
                /*
                 * This boot's DA state is not known to leave tries: read it. The warm one-shot path has
                 * no salted HMAC session to audit the read, so here it may only let us ask (a forged
                 * "tries left" spends tries the TPM itself still counts and bounds, as the PIN call's own
                 * read always could); a refusal comes only from pin_can_work()'s audited read, so that a
                 * forged lockout never sends the user away with a message that looks legitimate.
                 */
                if (tg_da_read(tg_vtpm_esys(v), tg_vtpm_has_session(v) ? tg_vtpm_audit_session(v) : ESYS_TR_NONE,
                               &da) < 0 || da.max_failures == 0 ||
                    tg_pin_da_spendable(da.in_lockout, da.failures, da.max_failures, config->pin_da_reserve) == 0) {
                        tg_verified_tpm_free(TAKE_PTR(v));
                        return pin_can_work(cd, config, token);
                }
                (void) tg_vcache_da_store(config, &da);
        }

        r = tg_unseal_prepare(v, token, &satisfied, &object, &policy);
        if (r == -TG_ERR_INTERPOSER || r == -TG_ERR_TOKEN)
                return r;   /* logged: an alarm, or a token no PIN can open */
        if (r < 0) {
                log_debug("The unseal's work before the PIN failed (%s): the PIN call does all of it.", tg_err_str(r));
                tg_verified_tpm_free(TAKE_PTR(v));
                return pin_can_work(cd, config, token);
        }
        if (!satisfied)
                return pcr_mismatch(cd, token, 0, NULL, NULL);

        p = calloc(1, sizeof *p);
        if (!p)
                return -TG_ERR_NOMEM;
        r = token_digest(token_json, p->token_digest);
        if (r < 0)
                return r;
        p->v = TAKE_PTR(v);
        p->object = object;
        p->policy = policy;
        object.tr = policy.tr = ESYS_TR_NONE;
        attempts->prepared = TAKE_PTR(p);
        return -TG_ERR_PIN_NEEDED;
}

/*
 * Issue 32 §2: systemd-cryptsetup hands every volume the PINs it cached, typos included. The
 * PIN-bearing unseals of all volumes take turns (the lock, taken after the PIN's KDF and held until
 * this unseal's refusal is recorded), and a PIN the TPM refused a moment ago for another volume,
 * not typed again since, is not sent again: one wrong PIN, one dictionary-attack try
 * (tokens/pin-cache.c). Only under systemd-cryptsetup (turn.pin set).
 */
typedef struct pin_turn {
        const char *cache_dir;
        const tg_secret *pin;   /* NULL: no turn to take */
        bool *skipped;          /* this token's: a stale copy was not sent once already (NULL: never skip) */
        bool stale_skipped;     /* this call's PIN was such a copy, not sent */
        int lock;
} pin_turn;

static int pin_turn_take(void *userdata) {
        pin_turn *t = userdata;

        if (!t->pin)
                return 0;
        t->lock = tg_pin_cache_lock(t->cache_dir);
        if (t->lock < 0)
                log_notice("This volume's PIN try does not wait for other volumes' (no lock in %s, which must be "
                           "a root-only directory, 0700, or another volume's turn took over 15 s): a wrong PIN may cost one "
                           "dictionary-attack try per volume.", t->cache_dir);
        /*
         * Once per token and process: a PIN that reaches us again and again without passing through
         * systemd's cache (systemd's credential cryptsetup.luks2-pin, read at each pass of its loop)
         * is tried the second time rather than skipped until the record expires.
         */
        if (t->skipped && !*t->skipped && tg_pin_cache_refused_before(t->pin)) {
                *t->skipped = t->stale_skipped = true;
                return log_notice_rc(-TG_ERR_PIN_RETRY, "Not trying this PIN: the TPM refused it a moment ago for "
                                     "another volume (no dictionary-attack try spent). If it is this volume's PIN, "
                                     "type it again.");
        }
        return 0;
}

static void pin_turn_end(pin_turn *t) {
        if (t->lock >= 0)
                (void) close(t->lock);
        t->lock = -1;
}

int tg_unlock_token_json(struct crypt_device *cd, const char *token_json, const tg_secret *pin,
                         tg_pin_attempts *attempts, tg_secret **ret_passphrase) {
        _cleanup_config_ tg_config *config = NULL;
        _cleanup_vtpm_ tg_verified_tpm *v = NULL;
        _cleanup_secret_ tg_secret *secret = NULL;
        _cleanup_handle_ tg_handle object = TG_HANDLE_NULL, policy = TG_HANDLE_NULL;
        _cleanup_free_ tg_unlock_prepared *prepared = NULL;
        tg_da_state da;
        bool da_known = false;
        tg_pin_attempt_slot *slot;
        unsigned *wrong;
        tg_token token, seal;
        tg_alt_kind kind = 0;
        tg_tpm_counters counters = {};
        _cleanup_(pin_turn_end) pin_turn turn = { .lock = -1 };
        tg_unseal_gate gate = { pin_turn_take, &turn };
        int r, k;

        r = tg_token_from_string(token_json, &token);
        if (r >= 0)
                r = tg_config_load(NULL, &config);
        if (r < 0) {
                tg_unlock_prepared_release(attempts);
                return r;
        }
        slot = token.pin ? attempts_slot(attempts, token_json) : NULL;
        wrong = slot ? &slot->wrong : NULL;
        if (wrong && *wrong >= config->pin_tries) {
                /* systemd-cryptsetup would ask forever on -ENOANO: the budget ends here. */
                tg_unlock_prepared_release(attempts);
                return log_error_rc(-TG_ERR_BAD_PIN, "%u wrong PINs: no more tries (pin_tries = %u). "
                                    "Use the recovery passphrase.", *wrong, config->pin_tries);
        }
        if (token.pin && !pin)
                return prepare_unlock(cd, config, &token, token_json, attempts);

        /* The PIN-less call's work for this token, when this process made it (prepare_unlock()). */
        prepared = token.pin ? prepared_take(attempts, token_json) : NULL;
        tg_unlock_prepared_release(attempts);
        seal = token;
        if (prepared) {
                v = TAKE_PTR(prepared->v);
                object = prepared->object;
                policy = prepared->policy;
                log_debug("Unsealing with the sessions and the object the PIN-less call prepared.");
        } else {
                /*
                 * One unseal and nothing after it: the session ends with its last command (no
                 * FlushContext). A token with update seals (never prepared: prepare_unlock()) keeps the
                 * HMAC session: the seal is chosen from audited reads first (tg_unlock_choose_seal()).
                 */
                r = tg_verify(config, &(tg_verify_options) { .use_cache = true, .one_shot = token.n_alt == 0 },
                              NULL, &v);
                if (r >= 0 && token.n_alt > 0)
                        r = tg_unlock_choose_seal(v, &token, &seal, &kind, NULL, &counters);
                if (r < 0)
                        return r;
                /* The grace's bounds from the audited ReadClock of the choice: a boot that cannot
                 * open it is told why before the PIN's Argon2id and any Unseal (the TPM would
                 * refuse the policy anyway, before the PIN: no try either way). */
                if (kind == TG_ALT_GRACE && counters.restart_count != 0)
                        return log_error_rc(-TG_ERR_PCR_MISMATCH, "%s", TG_GRACE_RESTART_MESSAGE);
        }

        if (token.pin) {
                /*
                 * The DA state is read without a session: a lying interposer can
                 * only make us refuse (it can do that anyway) or spend tries the
                 * TPM itself still counts and bounds.
                 *
                 * Issue 18: this boot's last live read (cache_dir/da-state.json) instead,
                 * when it leaves tries to spend. It is exact for tpmguard's tries (every
                 * wrong PIN re-reads and re-stores it below; a right PIN changes nothing),
                 * conservative over time (the TPM forgives failures, never adds them, by
                 * waiting; a cached state at the reserve is re-read live), dropped when
                 * 'tpmguard lockout setup' may change the parameters, and blind only to
                 * failures of other TPM users, who could spend the reserve directly: the
                 * reserve keeps the boot prompt from spending it, which this still does.
                 */
                if (tg_vcache_da_load(config, &da) >= 0 && da.max_failures > 0 &&
                    tg_pin_da_spendable(da.in_lockout, da.failures, da.max_failures, config->pin_da_reserve) > 0) {
                        da_known = true;
                } else {
                        da_known = tg_da_read(tg_vtpm_esys(v), ESYS_TR_NONE, &da) >= 0 && da.max_failures > 0;
                        if (da_known && tg_pin_da_spendable(da.in_lockout, da.failures, da.max_failures,
                                                            config->pin_da_reserve) == 0) {
                                /* A refusal only from an audited read (da_reread_audited()). */
                                r = da_reread_audited(config, &v, &object, &policy, &da);
                                if (r == -TG_ERR_INTERPOSER)
                                        return r;
                                if (r >= 0 && da.max_failures > 0 &&
                                    tg_pin_da_spendable(da.in_lockout, da.failures, da.max_failures,
                                                        config->pin_da_reserve) > 0) {
                                        (void) tg_vcache_da_store(config, &da);
                                        return log_warning_rc(-TG_ERR_PIN_RETRY,
                                                              "The TPM's dictionary-attack state, read without a "
                                                              "session, left no PIN tries; read over the verified "
                                                              "session it leaves some. The PIN was not tried: type it "
                                                              "again. If this repeats, suspect the TPM bus and run "
                                                              "'tpmguard doctor'.");
                                }
                                if (r >= 0)
                                        da_known = da.max_failures > 0;
                        }
                        if (da_known)
                                (void) tg_vcache_da_store(config, &da);
                }
                if (da_known && tg_pin_da_spendable(da.in_lockout, da.failures, da.max_failures,
                                                    config->pin_da_reserve) == 0)
                        return log_error_rc(-TG_ERR_LOCKOUT,
                                            "Not trying the PIN: %s. tpmguard never spends the TPM's last %u "
                                            "dictionary-attack tries at the boot prompt (pin_da_reserve in %s). "
                                            "Use the recovery passphrase; the TPM forgives one failure every %u s.",
                                            da.in_lockout ? "the TPM is in dictionary-attack lockout" :
                                            "only the reserved TPM dictionary-attack tries remain",
                                            config->pin_da_reserve, config->path, da.recovery_seconds);
        }

        if (token.pin && tg_pin_cache_applies()) {
                turn.cache_dir = config->cache_dir;
                turn.pin = pin;
                turn.skipped = slot ? &slot->stale_skipped : NULL;
        }
        r = prepared ? tg_unseal_prepared(v, &token, pin, &gate, &object, &policy, &secret) :
                       tg_unseal_gated(v, &seal, pin, &gate, &secret);
        explicit_bzero(&seal, sizeof seal);
        if (r == -TG_ERR_BAD_PIN) {
                unsigned spendable = 1;

                if (turn.pin)
                        tg_pin_cache_refused(pin);
                if (wrong)
                        (*wrong)++;
                if (da_known && tg_da_read(tg_vtpm_esys(v), ESYS_TR_NONE, &da) >= 0 && da.max_failures > 0) {
                        spendable = tg_pin_da_spendable(da.in_lockout, da.failures, da.max_failures,
                                                        config->pin_da_reserve);
                        /* "No tries left" ends the unlock: only from an audited read (da_read_audited()). */
                        if (spendable == 0) {
                                k = da_reread_audited(config, &v, &object, &policy, &da);
                                if (k == -TG_ERR_INTERPOSER)
                                        return k;
                                if (k >= 0)
                                        spendable = da.max_failures == 0 ? 1 :
                                                tg_pin_da_spendable(da.in_lockout, da.failures, da.max_failures,
                                                                    config->pin_da_reserve);
                        }
                        (void) tg_vcache_da_store(config, &da);
                }
                if (!wrong || *wrong >= config->pin_tries)
                        return no_more_pin_tries(config);
                if (spendable == 0)
                        return log_error_rc(-TG_ERR_BAD_PIN, "No more PIN tries: the TPM's remaining "
                                            "dictionary-attack tries are the %u kept in reserve "
                                            "(pin_da_reserve). Use the recovery passphrase.", config->pin_da_reserve);
                log_error("Try again (%u of %u PIN tries left for this unlock).",
                          config->pin_tries - *wrong < spendable ? config->pin_tries - *wrong : spendable,
                          config->pin_tries);
                return -TG_ERR_PIN_RETRY;
        }
        if (r == -TG_ERR_PIN_RETRY) {
                /* A stale copy not sent (pin_turn_take()): the TPM saw nothing. An Unseal answered
                 * "retry" twice (tokens/seal.c): the TPM may have counted it, so this boot's DA state
                 * is read live next time, and it is one of this unlock's PIN tries. */
                tg_vcache_da_drop(config);
                if (!turn.stale_skipped && wrong && ++*wrong >= config->pin_tries)
                        return no_more_pin_tries(config);
                return r;
        }
        if (r == -TG_ERR_LOCKOUT && token.pin) {
                /*
                 * The TPM's "lockout" answer, or an unaudited read after a wrong PIN, sends the user to the
                 * recovery passphrase: only when the audited read agrees. A forged one (the interposer's
                 * answer to a wrong PIN's Unseal) asks for the PIN once more, which counts.
                 */
                tg_vcache_da_drop(config);
                k = da_reread_audited(config, &v, &object, &policy, &da);
                if (k == -TG_ERR_INTERPOSER)
                        return k;
                if (k < 0 || da.max_failures == 0 ||
                    tg_pin_da_spendable(da.in_lockout, da.failures, da.max_failures, config->pin_da_reserve) == 0)
                        return r;
                /* Not in lockout after all: this unlock's own budget decides, never the forged words. */
                if (!wrong || ++*wrong >= config->pin_tries)
                        return no_more_pin_tries(config);
                return log_warning_rc(-TG_ERR_PIN_RETRY, "The TPM's answer said it is in dictionary-attack lockout; "
                                      "read over the verified session it is not, and %u tries remain: the answer was "
                                      "altered on the TPM bus. Type the PIN again (this counts as one of the PIN "
                                      "tries); if this repeats, suspect the TPM bus and run 'tpmguard doctor'.",
                                      da.max_failures - da.failures);
        }
        if (r < 0) {
                /* Lockout, or anything else the DA state may have to do with: read it live next time. */
                if (token.pin)
                        tg_vcache_da_drop(config);
                return r;
        }
        /* The secret goes to libcryptsetup only for the volume enrolled here
         * (tokens/binding.h: decoy volumes). */
        if (cd) {
                r = tg_volume_binding_check(config->state_dir, cd, token.keyslot, secret);
                if (r < 0)
                        return r;
        }
        if (kind != 0) {
                tg_token_alt_view(&token, tg_token_alt_find(&token, kind), &seal);
                update_notice(cd, &token, &seal, kind, counters.reset_count);
                update_marker_write(config, cd, kind);
        }
        *ret_passphrase = TAKE_PTR(secret);
        return 0;
}
