/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"

/*
 * The files of an EK CA store directory besides its certificates:
 *
 *   MANIFEST  one line per shipped certificate (scripts/update-ek-ca writes
 *             it): kind, vendor id, vendor, SHA-256, notBefore, notAfter,
 *             source URL, subject, tab-separated; "#" lines are comments.
 *             It names the vendor of the root that anchored a chain, and the
 *             unit test checks the shipped certificates against it.
 *   distrust  SHA-256 fingerprints (hex, colons and spaces allowed, "#"
 *             comments), one per line: certificates that are not trusted,
 *             whichever store of the list they come from. The
 *             administrator's way to distrust a shipped CA without editing
 *             files under /usr.
 *
 * Both are parsed strictly: a malformed line is an error naming it, never
 * skipped (a distrust entry that is silently ignored would keep a CA the
 * administrator meant to remove).
 */
#define TG_EK_STORE_MANIFEST "MANIFEST"
#define TG_EK_STORE_DISTRUST "distrust"

typedef struct tg_ek_manifest_entry {
        char *kind;       /* "root", "intermediate" or "orphan" */
        char *vendor_id;  /* "IFX", "NTC", ... */
        char *vendor;     /* "Infineon", ... */
        uint8_t sha256[32];
        char *not_before; /* ISO 8601, "2013-07-26T00:00:00Z" */
        char *not_after;
        char *url;        /* where the vendor publishes it */
        char *subject;    /* RFC 2253 */
} tg_ek_manifest_entry;

typedef struct tg_ek_manifest {
        tg_ek_manifest_entry *entries;
        size_t n;
} tg_ek_manifest;

int tg_ek_manifest_parse(const char *text, const char *origin, tg_ek_manifest **ret);
/* Loads path; a missing file gives -TG_ERR_NOT_FOUND without a message. */
int tg_ek_manifest_load(const char *path, tg_ek_manifest **ret);
const tg_ek_manifest_entry *tg_ek_manifest_find(const tg_ek_manifest *m, const uint8_t sha256[32]);
void tg_ek_manifest_free(tg_ek_manifest *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(tg_ek_manifest *, tg_ek_manifest_free);

/* A set of SHA-256 fingerprints (the distrust lists). */
typedef struct tg_ek_fingerprints {
        uint8_t (*fp)[32];
        size_t n;
} tg_ek_fingerprints;

/* Adds the fingerprints of a distrust file's text; origin names it in messages. */
int tg_ek_fingerprints_parse(tg_ek_fingerprints *set, const char *text, const char *origin);
/* Adds those of the file at path; a missing file adds nothing and returns 0. */
int tg_ek_fingerprints_load(tg_ek_fingerprints *set, const char *path);
bool tg_ek_fingerprints_contain(const tg_ek_fingerprints *set, const uint8_t sha256[32]);
void tg_ek_fingerprints_done(tg_ek_fingerprints *set);

/* "ab:cd:..." (lowercase hex, colons) of a SHA-256, into buf of at least 96 bytes. */
void tg_ek_fingerprint_format(const uint8_t sha256[32], char *buf, size_t size);
