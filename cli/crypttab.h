/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

/*
 * The devices listed in a crypttab file, in order, as paths: UUID=, PARTUUID=,
 * LABEL=, PARTLABEL= and ID= become /dev/disk/by-*. Comments and blank lines
 * are skipped; a line with fewer than two fields is an error naming the line.
 * A missing file gives an empty list.
 */
int tg_crypttab_devices(const char *path, char ***ret_devices, size_t *ret_n);
/* The same, with each line's name and options ("" when the line has none),
 * in lists of the same length; ret_names and ret_options may be NULL. */
int tg_crypttab_entries(const char *path, char ***ret_names, char ***ret_devices, char ***ret_options,
                        size_t *ret_n);
void tg_strv_free(char **v, size_t n);
/* The device spec (second field, as written) of the crypttab line named name: -TG_ERR_NOT_FOUND if none. */
int tg_crypttab_lookup(const char *path, const char *name, char **ret_spec);
/* Calls each with every line's name and device spec, in order; a non-zero return stops and is returned. */
int tg_crypttab_foreach(const char *path, int (*each)(const char *name, const char *spec, void *userdata),
                        void *userdata);
