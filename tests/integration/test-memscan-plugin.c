/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Secret hygiene of the plugin's unlock path, measured: this harness loads
 * the plugin like libcryptsetup does (dlopen + dlvsym), unlocks an enrolled
 * image through cryptsetup_token_open_pin(), then searches every writable
 * mapping of its own address space (/proc/self/maps, read through
 * /proc/self/mem) for the PIN, the unsealed secret and the PIN-derived TPM
 * authValue, and for a format 2 token also the PIN's Argon2id output A, the
 * mask K and what the TPM released (S XOR K), each computed here from the
 * token's parameters with libargon2 and OpenSSL's HKDF, independently of
 * tokens/pin.c.
 *
 *  - After open_pin and before buffer_free the secret must be found (in the
 *    returned buffer): the positive control that shows the scan works.
 *  - After buffer_free none of them may be found anywhere: not in the heap
 *    (freed or not), not on the stack, not in libtss2's or OpenSSL's memory.
 *    One exception is reported but not failed: the authValue copy that
 *    tpm2-tss 3.2.1 leaves in its freed session node (see add_auth_needle).
 *  - No log line of the plugin, at libcryptsetup's debug level, holds any of
 *    them (raw, hex or base64).
 *
 * The harness itself never keeps a needle in plain form: each is stored
 * XOR-masked and compared through the mask, and the scan buffer is a
 * private mapping that the scan skips.
 *
 *   test-memscan-plugin PLUGIN.so IMAGE PIN
 * (TPMGUARD_CONFIG points at the test TPM's configuration.) Exit 0: clean;
 * 1: a needle was found or a step failed.
 */
#include <argon2.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <libcryptsetup.h>
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MASK 0xa5
#define CHUNK (1u << 20)
#define ABI "CRYPTSETUP_TOKEN_1.0"

typedef int (*open_pin_fn)(struct crypt_device *, int, const char *, size_t, char **, size_t *, void *);
typedef void (*buffer_free_fn)(void *, size_t);

typedef struct needle {
        const char *what;
        const char *known_residual; /* non-NULL: reported, not failed, for this reason */
        uint8_t masked[256];
        size_t size;
} needle;

static needle needles[8];
static size_t n_needles;
static uint8_t *scan_buf; /* private mapping, excluded from the scan */
static char log_text[1 << 20];

static void needle_add(const char *what, const void *data, size_t size) {
        needle *n = &needles[n_needles++];
        n->what = what;
        n->size = size;
        for (size_t i = 0; i < size; i++)
                n->masked[i] = ((const uint8_t *) data)[i] ^ MASK;
}

static bool match_at(const uint8_t *p, const needle *n) {
        for (size_t i = 0; i < n->size; i++)
                if ((uint8_t) (p[i] ^ MASK) != n->masked[i])
                        return false;
        return true;
}

/* Counts occurrences of needle k in all writable mappings; prints where. */
static int scan(size_t k, bool verbose) {
        FILE *maps = fopen("/proc/self/maps", "re");
        int mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
        char line[512];
        int found = 0;

        if (!maps || mem < 0) {
                perror("open /proc/self");
                exit(1);
        }
        while (fgets(line, sizeof line, maps)) {
                uintptr_t start, end;
                char perms[5] = "", path[256] = "";

                if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %4s %*s %*s %*s %255[^\n]", &start, &end, perms, path) < 3)
                        continue;
                if (perms[0] != 'r' || perms[1] != 'w')
                        continue;
                if (start == (uintptr_t) scan_buf)
                        continue;
                /* Sanitizer shadow or allocator reservations, never a heap we could scan in time. */
                if (end - start > (UINT64_C(64) << 30)) {
                        fprintf(stderr, "memscan: skipping a %" PRIuPTR " GiB mapping %s\n", (end - start) >> 30, path);
                        continue;
                }
                /* Overlapping chunks so that no needle straddling a boundary is missed. */
                for (uintptr_t off = start; off < end; off += CHUNK - 256) {
                        size_t want = end - off < CHUNK ? end - off : CHUNK;
                        ssize_t got = pread(mem, scan_buf, want, (off_t) off);
                        if (got <= 0)
                                break;
                        for (size_t i = 0; i + needles[k].size <= (size_t) got; i++)
                                if (match_at(scan_buf + i, &needles[k])) {
                                        found++;
                                        if (verbose)
                                                fprintf(stderr, "  %s at %#" PRIxPTR " in %s %s\n", needles[k].what,
                                                        off + i, perms, path[0] ? path : "[anonymous]");
                                }
                        if ((size_t) got < want || off + want >= end)
                                break;
                }
        }
        explicit_bzero(scan_buf, CHUNK);
        fclose(maps);
        close(mem);
        return found;
}

static void capture_log(int level, const char *msg, void *usrptr) {
        size_t len = strlen(log_text);
        snprintf(log_text + len, sizeof log_text - len, "%s", msg);
}

/* Does the captured log hold needle k raw, in lowercase/uppercase hex, or in base64? */
static bool log_holds(size_t k) {
        const needle *n = &needles[k];
        uint8_t plain[256];
        char hex[513], HEX[513], b64[400];
        bool hit = false;

        for (size_t i = 0; i < n->size; i++)
                plain[i] = n->masked[i] ^ MASK;
        for (size_t i = 0; i < n->size; i++) {
                snprintf(hex + 2 * i, 3, "%02x", plain[i]);
                snprintf(HEX + 2 * i, 3, "%02X", plain[i]);
        }
        EVP_EncodeBlock((unsigned char *) b64, plain, (int) n->size);
        if (memmem(log_text, strlen(log_text), plain, n->size) || strstr(log_text, hex) || strstr(log_text, HEX) ||
            (n->size >= 6 && strstr(log_text, b64)))
                hit = true;
        explicit_bzero(plain, sizeof plain);
        explicit_bzero(hex, sizeof hex);
        explicit_bzero(HEX, sizeof HEX);
        explicit_bzero(b64, sizeof b64);
        return hit;
}

static void hkdf(const uint8_t *ikm, size_t ikm_size, const char *label, uint8_t *out, size_t size) {
        EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
        EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;
        OSSL_PARAM p[] = {
                OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *) "SHA256", 0),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *) ikm, ikm_size),
                OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *) label, strlen(label)),
                OSSL_PARAM_construct_end(),
        };

        if (!ctx || EVP_KDF_derive(ctx, out, size, p) != 1)
                exit(1);
        EVP_KDF_CTX_free(ctx);
        EVP_KDF_free(kdf);
}

/* The mask K of a format 2 token, kept (masked) to add "S XOR K" once S is known. */
static uint8_t mask_k[128];
static bool have_mask;

/*
 * From the token's own parameters: format 1, authValue = PBKDF2-HMAC-SHA256(PIN, salt,
 * iterations); format 2 (docs/token-format.md), A = Argon2id(PIN, salt, t, m, p), authValue and K
 * by HKDF-SHA256 of A under their labels.
 */
static void add_auth_needle(struct crypt_device *cd, int token, const char *pin, size_t pin_size) {
        const char *json = NULL;
        json_object *o, *kdf, *v, *t, *m, *par;
        uint8_t salt[64], auth[32], a[32];
        int salt_len, iterations;
        bool v2;

        if (crypt_token_json_get(cd, token, &json) < 0 || !(o = json_tokener_parse(json)) ||
            !json_object_object_get_ex(o, "pin_kdf", &kdf) ||
            !json_object_object_get_ex(kdf, "salt", &v) ||
            (salt_len = EVP_DecodeBlock(salt, (const unsigned char *) json_object_get_string(v),
                                        (int) strlen(json_object_get_string(v)))) < 32) {
                fprintf(stderr, "memscan: cannot read the token's PIN KDF\n");
                exit(1);
        }
        v2 = json_object_object_get_ex(kdf, "type", &v) && strcmp(json_object_get_string(v), "argon2id") == 0;
        if (v2) {
                if (!json_object_object_get_ex(kdf, "time", &t) || !json_object_object_get_ex(kdf, "memory", &m) ||
                    !json_object_object_get_ex(kdf, "parallel", &par) ||
                    argon2id_hash_raw((uint32_t) json_object_get_int(t), (uint32_t) json_object_get_int(m),
                                      (uint32_t) json_object_get_int(par), pin, pin_size, salt, 32, a, sizeof a) !=
                            ARGON2_OK) {
                        fprintf(stderr, "memscan: cannot compute the token's Argon2id\n");
                        exit(1);
                }
                needle_add("the PIN's Argon2id output A", a, sizeof a);
                hkdf(a, sizeof a, "tpmguard v2 keyslot mask", mask_k, sizeof mask_k);
                have_mask = true;
                needle_add("the mask K", mask_k, 32);
                hkdf(a, sizeof a, "tpmguard v2 authValue", auth, sizeof auth);
                explicit_bzero(a, sizeof a);
                printf("memscan: format 2 token (argon2id t=%d m=%d p=%d)\n", json_object_get_int(t),
                       json_object_get_int(m), json_object_get_int(par));
        } else {
                if (!json_object_object_get_ex(kdf, "iterations", &v) || (iterations = json_object_get_int(v)) <= 0 ||
                    PKCS5_PBKDF2_HMAC(pin, (int) pin_size, salt, 32, iterations, EVP_sha256(), sizeof auth, auth) != 1)
                        exit(1);
                printf("memscan: format 1 token\n");
        }
        needle_add("PIN-derived authValue", auth, sizeof auth);
        /*
         * tpm2-tss 3.2.1 ESAPI appends the object's authValue to the policy
         * session's sessionValue (sessionKey ‖ authValue) inside its own
         * session node, and frees that node unwiped when the session is
         * flushed; no ESAPI call overwrites it. The PIN itself and the
         * unsealed secret must be gone; this copy needs a tpm2-tss fix.
         * (Format 2: the authValue says nothing of A or K, labels apart.)
         */
        needles[n_needles - 1].known_residual = "in ESAPI's freed policy-session node (tpm2-tss 3.2.1 does not wipe sessionValue)";
        explicit_bzero(auth, sizeof auth);
        json_object_put(o);
}

int main(int argc, char **argv) {
        struct crypt_device *cd = NULL;
        void *dl;
        open_pin_fn open_pin;
        buffer_free_fn buffer_free;
        char *buffer = NULL, *pin;
        size_t buffer_len = 0, pin_size;
        int r, token, failed = 0;
        size_t secret_index;

        if (argc != 4) {
                fprintf(stderr, "usage: %s PLUGIN IMAGE PIN\n", argv[0]);
                return 2;
        }
        scan_buf = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (scan_buf == MAP_FAILED)
                return 1;

        /* The PIN: masked, and wiped from argv (it is a test PIN; real PINs never pass through argv). */
        pin_size = strlen(argv[3]);
        pin = malloc(pin_size + 1);
        memcpy(pin, argv[3], pin_size + 1);
        needle_add("PIN", pin, pin_size);
        explicit_bzero(argv[3], pin_size);

        dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        open_pin = dl ? (open_pin_fn) dlvsym(dl, "cryptsetup_token_open_pin", ABI) : NULL;
        buffer_free = dl ? (buffer_free_fn) dlvsym(dl, "cryptsetup_token_buffer_free", ABI) : NULL;
        if (!open_pin || !buffer_free) {
                fprintf(stderr, "memscan: cannot load %s: %s\n", argv[1], dlerror());
                return 1;
        }
        crypt_set_log_callback(NULL, capture_log, NULL);
        crypt_set_debug_level(CRYPT_DEBUG_ALL);
        if (crypt_init(&cd, argv[2]) < 0 || crypt_load(cd, CRYPT_LUKS2, NULL) < 0) {
                fprintf(stderr, "memscan: cannot load the LUKS2 header of %s\n", argv[2]);
                return 1;
        }
        crypt_set_log_callback(cd, capture_log, NULL);
        token = 0;
        add_auth_needle(cd, token, pin, pin_size);

        r = open_pin(cd, token, pin, pin_size, &buffer, &buffer_len, NULL);
        explicit_bzero(pin, pin_size);
        free(pin);
        if (r < 0) {
                fprintf(stderr, "memscan: token open failed: %d\n%s", r, log_text);
                return 1;
        }
        secret_index = n_needles;
        needle_add("unsealed secret", buffer, buffer_len);
        if (have_mask && buffer_len <= sizeof mask_k) {
                /* What the TPM released for a format 2 token: S XOR K. */
                uint8_t released[sizeof mask_k];
                for (size_t i = 0; i < buffer_len; i++)
                        released[i] = (uint8_t) buffer[i] ^ mask_k[i];
                needle_add("what Unseal released (S XOR K)", released, buffer_len);
                explicit_bzero(released, sizeof released);
        }
        explicit_bzero(mask_k, sizeof mask_k);

        /* Positive control: the secret is in memory now (the returned buffer). */
        if (scan(secret_index, false) < 1) {
                fprintf(stderr, "memscan: the scan does not find the secret in the plugin's own buffer: broken scan\n");
                return 1;
        }
        buffer_free(buffer, buffer_len);
        buffer = NULL;
        crypt_free(cd);
        cd = NULL;

        for (size_t k = 0; k < n_needles; k++) {
                int hits = scan(k, false);
                if (hits > 0 && needles[k].known_residual) {
                        fprintf(stderr, "memscan: KNOWN RESIDUAL: %s remains in memory %d time(s): %s\n",
                                needles[k].what, hits, needles[k].known_residual);
                } else if (hits > 0) {
                        fprintf(stderr, "memscan: FAIL: %s remains in memory %d time(s):\n", needles[k].what, hits);
                        (void) scan(k, true);
                        failed = 1;
                } else
                        fprintf(stderr, "memscan: %s: not in memory\n", needles[k].what);
                if (log_holds(k)) {
                        fprintf(stderr, "memscan: FAIL: %s appears in the debug log\n", needles[k].what);
                        failed = 1;
                }
        }
        if (!strstr(log_text, "tpmguard")) {
                fprintf(stderr, "memscan: the plugin's debug log is empty: log capture broken\n");
                failed = 1;
        }
        dlclose(dl);
        return failed;
}
