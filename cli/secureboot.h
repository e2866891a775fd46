/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Why PCR 7 binds almost nothing on this machine, or NULL: "Secure Boot is
 * off" or "the firmware is in Secure Boot setup mode", read from the UEFI
 * variables SecureBoot and SetupMode in efivarfs ($TPMGUARD_EFIVARS for
 * tests, else /sys/firmware/efi/efivars). NULL too when the state cannot be
 * read (no UEFI, efivarfs not mounted): nothing is claimed then.
 */
const char *tg_secure_boot_weakness(void);
