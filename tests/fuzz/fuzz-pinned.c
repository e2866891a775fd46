/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pinned EK signing key file (/etc/tpmguard, copied into the initrd):
 * tg_pinned_key_parse on arbitrary bytes. An accepted file must format and
 * parse back to the same key.
 */
#include "fuzz.h"
#include "pinned.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        fuzz_silence_logs();
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        uint8_t *copy = malloc(size ? size : 1);
        _cleanup_free_ char *again = NULL;
        tg_pinned_key key, key2;

        if (!copy)
                abort();
        memcpy(copy, data, size);
        if (tg_pinned_key_parse((const char *) copy, size, &key) == 0) {
                if (tg_pinned_public_check(&key.public.publicArea) != 0)
                        abort();
                if (tg_pinned_key_format(&key, &again) != 0)
                        abort();
                if (tg_pinned_key_parse(again, strlen(again), &key2) != 0 ||
                    key2.name.size != key.name.size || memcmp(key2.name.name, key.name.name, key.name.size) != 0)
                        abort();
        }
        free(copy);
        return 0;
}
