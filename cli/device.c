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

static int tag_resolve(const char *tag, const char *origin, char **ret) {
        char *dev;
        const char *value = strchr(tag, '=') + 1;

        if (*value == '\0' || strlen(tag) > 256)
                return log_error_rc(-TG_ERR_INVALID, "\"%.64s\"%s is not a valid tag (UUID=..., PARTUUID=...).", tag,
                                    origin ?: "");
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
