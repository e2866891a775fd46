/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <libcryptsetup.h>
#include <stdbool.h>

/*
 * Appends to KEYSLOTS (a JSON array) one object per active keyslot: its
 * number, the tokens that list it (labels never; pending markers only
 * WITH_PENDING) and what the header says it is ("token", "recovery-key",
 * "kept-unproven" or "passphrase"). What status and audit report: the header
 * is attacker-editable, so this decides nothing.
 */
int tg_luks_keyslots_describe(struct crypt_device *cd, bool with_pending, json_object *keyslots);
