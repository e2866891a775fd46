/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "error.h"
#include "log.h"
#include "secret.h"

int tg_secret_new(size_t size, tg_secret **ret) {
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        size_t capacity = size == 0 ? page : (size + page - 1) / page * page;
        _cleanup_free_ tg_secret *s = NULL;
        void *mem = NULL;

        if (capacity < size) /* overflow */
                return -TG_ERR_NOMEM;
        s = calloc(1, sizeof *s);
        if (!s)
                return -TG_ERR_NOMEM;
        if (posix_memalign(&mem, page, capacity) != 0)
                return -TG_ERR_NOMEM;
        memset(mem, 0, capacity);
        (void) madvise(mem, capacity, MADV_DONTDUMP);
        if (mlock(mem, capacity) < 0)
                log_debug("mlock of %zu secret bytes failed: %m (continuing)", capacity);

        s->data = mem;
        s->size = size;
        s->capacity = capacity;
        *ret = TAKE_PTR(s);
        return 0;
}

int tg_secret_new_copy(const void *data, size_t size, tg_secret **ret) {
        tg_secret *s;
        int r = tg_secret_new(size, &s);
        if (r < 0)
                return r;
        if (size > 0)
                memcpy(s->data, data, size);
        *ret = s;
        return 0;
}

int tg_secret_new_random(size_t size, tg_secret **ret) {
        _cleanup_secret_ tg_secret *s = NULL;
        int r = tg_secret_new(size, &s);
        if (r < 0)
                return r;
        if (size > 0 && RAND_priv_bytes(s->data, (int) size) != 1)
                return log_error_rc(-TG_ERR_IO, "The OpenSSL random generator failed.");
        *ret = TAKE_PTR(s);
        return 0;
}

void tg_secret_free(tg_secret *s) {
        if (!s)
                return;
        if (s->data) {
                explicit_bzero(s->data, s->capacity);
                (void) munlock(s->data, s->capacity);
                free(s->data);
        }
        free(s);
}

void tg_free_wiped(void *p, size_t size) {
        if (!p)
                return;
        explicit_bzero(p, size);
        free(p);
}

void tg_process_harden(void) {
        struct rlimit nocore = { 0, 0 };

        (void) prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        (void) setrlimit(RLIMIT_CORE, &nocore);
}

int tg_secret_read_file(const char *path, size_t max_size, tg_secret **ret) {
        _cleanup_secret_ tg_secret *s = NULL;
        _cleanup_close_ int owned_fd = -1;
        int fd, r;
        size_t size = 0;

        if (strcmp(path, "-") == 0)
                fd = STDIN_FILENO;
        else {
                owned_fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
                if (owned_fd < 0)
                        return log_error_rc(errno == ENOENT ? -TG_ERR_NOT_FOUND : -TG_ERR_IO, "Cannot open %s: %m", path);
                fd = owned_fd;
        }
        r = tg_secret_new(max_size + 1, &s);
        if (r < 0)
                return r;
        while (size <= max_size) {
                ssize_t n = read(fd, s->data + size, max_size + 1 - size);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return log_error_rc(-TG_ERR_IO, "Cannot read %s: %m", path);
                }
                if (n == 0)
                        break;
                size += (size_t) n;
        }
        if (size > max_size)
                return log_error_rc(-TG_ERR_INVALID, "%s is larger than %zu bytes.", path, max_size);
        if (size == 0)
                return log_error_rc(-TG_ERR_INVALID, "%s is empty.", path);
        s->size = size;
        *ret = TAKE_PTR(s);
        return 0;
}
