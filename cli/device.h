/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A device as a user types it, resolved to a path: a path (as given; a
 * /dev/disk/by-* link is a path), UUID=, PARTUUID=, LABEL= or PARTLABEL=
 * (looked up by libblkid), or the name of a line of crypttab_path (its
 * device column, resolved the same way). A name that is neither an existing
 * path nor a crypttab name comes back unchanged, so that opening it names
 * the missing file. *ret is newly allocated.
 */
int tg_device_resolve(const char *crypttab_path, const char *name, char **ret);
