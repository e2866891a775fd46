/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * bench-token-open: opens a LUKS2 token in-process through a libcryptsetup
 * token plugin, the way libcryptsetup itself does (dlopen the plugin, call
 * its cryptsetup_token_open_pin), and times only that call. Used by
 * tests/bench/run for both tpmguard's plugin and systemd's
 * libcryptsetup-token-systemd-tpm2.so, so that both unlocks are measured the
 * same way. After each timed call (outside the timed window) it checks that
 * the returned passphrase opens a keyslot, so a benchmark can never time a
 * failure.
 *
 *   bench-token-open --plugin SO --type TOKEN_TYPE --pin-file FILE
 *                    [--systemd-device TCTI --systemd-version N] [--iterations N]
 *                    [--remove-before-each FILE] [--pin-less-first [--sync]] IMAGE
 *
 * The PIN comes from a file, never argv or the environment. Prints one JSON
 * object: {"ms": [t1, t2, ...]}. Exits 0 only when every open unlocked.
 *
 * --pin-less-first opens as systemd-cryptsetup and `cryptsetup open` do
 * (issue 33): first cryptsetup_token_open without a PIN, which must answer
 * -ENOANO ("ask for a PIN"), then cryptsetup_token_open_pin with it, in the
 * same process and on the same crypt_device. Each "ms" value is then the sum
 * of both calls, and "pre_ms" and "post_ms" list each call's time (what runs
 * before the plugin has the PIN, what runs after it; the human's typing is
 * not in either). With --sync it writes the line "pin-less-done" to stdout
 * after the first call and waits for a line on stdin before the second, so
 * that tests/bench/run can tell the two calls' TPM commands apart.
 *
 * systemd's plugin takes its device through usrptr, as a
 * systemd_tpm2_plugin_params (src/shared/tpm2-util.h) whose layout depends on
 * the systemd version, so --systemd-version is required with --systemd-device
 * and the struct of exactly that version is passed; the plugin reads the
 * whole struct it was built with, so a shorter one would be read past:
 *   v252..v254: { uint32_t search_pcr_mask; const char *device; const char *signature_path; }
 *   v255..v257: the same, then const char *pcrlock_path (systemd-pcrlock, v255)
 * Versions outside 252..257 are refused rather than guessed at.
 * systemd-cryptsetup passes search_pcr_mask = UINT32_MAX ("any PCRs") and
 * NULL paths (the plugin's defaults).
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <libcryptsetup.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "macro.h"

typedef struct systemd_v252_tpm2_plugin_params {
        uint32_t search_pcr_mask;
        const char *device;
        const char *signature_path;
} systemd_v252_tpm2_plugin_params;

typedef struct systemd_v255_tpm2_plugin_params {
        uint32_t search_pcr_mask;
        const char *device;
        const char *signature_path;
        const char *pcrlock_path;
} systemd_v255_tpm2_plugin_params;

#define SYSTEMD_VERSION_MIN 252
#define SYSTEMD_VERSION_MAX 257

typedef int (*token_open_pin_fn)(struct crypt_device *cd, int token, const char *pin, size_t pin_size,
                                 char **buffer, size_t *buffer_len, void *usrptr);
typedef int (*token_open_fn)(struct crypt_device *cd, int token, char **buffer, size_t *buffer_len, void *usrptr);
typedef void (*token_buffer_free_fn)(void *buffer, size_t buffer_len);

static void crypt_freep(struct crypt_device **cd) {
        if (*cd)
                crypt_free(*cd);
}

static void dlclosep(void **h) {
        if (*h)
                dlclose(*h);
}

static double now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

/* The PIN file's first line, without its newline. */
static int read_pin(const char *path, char *buf, size_t size, size_t *ret_len) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        size_t n;

        if (!f)
                return -errno;
        if (!fgets(buf, (int) size, f))
                return -EINVAL;
        n = strcspn(buf, "\n");
        buf[n] = 0;
        *ret_len = n;
        return 0;
}

static int find_token(struct crypt_device *cd, const char *type) {
        for (int id = 0; id < 32; id++) {
                const char *t = NULL;
                crypt_token_info info = crypt_token_status(cd, id, &t);
                if ((info == CRYPT_TOKEN_EXTERNAL || info == CRYPT_TOKEN_EXTERNAL_UNKNOWN) && t && strcmp(t, type) == 0)
                        return id;
        }
        return -ENOENT;
}

static void usage(void) {
        fprintf(stderr, "usage: bench-token-open --plugin SO --type TOKEN_TYPE --pin-file FILE "
                        "[--systemd-device TCTI --systemd-version N] [--iterations N] [--remove-before-each FILE] "
                        "[--pin-less-first [--sync]] IMAGE\n");
}

static void log_to_stderr(int level, const char *msg, void *usrptr) {
        (void) level;
        (void) usrptr;
        fputs(msg, stderr);
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "plugin", required_argument, NULL, 'p' },
                { "type", required_argument, NULL, 't' },
                { "pin-file", required_argument, NULL, 'P' },
                { "systemd-device", required_argument, NULL, 'd' },
                { "systemd-version", required_argument, NULL, 'v' },
                { "iterations", required_argument, NULL, 'n' },
                { "remove-before-each", required_argument, NULL, 'r' },
                { "pin-less-first", no_argument, NULL, 'f' },
                { "sync", no_argument, NULL, 's' },
                {}
        };
        _cleanup_(crypt_freep) struct crypt_device *cd = NULL;
        _cleanup_(dlclosep) void *plugin = NULL;
        const char *plugin_path = NULL, *type = NULL, *pin_path = NULL, *device = NULL, *remove_path = NULL;
        systemd_v252_tpm2_plugin_params sd252 = { .search_pcr_mask = UINT32_MAX };
        systemd_v255_tpm2_plugin_params sd255 = { .search_pcr_mask = UINT32_MAX };
        void *sd_params = NULL;
        long systemd_version = 0;
        token_open_pin_fn open_pin;
        token_open_fn open_no_pin = NULL;
        token_buffer_free_fn buffer_free;
        bool pin_less_first = false, sync = false;
        _cleanup_free_ double *ms = NULL, *pre_ms = NULL, *post_ms = NULL;
        char pin[256];
        size_t pin_len = 0;
        long iterations = 1;
        int c, r, token;

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'p': plugin_path = optarg; break;
                case 't': type = optarg; break;
                case 'P': pin_path = optarg; break;
                case 'd': device = optarg; break;
                case 'r': remove_path = optarg; break;
                case 'f': pin_less_first = true; break;
                case 's': sync = true; break;
                case 'v':
                        systemd_version = strtol(optarg, NULL, 10);
                        break;
                case 'n':
                        iterations = strtol(optarg, NULL, 10);
                        if (iterations < 1 || iterations > 1000) {
                                usage();
                                return 2;
                        }
                        break;
                default:
                        usage();
                        return 2;
                }
        if (!plugin_path || !type || !pin_path || optind + 1 != argc || (device && !systemd_version) ||
            (sync && !pin_less_first)) {
                usage();
                return 2;
        }
        if (device) {
                if (systemd_version < SYSTEMD_VERSION_MIN || systemd_version > SYSTEMD_VERSION_MAX) {
                        fprintf(stderr, "bench-token-open: systemd %ld: its plugin's parameter struct is not known "
                                        "here (known: %d..%d); add its layout to bench-token-open.c\n",
                                systemd_version, SYSTEMD_VERSION_MIN, SYSTEMD_VERSION_MAX);
                        return 2;
                }
                if (systemd_version >= 255) {
                        sd255.device = device;
                        sd_params = &sd255;
                } else {
                        sd252.device = device;
                        sd_params = &sd252;
                }
        }

        r = read_pin(pin_path, pin, sizeof pin, &pin_len);
        if (r < 0) {
                fprintf(stderr, "bench-token-open: cannot read the PIN file %s: %s\n", pin_path, strerror(-r));
                return 1;
        }
        plugin = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
        if (!plugin) {
                fprintf(stderr, "bench-token-open: %s\n", dlerror());
                return 1;
        }
        /* libcryptsetup 2.6 resolves the token ABI with this symbol version. */
        open_pin = (token_open_pin_fn) dlvsym(plugin, "cryptsetup_token_open_pin", "CRYPTSETUP_TOKEN_1.0");
        buffer_free = (token_buffer_free_fn) dlvsym(plugin, "cryptsetup_token_buffer_free", "CRYPTSETUP_TOKEN_1.0");
        if (!open_pin) {
                fprintf(stderr, "bench-token-open: %s exports no cryptsetup_token_open_pin@CRYPTSETUP_TOKEN_1.0\n",
                        plugin_path);
                return 1;
        }
        if (pin_less_first) {
                /* libcryptsetup calls the plugin's open (not open_pin) when it has no PIN. */
                open_no_pin = (token_open_fn) dlvsym(plugin, "cryptsetup_token_open", "CRYPTSETUP_TOKEN_1.0");
                pre_ms = calloc((size_t) iterations, sizeof *pre_ms);
                post_ms = calloc((size_t) iterations, sizeof *post_ms);
                if (!open_no_pin || !pre_ms || !post_ms) {
                        fprintf(stderr, "bench-token-open: %s exports no cryptsetup_token_open@CRYPTSETUP_TOKEN_1.0\n",
                                plugin_path);
                        return 1;
                }
        }

        /* The plugins' messages (libcryptsetup prints the normal level on stdout by default) go to
         * stderr: stdout carries only the JSON. */
        r = crypt_init(&cd, argv[optind]);
        if (r >= 0)
                crypt_set_log_callback(cd, log_to_stderr, NULL);
        if (r >= 0)
                r = crypt_load(cd, CRYPT_LUKS2, NULL);
        if (r < 0) {
                fprintf(stderr, "bench-token-open: cannot load LUKS2 header of %s: %s\n", argv[optind], strerror(-r));
                return 1;
        }
        token = find_token(cd, type);
        if (token < 0) {
                fprintf(stderr, "bench-token-open: no token of type %s in %s\n", type, argv[optind]);
                return 1;
        }

        ms = calloc((size_t) iterations, sizeof *ms);
        if (!ms) {
                explicit_bzero(pin, sizeof pin);
                return 1;
        }
        for (long i = 0; i < iterations; i++) {
                char *buffer = NULL;
                size_t buffer_len = 0;
                double t0, t1;

                if (remove_path && unlink(remove_path) < 0 && errno != ENOENT) {
                        fprintf(stderr, "bench-token-open: cannot remove %s: %m\n", remove_path);
                        return 1;
                }
                if (pin_less_first) {
                        double p0, p1;

                        p0 = now_ms();
                        r = open_no_pin(cd, token, &buffer, &buffer_len, sd_params);
                        p1 = now_ms();
                        if (r != -ENOANO) {
                                fprintf(stderr, "bench-token-open: the PIN-less open of token %d (%s) answered %s, "
                                                "not -ENOANO (\"ask for a PIN\")\n", token, type, strerror(-r));
                                if (r >= 0 && buffer_free)
                                        buffer_free(buffer, buffer_len);
                                explicit_bzero(pin, sizeof pin);
                                return 1;
                        }
                        pre_ms[i] = p1 - p0;
                        if (sync) {
                                char line[16];

                                printf("pin-less-done\n");
                                fflush(stdout);
                                if (!fgets(line, sizeof line, stdin)) {
                                        explicit_bzero(pin, sizeof pin);
                                        return 1;
                                }
                        }
                }
                t0 = now_ms();
                r = open_pin(cd, token, pin, pin_len, &buffer, &buffer_len, sd_params);
                t1 = now_ms();
                if (pin_less_first) {
                        post_ms[i] = t1 - t0;
                        t0 -= pre_ms[i];
                }
                if (r < 0) {
                        fprintf(stderr, "bench-token-open: token %d (%s) did not open: %s\n", token, type, strerror(-r));
                        explicit_bzero(pin, sizeof pin);
                        return 1;
                }
                /* Outside the timed window: the passphrase must open a keyslot (no activation). */
                r = crypt_activate_by_passphrase(cd, NULL, CRYPT_ANY_SLOT, buffer, buffer_len, 0);
                if (buffer_free)
                        buffer_free(buffer, buffer_len);
                else {
                        explicit_bzero(buffer, buffer_len);
                        free(buffer);
                }
                if (r < 0) {
                        fprintf(stderr, "bench-token-open: the token's passphrase opens no keyslot: %s\n", strerror(-r));
                        explicit_bzero(pin, sizeof pin);
                        return 1;
                }
                ms[i] = t1 - t0;
        }
        /* Printed at the end: with --sync, stdout also carries the "pin-less-done" lines. */
        printf("{\"ms\": [");
        for (long i = 0; i < iterations; i++)
                printf("%s%.3f", i ? ", " : "", ms[i]);
        printf("]");
        if (pin_less_first) {
                printf(", \"pre_ms\": [");
                for (long i = 0; i < iterations; i++)
                        printf("%s%.3f", i ? ", " : "", pre_ms[i]);
                printf("], \"post_ms\": [");
                for (long i = 0; i < iterations; i++)
                        printf("%s%.3f", i ? ", " : "", post_ms[i]);
                printf("]");
        }
        printf("}\n");
        explicit_bzero(pin, sizeof pin);
        return 0;
}
