/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdio.h>

/*
 * tpmguard status with no device: every LUKS2 volume of this machine that
 * has a tpmguard token (block devices enumerated with sd-device, each probed
 * by libblkid, the LUKS2 ones opened read-only), and the lines of
 * crypttab_path that name one. Changes nothing.
 *   { "volumes": [ { "device", "uuid", "tokens": [ids], "crypttab": NAME|null } ],
 *     "crypttab": [ { "name", "device" (as written), "resolved": PATH|null, "tpmguard": bool } ],
 *     "skipped": [ { "device", "reason" } ] }
 */
int tg_volumes_list(const char *crypttab_path, json_object **ret);
void tg_volumes_print(json_object *list, FILE *f);
