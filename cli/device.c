/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Device names users type (device.h). The tags go to libblkid, which reads
 * udev's /dev/disk links or probes the block devices itself; crypttab is
 * hostile text, read bounded by crypttab.c, and a crypttab line only names
 * a device: whatever it says, the volume's own header is what the command
 * then checks.
 */
#include <blkid.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "crypttab.h"
#include "device.h"
#include "error.h"
#include "log.h"
#include "macro.h"

static bool is_tag(const char *s) {
        static const char *const tags[] = { "UUID=", "PARTUUID=", "LABEL=", "PARTLABEL=" };

        for (size_t i = 0; i < ELEMENTSOF(tags); i++)
                if (strncmp(s, tags[i], strlen(tags[i])) == 0)
                        return true;
        return false;
}

/*
 * How many block devices carry the tag, probed afresh (not from a stale
 * cache); names the first two in first and second. A copy of the volume, or
 * a decoy an attacker plugged in, carries the same UUID: a tag that names
 * two devices names neither, since enroll would record the decoy's volume
 * key as this machine's (docs/design.md §9.1, volume binding).
 */
static unsigned tag_count(const char *tag, char *first, char *second, size_t size) {
        _cleanup_free_ char *name = strndup(tag, (size_t) (strchr(tag, '=') - tag));
        const char *value = strchr(tag, '=') + 1;
        blkid_cache cache = NULL;
        blkid_dev_iterate it;
        blkid_dev dev;
        unsigned n = 0;

        if (!name || blkid_get_cache(&cache, "/dev/null") < 0)
                return 0;
        if (blkid_probe_all(cache) < 0 || !(it = blkid_dev_iterate_begin(cache))) {
                blkid_put_cache(cache);
                return 0;
        }
        (void) blkid_dev_set_search(it, name, value);
        while (blkid_dev_next(it, &dev) == 0) {
                dev = blkid_verify(cache, dev);
                if (!dev)
                        continue;
                snprintf(n == 0 ? first : second, size, "%s", blkid_dev_devname(dev));
                if (++n >= 2)
                        break;
        }
        blkid_dev_iterate_end(it);
        blkid_put_cache(cache);
        return n;
}

static int tag_resolve(const char *tag, const char *origin, char **ret) {
        char first[256] = "", second[256] = "";
        const char *value = strchr(tag, '=') + 1;
        char *dev;

        if (*value == '\0' || strlen(tag) > 256)
                return log_error_rc(-TG_ERR_INVALID, "\"%.64s\"%s is not a valid tag (UUID=..., PARTUUID=...).", tag,
                                    origin ?: "");
        if (tag_count(tag, first, second, sizeof first) >= 2)
                return log_error_rc(-TG_ERR_INVALID, "%s%s names more than one block device (%s and %s): a copy of "
                                    "the volume, or a decoy, carries the same identifier. Name the device by its "
                                    "path, after checking which one is yours.", tag, origin ?: "", first, second);
        dev = blkid_evaluate_tag(tag, NULL, NULL);
        if (!dev)
                return log_error_rc(-TG_ERR_NOT_FOUND, "No block device has %s%s ('lsblk -o NAME,UUID,PARTUUID' "
                                    "lists them).", tag, origin ?: "");
        *ret = dev;
        return 0;
}

int tg_device_resolve(const char *crypttab_path, const char *name, char **ret) {
        _cleanup_free_ char *spec = NULL;
        char origin[300];
        struct stat st;
        int r;

        if (is_tag(name))
                return tag_resolve(name, NULL, ret);
        /* A path, or a file in the current directory: as given. */
        if (strchr(name, '/') || stat(name, &st) == 0) {
                *ret = strdup(name);
                return *ret ? 0 : -TG_ERR_NOMEM;
        }
        r = tg_crypttab_lookup(crypttab_path, name, &spec);
        if (r == -TG_ERR_NOT_FOUND) {
                *ret = strdup(name);
                return *ret ? 0 : -TG_ERR_NOMEM;
        }
        if (r < 0)
                return r;
        snprintf(origin, sizeof origin, " (crypttab name \"%.64s\" in %.200s)", name, crypttab_path);
        if (is_tag(spec))
                r = tag_resolve(spec, origin, ret);
        else if (spec[0] == '/') {
                *ret = strdup(spec);
                r = *ret ? 0 : -TG_ERR_NOMEM;
        } else
                r = log_error_rc(-TG_ERR_INVALID, "The device column of %s is \"%.64s\": neither a path nor UUID=, "
                                 "PARTUUID=, LABEL= or PARTLABEL=.", origin + 1, spec);
        if (r >= 0)
                log_info("%s is %s%s.", name, *ret, origin);
        return r;
}
