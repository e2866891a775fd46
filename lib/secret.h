/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "macro.h"

/*
 * Memory for secrets (disk keys, PINs, PIN-derived auth values, passphrases).
 * Page-aligned, excluded from core dumps (MADV_DONTDUMP), locked in RAM where
 * the process may (mlock; failure is tolerated and logged at debug level),
 * and wiped with explicit_bzero before it is returned to the allocator, on
 * every path. A tg_secret never appears in a log line.
 */
typedef struct tg_secret {
        uint8_t *data;
        size_t size;     /* bytes in use */
        size_t capacity; /* bytes allocated (page multiple) */
} tg_secret;

/* Allocates a zeroed secret of exactly size bytes in use. */
int tg_secret_new(size_t size, tg_secret **ret);
/* Copies size bytes from data into a fresh secret. */
int tg_secret_new_copy(const void *data, size_t size, tg_secret **ret);
/* Fills a fresh secret with size bytes from the OpenSSL CSPRNG. */
int tg_secret_new_random(size_t size, tg_secret **ret);
void tg_secret_free(tg_secret *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(tg_secret *, tg_secret_free);
#define _cleanup_secret_ _cleanup_(tg_secret_freep)

/* Wipes and frees a plain heap buffer of known size. */
void tg_free_wiped(void *p, size_t size);

/* Makes this process undumpable and disables core files (CLI start-up). */
void tg_process_harden(void);

/* Reads a whole file (or stdin for "-") into a secret, byte for byte, like
 * cryptsetup's --key-file: no newline is stripped. At most max_size bytes. */
int tg_secret_read_file(const char *path, size_t max_size, tg_secret **ret);
