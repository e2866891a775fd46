/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Authenticated pending markers (marker-auth.h, docs/lifecycle.md).
 *
 * The attack: the LUKS2 header is writable by whoever can write the block
 * device (an evil maid, the disk group). A planted passphrase-operation marker
 * ("passwd", "committed": true, "old_keyslot": the recovery passphrase's
 * keyslot) would make the next lifecycle command or 'tpmguard cleanup'
 * destroy the recovery passphrase's keyslot; an edited genuine marker could
 * redirect a roll-forward or an undo to any keyslot no token uses.
 *
 * The defence: tpmguard MACs each marker it writes with a random 256-bit key
 * that only root can read (state_dir/marker.key, 0600, never copied into the
 * initrd), and resolving a marker destroys a keyslot only when the MAC
 * verifies. The MAC covers a fixed-order string built from the parsed fields
 * (not the JSON text, which libcryptsetup re-serializes) and the volume's
 * UUID, so a marker copied from another volume does not verify either. It
 * does not cover "keyslots": libcryptsetup changes that list itself
 * (crypt_token_assign_keyslot, crypt_keyslot_destroy), and the binding only
 * matters for new_keyslot, which is covered.
 *
 * The replay: a MAC alone proves that tpmguard once wrote the marker, not
 * that its operation is still open. Whoever reads the header while an
 * operation runs (or finds one a crash left) can save the signed marker and
 * plant it again after the keyslot numbers it names were reused: a committed
 * passwd marker "old 0, new 2", replayed after a second passwd moved the
 * passphrase back into keyslot 0, destroyed that keyslot. So the MAC also
 * covers a random nonce that is registered in state_dir/pending-markers/
 * while the operation is open (before the first write of its marker, until
 * just before its removal), and a marker is authentic only while its nonce
 * is registered.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "marker-auth.h"
#include "secret.h"
#include "util.h"

#define MARKER_MAC_LABEL "tpmguard pending marker v2"

static int key_path(const char *state_dir, char **ret) {
        return tg_asprintf(ret, "%s/%s", state_dir, TG_MARKER_KEY_FILE_NAME);
}

/* Reads the key from an open fd: exactly TG_MARKER_KEY_SIZE bytes, root-only, in a trusted directory. */
static int key_read_fd(int fd, const char *path, tg_secret **ret) {
        _cleanup_secret_ tg_secret *key = NULL;
        uint8_t extra;
        struct stat st;
        size_t got = 0;
        int r;

        /* Whoever can replace this file can forge markers: root-owned, in a directory only root writes. */
        r = tg_check_trusted(fd, path, "pending-marker key");
        if (r < 0)
                return r;
        if (fstat(fd, &st) < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot stat %s: %m", path);
        if (!S_ISREG(st.st_mode))
                return log_error_rc(-TG_ERR_CONFIG, "Refusing the pending-marker key %s: not a regular file.", path);
        /* Whoever can read it can forge markers too, e.g. a member of the disk group who also writes the header. */
        if (st.st_mode & (S_IRWXG | S_IRWXO))
                return log_error_rc(-TG_ERR_CONFIG,
                                    "Refusing the pending-marker key %s: other users can access it (mode %04o), so a "
                                    "marker signed with it proves nothing. Remove it ('rm %s'; the next marker "
                                    "creates a new one); markers signed with it are then treated as unauthenticated.",
                                    path, (unsigned) (st.st_mode & 07777), path);
        r = tg_secret_new(TG_MARKER_KEY_SIZE, &key);
        if (r < 0)
                return r;
        while (got < key->size) {
                ssize_t n = read(fd, key->data + got, key->size - got);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return log_error_rc(-TG_ERR_IO, "Cannot read %s: %m", path);
                if (n == 0)
                        break;
                got += (size_t) n;
        }
        if (got != key->size || read(fd, &extra, 1) != 0)
                return log_error_rc(-TG_ERR_CONFIG, "The pending-marker key %s is not %d bytes. Remove it ('rm %s'); "
                                    "markers signed with it are then treated as unauthenticated.",
                                    path, TG_MARKER_KEY_SIZE, path);
        *ret = TAKE_PTR(key);
        return 0;
}

static int key_load(const char *path, tg_secret **ret) {
        _cleanup_close_ int fd = -1;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT)
                return -TG_ERR_NOT_FOUND;
        if (fd < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot open the pending-marker key %s: %m", path);
        return key_read_fd(fd, path, ret);
}

/*
 * A new key, written completely to a temporary file and then linked into
 * place: link() fails if the key exists (O_EXCL for the final name), and a
 * crash leaves either no key or a whole one, never a short one.
 */
static int key_create(const char *state_dir, const char *path) {
        _cleanup_secret_ tg_secret *key = NULL;
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -1, dfd = -1;
        size_t done = 0;
        int r;

        if (mkdir(state_dir, 0700) < 0 && errno != EEXIST)
                return log_error_rc(-TG_ERR_IO, "Cannot create %s: %m", state_dir);
        r = tg_secret_new_random(TG_MARKER_KEY_SIZE, &key);
        if (r < 0)
                return r;
        if (tg_asprintf(&tmp, "%s.tmpXXXXXX", path) < 0)
                return -TG_ERR_NOMEM;
        fd = mkostemp(tmp, O_CLOEXEC);  /* O_CREAT | O_EXCL, mode 0600 */
        if (fd < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot create %s: %m", tmp);
        if (fchmod(fd, 0600) < 0)
                goto fail;
        while (done < key->size) {
                ssize_t n = write(fd, key->data + done, key->size - done);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        goto fail;
                done += (size_t) n;
        }
        if (fsync(fd) < 0)
                goto fail;
        if (link(tmp, path) < 0 && errno != EEXIST)
                goto fail;
        (void) unlink(tmp);
        dfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0)
                (void) fsync(dfd);
        return 0;

fail:
        r = log_error_rc(-TG_ERR_IO, "Cannot write the pending-marker key %s: %m. Nothing was changed.%s", path,
                         tg_write_error_next_step(errno));
        (void) unlink(tmp);
        return r;
}

int tg_marker_key_load(const char *state_dir, bool create, tg_secret **ret) {
        _cleanup_free_ char *path = NULL;
        int r;

        assert(state_dir);
        if (key_path(state_dir, &path) < 0)
                return -TG_ERR_NOMEM;
        r = key_load(path, ret);
        if (r != -TG_ERR_NOT_FOUND || !create)
                return r;
        r = key_create(state_dir, path);
        if (r < 0)
                return r;
        r = key_load(path, ret);
        return r == -TG_ERR_NOT_FOUND ? log_error_rc(-TG_ERR_IO, "%s vanished right after it was created.", path) : r;
}

int tg_pending_marker_mac(const tg_secret *key, const char *uuid, const tg_pending_marker *m,
                          char ret[TG_MARKER_MAC_HEX_SIZE]) {
        _cleanup_free_ char *msg = NULL, *hex = NULL;
        uint8_t mac[32];
        size_t out_len = 0;
        int r;

        assert(key && key->size == TG_MARKER_KEY_SIZE);
        assert(uuid);
        assert(m);
        if (strchr(uuid, '\n'))
                return log_error_rc(-TG_ERR_TOKEN, "The volume's UUID contains a newline.");
        /* One field a line, in a fixed order, integers in decimal, absent ones -1: the same string however
         * libcryptsetup re-serializes the token. Only the UUID and the PBKDF type are free text; the type
         * comes last on its line after a fixed number of integers, and a UUID cannot hold a newline (the
         * nonce is hex, checked by the parser). */
        if (tg_asprintf(&msg,
                        MARKER_MAC_LABEL "\n"
                        "uuid=%s\nversion=%d\noperation=%s\nnonce=%s\ntoken=%d\nold_keyslot=%d\nnew_keyslot=%d\n"
                        "committed=%d\npbkdf=%u,%u,%u,%s\n",
                        uuid, TG_PENDING_VERSION, m->operation, m->nonce, m->token, m->old_keyslot, m->new_keyslot,
                        m->committed ? 1 : 0, m->pbkdf.iterations, m->pbkdf.memory_kb, m->pbkdf.parallel,
                        m->pbkdf.type) < 0)
                return -TG_ERR_NOMEM;
        if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key->data, key->size, (const unsigned char *) msg,
                       strlen(msg), mac, sizeof mac, &out_len) || out_len != sizeof mac)
                return log_error_rc(-TG_ERR_INVALID, "HMAC-SHA256 failed in OpenSSL.");
        r = tg_hex_encode(mac, sizeof mac, &hex);
        if (r < 0)
                return r;
        assert(strlen(hex) == TG_MARKER_MAC_HEX_SIZE - 1);
        memcpy(ret, hex, TG_MARKER_MAC_HEX_SIZE);
        return 0;
}

static const char *volume_uuid(struct crypt_device *cd) {
        const char *uuid = crypt_get_uuid(cd);
        return uuid ?: "";
}

static int nonce_path(const char *state_dir, const char *nonce, char **ret) {
        return tg_asprintf(ret, "%s/%s/%s", state_dir, TG_MARKER_NONCE_DIR_NAME, nonce);
}

static bool nonce_valid(const char *nonce) {
        size_t n = strlen(nonce);

        if (n != TG_MARKER_NONCE_HEX_SIZE - 1)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((nonce[i] >= '0' && nonce[i] <= '9') || (nonce[i] >= 'a' && nonce[i] <= 'f')))
                        return false;
        return true;
}

static void fsync_dir(const char *path) {
        _cleanup_close_ int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (dfd >= 0)
                (void) fsync(dfd);
}

/* A fresh nonce for m, registered (file created and synced) before any marker carrying it is written. */
static int nonce_register(const char *state_dir, tg_pending_marker *m) {
        _cleanup_free_ char *dir = NULL, *path = NULL, *hex = NULL;
        _cleanup_close_ int fd = -1;
        uint8_t raw[TG_MARKER_NONCE_SIZE];
        int r;

        if (RAND_bytes(raw, sizeof raw) != 1)
                return log_error_rc(-TG_ERR_IO, "The OpenSSL random generator failed.");
        r = tg_hex_encode(raw, sizeof raw, &hex);
        if (r < 0)
                return r;
        if (tg_asprintf(&dir, "%s/%s", state_dir, TG_MARKER_NONCE_DIR_NAME) < 0 || nonce_path(state_dir, hex, &path) < 0)
                return -TG_ERR_NOMEM;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return log_error_rc(-TG_ERR_IO, "Cannot create %s: %m. Nothing was changed.", dir);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0 || fsync(fd) < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot register the pending marker in %s: %m. Nothing was changed.",
                                    path);
        fsync_dir(dir);
        memcpy(m->nonce, hex, TG_MARKER_NONCE_HEX_SIZE);
        return 0;
}

/* 1 when the nonce is registered in state_dir (a regular file, not a link), 0 when not. */
static int nonce_registered(const char *state_dir, const char *nonce) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -1;
        struct stat st;

        if (!nonce_valid(nonce))
                return 0;
        if (nonce_path(state_dir, nonce, &path) < 0)
                return -TG_ERR_NOMEM;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
        if (fd < 0 && (errno == ENOENT || errno == ELOOP))
                return 0;
        if (fd < 0 || fstat(fd, &st) < 0)
                return log_error_rc(-TG_ERR_IO, "Cannot read the pending-marker registry entry %s: %m", path);
        return S_ISREG(st.st_mode) ? 1 : 0;
}

int tg_pending_marker_sign(const char *state_dir, struct crypt_device *cd, tg_pending_marker *m) {
        _cleanup_secret_ tg_secret *key = NULL;
        int r;

        r = tg_marker_key_load(state_dir, true, &key);
        if (r == -TG_ERR_IO)
                return r;   /* the cause and the next step are logged: one line, not three */
        if (r < 0)
                return log_error_rc(r, "Cannot sign the pending marker: nothing was changed.");
        /* The operation's first marker write: its nonce, registered before the marker exists. */
        if (!m->nonce[0]) {
                r = nonce_register(state_dir, m);
                if (r < 0)
                        return r;
        }
        return tg_pending_marker_mac(key, volume_uuid(cd), m, m->mac);
}

int tg_pending_marker_retire(const char *state_dir, const tg_pending_marker *m) {
        _cleanup_free_ char *path = NULL, *dir = NULL;

        if (!nonce_valid(m->nonce))
                return 0;
        if (nonce_path(state_dir, m->nonce, &path) < 0 || tg_asprintf(&dir, "%s/%s", state_dir, TG_MARKER_NONCE_DIR_NAME) < 0)
                return -TG_ERR_NOMEM;
        if (unlink(path) < 0 && errno != ENOENT)
                return log_error_rc(-TG_ERR_IO, "Cannot unregister the pending marker %s: %m. The marker stays; "
                                    "fix the cause and run 'tpmguard cleanup' again.", path);
        fsync_dir(dir);
        return 0;
}

bool tg_pending_marker_mac_matches(const tg_secret *key, const char *uuid, const tg_pending_marker *m) {
        char expected[TG_MARKER_MAC_HEX_SIZE];

        if (m->mac[0] == '\0' || strlen(m->mac) != TG_MARKER_MAC_HEX_SIZE - 1)
                return false;
        if (tg_pending_marker_mac(key, uuid, m, expected) < 0)
                return false;
        return memeq_const(expected, m->mac, TG_MARKER_MAC_HEX_SIZE - 1);
}

int tg_pending_marker_authenticate(const char *state_dir, struct crypt_device *cd, tg_pending_marker *m) {
        _cleanup_secret_ tg_secret *key = NULL;
        int r;

        m->authenticated = m->mac_verified = false;
        if (m->mac[0] == '\0')
                return 0;       /* an older tpmguard's marker, or a planted one */
        r = tg_marker_key_load(state_dir, false, &key);
        if (r == -TG_ERR_NOT_FOUND)
                return 0;       /* this machine never wrote a marker: not ours */
        if (r < 0)
                return r;
        m->mac_verified = tg_pending_marker_mac_matches(key, volume_uuid(cd), m);
        if (!m->mac_verified)
                return 0;
        /* Signed by us, but is its operation still open? A saved marker planted again is not (replay). */
        r = nonce_registered(state_dir, m->nonce);
        if (r < 0)
                return r;
        m->authenticated = r > 0;
        return 0;
}
