/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The Secure Boot state behind PCR 7 (secureboot.h), for doctor and enroll.
 * An efivarfs file is 4 bytes of attributes and the variable's data; both
 * variables hold one byte. Anything else (a short, long or unreadable file)
 * is "unknown", never "on": the warning is advice, its absence proves nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "macro.h"
#include "secureboot.h"

#define EFI_GLOBAL_GUID "8be4df61-93ca-11d2-aa0d-00e098032b8c"

/* The variable's one data byte (0 or 1), or -1 when unknown. */
static int efivar_bool(const char *dir, const char *name) {
        char path[4096];
        unsigned char buf[8];
        _cleanup_close_ int fd = -1;
        ssize_t n;

        if ((size_t) snprintf(path, sizeof path, "%s/%s-" EFI_GLOBAL_GUID, dir, name) >= sizeof path)
                return -1;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
        if (fd < 0)
                return -1;
        do
                n = read(fd, buf, sizeof buf);
        while (n < 0 && errno == EINTR);
        if (n != 5 || buf[4] > 1)
                return -1;
        return buf[4];
}

const char *tg_secure_boot_weakness(void) {
        const char *dir = secure_getenv("TPMGUARD_EFIVARS") ?: "/sys/firmware/efi/efivars";
        int secure_boot = efivar_bool(dir, "SecureBoot"), setup_mode = efivar_bool(dir, "SetupMode");

        if (secure_boot == 0)
                return "Secure Boot is off";
        if (setup_mode == 1)
                return "the firmware is in Secure Boot setup mode (its keys are not enforced)";
        return NULL;
}
