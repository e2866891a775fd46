/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * /etc/crypttab for doctor: the device column (which volumes to check) and
 * the name and options columns (which options turn tpmguard off or are
 * ignored by the initrd: doctor-crypttab.c). The file is never trusted to say
 * anything about security (the token in each volume's header is what is
 * checked).
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

/* Appends a copy of s to *v (n entries); on failure *v is unchanged. */
static int strv_push(char ***v, size_t n, const char *s) {
        char **grown, *copy = strdup(s);

        if (!copy)
                return -TG_ERR_NOMEM;
        grown = reallocarray(*v, n + 1, sizeof **v);
        if (!grown) {
                free(copy);
                return -TG_ERR_NOMEM;
        }
        grown[n] = copy;
        *v = grown;
        return 0;
}

int tg_crypttab_entries(const char *path, char ***ret_names, char ***ret_devices, char ***ret_options,
                        size_t *ret_n) {
        _cleanup_free_ uint8_t *data = NULL;
        _cleanup_free_ char *text = NULL;
        char **names = NULL, **devices = NULL, **options = NULL;
        size_t size, nd = 0, nn = 0, no = 0;
        unsigned line = 0;
        char *l, *next;
        int r;

        r = tg_read_file(path, CRYPTTAB_MAX, &data, &size);
        if (r == -TG_ERR_NOT_FOUND) {
                if (ret_names)
                        *ret_names = NULL;
                if (ret_options)
                        *ret_options = NULL;
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
                char *fields[4], *save = NULL, *dev = NULL;
                int nf = 0;

                next = strchr(l, '\n');
                if (next)
                        *next++ = '\0';
                line++;
                for (char *t = strtok_r(l, " \t\r", &save); t && nf < 4; t = strtok_r(NULL, " \t\r", &save)) {
                        if (nf == 0 && t[0] == '#')
                                break;
                        fields[nf++] = t;
                }
                if (nf == 0)
                        continue;
                if (nf < 2) {
                        r = log_error_rc(-TG_ERR_INVALID, "%s:%u: expected \"NAME DEVICE [KEY [OPTIONS]]\".",
                                         path, line);
                        goto fail;
                }
                r = crypttab_device_path(fields[1], &dev);
                if (r < 0) {
                        if (r != -TG_ERR_NOMEM)
                                r = log_error_rc(r, "%s:%u: \"%s\" is neither a path nor "
                                                 "UUID=, PARTUUID=, LABEL=, PARTLABEL= or ID=.",
                                                 path, line, fields[1]);
                        goto fail;
                }
                r = strv_push(&devices, nd, dev);
                free(dev);
                if (r < 0)
                        goto fail;
                nd++;
                if (ret_names) {
                        r = strv_push(&names, nn, fields[0]);
                        if (r < 0)
                                goto fail;
                        nn++;
                }
                if (ret_options) {
                        r = strv_push(&options, no, nf == 4 ? fields[3] : "");
                        if (r < 0)
                                goto fail;
                        no++;
                }
        }
        if (ret_names)
                *ret_names = names;
        if (ret_options)
                *ret_options = options;
        *ret_devices = devices;
        *ret_n = nd;
        return 0;

fail:
        tg_strv_free(devices, nd);
        tg_strv_free(names, nn);
        tg_strv_free(options, no);
        return r;
}

int tg_crypttab_devices(const char *path, char ***ret_devices, size_t *ret_n) {
        return tg_crypttab_entries(path, NULL, ret_devices, NULL, ret_n);
}
