/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "log.h"
#include "sanitize.h"
#include "splash.h"
#include "util.h"

void tg_splash_add(tg_splash *s, int level, const char *message) {
        size_t room, n, start;

        if (!s || !message || level > LOG_NOTICE || !*message)
                return;
        if (s->len >= sizeof s->text - 1)
                return;
        if (s->len > 0) {
                /* A line per reason (plymouth shows each as a message), when a word of the next fits. */
                if (sizeof s->text - 1 - s->len < 8)
                        return;
                s->text[s->len++] = '\n';
        }
        start = s->len;
        room = sizeof s->text - 1 - s->len;
        n = strlen(message);
        if (n > room) {
                n = room;
                /* Never half a UTF-8 character: plymouth's label would show garbage. */
                while (n > 0 && ((unsigned char) message[n] & 0xc0) == 0x80)
                        n--;
        }
        memcpy(s->text + s->len, message, n);
        s->len += n;
        s->text[s->len] = '\0';
        /* A reason is one line: no newline or terminal control of its own. */
        tg_str_sanitize_line(s->text + start);
}

/* The directory only the path unit makes (0700): ours and private, or nobody is listening. */
static bool splash_dir_ok(const char *dir) {
        return tg_private_dir_check(dir) >= 0;
}

int tg_splash_write(const tg_splash *s, const char *cache_dir, const char *device) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *prefix = NULL, *data = NULL;
        struct timespec ts;

        if (!s || s->len == 0 || !cache_dir)
                return 0;
        if (tg_asprintf(&dir, "%s/" TG_SPLASH_DIR, cache_dir) < 0)
                return -TG_ERR_NOMEM;
        if (!splash_dir_ok(dir))
                return log_debug_rc(0, "No private %s (tpmguard-splash.path makes it): the reason stays in the log.", dir);
        /* The device path comes from systemd-cryptsetup's command line: no line or terminal control of its own. */
        if (tg_asprintf(&prefix, "%s%s", device ?: "", device ? ": " : "") < 0)
                return -TG_ERR_NOMEM;
        tg_str_sanitize_line(prefix);
        /* Names sort in the order written, across processes: tpmguard-splash shows the newest last. */
        if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
                return -TG_ERR_IO;
        if (tg_asprintf(&path, "%s/%020" PRIu64 "-%d", dir,
                        (uint64_t) ts.tv_sec * UINT64_C(1000000000) + (uint64_t) ts.tv_nsec, (int) getpid()) < 0)
                return -TG_ERR_NOMEM;
        if (tg_asprintf(&data, "%s%s\n", prefix, s->text) < 0)
                return -TG_ERR_NOMEM;
        return tg_write_file_atomic(path, data, strlen(data), 0600);
}

void tg_splash_record(const tg_splash *s, const char *device) {
        _cleanup_config_ tg_config *config = NULL;
        int r;

        if (!s || s->len == 0)
                return;
        r = tg_config_load(NULL, &config);
        r = tg_splash_write(s, r >= 0 ? config->cache_dir : TG_DEFAULT_CACHE_DIR, device);
        if (r < 0)
                log_debug("The reason was not recorded for the splash: %s.", tg_err_str(r));
}
