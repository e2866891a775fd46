/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The device column of /etc/crypttab, for doctor (which volumes to check).
 * Only the first two fields of each line are read; the file is never
 * trusted to say anything about security (the token in each volume's header
 * is what is checked).
 */
#include <errno.h>
#include <stdbool.h>
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

/*
 * The lines of a crypttab file as (name, device spec, options) triples, bounded
 * (CRYPTTAB_MAX bytes): hostile text, read only for its first four fields
 * (options "" when the line has none). each is called per line; a non-zero
 * return stops the walk and is returned.
 */
typedef int (*crypttab_each)(const char *name, const char *spec, const char *options, const char *path,
                             unsigned line, void *userdata);

static int crypttab_walk(const char *path, crypttab_each each, void *userdata) {
        _cleanup_free_ uint8_t *data = NULL;
        _cleanup_free_ char *text = NULL;
        size_t size;
        unsigned line = 0;
        char *l, *next;
        int r;

        r = tg_read_file(path, CRYPTTAB_MAX, &data, &size);
        if (r == -TG_ERR_NOT_FOUND)
                return 0;
        if (r < 0)
                return log_error_rc(r, "Cannot read %s.", path);
        if (memchr(data, '\0', size))
                return log_error_rc(-TG_ERR_INVALID, "%s contains a NUL byte.", path);
        text = strndup((const char *) data, size);
        if (!text)
                return -TG_ERR_NOMEM;

        for (l = text; l; l = next) {
                char *fields[4], *save = NULL;
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
                if (nf < 2)
                        return log_error_rc(-TG_ERR_INVALID, "%s:%u: expected \"NAME DEVICE [KEY [OPTIONS]]\".",
                                            path, line);
                r = each(fields[0], fields[1], nf == 4 ? fields[3] : "", path, line, userdata);
                if (r != 0)
                        return r;
        }
        return 0;
}

typedef struct entry_lists {
        char **names, **devices, **options;  /* names, options: NULL when not asked for */
        bool want_names, want_options;
        size_t n;
} entry_lists;

static void entry_lists_done(entry_lists *l) {
        tg_strv_free(l->names, l->want_names ? l->n : 0);
        tg_strv_free(l->devices, l->n);
        tg_strv_free(l->options, l->want_options ? l->n : 0);
}

/* Grows v (n entries) by one slot for the next entry; on failure v is unchanged. */
static int strv_grow(char ***v, size_t n) {
        char **grown = reallocarray(*v, n + 1, sizeof **v);

        if (!grown)
                return -TG_ERR_NOMEM;
        *v = grown;
        return 0;
}

static int add_entry(const char *name, const char *spec, const char *options, const char *path, unsigned line,
                     void *userdata) {
        entry_lists *l = userdata;
        _cleanup_free_ char *dev = NULL, *name_copy = NULL, *options_copy = NULL;
        int r;

        r = crypttab_device_path(spec, &dev);
        if (r < 0)
                return r == -TG_ERR_NOMEM ? r
                                          : log_error_rc(r, "%s:%u: \"%s\" is neither a path nor "
                                                         "UUID=, PARTUUID=, LABEL=, PARTLABEL= or ID=.",
                                                         path, line, spec);
        if ((l->want_names && !(name_copy = strdup(name))) || (l->want_options && !(options_copy = strdup(options))))
                return -TG_ERR_NOMEM;
        /* Every list grows before any is written, so that they keep one length. */
        if (strv_grow(&l->devices, l->n) < 0 || (l->want_names && strv_grow(&l->names, l->n) < 0) ||
            (l->want_options && strv_grow(&l->options, l->n) < 0))
                return -TG_ERR_NOMEM;
        l->devices[l->n] = TAKE_PTR(dev);
        if (l->want_names)
                l->names[l->n] = TAKE_PTR(name_copy);
        if (l->want_options)
                l->options[l->n] = TAKE_PTR(options_copy);
        l->n++;
        return 0;
}

int tg_crypttab_entries(const char *path, char ***ret_names, char ***ret_devices, char ***ret_options,
                        size_t *ret_n) {
        entry_lists l = { .want_names = ret_names != NULL, .want_options = ret_options != NULL };
        int r;

        r = crypttab_walk(path, add_entry, &l);
        if (r < 0) {
                entry_lists_done(&l);
                return r;
        }
        if (ret_names)
                *ret_names = l.names;
        if (ret_options)
                *ret_options = l.options;
        *ret_devices = l.devices;
        *ret_n = l.n;
        return 0;
}

int tg_crypttab_devices(const char *path, char ***ret_devices, size_t *ret_n) {
        return tg_crypttab_entries(path, NULL, ret_devices, NULL, ret_n);
}

typedef struct name_lookup {
        const char *name;
        char *spec;
} name_lookup;

static int match_name(const char *name, const char *spec, _unused_ const char *options, _unused_ const char *path,
                      _unused_ unsigned line, void *userdata) {
        name_lookup *q = userdata;

        if (strcmp(name, q->name) != 0)
                return 0;
        q->spec = strdup(spec);
        return q->spec ? 1 : -TG_ERR_NOMEM;
}

int tg_crypttab_lookup(const char *path, const char *name, char **ret_spec) {
        name_lookup q = { .name = name };
        int r;

        r = crypttab_walk(path, match_name, &q);
        if (r < 0)
                return r;
        if (r == 0)
                return -TG_ERR_NOT_FOUND;
        *ret_spec = q.spec;
        return 0;
}

typedef struct entry_list {
        int (*each)(const char *name, const char *spec, void *userdata);
        void *userdata;
} entry_list;

static int call_each(const char *name, const char *spec, _unused_ const char *options, _unused_ const char *path,
                     _unused_ unsigned line, void *userdata) {
        entry_list *e = userdata;
        return e->each(name, spec, e->userdata);
}

int tg_crypttab_foreach(const char *path, int (*each)(const char *name, const char *spec, void *userdata),
                        void *userdata) {
        return crypttab_walk(path, call_each, &(entry_list) { .each = each, .userdata = userdata });
}
