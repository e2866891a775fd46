/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "secret.h"

/*
 * Shows a recovery key once: as text, and as a QR code when built with
 * libqrencode and standard output is a UTF-8 terminal (as
 * systemd-cryptenroll does). Written with write(2) from wiped buffers, never
 * through stdio, so no buffer keeps a copy; never logged.
 */
int tg_show_recovery_key(const tg_secret *key, int keyslot);

/*
 * A secret text (a recovery key, an otpauth:// URI) as a QR code on standard output, with
 * the same care: only on a UTF-8 terminal and when built with libqrencode (nothing otherwise).
 */
int tg_show_qr(const tg_secret *key);
