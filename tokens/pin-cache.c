/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One wrong PIN, one dictionary-attack try, however many volumes (issue 32 §2).
 *
 * systemd-cryptsetup keeps every PIN typed at its prompt in the kernel keyring (ask-password's
 * "luks2-pin": a `user` key in root's user keyring, its payload the PINs, each NUL-terminated,
 * 150 s) and tries each cached PIN on every later volume before it asks. Left alone, a typo that
 * the first volume's TPM refused is sent to the TPM again for every further volume, a
 * dictionary-attack try each time. So, when the TPM refuses a PIN that came from that cache:
 *   - it is taken out of the cache (the key updated, or invalidated when it held only that PIN):
 *     no later volume receives it;
 *   - its salted digest is kept beside the cache, as long as the cache lives ("tpmguard:refused-pin",
 *     150 s), for another volume's systemd-cryptsetup that read the list before the PIN was taken
 *     out (one answer at the console can serve two pending prompts): a PIN that has a digest there
 *     and is no longer in the cache is such a stale copy, and is refused without the TPM;
 *   - the TPM tries of all volumes are serialised (a lock in cache_dir), so that the second volume
 *     sees the first one's refusal before it sends the same PIN.
 * A PIN typed again is pushed to the cache by systemd before the plugin sees it, and is tried: two
 * volumes with different PINs lose no try and no PIN.
 *
 * Threat model. The keyring is root's and already holds systemd's plaintext PINs; the digest
 * replaces a plaintext wrong PIN, it adds nothing readable. A local attacker who can write root's
 * keyring can make us skip a PIN (a denial of service, no more than deleting systemd's cache) or
 * try one (the TPM decides, and counts it). Nothing here can open a volume, and every failure
 * here only tries a PIN once more, as before. Every buffer that held a PIN or the cache is wiped.
 * Only systemd-cryptsetup's calls use this (tg_pin_cache_applies()): a PIN typed to cryptsetup
 * is always tried.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "pin-cache.h"
#include "util.h"

#define REFUSED_SALT_SIZE 16
#define REFUSED_DIGEST_SIZE 32
#define REFUSED_MAX 16           /* digests kept; the oldest goes first */
#define CACHE_MAX_SIZE 32767     /* the kernel's limit for a user key's payload */
#define LOCK_WAIT_MS 10000       /* an unseal with its KDF takes well under this */

typedef int32_t key_serial;

static key_serial key_request(const char *description) {
        return (key_serial) syscall(SYS_request_key, "user", description, NULL, 0);
}

static key_serial key_add(const char *description, const void *payload, size_t size, key_serial keyring) {
        return (key_serial) syscall(SYS_add_key, "user", description, payload, size, keyring);
}

static long keyctl2(int op, unsigned long a, unsigned long b) {
        return syscall(SYS_keyctl, op, a, b, 0UL, 0UL);
}

static long keyctl3(int op, unsigned long a, unsigned long b, unsigned long c) {
        return syscall(SYS_keyctl, op, a, b, c, 0UL);
}

/* A user key's payload, whole, in secret memory; NULL when it cannot be read. */
static tg_secret *key_read(key_serial key) {
        _cleanup_secret_ tg_secret *buf = NULL;
        long got;

        if (key < 0 || tg_secret_new(CACHE_MAX_SIZE, &buf) < 0 || !buf)
                return NULL;
        got = keyctl3(KEYCTL_READ, (unsigned long) key, (unsigned long) buf->data, buf->size);
        if (got < 0 || (size_t) got > buf->size)
                return NULL;
        buf->size = (size_t) got;
        return TAKE_PTR(buf);
}

/* Does the NUL-separated list hold exactly pin as one of its entries? */
static bool list_has(const tg_secret *list, const tg_secret *pin) {
        size_t i = 0;

        while (i < list->size) {
                const uint8_t *entry = list->data + i, *end = memchr(entry, '\0', list->size - i);
                size_t len = end ? (size_t) (end - entry) : list->size - i;

                if (len == pin->size && CRYPTO_memcmp(entry, pin->data, len) == 0)
                        return true;
                i += len + 1;
        }
        return false;
}

/* The list without pin, each entry NUL-terminated as systemd writes it; sets *ret_removed. */
static int list_without(const tg_secret *list, const tg_secret *pin, tg_secret **ret, bool *ret_removed) {
        _cleanup_secret_ tg_secret *out = NULL;
        bool removed = false;
        size_t i = 0, n = 0;
        int r;

        r = tg_secret_new(list->size + 1, &out);
        if (r < 0)
                return r;
        while (i < list->size) {
                const uint8_t *entry = list->data + i, *end = memchr(entry, '\0', list->size - i);
                size_t len = end ? (size_t) (end - entry) : list->size - i;

                if (len == pin->size && CRYPTO_memcmp(entry, pin->data, len) == 0)
                        removed = true;
                else if (len > 0) {
                        memcpy(out->data + n, entry, len);
                        out->data[n + len] = '\0';
                        n += len + 1;
                }
                i += len + 1;
        }
        out->size = n;
        *ret = TAKE_PTR(out);
        *ret_removed = removed;
        return 0;
}

static int refused_digest(const uint8_t salt[static REFUSED_SALT_SIZE], const tg_secret *pin,
                          uint8_t out[static REFUSED_DIGEST_SIZE]) {
        static const char label[] = "tpmguard refused PIN";
        unsigned int size = 0;
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        int ok;

        if (!ctx)
                return -ENOMEM;
        ok = EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
             EVP_DigestUpdate(ctx, label, sizeof label) == 1 &&
             EVP_DigestUpdate(ctx, salt, REFUSED_SALT_SIZE) == 1 &&
             EVP_DigestUpdate(ctx, pin->data, pin->size) == 1 &&
             EVP_DigestFinal_ex(ctx, out, &size) == 1 && size == REFUSED_DIGEST_SIZE;
        EVP_MD_CTX_free(ctx);
        return ok ? 0 : -EIO;
}

/* Where the record is well formed: salt, then whole digests. */
static bool record_valid(const tg_secret *record) {
        return record->size >= REFUSED_SALT_SIZE + REFUSED_DIGEST_SIZE &&
               (record->size - REFUSED_SALT_SIZE) % REFUSED_DIGEST_SIZE == 0 &&
               record->size <= REFUSED_SALT_SIZE + REFUSED_MAX * REFUSED_DIGEST_SIZE;
}

static bool record_has(const tg_secret *record, const tg_secret *pin) {
        uint8_t digest[REFUSED_DIGEST_SIZE];
        bool found = false;

        if (!record_valid(record) || refused_digest(record->data, pin, digest) < 0)
                return false;
        for (size_t off = REFUSED_SALT_SIZE; off < record->size; off += REFUSED_DIGEST_SIZE)
                found |= CRYPTO_memcmp(record->data + off, digest, sizeof digest) == 0;
        explicit_bzero(digest, sizeof digest);
        return found;
}

bool tg_pin_cache_applies(void) {
        return strcmp(program_invocation_short_name, "systemd-cryptsetup") == 0;
}

int tg_pin_cache_lock(const char *cache_dir) {
        _cleanup_free_ char *path = NULL;
        struct stat st;
        int fd;

        if (!cache_dir || tg_asprintf(&path, "%s/pin.lock", cache_dir) < 0)
                return -1;
        if (mkdir(cache_dir, 0700) < 0 && errno != EEXIST)
                return -1;
        /* Only a private directory of ours: a planted one could hold the lock forever (it is bounded anyway). */
        if (lstat(cache_dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)
                return -1;
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
        if (fd < 0)
                return -1;
        for (int waited = 0; waited < LOCK_WAIT_MS; waited += 20) {
                if (flock(fd, LOCK_EX | LOCK_NB) == 0)
                        return fd;
                if (errno != EWOULDBLOCK && errno != EINTR)
                        break;
                (void) nanosleep(&(struct timespec) { .tv_nsec = 20 * 1000 * 1000 }, NULL);
        }
        close(fd);
        return -1;
}

bool tg_pin_cache_refused_before(const tg_secret *pin) {
        _cleanup_secret_ tg_secret *record = NULL, *list = NULL;

        if (!pin || pin->size == 0)
                return false;
        record = key_read(key_request(TG_PIN_REFUSED_KEY));
        if (!record || !record_has(record, pin))
                return false;
        /* Refused before. Typed again since? Then systemd has pushed it to its cache again. */
        list = key_read(key_request(TG_PIN_CACHE_KEY));
        return !(list && list_has(list, pin));
}

/* Adds pin's digest to the record in keyring (a new record with a fresh salt when there is none). */
static void record_add(const tg_secret *pin, key_serial keyring) {
        _cleanup_secret_ tg_secret *old = NULL, *record = NULL;
        key_serial key;
        size_t keep = 0;

        key = key_request(TG_PIN_REFUSED_KEY);
        old = key_read(key);
        if (old && record_valid(old)) {
                if (record_has(old, pin))
                        return;
                keep = (old->size - REFUSED_SALT_SIZE) / REFUSED_DIGEST_SIZE;
                if (keep >= REFUSED_MAX)
                        keep = REFUSED_MAX - 1;
        }
        if (tg_secret_new(REFUSED_SALT_SIZE + (keep + 1) * REFUSED_DIGEST_SIZE, &record) < 0)
                return;
        if (keep > 0) {
                /* The salt, then the newest digests kept. */
                memcpy(record->data, old->data, REFUSED_SALT_SIZE);
                memcpy(record->data + REFUSED_SALT_SIZE,
                       old->data + old->size - keep * REFUSED_DIGEST_SIZE, keep * REFUSED_DIGEST_SIZE);
        } else if (RAND_bytes(record->data, REFUSED_SALT_SIZE) != 1)
                return;
        if (refused_digest(record->data, pin, record->data + REFUSED_SALT_SIZE + keep * REFUSED_DIGEST_SIZE) < 0)
                return;
        if (keep > 0 && keyctl3(KEYCTL_UPDATE, (unsigned long) key, (unsigned long) record->data, record->size) == 0)
                return;
        key = key_add(TG_PIN_REFUSED_KEY, record->data, record->size, keyring);
        if (key < 0) {
                log_debug("Cannot record a refused PIN in the kernel keyring: %m.");
                return;
        }
        /* Possessor and owner (root) may read it: the next volume's systemd-cryptsetup is another process. */
        (void) keyctl2(KEYCTL_SETPERM, (unsigned long) key, 0x3f3f0000UL);
        (void) keyctl2(KEYCTL_SET_TIMEOUT, (unsigned long) key, TG_PIN_REFUSED_TIMEOUT_SEC);
}

void tg_pin_cache_refused(const tg_secret *pin) {
        _cleanup_secret_ tg_secret *list = NULL, *rest = NULL;
        key_serial cache, keyring;
        bool removed = false;

        if (!pin || pin->size == 0)
                return;
        cache = key_request(TG_PIN_CACHE_KEY);
        list = key_read(cache);
        if (!list || list_without(list, pin, &rest, &removed) < 0 || !removed)
                return;   /* not from systemd's cache: nobody else will be handed it */
        /* The record lives where systemd keeps its cache: root's user keyring, shared by its volumes. */
        keyring = keyctl3(KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, (unsigned long) "user",
                          (unsigned long) TG_PIN_CACHE_KEY) >= 0 ? KEY_SPEC_USER_KEYRING : KEY_SPEC_SESSION_KEYRING;
        record_add(pin, keyring);
        if (rest->size > 0 ? keyctl3(KEYCTL_UPDATE, (unsigned long) cache, (unsigned long) rest->data, rest->size) < 0 :
                             keyctl2(KEYCTL_INVALIDATE, (unsigned long) cache, 0) < 0)
                log_debug("Cannot take the refused PIN out of systemd's PIN cache: %m.");
        else
                log_debug("The refused PIN is out of systemd's PIN cache: no other volume tries it.");
}
