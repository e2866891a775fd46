/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <tss2/tss2_tpm2_types.h>

/*
 * The kernel's record of its NULL primary (Linux >= 6.10 with
 * CONFIG_TCG_TPM2_HMAC): /sys/class/tpm/tpmN/null_name, lowercase hex of the
 * 34-byte name (0x000b ‖ SHA-256) and a newline.
 */

/* Parses exactly "<68 hex digits>" optionally followed by one "\n". */
int tg_null_name_parse(const char *text, size_t size, TPM2B_NAME *ret);

/*
 * Reads the kernel's null_name. path == NULL reads the sysfs attribute of the
 * TPM the TCTI string names (device:/dev/tpmrmN → tpmN, otherwise tpm0)
 * through libsystemd. Returns -TG_ERR_NOT_FOUND when the kernel exports no
 * null_name, -TG_ERR_INVALID when what it holds is malformed.
 */
int tg_null_name_read(const char *path, const char *tcti, TPM2B_NAME *ret);
