/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * token-open: calls a LUKS2 token plugin's cryptsetup_token_open_pin in
 * process, the way libcryptsetup would, and checks that what it returns
 * opens a keyslot. Test-only (adversarial tier): it runs our plugin without
 * the cryptsetup binary, and it runs systemd's systemd-tpm2 plugin against
 * a TPM that is not /dev/tpmrm* (that plugin takes its device only from the
 * usrptr parameter struct).
 *
 *   token-open PLUGIN.so IMAGE TOKEN_ID [--systemd-device TCTI] [--secret-out FILE]
 *
 * The PIN is the first line of stdin (none: cryptsetup_token_open is called).
 * --secret-out writes the returned keyslot secret (hex) to FILE, so that a
 * capture test can search the bus recording for it. Exit: 0 when the
 * returned secret opened a keyslot; the plugin's errno (positive) when the
 * plugin failed (63 for an errno above 63); 64 on usage or setup errors; 65 when the plugin returned
 * a secret that opens no keyslot.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libcryptsetup.h>

/* systemd v252..v254 src/shared/tpm2-util.h (checked against the v252 source):
 * the plugin reads only these fields; signature_path stays NULL (no signed
 * PCR policy). */
struct systemd_tpm2_plugin_params {
        uint32_t search_pcr_mask;
        const char *device;
        const char *signature_path;
};

typedef int (*token_open_pin_fn)(struct crypt_device *cd, int token, const char *pin,
                                 size_t pin_size, char **buffer, size_t *buffer_len, void *usrptr);
typedef int (*token_open_fn)(struct crypt_device *cd, int token, char **buffer,
                             size_t *buffer_len, void *usrptr);
typedef void (*token_buffer_free_fn)(void *buffer, size_t buffer_len);

static void log_to_stderr(int level, const char *msg, void *usrptr) {
        (void) level;
        (void) usrptr;
        fputs(msg, stderr);
}

int main(int argc, char **argv) {
        const char *systemd_device = NULL, *secret_out = NULL;
        struct systemd_tpm2_plugin_params params = { 0 };
        struct crypt_device *cd = NULL;
        char *buffer = NULL, pin[256];
        size_t buffer_len = 0;
        int r, ret = 64;
        void *plugin;

        if (argc < 4) {
                fprintf(stderr, "usage: %s PLUGIN.so IMAGE TOKEN_ID [--systemd-device TCTI] [--secret-out FILE]\n", argv[0]);
                return 64;
        }
        for (int i = 4; i < argc; i++) {
                if (strcmp(argv[i], "--systemd-device") == 0 && i + 1 < argc)
                        systemd_device = argv[++i];
                else if (strcmp(argv[i], "--secret-out") == 0 && i + 1 < argc)
                        secret_out = argv[++i];
                else {
                        fprintf(stderr, "token-open: unknown argument %s\n", argv[i]);
                        return 64;
                }
        }

        crypt_set_log_callback(NULL, log_to_stderr, NULL);
        plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        if (!plugin) {
                fprintf(stderr, "token-open: %s\n", dlerror());
                return 64;
        }
        token_open_pin_fn open_pin = (token_open_pin_fn) dlvsym(plugin, "cryptsetup_token_open_pin", "CRYPTSETUP_TOKEN_1.0");
        token_open_fn open_nopin = (token_open_fn) dlvsym(plugin, "cryptsetup_token_open", "CRYPTSETUP_TOKEN_1.0");
        token_buffer_free_fn buffer_free = (token_buffer_free_fn) dlvsym(plugin, "cryptsetup_token_buffer_free", "CRYPTSETUP_TOKEN_1.0");
        if (!open_nopin) {
                fprintf(stderr, "token-open: %s exports no cryptsetup_token_open@CRYPTSETUP_TOKEN_1.0\n", argv[1]);
                goto out;
        }

        r = crypt_init(&cd, argv[2]);
        if (r == 0)
                r = crypt_load(cd, CRYPT_LUKS2, NULL);
        if (r < 0) {
                fprintf(stderr, "token-open: cannot load LUKS2 header of %s: %s\n", argv[2], strerror(-r));
                goto out;
        }
        crypt_set_log_callback(cd, log_to_stderr, NULL);

        /* UINT32_MAX: any PCR mask (0 would select only tokens bound to no PCR). */
        params.search_pcr_mask = UINT32_MAX;
        params.device = systemd_device;

        if (fgets(pin, sizeof(pin), stdin) && pin[0] != '\n') {
                pin[strcspn(pin, "\n")] = '\0';
                if (!open_pin) {
                        fprintf(stderr, "token-open: plugin has no cryptsetup_token_open_pin\n");
                        goto out;
                }
                r = open_pin(cd, atoi(argv[3]), pin, strlen(pin), &buffer, &buffer_len,
                             systemd_device ? &params : NULL);
        } else
                r = open_nopin(cd, atoi(argv[3]), &buffer, &buffer_len, systemd_device ? &params : NULL);
        explicit_bzero(pin, sizeof(pin));
        if (r < 0) {
                fprintf(stderr, "token-open: plugin failed: %s (%d)\n", strerror(-r), r);
                ret = -r < 64 ? -r : 63;
                goto out;
        }

        r = crypt_activate_by_passphrase(cd, NULL, CRYPT_ANY_SLOT, buffer, buffer_len, 0);
        if (r < 0) {
                fprintf(stderr, "token-open: the plugin's secret opens no keyslot: %s\n", strerror(-r));
                ret = 65;
        } else {
                printf("keyslot %d\n", r);
                ret = 0;
        }
        if (secret_out) {
                FILE *f = fopen(secret_out, "we");
                if (!f) {
                        fprintf(stderr, "token-open: %s: %s\n", secret_out, strerror(errno));
                        ret = 64;
                } else {
                        for (size_t i = 0; i < buffer_len; i++)
                                fprintf(f, "%02x", (unsigned char) buffer[i]);
                        fputc('\n', f);
                        if (fclose(f) != 0)
                                ret = 64;
                }
        }
out:
        if (buffer) {
                if (buffer_free)
                        buffer_free(buffer, buffer_len);
                else {
                        explicit_bzero(buffer, buffer_len);
                        free(buffer);
                }
        }
        crypt_free(cd);
        dlclose(plugin);
        return ret;
}
