/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The machine's tpmguard volumes (volumes.h). Read-only: sd-device lists the
 * block devices, libblkid names the LUKS2 ones by their superblock, and only
 * those are opened with libcryptsetup to count tpmguard tokens. Every field
 * printed comes from a header or crypttab, which anyone with write access to
 * them controls: the caller sanitizes the strings (tg_json_sanitize_strings).
 */
#include <blkid.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <systemd/sd-device.h>

#include "crypttab.h"
#include "device.h"
#include "error.h"
#include "json-util.h"
#include "log.h"
#include "luks.h"
#include "token.h"
#include "volumes.h"

#define VOLUMES_MAX 1024  /* block devices looked at: a bound, not a limit any machine meets */


/* Probing every device: a volume that does not open is not listed, and its error is not this command's. */
static int quiet_begin(void) {
        int saved = tg_log_get_max_level();
        tg_log_set_max_level(LOG_CRIT);
        return saved;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(blkid_probe, blkid_free_probe);

/* 1: a LUKS2 superblock, 0: something else, <0: not probed (errno). */
static int probe_luks2(const char *devname) {
        _cleanup_(blkid_free_probep) blkid_probe pr = NULL;
        const char *type = NULL, *version = NULL;

        pr = blkid_new_probe_from_filename(devname);
        if (!pr)
                return errno > 0 ? -errno : -EIO;
        blkid_probe_enable_superblocks(pr, 1);
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_VERSION);
        if (blkid_do_safeprobe(pr) != 0)
                return 0;
        if (blkid_probe_lookup_value(pr, "TYPE", &type, NULL) != 0 || strcmp(type, "crypto_LUKS") != 0)
                return 0;
        return blkid_probe_lookup_value(pr, "VERSION", &version, NULL) == 0 && strcmp(version, "2") == 0;
}

typedef struct crypttab_ctx {
        const char *path;
        json_object *entries;
} crypttab_ctx;

static int crypttab_entry(const char *name, const char *spec, void *userdata) {
        crypttab_ctx *ctx = userdata;
        _cleanup_free_ char *resolved = NULL;
        json_object *e = json_object_new_object();
        int saved;

        if (!e)
                return -TG_ERR_NOMEM;
        json_object_array_add(ctx->entries, e);
        json_object_object_add(e, "name", json_object_new_string(name));
        json_object_object_add(e, "device", json_object_new_string(spec));
        /* A line that names no device here is listed, unresolved: crypttab is the user's, not ours. */
        saved = quiet_begin();
        if (tg_device_resolve(ctx->path, spec, &resolved) >= 0 && access(resolved, F_OK) < 0) {
                free(resolved);
                resolved = NULL;
        }
        tg_log_set_max_level(saved);
        json_object_object_add(e, "resolved", resolved ? json_object_new_string(resolved) : NULL);
        json_object_object_add(e, "tpmguard", json_object_new_boolean(false));
        return 0;
}

/* The crypttab line whose device is dev (same device number), or NULL. */
static json_object *crypttab_match(json_object *entries, const char *dev) {
        struct stat a, b;

        if (stat(dev, &a) < 0)
                return NULL;
        for (size_t i = 0; i < json_object_array_length(entries); i++) {
                json_object *e = json_object_array_get_idx(entries, i), *r;

                if (json_object_object_get_ex(e, "resolved", &r) && r && stat(json_object_get_string(r), &b) == 0 &&
                    a.st_rdev == b.st_rdev && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
                        return e;
        }
        return NULL;
}

static int volume_add(json_object *volumes, json_object *skipped, json_object *entries, const char *devname) {
        _cleanup_crypt_ struct crypt_device *cd = NULL;
        json_object *v, *tokens, *e, *name;
        int saved, r;

        r = probe_luks2(devname);
        if (r < 0) {
                /* Not root: the user should know the list is partial. */
                if (r == -EACCES || r == -EPERM) {
                        json_object *s = json_object_new_object();
                        if (!s)
                                return -TG_ERR_NOMEM;
                        json_object_object_add(s, "device", json_object_new_string(devname));
                        json_object_object_add(s, "reason", json_object_new_string("permission denied (run as root)"));
                        json_object_array_add(skipped, s);
                }
                return 0;
        }
        if (r == 0)
                return 0;
        saved = quiet_begin();
        r = tg_luks_open(devname, &cd);
        tg_log_set_max_level(saved);
        if (r < 0)
                return 0;
        tokens = json_object_new_array();
        if (!tokens)
                return -TG_ERR_NOMEM;
        for (int id = 0; id < tg_luks_tokens_max(); id++)
                if (tg_luks_token_has_type(cd, id, TG_TOKEN_TYPE))
                        json_object_array_add(tokens, json_object_new_int(id));
        if (json_object_array_length(tokens) == 0) {
                json_object_put(tokens);
                return 0;
        }
        v = json_object_new_object();
        if (!v) {
                json_object_put(tokens);
                return -TG_ERR_NOMEM;
        }
        json_object_array_add(volumes, v);
        json_object_object_add(v, "device", json_object_new_string(devname));
        json_object_object_add(v, "uuid", crypt_get_uuid(cd) ? json_object_new_string(crypt_get_uuid(cd)) : NULL);
        json_object_object_add(v, "tokens", tokens);
        e = crypttab_match(entries, devname);
        if (e) {
                json_object_object_add(e, "tpmguard", json_object_new_boolean(true));
                json_object_object_get_ex(e, "name", &name);
                json_object_object_add(v, "crypttab", json_object_get(name));
        } else
                json_object_object_add(v, "crypttab", NULL);
        return 0;
}

int tg_volumes_list(const char *crypttab_path, json_object **ret) {
        _cleanup_(sd_device_enumerator_unrefp) sd_device_enumerator *en = NULL;
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *volumes = json_object_new_array(), *entries = json_object_new_array(),
                    *skipped = json_object_new_array();
        unsigned n = 0;
        int r;

        if (!o || !volumes || !entries || !skipped) {
                json_object_put(volumes);
                json_object_put(entries);
                json_object_put(skipped);
                return -TG_ERR_NOMEM;
        }
        json_object_object_add(o, "volumes", volumes);
        json_object_object_add(o, "crypttab", entries);
        json_object_object_add(o, "skipped", skipped);

        r = tg_crypttab_foreach(crypttab_path, crypttab_entry, &(crypttab_ctx) { .path = crypttab_path, .entries = entries });
        if (r < 0)
                return r;

        r = sd_device_enumerator_new(&en);
        if (r >= 0)
                r = sd_device_enumerator_add_match_subsystem(en, "block", true);
        /* Without udev (a container, an early boot) no device is "initialized": list them all the same. */
        if (r >= 0)
                r = sd_device_enumerator_allow_uninitialized(en);
        if (r < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot list the block devices: %s", strerror(-r));
        for (sd_device *d = sd_device_enumerator_get_device_first(en); d && n < VOLUMES_MAX;
             d = sd_device_enumerator_get_device_next(en), n++) {
                const char *devname = NULL;

                if (sd_device_get_devname(d, &devname) < 0 || !devname)
                        continue;
                r = volume_add(volumes, skipped, entries, devname);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(o);
        return 0;
}

void tg_volumes_print(json_object *list, FILE *f) {
        json_object *volumes, *entries, *skipped, *x;

        json_object_object_get_ex(list, "volumes", &volumes);
        json_object_object_get_ex(list, "crypttab", &entries);
        json_object_object_get_ex(list, "skipped", &skipped);
        if (json_object_array_length(volumes) == 0)
                fprintf(f, "No LUKS2 volume with a tpmguard token on this machine. Enroll one: 'tpmguard enroll DEV' "
                        "('lsblk -f' shows the crypto_LUKS partitions).\n");
        for (size_t i = 0; i < json_object_array_length(volumes); i++) {
                json_object *v = json_object_array_get_idx(volumes, i), *tokens, *uuid, *ct;

                json_object_object_get_ex(v, "tokens", &tokens);
                json_object_object_get_ex(v, "uuid", &uuid);
                json_object_object_get_ex(v, "crypttab", &ct);
                json_object_object_get_ex(v, "device", &x);
                fprintf(f, "%s: UUID %s, %zu tpmguard token%s, %s%s\n", json_object_get_string(x),
                        uuid ? json_object_get_string(uuid) : "?", json_object_array_length(tokens),
                        json_object_array_length(tokens) == 1 ? "" : "s", ct ? "crypttab name " : "not in crypttab",
                        ct ? json_object_get_string(ct) : "");
        }
        for (size_t i = 0; i < json_object_array_length(entries); i++) {
                json_object *e = json_object_array_get_idx(entries, i), *name, *dev, *res, *tg;

                json_object_object_get_ex(e, "name", &name);
                json_object_object_get_ex(e, "device", &dev);
                json_object_object_get_ex(e, "resolved", &res);
                json_object_object_get_ex(e, "tpmguard", &tg);
                fprintf(f, "crypttab %s: %s%s%s%s\n", json_object_get_string(name), json_object_get_string(dev),
                        res ? " = " : " (no such device here)", res ? json_object_get_string(res) : "",
                        json_object_get_boolean(tg) ? ", tpmguard token" : "");
        }
        for (size_t i = 0; i < json_object_array_length(skipped); i++) {
                json_object *s = json_object_array_get_idx(skipped, i), *reason;

                json_object_object_get_ex(s, "device", &x);
                json_object_object_get_ex(s, "reason", &reason);
                fprintf(f, "skipped %s: %s\n", json_object_get_string(x), json_object_get_string(reason));
        }
        fprintf(f, "'tpmguard status DEV' shows one volume in full.\n");
}
