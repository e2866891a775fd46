/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

#include "config.h"

/*
 * The splash record (issue 29, docs/design.md "Plymouth"). Under systemd-cryptsetup the token
 * plugin cannot reach plymouth: libcryptsetup's log goes to the journal and to a console the
 * splash hides, and the token ABI has no way to show a message beside systemd's PIN prompt. So
 * the plugin keeps what it told libcryptsetup at notice level or above during one call (the
 * wrong-PIN count, a PCR mismatch, the reserved dictionary-attack tries, a failed verification,
 * tampering), and writes it into cache_dir/splash/, a line per reason, where
 * tpmguard-splash.path (DirectoryNotEmpty=) starts tpmguard-splash.service, which shows each
 * line with 'plymouth display-message' when a splash runs and removes the file.
 *
 * Secret-free by construction: only what was logged, and nothing secret is ever logged
 * (lib/log.h). Only into a directory that exists, is ours and is private (the path unit makes
 * it, 0700): without the unit (initramfs-tools, which shows cryptsetup's output itself; a
 * booted system without it) nothing is written, and a directory planted with other owners or
 * modes is not written into.
 */
#define TG_SPLASH_DIR "splash"
#define TG_SPLASH_MAX 2048

typedef struct tg_splash {
        char text[TG_SPLASH_MAX];
        size_t len;
} tg_splash;

/* Keeps message when level is LOG_NOTICE or more severe: appended as a line of its own (control
 * characters replaced), cut at TG_SPLASH_MAX - 1 bytes in all (the first reason is the cause;
 * later ones say what follows). */
void tg_splash_add(tg_splash *s, int level, const char *message);
/* Writes s (its first line prefixed "DEVICE: " when device is given) as
 * cache_dir/splash/<monotonic ns>-<pid>, 0600, atomically; 0 without writing when s is empty or
 * the directory is not ours and private. */
int tg_splash_write(const tg_splash *s, const char *cache_dir, const char *device);
/* tg_splash_write() into the configured cache_dir (the default one when the configuration
 * cannot be read: that too is a reason to show). Best effort, logs at debug level only. */
void tg_splash_record(const tg_splash *s, const char *device);
