/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <systemd/sd-device.h>

#include "error.h"
#include "log.h"
#include "nullname.h"
#include "util.h"

#define NULL_NAME_HEX_LEN (2 * (2 + 32))

int tg_null_name_parse(const char *text, size_t size, TPM2B_NAME *ret) {
        _cleanup_free_ uint8_t *bytes = NULL;
        TPM2B_NAME name = {};
        size_t n;

        if (size == NULL_NAME_HEX_LEN + 1 && text[NULL_NAME_HEX_LEN] == '\n')
                size--;
        if (size != NULL_NAME_HEX_LEN)
                return log_error_rc(-TG_ERR_INVALID, "null_name has %zu characters, expected %d hex digits.",
                                    size, NULL_NAME_HEX_LEN);
        if (tg_hex_decode(text, size, &bytes, &n) < 0)
                return log_error_rc(-TG_ERR_INVALID, "null_name is not hexadecimal.");
        if (bytes[0] != 0x00 || bytes[1] != 0x0b)
                return log_error_rc(-TG_ERR_INVALID, "null_name is not a SHA-256 name (prefix %02x%02x, expected 000b).",
                                    bytes[0], bytes[1]);
        memcpy(name.name, bytes, n);
        name.size = (UINT16) n;
        *ret = name;
        return 0;
}

static const char *tpm_sysname_from_tcti(const char *tcti, char *buf, size_t size) {
        const char *p;

        /* "device:/dev/tpmrm3" or "device:/dev/tpm3" → "tpm3" */
        if (tcti && strncmp(tcti, "device:", 7) == 0) {
                p = tcti + 7;
                if (strncmp(p, "/dev/tpmrm", 10) == 0)
                        p += 10;
                else if (strncmp(p, "/dev/tpm", 8) == 0)
                        p += 8;
                else
                        p = NULL;
                if (p && *p && strspn(p, "0123456789") == strlen(p) && strlen(p) < 8) {
                        snprintf(buf, size, "tpm%s", p);
                        return buf;
                }
        }
        return "tpm0";
}

int tg_null_name_read(const char *path, const char *tcti, TPM2B_NAME *ret) {
        _cleanup_free_ uint8_t *text = NULL;
        size_t size;
        int r;

        if (path) {
                r = tg_read_file(path, 4096, &text, &size);
                if (r == -TG_ERR_NOT_FOUND)
                        return log_debug_rc(-TG_ERR_NOT_FOUND, "%s does not exist.", path);
                if (r < 0)
                        return log_error_rc(r, "Cannot read null_name from %s.", path);
                r = tg_null_name_parse((const char *) text, size, ret);
                return r < 0 ? log_error_rc(r, "%s is malformed.", path) : 0;
        }

        _cleanup_(sd_device_unrefp) sd_device *dev = NULL;
        const char *value = NULL;
        char sysname[16];

        r = sd_device_new_from_subsystem_sysname(&dev, "tpm", tpm_sysname_from_tcti(tcti, sysname, sizeof sysname));
        if (r < 0)
                return log_debug_rc(-TG_ERR_NOT_FOUND, "No TPM device in sysfs: %s", strerror(-r));
        r = sd_device_get_sysattr_value(dev, "null_name", &value);
        if (r < 0)
                return log_debug_rc(-TG_ERR_NOT_FOUND, "The kernel exports no null_name: %s", strerror(-r));
        /* libsystemd strips the trailing newline. */
        r = tg_null_name_parse(value, strlen(value), ret);
        return r < 0 ? log_error_rc(r, "The kernel's sysfs null_name is malformed.") : 0;
}
