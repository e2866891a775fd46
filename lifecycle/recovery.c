/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "error.h"
#include "recovery.h"

static const char modhex[16] = "cbdefghijklnrtuv";

int tg_recovery_key_format(const uint8_t *bytes, size_t size, tg_secret **ret) {
        _cleanup_secret_ tg_secret *key = NULL;
        size_t n = 0;
        int r;

        if (size != TG_RECOVERY_KEY_BYTES)
                return -TG_ERR_INVALID;
        r = tg_secret_new(TG_RECOVERY_KEY_LENGTH, &key);
        if (r < 0)
                return r;
        for (size_t i = 0; i < size; i++) {
                if (i > 0 && i % 4 == 0)
                        key->data[n++] = '-';
                key->data[n++] = (uint8_t) modhex[bytes[i] >> 4];
                key->data[n++] = (uint8_t) modhex[bytes[i] & 0xf];
        }
        key->size = n;
        *ret = TAKE_PTR(key);
        return 0;
}

int tg_recovery_key_new(tg_secret **ret) {
        _cleanup_secret_ tg_secret *raw = NULL;
        int r;

        r = tg_secret_new_random(TG_RECOVERY_KEY_BYTES, &raw);
        if (r < 0)
                return r;
        return tg_recovery_key_format(raw->data, raw->size, ret);
}

bool tg_recovery_key_is_wellformed(const uint8_t *data, size_t size) {
        if (size != TG_RECOVERY_KEY_LENGTH)
                return false;
        for (size_t i = 0; i < size; i++) {
                if (i % 9 == 8) {
                        if (data[i] != '-')
                                return false;
                } else if (!memchr(modhex, data[i], sizeof modhex) || data[i] == '\0')
                        return false;
        }
        return true;
}
