/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <assert.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "macro.h"
#include "util.h"

int tg_hex_encode(const uint8_t *data, size_t size, char **ret) {
        static const char digits[] = "0123456789abcdef";
        char *s = malloc(size * 2 + 1);

        if (!s)
                return -TG_ERR_NOMEM;
        for (size_t i = 0; i < size; i++) {
                s[2 * i] = digits[data[i] >> 4];
                s[2 * i + 1] = digits[data[i] & 0xf];
        }
        s[size * 2] = '\0';
        *ret = s;
        return 0;
}

int tg_hex_digit_value(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

int tg_hex_decode(const char *hex, size_t hex_len, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ uint8_t *buf = NULL;

        if (hex_len % 2 != 0)
                return -TG_ERR_INVALID;
        buf = malloc(hex_len / 2 + 1);
        if (!buf)
                return -TG_ERR_NOMEM;
        for (size_t i = 0; i < hex_len / 2; i++) {
                int hi = tg_hex_digit_value(hex[2 * i]), lo = tg_hex_digit_value(hex[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -TG_ERR_INVALID;
                buf[i] = (uint8_t) (hi << 4 | lo);
        }
        *ret = TAKE_PTR(buf);
        *ret_size = hex_len / 2;
        return 0;
}

static int read_fd(int fd, size_t max_size, uint8_t **ret, size_t *ret_size) {
        _cleanup_free_ uint8_t *buf = NULL;
        struct stat st;
        size_t size = 0;

        if (fstat(fd, &st) < 0)
                return -TG_ERR_IO;
        if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode) && !S_ISFIFO(st.st_mode))
                return -TG_ERR_INVALID;
        buf = malloc(max_size + 1);
        if (!buf)
                return -TG_ERR_NOMEM;
        /* Read up to one byte past the limit to detect oversized files (sysfs reports size 4096). */
        while (size <= max_size) {
                ssize_t n = read(fd, buf + size, max_size + 1 - size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -TG_ERR_IO;
                }
                if (n == 0)
                        break;
                size += (size_t) n;
        }
        if (size > max_size)
                return -TG_ERR_INVALID;
        buf[size] = 0;
        *ret = TAKE_PTR(buf);
        *ret_size = size;
        return 0;
}

int tg_read_file(const char *path, size_t max_size, uint8_t **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -1;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? -TG_ERR_NOT_FOUND : -TG_ERR_IO;
        return read_fd(fd, max_size, ret, ret_size);
}

/* Root, or (for a process that is not root) its own user: nobody else may decide our policy. */
static bool owner_trusted(uid_t uid) {
        return uid == 0 || uid == geteuid();
}

int tg_check_trusted(int fd, const char *path, const char *what) {
        _cleanup_free_ char *dircopy = NULL;
        struct stat st, dst;

        assert(path);
        if (fstat(fd, &st) < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot stat %s: %m", path);
        /*
         * Whoever can write this file decides tpmguard's security policy (or
         * which TPM key is trusted): a file owned or writable by another user
         * is refused rather than obeyed.
         */
        if (!owner_trusted(st.st_uid))
                return log_error_rc(-TG_ERR_CONFIG,
                                    "Refusing %s %s: it is owned by uid %u, not by root. "
                                    "Fix it with: chown root:root %s && chmod go-w %s",
                                    what, path, (unsigned) st.st_uid, path, path);
        if (st.st_mode & (S_IWGRP | S_IWOTH))
                return log_error_rc(-TG_ERR_CONFIG,
                                    "Refusing %s %s: it is writable by %s (mode %04o). Fix it with: chmod go-w %s",
                                    what, path, st.st_mode & S_IWOTH ? "every user" : "its group",
                                    (unsigned) (st.st_mode & 07777), path);
        /* The directory too: whoever can write it can replace the file. */
        dircopy = strdup(path);
        if (!dircopy)
                return -TG_ERR_NOMEM;
        if (stat(dirname(dircopy), &dst) < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot stat the directory of %s: %m", path);
        if (!owner_trusted(dst.st_uid) ||
            ((dst.st_mode & (S_IWGRP | S_IWOTH)) && !(dst.st_mode & S_ISVTX)))
                return log_error_rc(-TG_ERR_CONFIG,
                                    "Refusing %s %s: its directory is owned by uid %u with mode %04o, so another "
                                    "user could replace the file. Make the directory root-owned and not writable "
                                    "by group or others.", what, path, (unsigned) dst.st_uid,
                                    (unsigned) (dst.st_mode & 07777));
        return 0;
}

int tg_read_trusted_file(const char *path, const char *what, size_t max_size, uint8_t **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -1;
        int r;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? -TG_ERR_NOT_FOUND : -TG_ERR_IO;
        r = tg_check_trusted(fd, path, what);
        if (r < 0)
                return r;
        return read_fd(fd, max_size, ret, ret_size);
}

int tg_write_file_atomic(const char *path, const void *data, size_t size, unsigned mode) {
        _cleanup_free_ char *tmp = NULL, *dircopy = NULL;
        _cleanup_close_ int fd = -1, dfd = -1;
        const uint8_t *p = data;
        size_t left = size;

        if (tg_asprintf(&tmp, "%s.tmpXXXXXX", path) < 0)
                return -TG_ERR_NOMEM;
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot create %s: %m", tmp);
        if (fchmod(fd, mode) < 0)
                goto fail;
        while (left > 0) {
                ssize_t n = write(fd, p, left);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        goto fail;
                }
                p += n;
                left -= (size_t) n;
        }
        if (fsync(fd) < 0)
                goto fail;
        if (rename(tmp, path) < 0)
                goto fail;

        dircopy = strdup(path);
        if (dircopy) {
                dfd = open(dirname(dircopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (dfd >= 0)
                        (void) fsync(dfd);
        }
        return 0;

fail:
        log_error("Cannot write %s: %m.%s", path, tg_write_error_next_step(errno));
        (void) unlink(tmp);
        return -TG_ERR_IO;
}

int tg_write_all(int fd, const void *data, size_t size) {
        const uint8_t *p = data;

        while (size > 0) {
                ssize_t k = write(fd, p, size);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -TG_ERR_IO;
                }
                p += k;
                size -= (size_t) k;
        }
        return 0;
}

const char *tg_write_error_next_step(int errnum) {
        switch (errnum) {
        case ENOSPC:
        case EDQUOT:
                return " The filesystem is full: free space on it (df -h shows which), then run the command again.";
        case EROFS:
                return " The filesystem is mounted read-only: remount it read-write, then run the command again.";
        case EACCES:
        case EPERM:
                return " Run the command as root.";
        default:
                return "";
        }
}

int tg_private_dir_check(const char *dir) {
        struct stat st;

        if (lstat(dir, &st) < 0)
                return -TG_ERR_NOT_FOUND;
        if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
                return -TG_ERR_INVALID;
        return 0;
}

int tg_asprintf(char **ret, const char *format, ...) {
        va_list ap;
        int n;

        va_start(ap, format);
        n = vasprintf(ret, format, ap);
        va_end(ap);
        if (n < 0) {
                *ret = NULL;
                return -TG_ERR_NOMEM;
        }
        return 0;
}
