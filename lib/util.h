/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Lowercase hex of size bytes; returns a malloc'ed string. */
int tg_hex_encode(const uint8_t *data, size_t size, char **ret);
/* Strict hex decoding: even length, [0-9a-fA-F] only, no whitespace. */
/* The value of one hex digit (either case), -1 for any other character. */
int tg_hex_digit_value(char c);
int tg_hex_decode(const char *hex, size_t hex_len, uint8_t **ret, size_t *ret_size);
/* Reads a whole regular file of at most max_size bytes. */
int tg_read_file(const char *path, size_t max_size, uint8_t **ret, size_t *ret_size);
/*
 * Refuses (-TG_ERR_CONFIG, with the fix in the message) a file that decides
 * policy or trust (tpmguard.conf, the pinned key) when it is not owned by
 * root (or by the process's own user, for a process that is not root), is
 * writable by group or others, or sits in a directory that others could write
 * (without the sticky bit). what names the file in messages.
 */
int tg_check_trusted(int fd, const char *path, const char *what);
/* tg_read_file() after tg_check_trusted(); -TG_ERR_NOT_FOUND when it does not exist. */
int tg_read_trusted_file(const char *path, const char *what, size_t max_size, uint8_t **ret, size_t *ret_size);
/* Writes data to path atomically: temporary file in the same directory, fsync, rename, fsync dir. */
int tg_write_file_atomic(const char *path, const void *data, size_t size, unsigned mode);
/*
 * Whether dir is a private directory of ours (a directory, not a symlink, owned by the effective
 * user, no group or other permission bits): 0; -TG_ERR_NOT_FOUND when it cannot be looked at,
 * -TG_ERR_INVALID when it is something else. Stops a planted or shared directory from receiving
 * what a root process writes or from being read as ours (the per-boot cache, the boot anchor, the
 * splash reasons, the PIN turn's lock).
 */
int tg_private_dir_check(const char *dir);
/* asprintf that leaves *ret NULL on failure and returns 0 or -TG_ERR_NOMEM. */
int tg_asprintf(char **ret, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Writes all of data to fd, again after EINTR and short writes: 0, or -TG_ERR_IO with errno set
 * (the caller names what it was writing). */
int tg_write_all(int fd, const void *data, size_t size);
/* After a failed write of a file: the next step for errnum, as a sentence that starts with a space
 * (a full or read-only filesystem, a permission), or "" when there is nothing better to say. */
const char *tg_write_error_next_step(int errnum);
