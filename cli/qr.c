/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "qr.h"
#include "tpmguard-config.h"
#include "util.h"

#if HAVE_QRENCODE
#include <qrencode.h>
#endif

static int write_out(int fd, const void *data, size_t size) {
        return tg_write_all(fd, data, size) < 0
                ? log_error_rc(-TG_ERR_IO, "Cannot write the recovery key to standard output: %m") : 0;
}

static int write_str(const char *s) {
        return write_out(STDOUT_FILENO, s, strlen(s));
}

#if HAVE_QRENCODE
/* Two module rows per text line, with Unicode half blocks, and a quiet zone of 2 modules. */
int tg_show_qr(const tg_secret *key) {
        static const char *const glyph[4] = { " ", "\u2580", "\u2584", "\u2588" }; /* upper, lower, both dark */
        _cleanup_secret_ tg_secret *text = NULL, *out = NULL;
        QRcode *qr;
        size_t n = 0;
        int w, r;

        if (!isatty(STDOUT_FILENO))
                return 0;
        (void) setlocale(LC_CTYPE, "");
        if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0)
                return 0;
        r = tg_secret_new_copy(key->data, key->size + 1, &text);   /* tg_secret memory is zeroed: NUL-terminated */
        if (r < 0)
                return r;
        text->data[key->size] = '\0';
        qr = QRcode_encodeString((const char *) text->data, 0, QR_ECLEVEL_L, QR_MODE_8, 1);
        if (!qr) {
                log_debug("No QR code: libqrencode failed (%m).");
                return 0;
        }
        w = qr->width;
        r = tg_secret_new((size_t) (w + 4 + 1) * (size_t) ((w + 5) / 2) * 3 + 64, &out);
        if (r < 0)
                goto finish;
        /* Dark modules as light glyphs on a dark terminal would invert; print the light ones, as systemd does. */
        for (int y = -2; y < w + 2; y += 2) {
                for (int x = -2; x < w + 2; x++) {
                        bool up = y >= 0 && y < w && x >= 0 && x < w && (qr->data[y * w + x] & 1);
                        bool down = y + 1 >= 0 && y + 1 < w && x >= 0 && x < w && (qr->data[(y + 1) * w + x] & 1);
                        const char *g = glyph[(!up ? 1 : 0) | (!down ? 2 : 0)];
                        size_t l = strlen(g);
                        memcpy(out->data + n, g, l);
                        n += l;
                }
                out->data[n++] = '\n';
        }
        r = write_out(STDOUT_FILENO, out->data, n);
finish:
        explicit_bzero(qr->data, (size_t) w * (size_t) w);
        QRcode_free(qr);
        return r;
}
#else
int tg_show_qr(const tg_secret *key) {
        (void) key;
        return 0;
}
#endif

int tg_show_recovery_key(const tg_secret *key, int keyslot) {
        char head[256];
        int r;

        fflush(stdout);
        snprintf(head, sizeof head,
                 "A new recovery key for keyslot %d. It is shown only now and stored nowhere else; write it down\n"
                 "and keep it away from this machine. It opens the volume without the TPM (cryptsetup open),\n"
                 "once tpmguard reports \"Recovery key enrolled\" below.\n\n    ",
                 keyslot);
        r = write_str(head);
        if (r >= 0)
                r = write_out(STDOUT_FILENO, key->data, key->size);
        if (r >= 0)
                r = write_str("\n\n");
        if (r >= 0)
                r = tg_show_qr(key);
        return r;
}
