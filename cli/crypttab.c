/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The device column of /etc/crypttab, for doctor (which volumes to check).
 * Only the first two fields of each line are read; the file is never
 * trusted to say anything about security (the token in each volume's header
 * is what is checked).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "crypttab.h"
#include "error.h"
#include "log.h"
#include "macro.h"
#include "util.h"

#define CRYPTTAB_MAX (256u * 1024u)

void tg_strv_free(char **v, size_t n) {
        if (!v)
                return;
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

static int crypttab_device_path(const char *spec, char **ret) {
        static const struct {
                const char *prefix;
                const char *dir;
        } tags[] = {
                { "UUID=", "/dev/disk/by-uuid/" },
                { "PARTUUID=", "/dev/disk/by-partuuid/" },
                { "LABEL=", "/dev/disk/by-label/" },
                { "PARTLABEL=", "/dev/disk/by-partlabel/" },
                { "ID=", "/dev/disk/by-id/" },
        };

        for (size_t i = 0; i < ELEMENTSOF(tags); i++) {
                size_t n = strlen(tags[i].prefix);
                if (strncmp(spec, tags[i].prefix, n) == 0) {
                        if (spec[n] == '\0' || strchr(spec + n, '/'))
                                return -TG_ERR_INVALID;
                        return tg_asprintf(ret, "%s%s", tags[i].dir, spec + n);
                }
        }
        if (spec[0] != '/')
                return -TG_ERR_INVALID;
        *ret = strdup(spec);
        return *ret ? 0 : -TG_ERR_NOMEM;
}

int tg_crypttab_devices(const char *path, char ***ret_devices, size_t *ret_n) {
        _cleanup_free_ uint8_t *data = NULL;
        _cleanup_free_ char *text = NULL;
        char **devices = NULL;
        size_t size, n = 0;
        unsigned line = 0;
        char *l, *next;
        int r;

        r = tg_read_file(path, CRYPTTAB_MAX, &data, &size);
        if (r == -TG_ERR_NOT_FOUND) {
                *ret_devices = NULL;
                *ret_n = 0;
                return 0;
        }
        if (r < 0)
                return log_error_rc(r, "Cannot read %s.", path);
        if (memchr(data, '\0', size))
                return log_error_rc(-TG_ERR_INVALID, "%s contains a NUL byte.", path);
        text = strndup((const char *) data, size);
        if (!text)
                return -TG_ERR_NOMEM;

        for (l = text; l; l = next) {
                char *fields[2], *save = NULL, *dev = NULL, **grown;
                int nf = 0;

                next = strchr(l, '\n');
                if (next)
                        *next++ = '\0';
                line++;
                for (char *t = strtok_r(l, " \t\r", &save); t && nf < 2; t = strtok_r(NULL, " \t\r", &save)) {
                        if (nf == 0 && t[0] == '#')
                                break;
                        fields[nf++] = t;
                }
                if (nf == 0)
                        continue;
                if (nf < 2) {
                        tg_strv_free(devices, n);
                        return log_error_rc(-TG_ERR_INVALID, "%s:%u: expected \"NAME DEVICE [KEY [OPTIONS]]\".",
                                            path, line);
                }
                r = crypttab_device_path(fields[1], &dev);
                if (r < 0) {
                        tg_strv_free(devices, n);
                        return r == -TG_ERR_NOMEM ? r
                                                  : log_error_rc(r, "%s:%u: \"%s\" is neither a path nor "
                                                                 "UUID=, PARTUUID=, LABEL=, PARTLABEL= or ID=.",
                                                                 path, line, fields[1]);
                }
                grown = reallocarray(devices, n + 1, sizeof *devices);
                if (!grown) {
                        free(dev);
                        tg_strv_free(devices, n);
                        return -TG_ERR_NOMEM;
                }
                devices = grown;
                devices[n++] = dev;
        }
        *ret_devices = devices;
        *ret_n = n;
        return 0;
}
