/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * One wrong PIN, one dictionary-attack try, however many volumes (issue 32 §2).
 *
 * systemd-cryptsetup keeps every PIN typed at its prompt in the kernel keyring (ask-password's
 * "luks2-pin": a `user` key in root's user keyring, its payload the PINs, each NUL-terminated,
 * 150 s) and tries each cached PIN on every later volume before it asks. Left alone, a typo that
 * the first volume's TPM refused is sent to the TPM again for every further volume, a
 * dictionary-attack try each time. So, when the TPM refuses a PIN that came from that cache:
 *   - it is taken out of the cache (the key rewritten, or unlinked when it held only that PIN):
 *     no volume that reads the cache later receives it;
 *   - its tag is recorded beside the cache for as long as the cache lives
 *     ("tpmguard:refused-pin", 150 s, with the refusing process's ID), because another volume's
 *     systemd-cryptsetup may already hold a copy of the list read before the PIN was taken out
 *     (one answer at the console can serve two pending prompts). A PIN that another process
 *     recorded and that is no longer in the cache is such a stale copy, and is not sent;
 *   - the volumes' PIN-bearing Unseals take turns (a lock in cache_dir, taken right before the
 *     Unseal, after the PIN's KDF), so that the second volume sees the first one's refusal before
 *     it sends the same PIN.
 * What this cannot know is whether a PIN wrong for one token is right for another: it assumes, as
 * the one-PIN-for-several-volumes design does, that the volumes share the PIN, and bounds the cost
 * when they do not. A PIN typed again is pushed to the cache by systemd before the plugin sees
 * it and is always tried; the refusals of the same process (other tokens of the same volume) are
 * never held against a PIN. So volumes with different PINs lose no PIN and no try: at worst,
 * when both prompts were answered with one volume's PIN at once, the other volume asks again.
 *
 * Threat model. The keyring is root's and already holds systemd's plaintext PINs; the tag is an
 * Argon2id of the refused PIN (one pass at 32 MiB under a random salt, tg_pin_tag()): a guess
 * costs about a 25th of a guess at a token's defaults, and the tag replaces a plaintext wrong PIN. A
 * local attacker who can write root's keyring can make us skip a PIN (as deleting systemd's cache
 * would) or try one (the TPM decides, and counts it): nothing here can open a volume. Both keys
 * get their 150 s timeout again after every rewrite (the kernel's KEYCTL_UPDATE clears it).
 * Removal unlinks rather than invalidates: systemd-cryptsetup treats any keyring error but
 * ENOKEY as fatal, and an invalidated key answers EKEYREVOKED until it is collected. Every buffer
 * that held a PIN or the cache is wiped. Only systemd-cryptsetup's calls use this
 * (tg_pin_cache_applies()): a PIN typed to cryptsetup is always tried.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/keyctl.h>
#include <openssl/crypto.h>
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
#include "pin.h"
#include "util.h"

#define REFUSED_SALT_SIZE 16
#define REFUSED_TAG_SIZE 32
#define REFUSED_ENTRY_SIZE (4 + REFUSED_TAG_SIZE)   /* the refusing process's ID (little endian), the tag */
#define REFUSED_MAX 16                             /* entries kept; the oldest goes first */
#define CACHE_MAX_SIZE 32767                       /* the kernel's limit for a user key's payload */
#define LOCK_WAIT_MS 15000                         /* volumes wait for each other's TPM unseal, not their KDF */

typedef int32_t key_serial;

static key_serial key_request(const char *description) {
        return (key_serial) syscall(SYS_request_key, "user", description, NULL, 0);
}

static key_serial key_add(const char *description, const void *payload, size_t size, key_serial keyring) {
        return (key_serial) syscall(SYS_add_key, "user", description, payload, size, keyring);
}

static long keyctl3(int op, unsigned long a, unsigned long b, unsigned long c) {
        return syscall(SYS_keyctl, op, a, b, c, 0UL);
}

/* A new payload for an existing key, with the cache's lifetime again (KEYCTL_UPDATE clears a timeout). */
static int key_rewrite(key_serial key, const tg_secret *payload) {
        if (keyctl3(KEYCTL_UPDATE, (unsigned long) key, (unsigned long) payload->data, payload->size) < 0)
                return -errno;
        (void) keyctl3(KEYCTL_SET_TIMEOUT, (unsigned long) key, TG_PIN_REFUSED_TIMEOUT_SEC, 0);
        return 0;
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

/*
 * The next entry of a NUL-separated list (systemd's nulstr: each entry NUL-terminated; a last one
 * without its NUL is taken whole) from *i on, advancing *i; false at the end. Never reads past
 * list->size.
 */
static bool list_next(const tg_secret *list, size_t *i, const uint8_t **ret_entry, size_t *ret_len) {
        const uint8_t *entry, *end;

        if (*i >= list->size)
                return false;
        entry = list->data + *i;
        end = memchr(entry, '\0', list->size - *i);
        *ret_entry = entry;
        *ret_len = end ? (size_t) (end - entry) : list->size - *i;
        *i += *ret_len + 1;
        return true;
}

static bool entry_is(const uint8_t *entry, size_t len, const tg_secret *pin) {
        return len == pin->size && CRYPTO_memcmp(entry, pin->data, len) == 0;
}

/* Does the NUL-separated list hold exactly pin as one of its entries? */
static bool list_has(const tg_secret *list, const tg_secret *pin) {
        const uint8_t *entry;
        size_t i = 0, len;

        while (list_next(list, &i, &entry, &len))
                if (entry_is(entry, len, pin))
                        return true;
        return false;
}

/* The list without pin, each entry NUL-terminated as systemd writes it; sets *ret_removed. */
static int list_without(const tg_secret *list, const tg_secret *pin, tg_secret **ret, bool *ret_removed) {
        _cleanup_secret_ tg_secret *out = NULL;
        const uint8_t *entry;
        bool removed = false;
        size_t i = 0, n = 0, len;
        int r;

        r = tg_secret_new(list->size + 1, &out);
        if (r < 0)
                return r;
        while (list_next(list, &i, &entry, &len)) {
                if (entry_is(entry, len, pin))
                        removed = true;
                else if (len > 0) {
                        memcpy(out->data + n, entry, len);
                        out->data[n + len] = '\0';
                        n += len + 1;
                }
        }
        out->size = n;
        *ret = TAKE_PTR(out);
        *ret_removed = removed;
        return 0;
}

/* The record: a salt, then whole entries, at most REFUSED_MAX. */
static bool record_valid(const tg_secret *record) {
        return record->size >= REFUSED_SALT_SIZE + REFUSED_ENTRY_SIZE &&
               (record->size - REFUSED_SALT_SIZE) % REFUSED_ENTRY_SIZE == 0 &&
               record->size <= REFUSED_SALT_SIZE + REFUSED_MAX * REFUSED_ENTRY_SIZE;
}

static uint32_t entry_pid(const uint8_t *entry) {
        return (uint32_t) entry[0] | (uint32_t) entry[1] << 8 | (uint32_t) entry[2] << 16 | (uint32_t) entry[3] << 24;
}

static void entry_set_pid(uint8_t *entry, uint32_t pid) {
        for (unsigned b = 0; b < 4; b++)
                entry[b] = (uint8_t) (pid >> (8 * b));
}

/* Whether the record holds pin's tag from a process other than this one (another volume's). */
static bool record_has_other(const tg_secret *record, const tg_secret *pin) {
        _cleanup_secret_ tg_secret *tag = NULL;
        uint32_t self = (uint32_t) getpid();
        bool others = false, found = false;

        if (!record_valid(record))
                return false;
        for (size_t off = REFUSED_SALT_SIZE; off < record->size; off += REFUSED_ENTRY_SIZE)
                others |= entry_pid(record->data + off) != self;
        /* The tag's Argon2id only when an entry could match. */
        if (!others || tg_pin_tag(pin, record->data, REFUSED_SALT_SIZE, &tag) < 0 || !tag)
                return false;
        for (size_t off = REFUSED_SALT_SIZE; off < record->size; off += REFUSED_ENTRY_SIZE)
                if (entry_pid(record->data + off) != self)
                        found |= CRYPTO_memcmp(record->data + off + 4, tag->data, REFUSED_TAG_SIZE) == 0;
        return found;
}

bool tg_pin_cache_applies(void) {
        return strcmp(program_invocation_short_name, "systemd-cryptsetup") == 0;
}

int tg_pin_cache_lock(const char *cache_dir) {
        _cleanup_free_ char *path = NULL;
        int fd;

        if (!cache_dir || tg_asprintf(&path, "%s/pin.lock", cache_dir) < 0)
                return -1;
        if (mkdir(cache_dir, 0700) < 0 && errno != EEXIST)
                return -1;
        /* Only a private directory of ours: a planted one could hold the lock (bounded anyway). */
        if (tg_private_dir_check(cache_dir) < 0)
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
        if (!record || !record_has_other(record, pin))
                return false;
        /* Refused by another volume. Typed again since? Then systemd has pushed it to its cache again. */
        list = key_read(key_request(TG_PIN_CACHE_KEY));
        return !(list && list_has(list, pin));
}

/* Adds (this process, pin's tag) to the record in keyring (a new record with a fresh salt when there is none). */
static void record_add(const tg_secret *pin, key_serial keyring) {
        _cleanup_secret_ tg_secret *old = NULL, *record = NULL, *tag = NULL;
        key_serial key;
        size_t keep = 0;
        uint8_t *entry;

        key = key_request(TG_PIN_REFUSED_KEY);
        old = key_read(key);
        if (old && record_valid(old)) {
                keep = (old->size - REFUSED_SALT_SIZE) / REFUSED_ENTRY_SIZE;
                if (keep >= REFUSED_MAX)
                        keep = REFUSED_MAX - 1;
        }
        if (tg_secret_new(REFUSED_SALT_SIZE + (keep + 1) * REFUSED_ENTRY_SIZE, &record) < 0 || !record)
                return;
        if (keep > 0) {
                /* The salt, then the newest entries kept. */
                memcpy(record->data, old->data, REFUSED_SALT_SIZE);
                memcpy(record->data + REFUSED_SALT_SIZE, old->data + old->size - keep * REFUSED_ENTRY_SIZE,
                       keep * REFUSED_ENTRY_SIZE);
        } else if (RAND_bytes(record->data, REFUSED_SALT_SIZE) != 1)
                return;
        if (tg_pin_tag(pin, record->data, REFUSED_SALT_SIZE, &tag) < 0 || !tag)
                return;
        entry = record->data + REFUSED_SALT_SIZE + keep * REFUSED_ENTRY_SIZE;
        entry_set_pid(entry, (uint32_t) getpid());
        memcpy(entry + 4, tag->data, REFUSED_TAG_SIZE);
        if (keep > 0 && key_rewrite(key, record) == 0)
                return;
        key = key_add(TG_PIN_REFUSED_KEY, record->data, record->size, keyring);
        if (key < 0) {
                log_debug("Cannot record a refused PIN in the kernel keyring: %m.");
                return;
        }
        /* Possessor and owner (root) may read it: the next volume's systemd-cryptsetup is another process. */
        (void) keyctl3(KEYCTL_SETPERM, (unsigned long) key, 0x3f3f0000UL, 0);
        (void) keyctl3(KEYCTL_SET_TIMEOUT, (unsigned long) key, TG_PIN_REFUSED_TIMEOUT_SEC, 0);
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
        /* The record lives where systemd keeps its cache: root's user keyring, shared by its volumes
         * (KeyringMode=shared links it into each unit's session keyring). */
        keyring = keyctl3(KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, (unsigned long) "user",
                          (unsigned long) TG_PIN_CACHE_KEY) >= 0 ? KEY_SPEC_USER_KEYRING : KEY_SPEC_SESSION_KEYRING;
        record_add(pin, keyring);
        if (rest->size > 0 ? key_rewrite(cache, rest) < 0 :
                             keyctl3(KEYCTL_UNLINK, (unsigned long) cache, (unsigned long) keyring, 0) < 0)
                log_debug("Cannot take the refused PIN out of systemd's PIN cache: %m.");
        else
                log_debug("The refused PIN is out of systemd's PIN cache: no volume that reads it later tries it.");
}
