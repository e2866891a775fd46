/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * LUKS2 header helpers (luks.h): what the lifecycle floor asks the header,
 * the token and keyslot queries, and the PBKDFs of the keyslots it adds.
 * Nothing here trusts the header (see luks.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <string.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "error.h"
#include "json-util.h"
#include "log.h"
#include "luks.h"
#include "token.h"

/* ---- header queries ---- */

int tg_luks_tokens_max(void) {
        int n = crypt_token_max(CRYPT_LUKS2);
        return n > 0 ? n : 32;
}

int tg_luks_keyslots_max(void) {
        int n = crypt_keyslot_max(CRYPT_LUKS2);
        return n > 0 ? n : 32;
}

bool tg_luks_token_has_type(struct crypt_device *cd, int id, const char *type) {
        const char *t = NULL;
        crypt_token_info info = crypt_token_status(cd, id, &t);

        return info != CRYPT_TOKEN_INACTIVE && info != CRYPT_TOKEN_INVALID && t && strcmp(t, type) == 0;
}

bool tg_luks_keyslot_active(struct crypt_device *cd, int keyslot) {
        crypt_keyslot_info s;

        if (keyslot < 0)
                return false;
        s = crypt_keyslot_status(cd, keyslot);
        return s == CRYPT_SLOT_ACTIVE || s == CRYPT_SLOT_ACTIVE_LAST;
}

/* Does token id list keyslot in its "keyslots"? */
bool tg_luks_token_references(struct crypt_device *cd, int id, int keyslot) {
        _cleanup_json_ json_object *o = NULL;
        json_object *arr;
        const char *json = NULL;

        if (crypt_token_json_get(cd, id, &json) < 0 || !json)
                return false;
        o = json_tokener_parse(json);
        if (!o || !json_object_object_get_ex(o, "keyslots", &arr) || !json_object_is_type(arr, json_type_array))
                return false;
        for (size_t i = 0; i < json_object_array_length(arr); i++) {
                const char *s = json_object_get_string(json_object_array_get_idx(arr, i));
                char *end;
                long n;

                if (!s)
                        continue;
                n = strtol(s, &end, 10);
                if (*s && !*end && n == keyslot)
                        return true;
        }
        return false;
}

/* Does any token other than except_token list keyslot? */
bool tg_luks_keyslot_referenced(struct crypt_device *cd, int keyslot, int except_token) {
        for (int id = 0; id < tg_luks_tokens_max(); id++)
                if (id != except_token && tg_luks_token_references(cd, id, keyslot))
                        return true;
        return false;
}

int tg_luks_token_active_keyslot(struct crypt_device *cd, int id) {
        for (int k = 0; k < tg_luks_keyslots_max(); k++)
                if (tg_luks_keyslot_active(cd, k) && tg_luks_token_references(cd, id, k))
                        return k;
        return -1;
}

int tg_luks_token_load(struct crypt_device *cd, int id, tg_token *ret) {
        const char *json = NULL;
        int r;

        r = crypt_token_json_get(cd, id, &json);
        if (r < 0 || !json)
                return log_error_rc(-TG_ERR_NOT_FOUND, "Cannot read token %d: %s", id, strerror(r < 0 ? -r : EINVAL));
        return tg_token_from_string(json, ret);
}

int tg_luks_token_remove(struct crypt_device *cd, int id) {
        int r = crypt_token_json_set(cd, id, NULL);

        return r < 0 ? log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot remove token %d: %s", id, strerror(-r)) : 0;
}

int tg_luks_keyslot_destroy(struct crypt_device *cd, int keyslot) {
        int r;

        if (crypt_keyslot_status(cd, keyslot) == CRYPT_SLOT_ACTIVE_LAST)
                return log_error_rc(-TG_ERR_INVALID, "Keyslot %d is the last keyslot; it is never destroyed.", keyslot);
        r = crypt_keyslot_destroy(cd, keyslot);
        return r < 0 ? log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot destroy keyslot %d: %s", keyslot, strerror(-r)) : 0;
}

int tg_luks_open(const char *device, struct crypt_device **ret) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        struct stat st;
        int r;

        /* libcryptsetup says "Block device required" for a path that does not exist: name the real cause. */
        if (stat(device, &st) < 0)
                return log_error_rc(errno == ENOENT ? -TG_ERR_NOT_FOUND : -TG_ERR_IO, "Cannot open %s: %m", device);
        if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode))
                return log_error_rc(-TG_ERR_INVALID, "%s is neither a block device nor an image file.", device);
        r = crypt_init(&cd, device);
        if (r < 0)
                return log_error_rc(-TG_ERR_NOT_FOUND, "Cannot open %s: %s", device, strerror(-r));
        r = crypt_load(cd, CRYPT_LUKS2, NULL);
        if (r < 0) {
                /* Name what it is, and the way on: tokens exist only in LUKS2. */
                if (crypt_load(cd, CRYPT_LUKS1, NULL) >= 0)
                        return log_error_rc(-TG_ERR_INVALID, "%s is a LUKS1 volume; tpmguard needs LUKS2 (tokens). "
                                            "Convert it with 'cryptsetup convert --type luks2 %s' (back up the header "
                                            "first: 'cryptsetup luksHeaderBackup %s --header-backup-file FILE').",
                                            device, device, device);
                return log_error_rc(-TG_ERR_INVALID, "%s is not a LUKS2 volume: no LUKS header (%s). Give the encrypted "
                                    "partition or image ('lsblk -f' shows crypto_LUKS), not the opened /dev/mapper device.",
                                    device, strerror(-r));
        }
        *ret = TAKE_PTR(cd);
        return 0;
}

int tg_luks_check_writable(const char *device) {
        _cleanup_close_ int fd = open(device, O_RDWR | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        int ro = 0;

        /* Checked before any secret is asked: otherwise the first header write (the pending marker)
         * fails half-way with libcryptsetup's "Input/output error". */
        if (fd < 0 && (errno == EROFS || errno == EACCES || errno == EPERM))
                return log_error_rc(-TG_ERR_IO, "%s is read-only (%m): this command writes its LUKS2 header. Make it "
                                    "writable ('blockdev --setrw %s', a loop device attached without --read-only, or "
                                    "run as root) and run the command again. Nothing was changed.", device, device);
        if (fd < 0)
                return log_error_rc(errno == ENOENT ? -TG_ERR_NOT_FOUND : -TG_ERR_IO, "Cannot open %s for writing: %m",
                                    device);
        /* A block device marked read-only opens for writing all the same; only its writes fail. */
        if (fstat(fd, &st) == 0 && S_ISBLK(st.st_mode) && ioctl(fd, BLKROGET, &ro) == 0 && ro)
                return log_error_rc(-TG_ERR_IO, "%s is read-only: this command writes its LUKS2 header. Make it "
                                    "writable ('blockdev --setrw %s', or a loop device attached without --read-only) "
                                    "and run the command again. Nothing was changed.", device, device);
        return 0;
}

int tg_luks_open_writable(const char *device, struct crypt_device **ret) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        int r;

        r = tg_luks_open(device, &cd);
        if (r < 0)
                return r;
        r = tg_luks_check_writable(device);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(cd);
        return 0;
}

int tg_luks_passphrase_check(struct crypt_device *cd, const char *device, const tg_secret *passphrase) {
        int r = crypt_activate_by_passphrase(cd, NULL, CRYPT_ANY_SLOT, (const char *) passphrase->data,
                                             passphrase->size, 0);

        if (r == -EPERM)
                return log_error_rc(-TG_ERR_BAD_PIN, "No keyslot of %s opens with the given passphrase. Nothing was "
                                    "changed; try again.", device);
        if (r < 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot check the passphrase on %s: %s", device, strerror(-r));
        return r;
}

int tg_keyslot_secret_new(tg_secret **ret) {
        _cleanup_secret_ tg_secret *raw = NULL, *encoded = NULL;
        int r;

        r = tg_secret_new_random(TG_KEYSLOT_SECRET_BYTES, &raw);
        if (r < 0)
                return r;
        r = tg_secret_new(4 * ((TG_KEYSLOT_SECRET_BYTES + 2) / 3) + 1, &encoded);
        if (r < 0)
                return r;
        encoded->size = (size_t) EVP_EncodeBlock(encoded->data, raw->data, (int) raw->size);
        *ret = TAKE_PTR(encoded);
        return 0;
}

/* A high-entropy secret needs no slow KDF; keep unlock fast and initrd memory small (as systemd does). */
static int use_minimal_pbkdf(struct crypt_device *cd) {
        static const struct crypt_pbkdf_type minimal = {
                .type = CRYPT_KDF_PBKDF2,
                .hash = "sha512",
                .iterations = 1000,
                .flags = CRYPT_PBKDF_NO_BENCHMARK,
        };
        int r = crypt_set_pbkdf_type(cd, &minimal);
        return r < 0 ? log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot set the keyslot PBKDF: %s", strerror(-r)) : 0;
}

/*
 * The one rule for a new keyslot (enroll, rotate, reseal, recovery-key, passwd): the first one
 * libcryptsetup reports inactive that no token names. libcryptsetup refuses a header in which a
 * token names a keyslot that does not exist, so in any header it loads this is the first inactive
 * keyslot; the second test only keeps a number a token's "keyslots" entry parses to (tokens are
 * read with strtol) from being handed out again.
 */
int tg_luks_keyslot_free(struct crypt_device *cd, const char *device) {
        for (int k = 0; k < tg_luks_keyslots_max(); k++)
                if (crypt_keyslot_status(cd, k) == CRYPT_SLOT_INACTIVE && !tg_luks_keyslot_referenced(cd, k, -1))
                        return k;
        return log_error_rc(-TG_ERR_CRYPTSETUP, "%s has no free keyslot.", device);
}

bool tg_migratable_token_type(const char *type) {
        return type && (strcmp(type, "systemd-tpm2") == 0 || strcmp(type, "clevis") == 0);
}

int tg_luks_use_minimal_pbkdf(struct crypt_device *cd) {
        return use_minimal_pbkdf(cd);
}

bool tg_luks_keyslot_has_peer_pbkdf(struct crypt_device *cd, int keyslot) {
        struct crypt_pbkdf_type p = {};

        return crypt_keyslot_get_pbkdf(cd, keyslot, &p) >= 0 && p.type && strcmp(p.type, CRYPT_KDF_PBKDF2) == 0 &&
               p.iterations == 1000;
}

bool tg_luks_keyslot_has_minimal_pbkdf(struct crypt_device *cd, int keyslot) {
        struct crypt_pbkdf_type p = {};

        return crypt_keyslot_get_pbkdf(cd, keyslot, &p) >= 0 &&
               p.type && strcmp(p.type, CRYPT_KDF_PBKDF2) == 0 &&
               p.hash && strcmp(p.hash, "sha512") == 0 &&
               p.iterations == 1000;
}

/* ---- keyslots for typed secrets, and the recovery-key label ---- */

int tg_luks_use_human_pbkdf(struct crypt_device *cd, uint32_t time_ms, tg_pbkdf_fingerprint *ret) {
        const struct crypt_pbkdf_type *def = crypt_get_pbkdf_default(CRYPT_LUKS2);
        const struct crypt_pbkdf_type *now;
        struct crypt_pbkdf_type p;
        long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE), cpus = sysconf(_SC_NPROCESSORS_ONLN);
        tg_pbkdf_fingerprint f = {};
        int vk_size, r;

        if (!def || !def->type)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "libcryptsetup has no default PBKDF for LUKS2.");
        p = *def;
        p.flags = 0;
        if (time_ms > 0)
                p.time_ms = time_ms;
        /* The initrd opens this keyslot on this machine: never ask for more than half its memory. */
        if (pages > 0 && page_size > 0 && p.max_memory_kb > (uint64_t) pages * (uint64_t) page_size / 1024 / 2)
                p.max_memory_kb = (uint32_t) ((uint64_t) pages * (uint64_t) page_size / 1024 / 2);
        if (cpus > 0 && p.parallel_threads > (uint32_t) cpus)
                p.parallel_threads = (uint32_t) cpus;
        vk_size = crypt_get_volume_key_size(cd);
        r = crypt_benchmark_pbkdf(cd, &p, "tpmguard", 8, "tpmguard-benchmark-salt-32-bytes", 32,
                                  vk_size > 0 ? (size_t) vk_size : 64, NULL, NULL);
        if (r < 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot benchmark the %s PBKDF: %s", p.type, strerror(-r));
        p.flags = CRYPT_PBKDF_NO_BENCHMARK;
        r = crypt_set_pbkdf_type(cd, &p);
        if (r < 0)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot set the keyslot PBKDF: %s", strerror(-r));
        now = crypt_get_pbkdf_type(cd);
        if (!now || !now->type || strlen(now->type) >= sizeof f.type)
                return log_error_rc(-TG_ERR_CRYPTSETUP, "Cannot read back the keyslot PBKDF.");
        snprintf(f.type, sizeof f.type, "%s", now->type);
        f.iterations = now->iterations;
        f.memory_kb = now->max_memory_kb;
        f.parallel = now->parallel_threads;
        log_debug("Keyslot PBKDF for a typed secret: %s, %u iterations, %u KiB, %u threads.", f.type, f.iterations,
                  f.memory_kb, f.parallel);
        *ret = f;
        return 0;
}

bool tg_luks_keyslot_has_pbkdf(struct crypt_device *cd, int keyslot, const tg_pbkdf_fingerprint *f) {
        struct crypt_pbkdf_type p = {};

        if (!f->type[0] || crypt_keyslot_get_pbkdf(cd, keyslot, &p) < 0 || !p.type || strcmp(p.type, f->type) != 0)
                return false;
        if (strcmp(p.type, CRYPT_KDF_PBKDF2) == 0)
                return p.iterations == f->iterations;
        return p.iterations == f->iterations && p.max_memory_kb == f->memory_kb && p.parallel_threads == f->parallel;
}
