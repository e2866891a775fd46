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
 */
#include <errno.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <systemd/sd-id128.h>

#include "boot-anchor.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "util.h"

#define ANCHOR_FILE "boot-anchor.json"
#define ANCHOR_MAX_SIZE 4096

/* No anchor is a degraded mode, not a failure of the verification: a warning, and the caller goes on. */
#define anchor_warning_rc(rc, ...) ({ int _anchor_rc_ = (rc); log_warning(__VA_ARGS__); _anchor_rc_; })

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

static int anchor_write(const char *path, const char *boot_id, const TPM2B_NAME *null_name,
                        uint32_t reset_count, uint32_t restart_count) {
        _cleanup_json_ json_object *o = json_object_new_object();
        _cleanup_free_ char *hex = NULL;
        const char *text;

        if (!o || tg_hex_encode(null_name->name, null_name->size, &hex) < 0)
                return -TG_ERR_NOMEM;
        if (json_object_object_add(o, "version", json_object_new_int(1)) < 0 ||
            json_object_object_add(o, "boot_id", json_object_new_string(boot_id)) < 0 ||
            json_object_object_add(o, "null_name", json_object_new_string(hex)) < 0 ||
            json_object_object_add(o, "reset_count", json_object_new_int64(reset_count)) < 0 ||
            json_object_object_add(o, "restart_count", json_object_new_int64(restart_count)) < 0)
                return -TG_ERR_NOMEM;
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
} anchor;

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
        *ret = a;
        return 0;
}

int tg_anchor_check(const char *dir, const TPM2B_NAME *null_name, uint32_t reset_count, uint32_t restart_count,
                    tg_anchor_state *ret_state) {
        _cleanup_free_ char *path = NULL;
        char boot_id[SD_ID128_STRING_MAX];
        tg_anchor_state state = TG_ANCHOR_RECORDED;
        struct stat st;
        sd_id128_t id;
        anchor a;
        int r;

        r = sd_id128_get_boot(&id);
        if (r < 0)
                return anchor_warning_rc(-TG_ERR_IO, "No boot ID (%s): no boot anchor.", strerror(-r));
        sd_id128_to_string(id, boot_id);

        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return anchor_warning_rc(-TG_ERR_IO, "Cannot create %s for the boot anchor: %m", dir);
        if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
                return anchor_warning_rc(-TG_ERR_INVALID,
                                      "%s is not a private directory of ours: no boot anchor. Make it root-only (0700).",
                                      dir);
        r = tg_asprintf(&path, "%s/%s", dir, ANCHOR_FILE);
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
                if (a.null_name.size != null_name->size ||
                    memcmp(a.null_name.name, null_name->name, null_name->size) != 0)
                        return log_alert_rc(-TG_ERR_INTERPOSER,
                                            "The TPM's NULL key is not the one this boot's first verification "
                                            "certified (boot anchor %s): the TPM was reset since, or an interposer "
                                            "sits on the TPM bus. The TPM will not be used; unlock with the recovery "
                                            "passphrase and investigate.", path);
                if (a.reset_count != reset_count || a.restart_count != restart_count)
                        return log_alert_rc(-TG_ERR_INTERPOSER,
                                            "The TPM was reset or restarted since this boot's first verification "
                                            "(resetCount %" PRIu32 " → %" PRIu32 ", restartCount %" PRIu32 " → %"
                                            PRIu32 "; boot anchor %s): its PCRs may have been replayed. The TPM "
                                            "will not be used; unlock with the recovery passphrase and investigate "
                                            "(a suspend and resume also moves restartCount).",
                                            a.reset_count, reset_count, a.restart_count, restart_count, path);
                *ret_state = TG_ANCHOR_MATCHED;
                return 0;
        } else if (r == 0)
                log_debug("The boot anchor %s is from another boot: recording this boot's.", path);

        r = anchor_write(path, boot_id, null_name, reset_count, restart_count);
        if (r < 0)
                return anchor_warning_rc(r, "Cannot record the boot anchor in %s: a TPM reset during this boot "
                                         "cannot be detected.", path);
        log_debug("Boot anchor recorded in %s.", path);
        *ret_state = state;
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
