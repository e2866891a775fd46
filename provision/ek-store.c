/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The MANIFEST and distrust files of an EK CA store directory (see
 * ek-store.h). Pure parsing: the certificates themselves are loaded by ek-cert.c.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ek-store.h"
#include "error.h"
#include "log.h"
#include "util.h"

/* Large enough for the shipped store many times over, small enough to refuse garbage. */
#define EK_STORE_FILE_MAX (1024 * 1024)

static void manifest_entry_done(tg_ek_manifest_entry *e) {
        free(e->kind);
        free(e->vendor_id);
        free(e->vendor);
        free(e->not_before);
        free(e->not_after);
        free(e->url);
        free(e->subject);
}

void tg_ek_manifest_free(tg_ek_manifest *m) {
        if (!m)
                return;
        for (size_t i = 0; i < m->n; i++)
                manifest_entry_done(&m->entries[i]);
        free(m->entries);
        free(m);
}

/* Exactly 64 hex digits, optionally split by colons or blanks, into out. */
static bool parse_fingerprint(const char *s, size_t len, uint8_t out[32]) {
        size_t digits = 0;

        for (size_t i = 0; i < len; i++) {
                int v;
                char ch = s[i];
                if (ch == ':' || ch == ' ' || ch == '\t')
                        continue;
                if (ch >= '0' && ch <= '9')
                        v = ch - '0';
                else if (ch >= 'a' && ch <= 'f')
                        v = ch - 'a' + 10;
                else if (ch >= 'A' && ch <= 'F')
                        v = ch - 'A' + 10;
                else
                        return false;
                if (digits >= 64)
                        return false;
                if (digits % 2 == 0)
                        out[digits / 2] = (uint8_t) (v << 4);
                else
                        out[digits / 2] |= (uint8_t) v;
                digits++;
        }
        return digits == 64;
}

static bool is_iso_time(const char *s) {
        /* YYYY-MM-DDTHH:MM:SSZ */
        static const char pattern[] = "dddd-dd-ddTdd:dd:ddZ";
        if (strlen(s) != sizeof pattern - 1)
                return false;
        for (size_t i = 0; pattern[i]; i++)
                if (pattern[i] == 'd' ? !isdigit((unsigned char) s[i]) : s[i] != pattern[i])
                        return false;
        return true;
}

int tg_ek_manifest_parse(const char *text, const char *origin, tg_ek_manifest **ret) {
        _cleanup_(tg_ek_manifest_freep) tg_ek_manifest *m = calloc(1, sizeof *m);
        _cleanup_free_ char *copy = strdup(text);
        unsigned line_no = 0;

        if (!m || !copy)
                return -TG_ERR_NOMEM;
        for (char *p = copy, *line; (line = strsep(&p, "\n"));) {
                char *field[8], *rest = line;
                size_t nf = 0;
                tg_ek_manifest_entry *grown, e = {};

                line_no++;
                if (line[0] == '#' || line[0] == '\0')
                        continue;
                while (nf < ELEMENTSOF(field) && rest)
                        field[nf++] = strsep(&rest, "\t");
                if (nf != ELEMENTSOF(field) || rest)
                        return log_error_rc(-TG_ERR_INVALID,
                                            "%s:%u: not 8 tab-separated fields. The EK CA store's manifest is "
                                            "damaged: reinstall it or regenerate it with update-ek-ca.",
                                            origin, line_no);
                if (strcmp(field[0], "root") != 0 && strcmp(field[0], "intermediate") != 0 &&
                    strcmp(field[0], "orphan") != 0)
                        return log_error_rc(-TG_ERR_INVALID, "%s:%u: unknown kind \"%s\".", origin, line_no,
                                            field[0]);
                if (!parse_fingerprint(field[3], strlen(field[3]), e.sha256))
                        return log_error_rc(-TG_ERR_INVALID, "%s:%u: \"%s\" is not a SHA-256 fingerprint.",
                                            origin, line_no, field[3]);
                if (!is_iso_time(field[4]) || !is_iso_time(field[5]))
                        return log_error_rc(-TG_ERR_INVALID, "%s:%u: validity dates are not YYYY-MM-DDTHH:MM:SSZ.",
                                            origin, line_no);
                if (field[1][0] == '\0' || field[2][0] == '\0' || field[7][0] == '\0')
                        return log_error_rc(-TG_ERR_INVALID, "%s:%u: vendor or subject is empty.", origin, line_no);
                if (tg_ek_manifest_find(m, e.sha256))
                        return log_error_rc(-TG_ERR_INVALID, "%s:%u: the certificate %s is listed twice.", origin,
                                            line_no, field[3]);
                e.kind = strdup(field[0]);
                e.vendor_id = strdup(field[1]);
                e.vendor = strdup(field[2]);
                e.not_before = strdup(field[4]);
                e.not_after = strdup(field[5]);
                e.url = strdup(field[6]);
                e.subject = strdup(field[7]);
                grown = reallocarray(m->entries, m->n + 1, sizeof *m->entries);
                if (!e.kind || !e.vendor_id || !e.vendor || !e.not_before || !e.not_after || !e.url || !e.subject ||
                    !grown) {
                        if (grown)
                                m->entries = grown;
                        manifest_entry_done(&e);
                        return -TG_ERR_NOMEM;
                }
                m->entries = grown;
                m->entries[m->n++] = e;
        }
        *ret = TAKE_PTR(m);
        return 0;
}

int tg_ek_manifest_load(const char *path, tg_ek_manifest **ret) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t size = 0;
        int r;

        r = tg_read_trusted_file(path, "EK CA manifest", EK_STORE_FILE_MAX, &buf, &size);
        if (r == -TG_ERR_NOT_FOUND)
                return r;
        if (r < 0)
                return log_error_rc(r, "Cannot read the EK CA manifest %s (%s).", path, tg_err_str(r));
        if (memchr(buf, '\0', size))
                return log_error_rc(-TG_ERR_INVALID, "%s is not a text file.", path);
        buf[size] = '\0'; /* tg_read_file leaves room for it */
        return tg_ek_manifest_parse((const char *) buf, path, ret);
}

const tg_ek_manifest_entry *tg_ek_manifest_find(const tg_ek_manifest *m, const uint8_t sha256[32]) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n; i++)
                if (memcmp(m->entries[i].sha256, sha256, 32) == 0)
                        return &m->entries[i];
        return NULL;
}

int tg_ek_fingerprints_parse(tg_ek_fingerprints *set, const char *text, const char *origin) {
        unsigned line_no = 0;

        for (const char *p = text; *p;) {
                const char *end = strchrnul(p, '\n'), *hash;
                size_t len;
                uint8_t fp[32];

                line_no++;
                hash = memchr(p, '#', (size_t) (end - p));
                len = (size_t) ((hash ?: end) - p);
                while (len > 0 && isspace((unsigned char) p[len - 1]))
                        len--;
                while (len > 0 && isspace((unsigned char) *p)) {
                        p++;
                        len--;
                }
                if (len > 0) {
                        if (!parse_fingerprint(p, len, fp))
                                return log_error_rc(-TG_ERR_EK_CERT,
                                                    "%s:%u: not a SHA-256 fingerprint (64 hex digits, colons "
                                                    "allowed). Fix the line: a distrust entry is never skipped.",
                                                    origin, line_no);
                        if (!tg_ek_fingerprints_contain(set, fp)) {
                                uint8_t (*grown)[32] = reallocarray(set->fp, set->n + 1, sizeof *set->fp);
                                if (!grown)
                                        return -TG_ERR_NOMEM;
                                set->fp = grown;
                                memcpy(set->fp[set->n++], fp, 32);
                        }
                }
                p = *end ? end + 1 : end;
        }
        return 0;
}

int tg_ek_fingerprints_load(tg_ek_fingerprints *set, const char *path) {
        _cleanup_free_ uint8_t *buf = NULL;
        size_t size = 0;
        int r;

        r = tg_read_trusted_file(path, "distrust list", EK_STORE_FILE_MAX, &buf, &size);
        if (r == -TG_ERR_NOT_FOUND)
                return 0;
        if (r < 0)
                return log_error_rc(-TG_ERR_EK_CERT, "Cannot read the distrust list %s (%s).", path, tg_err_str(r));
        if (memchr(buf, '\0', size))
                return log_error_rc(-TG_ERR_EK_CERT, "The distrust list %s is not a text file.", path);
        buf[size] = '\0';
        return tg_ek_fingerprints_parse(set, (const char *) buf, path);
}

bool tg_ek_fingerprints_contain(const tg_ek_fingerprints *set, const uint8_t sha256[32]) {
        for (size_t i = 0; i < set->n; i++)
                if (memcmp(set->fp[i], sha256, 32) == 0)
                        return true;
        return false;
}

void tg_ek_fingerprints_done(tg_ek_fingerprints *set) {
        free(set->fp);
        *set = (tg_ek_fingerprints) {};
}

void tg_ek_fingerprint_format(const uint8_t sha256[32], char *buf, size_t size) {
        size_t off = 0;

        for (size_t i = 0; i < 32 && off + 4 <= size; i++)
                off += (size_t) snprintf(buf + off, size - off, i ? ":%02x" : "%02x", sha256[i]);
        if (size > 0 && off >= size)
                buf[size - 1] = '\0';
}
