/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The kernel's sysfs null_name (read from a file the config names): tg_null_name_parse on arbitrary bytes. */
#include "fuzz.h"
#include "nullname.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_silence_logs();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* An exact-size heap copy, so that ASan sees any read past the input. */
        uint8_t *copy = malloc(size ? size : 1);
        TPM2B_NAME name;

        if (!copy)
                abort();
        memcpy(copy, data, size);
        if (tg_null_name_parse((const char *) copy, size, &name) == 0) {
                if (name.size != 34 || name.name[0] != 0x00 || name.name[1] != 0x0b)
                        abort();
        }
        free(copy);
        return 0;
}
