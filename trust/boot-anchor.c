/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The boot anchor. Threat model: an attacker on the TPM bus who resets the
 * TPM after boot and replays the boot's PCR extends, so that a policy on
 * PCRs is satisfied again, while the kernel exports no null_name to compare
 * with. A reset gives the TPM a new NULL seed, so a new NULL key, and moves
 * resetCount; a TPM Restart (Shutdown(STATE) + Startup(CLEAR)) resets the
 * PCRs and moves restartCount. Both values come from an attestation that
 * the pinned key signed over our nonce, after the key was checked to be a
 * NULL-hierarchy primary of the kernel's template (attest.c), so the
 * interposer can fake neither.
 *
 * The anchor file itself is local: root-only, in a private directory on
 * tmpfs. It is not trusted blindly: a file that cannot be parsed, or that is
 * not a private regular file of ours, is reported with a warning and
 * replaced, never taken as a match. A file of another boot is stale and is
 * replaced silently.
 *
 * Suspend and hibernate (design §2.8, "Sleep"): a suspend to RAM is
 * TPM2_Shutdown(STATE) then Startup(STATE), a TPM Resume: restartCount + 1,
 * the NULL seed and the PCRs kept. Hibernate is Shutdown(STATE), power off,
 * and the firmware's Startup(CLEAR): a TPM Restart (restartCount + 1, the
 * NULL seed kept, the PCRs measured anew by the resuming boot), or a TPM
 * Reset (resetCount + 1, a new NULL seed) when the kernel powers off with
 * Shutdown(CLEAR) (HibernateMode=shutdown). Both look like the attack above,
 * so the system-sleep hook announces them: before sleep, "tpmguard sleep
 * pre" records in this file, next to the counters a verification has just
 * authenticated, which sleep starts and a digest of the PCRs the sleep must
 * keep (read in an audited session salted to the certified key); after it,
 * "tpmguard sleep post" re-anchors only when a fresh certification shows
 * the counters moved exactly as that sleep moves them and, after a suspend,
 * the PCRs are the ones recorded. Nothing else accepts a moved counter: the
 * plugin and verify refuse until the hook re-anchored. What remains (the
 * TPM restarted by an attacker while the machine sleeps, PCRs replayed) is
 * in docs/security.md and docs/hardware.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <systemd/sd-id128.h>

#include "boot-anchor.h"
#include "tpmguard-config.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "util.h"

#define ANCHOR_FILE "boot-anchor.json"
#define ANCHOR_MAX_SIZE 4096

/* No anchor is a degraded mode, not a failure of the verification: a warning, and the caller goes on. */
#define anchor_warning_rc(rc, ...) ({ int _anchor_rc_ = (rc); log_warning(__VA_ARGS__); _anchor_rc_; })

static const char *const sleep_kinds[_TG_SLEEP_MAX] = {
        [TG_SLEEP_SUSPEND] = "suspend",
        [TG_SLEEP_HIBERNATE] = "hibernate",
        [TG_SLEEP_HYBRID] = "hybrid-sleep",
        [TG_SLEEP_SUSPEND_THEN_HIBERNATE] = "suspend-then-hibernate",
};

const char *tg_sleep_kind_to_string(tg_sleep_kind k) {
        return k >= 0 && k < _TG_SLEEP_MAX ? sleep_kinds[k] : "?";
}

int tg_sleep_kind_from_string(const char *s, tg_sleep_kind *ret) {
        for (int k = 0; k < _TG_SLEEP_MAX; k++)
                if (s && strcmp(s, sleep_kinds[k]) == 0) {
                        *ret = (tg_sleep_kind) k;
                        return 0;
                }
        return -TG_ERR_INVALID;
}

const char *tg_anchor_kind_to_string(tg_anchor_kind k) {
        return k == TG_ANCHOR_KERNEL ? "kernel" : k == TG_ANCHOR_BOOT ? "boot" : "none";
}

const char *tg_anchor_detects(tg_anchor_kind k) {
        switch (k) {
        case TG_ANCHOR_KERNEL:
                return "a TPM reset after the kernel created its NULL key is detected";
        case TG_ANCHOR_BOOT:
                return "a TPM reset or restart after this boot's first verification is detected; one before it is not";
        default:
                return "a TPM reset during this boot is not detected";
        }
}

/* The sleep this boot's anchor announces, if any ("sleep" in the file). */
typedef struct anchor_sleep {
        bool announced;
        bool refused;           /* the sleep hook's "post" refused this resume */
        tg_sleep_kind kind;
        uint32_t pcr_mask;
        TPM2B_DIGEST pcr_digest;
} anchor_sleep;

static int anchor_write(const char *path, const char *boot_id, const TPM2B_NAME *null_name,
                        uint32_t reset_count, uint32_t restart_count, const anchor_sleep *sleep) {
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_free_ char *hex = NULL, *digest_hex = NULL;
        const char *text;

        if (!o || tg_hex_encode(null_name->name, null_name->size, &hex) < 0)
                return -TG_ERR_NOMEM;
        if (json_object_object_add(o, "version", json_object_new_int(1)) < 0 ||
            json_object_object_add(o, "boot_id", json_object_new_string(boot_id)) < 0 ||
            json_object_object_add(o, "null_name", json_object_new_string(hex)) < 0 ||
            json_object_object_add(o, "reset_count", json_object_new_int64(reset_count)) < 0 ||
            json_object_object_add(o, "restart_count", json_object_new_int64(restart_count)) < 0)
                return -TG_ERR_NOMEM;
        if (sleep && sleep->announced) {
                json_object *so = json_object_new_object();

                if (!so || json_object_object_add(o, "sleep", so) < 0) {
                        json_object_put(so);
                        return -TG_ERR_NOMEM;
                }
                if (tg_hex_encode(sleep->pcr_digest.buffer, sleep->pcr_digest.size, &digest_hex) < 0 ||
                    json_object_object_add(so, "kind", json_object_new_string(tg_sleep_kind_to_string(sleep->kind))) < 0 ||
                    json_object_object_add(so, "pcr_mask", json_object_new_int64(sleep->pcr_mask)) < 0 ||
                    json_object_object_add(so, "pcr_digest", json_object_new_string(digest_hex)) < 0 ||
                    (sleep->refused && json_object_object_add(so, "refused", json_object_new_boolean(true)) < 0))
                        return -TG_ERR_NOMEM;
        }
        text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
        return tg_write_file_atomic(path, text, strlen(text), 0600);
}

static bool get_u32(json_object *o, const char *key, uint32_t *ret) {
        json_object *v;
        int64_t n;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return false;
        n = json_object_get_int64(v);
        if (n < 0 || n > UINT32_MAX)
                return false;
        *ret = (uint32_t) n;
        return true;
}

typedef struct anchor {
        char boot_id[SD_ID128_STRING_MAX];
        TPM2B_NAME null_name;
        uint32_t reset_count, restart_count;
        anchor_sleep sleep;
} anchor;

/* The optional "sleep" object: {"kind": ..., "pcr_mask": N, "pcr_digest": "<sha256 hex>"}. */
static int sleep_read(json_object *o, anchor_sleep *ret) {
        _cleanup_free_ uint8_t *digest = NULL;
        json_object *so, *v;
        size_t size;
        const char *s;

        if (!json_object_object_get_ex(o, "sleep", &so))
                return 0;
        if (!json_object_is_type(so, json_type_object) ||
            !json_object_object_get_ex(so, "kind", &v) || !json_object_is_type(v, json_type_string) ||
            tg_sleep_kind_from_string(json_object_get_string(v), &ret->kind) < 0 ||
            !get_u32(so, "pcr_mask", &ret->pcr_mask) || ret->pcr_mask != TG_SLEEP_PCR_MASK ||
            !json_object_object_get_ex(so, "pcr_digest", &v) || !json_object_is_type(v, json_type_string))
                return -TG_ERR_INVALID;
        s = json_object_get_string(v);
        if (strlen(s) != 64 || tg_hex_decode(s, strlen(s), &digest, &size) < 0 || size != 32)
                return -TG_ERR_INVALID;
        memcpy(ret->pcr_digest.buffer, digest, size);
        ret->pcr_digest.size = (UINT16) size;
        if (json_object_object_get_ex(so, "refused", &v)) {
                if (!json_object_is_type(v, json_type_boolean) || !json_object_get_boolean(v))
                        return -TG_ERR_INVALID;
                ret->refused = true;
        }
        ret->announced = true;
        return 0;
}

/* 0: parsed; -TG_ERR_NOT_FOUND: no file; -TG_ERR_INVALID: damaged or not a private file of ours. */
static int anchor_read(const char *path, anchor *ret) {
        _cleanup_free_ uint8_t *name = NULL;
        _cleanup_json_ json_object *o = NULL;
        char problem[TG_JSON_PROBLEM_MAX];
        size_t name_size;
        json_object *v;
        struct stat st;
        const char *s;
        anchor a = {};
        int r;

        if (lstat(path, &st) < 0)
                return errno == ENOENT ? -TG_ERR_NOT_FOUND : -TG_ERR_INVALID;
        if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
                return log_debug_rc(-TG_ERR_INVALID, "%s is not a private file of ours.", path);
        r = tg_json_read_object(path, ANCHOR_MAX_SIZE, &o, problem, sizeof problem);
        if (r < 0)
                return log_debug_rc(-TG_ERR_INVALID, "%s %s.", path, r == -TG_ERR_INVALID ? problem : "cannot be read");
        if (!json_object_object_get_ex(o, "version", &v) || !json_object_is_type(v, json_type_int) ||
            json_object_get_int(v) != 1 ||
            !json_object_object_get_ex(o, "boot_id", &v) || !json_object_is_type(v, json_type_string) ||
            strlen(json_object_get_string(v)) != SD_ID128_STRING_MAX - 1 ||
            !json_object_object_get_ex(o, "null_name", &v) || !json_object_is_type(v, json_type_string) ||
            !get_u32(o, "reset_count", &a.reset_count) || !get_u32(o, "restart_count", &a.restart_count))
                return log_debug_rc(-TG_ERR_INVALID, "%s: malformed.", path);
        json_object_object_get_ex(o, "boot_id", &v);
        memcpy(a.boot_id, json_object_get_string(v), SD_ID128_STRING_MAX);
        json_object_object_get_ex(o, "null_name", &v);
        s = json_object_get_string(v);
        if (strlen(s) != 2 * 34 || tg_hex_decode(s, strlen(s), &name, &name_size) < 0 || name_size != 34 ||
            name[0] != 0x00 || name[1] != 0x0b)
                return log_debug_rc(-TG_ERR_INVALID, "%s: malformed null_name.", path);
        memcpy(a.null_name.name, name, name_size);
        a.null_name.size = (UINT16) name_size;
        if (sleep_read(o, &a.sleep) < 0)
                return log_debug_rc(-TG_ERR_INVALID, "%s: malformed sleep record.", path);
        *ret = a;
        return 0;
}

/*
 * Did the key and the counters move exactly as the announced sleep moves
 * them? Measured on swtpm (tests/integration/test-boot-anchor.sh), as the spec
 * says (TPM 2.0 Part 1, "TPM Restart", "TPM Reset"):
 *  - a suspend to RAM, Shutdown(STATE) then Startup(STATE), is a TPM Resume: the
 *    NULL key and resetCount kept, restartCount + 1, the PCRs kept;
 *  - a hibernation, Shutdown(STATE), power off, the firmware's Startup(CLEAR), is a
 *    TPM Restart: the NULL key and resetCount kept, restartCount + 1, the PCRs reset
 *    and measured anew by the resuming boot; powered off with Shutdown(CLEAR) or none
 *    (HibernateMode=shutdown, a power loss), a TPM Reset: resetCount + 1, a new NULL
 *    key (which the caller has just certified by the pinned key), restartCount 0;
 *  - hybrid-sleep writes the image, then suspends (Shutdown(STATE) first): a Resume,
 *    or, when power is lost in between, a Restart, never a Reset;
 *  - suspend-then-hibernate without systemd's phase (SYSTEMD_SLEEP_ACTION, which the
 *    hook turns into suspend or hibernate): a Resume, then possibly the hibernation
 *    (restartCount + 2, or a Reset).
 * sleep_resumed() says which moves kept the PCRs, so that they are compared.
 */
static bool sleep_explains(const anchor *a, const TPM2B_NAME *null_name, uint32_t reset_count, uint32_t restart_count) {
        bool same_key = a->null_name.size == null_name->size &&
                        memcmp(a->null_name.name, null_name->name, null_name->size) == 0;
        uint32_t max_restarts = a->sleep.kind == TG_SLEEP_SUSPEND_THEN_HIBERNATE ? 2 : 1;

        if (!a->sleep.announced)
                return false;
        if (same_key && reset_count == a->reset_count && restart_count > a->restart_count &&
            restart_count - a->restart_count <= max_restarts)
                return true;
        return (a->sleep.kind == TG_SLEEP_HIBERNATE || a->sleep.kind == TG_SLEEP_SUSPEND_THEN_HIBERNATE) &&
               !same_key && a->reset_count != UINT32_MAX && reset_count == a->reset_count + 1 && restart_count == 0;
}

/*
 * After a move sleep_explains() accepted: must the PCRs be the ones recorded before sleep?
 * After a suspend and a hybrid-sleep, yes (a Resume keeps them; a Restart in its place, an
 * attacker's, resets them, and a replay rarely restores them all); after a suspend-then-hibernate
 * that moved restartCount by one only (it woke before hibernating), yes. After a hibernation
 * the resuming boot measured anew: nothing to compare.
 */
static bool sleep_resumed(const anchor *a, uint32_t reset_count, uint32_t restart_count) {
        switch (a->sleep.kind) {
        case TG_SLEEP_SUSPEND:
        case TG_SLEEP_HYBRID:
                return true;
        case TG_SLEEP_SUSPEND_THEN_HIBERNATE:
                return reset_count == a->reset_count && restart_count == a->restart_count + 1;
        default:
                return false;
        }
}

/* The refusal when the counters moved and no announced sleep explains it: the likely cause first. */
static int counters_moved(const anchor *a, const char *path, uint32_t reset_count, uint32_t restart_count) {
        if (a->sleep.announced)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM's counters moved in a way the %s announced before sleep does not "
                                    "explain (resetCount %" PRIu32 " → %" PRIu32 ", restartCount %" PRIu32 " → %"
                                    PRIu32 "; boot anchor %s): the TPM was reset or restarted more than that sleep "
                                    "does, and its PCRs may have been replayed. The TPM will not be used until the "
                                    "next boot; unlock with the recovery passphrase and investigate the TPM bus.",
                                    tg_sleep_kind_to_string(a->sleep.kind), a->reset_count, reset_count,
                                    a->restart_count, restart_count, path);
        if (reset_count == a->reset_count)
                return log_alert_rc(-TG_ERR_INTERPOSER,
                                    "The TPM was restarted since this boot's first verification (restartCount %"
                                    PRIu32 " → %" PRIu32 ", resetCount unchanged; boot anchor %s), and no suspend or "
                                    "hibernate was announced. If this machine just woke up, the likely cause is that "
                                    "tpmguard's sleep hook (%s) is missing or did not run; an attacker who restarts "
                                    "the TPM and replays its PCRs looks the same. The TPM will not be used until the "
                                    "next boot: unlock with the recovery passphrase if asked, reboot, and check the "
                                    "hook with 'tpmguard doctor'. If the machine did not sleep, investigate the TPM bus.",
                                    a->restart_count, restart_count, path, TPMGUARD_SLEEP_HOOK);
        return log_alert_rc(-TG_ERR_INTERPOSER,
                            "The TPM was reset or restarted since this boot's first verification "
                            "(resetCount %" PRIu32 " → %" PRIu32 ", restartCount %" PRIu32 " → %"
                            PRIu32 "; boot anchor %s): its PCRs may have been replayed. No sleep explains a reset. "
                            "The TPM will not be used; unlock with the recovery passphrase and investigate.",
                            a->reset_count, reset_count, a->restart_count, restart_count, path);
}

static int anchor_dir_path(const char *dir, char boot_id[SD_ID128_STRING_MAX], char **ret_path) {
        sd_id128_t id;
        int r;

        r = sd_id128_get_boot(&id);
        if (r < 0)
                return anchor_warning_rc(-TG_ERR_IO, "No boot ID (%s): no boot anchor.", strerror(-r));
        sd_id128_to_string(id, boot_id);

        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return anchor_warning_rc(-TG_ERR_IO, "Cannot create %s for the boot anchor: %m", dir);
        if (tg_private_dir_check(dir) < 0)
                return anchor_warning_rc(-TG_ERR_INVALID,
                                      "%s is not a private directory of ours: no boot anchor. Make it root-only (0700).",
                                      dir);
        return tg_asprintf(ret_path, "%s/%s", dir, ANCHOR_FILE);
}

/* After the sleep hook refused the resume (tg_anchor_resume()): the alarm, naming that refusal. */
static int sleep_refused(const anchor *a, const char *path) {
        return log_alert_rc(-TG_ERR_INTERPOSER,
                            "tpmguard's sleep hook refused the resume from the %s (boot anchor %s): the TPM's PCRs "
                            "were not the ones it had before the sleep; its message, in 'journalctl -b -t tpmguard', "
                            "says the likely cause. The TPM will not be used until the next boot.",
                            tg_sleep_kind_to_string(a->sleep.kind), path);
}

int tg_anchor_check(const char *dir, const TPM2B_NAME *null_name, uint32_t reset_count, uint32_t restart_count,
                    bool accept_resume, tg_anchor_state *ret_state) {
        _cleanup_free_ char *path = NULL;
        char boot_id[SD_ID128_STRING_MAX];
        tg_anchor_state state = TG_ANCHOR_RECORDED;
        anchor a;
        int r;

        r = anchor_dir_path(dir, boot_id, &path);
        if (r < 0)
                return r;

        r = anchor_read(path, &a);
        if (r == -TG_ERR_INVALID) {
                log_warning("The boot anchor %s is damaged or not a private file of ours: it is ignored and "
                            "recorded anew. This verification was a full one, but a TPM reset earlier in this boot "
                            "cannot be detected. If nobody edited that file, investigate.", path);
                state = TG_ANCHOR_REPLACED_DAMAGED;
                (void) unlink(path);
        } else if (r == 0 && strcmp(a.boot_id, boot_id) == 0) {
                bool same_key = a.null_name.size == null_name->size &&
                                memcmp(a.null_name.name, null_name->name, null_name->size) == 0;

                if (same_key && a.reset_count == reset_count && a.restart_count == restart_count) {
                        *ret_state = TG_ANCHOR_MATCHED;
                        return 0;
                }
                if (a.sleep.announced && a.sleep.refused)
                        return sleep_refused(&a, path);
                if (sleep_explains(&a, null_name, reset_count, restart_count)) {
                        /* Only the sleep hook's "post" accepts it, and re-anchors after its PCR check
                         * (tg_anchor_resume); everyone else waits for that. */
                        if (accept_resume) {
                                *ret_state = TG_ANCHOR_RESUMING;
                                return 0;
                        }
                        /*
                         * Not an alarm: an unlock between the thaw of user space and the sleep hook's
                         * "post" meets exactly this, on every resume. Not a verification either: the
                         * TPM is not used until the hook has compared the PCRs (which refuses a resume
                         * that is not one, loudly). "Not ready, try again": -EAGAIN for the plugin.
                         */
                        return log_notice_rc(-TG_ERR_TPM_UNREACHABLE,
                                             "The TPM was %s since this boot's anchor (%s), as the %s announced before "
                                             "sleep does, and tpmguard's sleep hook (%s, 'tpmguard sleep post') has not "
                                             "yet checked the PCRs and confirmed the resume. The TPM is not used until "
                                             "then: try again in a moment. If this persists, run 'tpmguard doctor'.",
                                             reset_count != a.reset_count ? "reset" : "restarted", path,
                                             tg_sleep_kind_to_string(a.sleep.kind), TPMGUARD_SLEEP_HOOK);
                }
                if (!same_key)
                        return log_alert_rc(-TG_ERR_INTERPOSER,
                                            "The TPM's NULL key is not the one this boot's first verification "
                                            "certified (boot anchor %s): the TPM was reset since, or an interposer "
                                            "sits on the TPM bus. The TPM will not be used; unlock with the recovery "
                                            "passphrase and investigate.", path);
                return counters_moved(&a, path, reset_count, restart_count);
        } else if (r == 0)
                log_debug("The boot anchor %s is from another boot: recording this boot's.", path);

        r = anchor_write(path, boot_id, null_name, reset_count, restart_count, NULL);
        if (r < 0)
                return anchor_warning_rc(r, "Cannot record the boot anchor in %s: a TPM reset during this boot "
                                         "cannot be detected.", path);
        log_debug("Boot anchor recorded in %s.", path);
        *ret_state = state;
        return 0;
}

/* This boot's anchor (the caller compares it with what it has just verified). */
static int anchor_current(const char *dir, char boot_id[SD_ID128_STRING_MAX], char **ret_path, anchor *ret) {
        _cleanup_free_ char *path = NULL;
        anchor a;
        int r;

        r = anchor_dir_path(dir, boot_id, &path);
        if (r < 0)
                return r;
        r = anchor_read(path, &a);
        if (r < 0 || strcmp(a.boot_id, boot_id) != 0)
                return log_error_rc(-TG_ERR_NOT_FOUND, "This boot has no usable boot anchor in %s: nothing to "
                                    "announce a sleep to. Run 'tpmguard verify' first.", dir);
        *ret_path = TAKE_PTR(path);
        *ret = a;
        return 0;
}

int tg_anchor_sleep_begin(const char *dir, const TPM2B_NAME *null_name, uint32_t reset_count, uint32_t restart_count,
                          tg_sleep_kind kind, const TPM2B_DIGEST *pcr_digest) {
        _cleanup_free_ char *path = NULL;
        char boot_id[SD_ID128_STRING_MAX];
        anchor a;
        int r;

        r = anchor_current(dir, boot_id, &path, &a);
        if (r < 0)
                return r;
        /* The caller's verification matched this anchor; a change since is a race we do not paper over. */
        if (a.null_name.size != null_name->size || memcmp(a.null_name.name, null_name->name, null_name->size) != 0 ||
            a.reset_count != reset_count || a.restart_count != restart_count)
                return log_error_rc(-TG_ERR_INTERPOSER, "The boot anchor %s changed during the verification before "
                                    "sleep: the sleep is not announced.", path);
        if (pcr_digest->size != 32)
                return -TG_ERR_INVALID;
        a.sleep = (anchor_sleep) { .announced = true, .kind = kind, .pcr_mask = TG_SLEEP_PCR_MASK,
                                   .pcr_digest = *pcr_digest };
        r = anchor_write(path, boot_id, &a.null_name, a.reset_count, a.restart_count, &a.sleep);
        if (r < 0)
                return log_error_rc(r, "Cannot write the boot anchor %s: the %s is not announced, and the TPM will "
                                    "be refused after it until the next boot.", path, tg_sleep_kind_to_string(kind));
        log_debug("Boot anchor %s: %s announced.", path, tg_sleep_kind_to_string(kind));
        return 0;
}

int tg_anchor_resume(const char *dir, const TPM2B_NAME *null_name, uint32_t reset_count, uint32_t restart_count,
                     const TPM2B_DIGEST *pcr_digest, bool *ret_reanchored) {
        _cleanup_free_ char *path = NULL;
        char boot_id[SD_ID128_STRING_MAX];
        bool moved;
        anchor a;
        int r;

        r = anchor_current(dir, boot_id, &path, &a);
        if (r < 0)
                return r;
        moved = a.null_name.size != null_name->size ||
                memcmp(a.null_name.name, null_name->name, null_name->size) != 0 ||
                a.reset_count != reset_count || a.restart_count != restart_count;
        if (!a.sleep.announced) {
                if (moved)
                        return counters_moved(&a, path, reset_count, restart_count);
                *ret_reanchored = false;
                return 0; /* nothing announced, nothing moved: a post without its pre */
        }
        if (a.sleep.refused)
                return sleep_refused(&a, path);
        if (moved) {
                if (!sleep_explains(&a, null_name, reset_count, restart_count))
                        return counters_moved(&a, path, reset_count, restart_count);
                if (sleep_resumed(&a, reset_count, restart_count) &&
                    (pcr_digest->size != a.sleep.pcr_digest.size ||
                     memcmp(pcr_digest->buffer, a.sleep.pcr_digest.buffer, pcr_digest->size) != 0)) {
                        /*
                         * The refusal is recorded with the announcement (the anchor kept as it was):
                         * verifications after it meet the alarm that names it, not the "try again" of a
                         * resume still to be confirmed, nor "no sleep announced". Best effort: if the
                         * write fails, they keep refusing with that message.
                         */
                        a.sleep.refused = true;
                        (void) anchor_write(path, boot_id, &a.null_name, a.reset_count, a.restart_count, &a.sleep);
                        if (a.sleep.kind == TG_SLEEP_HYBRID)
                                return log_alert_rc(-TG_ERR_INTERPOSER,
                                                    "The TPM's PCRs after the hybrid-sleep are not the ones it had "
                                                    "before (restartCount %" PRIu32 " → %" PRIu32 "; boot anchor %s). "
                                                    "Likely cause: the power ran out during the sleep and the machine "
                                                    "resumed from disk, through a boot that measured the PCRs anew; "
                                                    "then this is expected: reboot, and the TPM is used again. If the "
                                                    "machine had power, the TPM was started anew and its PCRs replayed "
                                                    "during the sleep: unlock with the recovery passphrase and "
                                                    "investigate the TPM bus. The TPM will not be used until the next "
                                                    "boot.", a.restart_count, restart_count, path);
                        return log_alert_rc(-TG_ERR_INTERPOSER,
                                            "The TPM was restarted during the %s as a resume does (restartCount %"
                                            PRIu32 " → %" PRIu32 "), but its PCRs are not the ones it had before "
                                            "(boot anchor %s): the TPM was started anew, not resumed, and its PCRs "
                                            "were reset or replayed, or a program extended a PCR during the sleep. The "
                                            "TPM will not be used until the next boot; unlock with the recovery "
                                            "passphrase and investigate the TPM bus.",
                                            tg_sleep_kind_to_string(a.sleep.kind), a.restart_count, restart_count,
                                            path);
                }
        }
        r = anchor_write(path, boot_id, null_name, reset_count, restart_count, NULL);
        if (r < 0)
                return log_error_rc(r, "Cannot re-anchor in %s after the %s.", path,
                                    tg_sleep_kind_to_string(a.sleep.kind));
        log_debug("Boot anchor %s: %s.", path, moved ? "re-anchored after the resume" : "the sleep did not happen");
        *ret_reanchored = moved;
        return 0;
}

int tg_anchor_names(const char *dir, const TPM2B_NAME *null_name) {
        _cleanup_free_ char *path = NULL;
        char boot_id[SD_ID128_STRING_MAX];
        sd_id128_t id;
        anchor a;
        int r;

        if (sd_id128_get_boot(&id) < 0)
                return -TG_ERR_NOT_FOUND;
        sd_id128_to_string(id, boot_id);
        r = tg_asprintf(&path, "%s/%s", dir, ANCHOR_FILE);
        if (r < 0)
                return r;
        if (anchor_read(path, &a) < 0 || strcmp(a.boot_id, boot_id) != 0)
                return -TG_ERR_NOT_FOUND;
        if (a.null_name.size != null_name->size || memcmp(a.null_name.name, null_name->name, null_name->size) != 0)
                return log_debug_rc(-TG_ERR_INVALID, "cache: not the NULL key of this boot's anchor.");
        return 0;
}
