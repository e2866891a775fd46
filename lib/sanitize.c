/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdbool.h>

#include "sanitize.h"

static char *str_sanitize(char *s, bool keep_newline) {
        unsigned char *p = (unsigned char *) s;

        for (; p && *p; p++) {
                if ((*p < 0x20 && *p != '\t' && (*p != '\n' || !keep_newline)) || *p == 0x7f)
                        *p = '?';
                else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
                        p[0] = p[1] = '?';
                        p++;
                }
        }
        return s;
}

char *tg_str_sanitize(char *s) {
        return str_sanitize(s, true);
}

char *tg_str_sanitize_line(char *s) {
        return str_sanitize(s, false);
}
