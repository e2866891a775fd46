/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "config.h"

/*
 * tpmguard audit: which TPM-bound tokens of the LUKS2 volumes an attacker of
 * docs/security.md can read. For every token (tpmguard, systemd-tpm2,
 * clevis, systemd-fido2, systemd-pkcs11, anything else) a verdict per threat
 * (passive sniffer, active interposer, TPM reset + PCR replay, header edit):
 * "yes" (exposed), "no" or "n/a", each with a one-line reason; the machine's
 * facts those verdicts depend on (verification, null_name, anchor, lockout,
 * DA) and the keyslots no token uses. The JSON schema is in tpmguard(8).
 *
 * Reads only: the headers through libcryptsetup, the TPM through the same
 * verification as status. Nothing is unsealed and nothing is written.
 */

/*
 * devices: the volumes to audit; n_devices 0: every LUKS2 block device
 * (sd-device enumeration of the block subsystem, ID_FS_TYPE=crypto_LUKS,
 * or a libcryptsetup probe where udev has not probed the device).
 * Returns 0 with *ret set (also when something is exposed: see
 * tg_audit_exposed, and when a volume could not be audited: its entry has
 * "error", "complete" is false and *ret_first_error (optional) is that
 * volume's error, else 0), or a negative error when nothing could be audited.
 */
int tg_audit(const tg_config *config, char **devices, size_t n_devices, json_object **ret, int *ret_first_error);
/* Did the audit find any token exposed? */
bool tg_audit_exposed(json_object *audit);
/* Human-readable rendering of tg_audit()'s object. */
void tg_audit_print(json_object *audit, FILE *f);
