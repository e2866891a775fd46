/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The plugin as libcryptsetup sees it: dlopen() the built .so, resolve every
 * export with dlvsym(..., "CRYPTSETUP_TOKEN_1.0"), and call the ABI on a real
 * LUKS2 image (a file, header operations only: no root, no TPM). Every return
 * code is asserted exactly, because libcryptsetup 2.6 acts on them: only
 * -ENOENT, -EPERM, -EAGAIN and -ENOANO let it go on to the next token, and
 * -ENOANO is what makes systemd-cryptsetup ask for the PIN.
 *
 *   test-plugin-abi PLUGIN.so SOURCE_DIR
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <libcryptsetup.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "tpmguard-config.h"

#define ABI_VERSION "CRYPTSETUP_TOKEN_1.0"

typedef const char *(*version_fn)(void);
typedef int (*open_fn)(struct crypt_device *, int, char **, size_t *, void *);
typedef int (*open_pin_fn)(struct crypt_device *, int, const char *, size_t, char **, size_t *, void *);
typedef void (*buffer_free_fn)(void *, size_t);
typedef int (*validate_fn)(struct crypt_device *, const char *);
typedef void (*dump_fn)(struct crypt_device *, const char *);

static const char *plugin_path, *src_dir;

typedef struct fixture {
        void *dl;
        version_fn version;
        open_fn open;
        open_pin_fn open_pin;
        buffer_free_fn buffer_free;
        validate_fn validate;
        dump_fn dump;
        char dir[64];
        char image[128];
        struct crypt_device *cd;
        char *token_pin;      /* a real token (from swtpm) that needs a PIN */
        char *token_no_pin;   /* a real token without a PIN */
        char log[16384];
} fixture;

static void capture_log(int level, const char *msg, void *usrptr) {
        fixture *f = usrptr;
        size_t len = strlen(f->log);
        snprintf(f->log + len, sizeof f->log - len, "%s", msg);
}

static char *read_text(const char *rel) {
        char path[512];
        FILE *fp;
        char *buf = calloc(1, 65536);
        size_t n;

        snprintf(path, sizeof path, "%s/%s", src_dir, rel);
        fp = fopen(path, "re");
        assert_non_null(fp);
        assert_non_null(buf);
        n = fread(buf, 1, 65535, fp);
        fclose(fp);
        while (n > 0 && (buf[n - 1] == '\n'))
                buf[--n] = '\0';
        return buf;
}

/* The token with "keyslots" pointing at keyslot 0 of our image. */
static char *token_for_keyslot0(const char *json) {
        json_object *o = json_tokener_parse(json), *ks = json_object_new_array();
        char *s;

        assert_non_null(o);
        json_object_array_add(ks, json_object_new_string("0"));
        json_object_object_add(o, "keyslots", ks);
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        return s;
}

static void write_file(const char *path, const char *text) {
        FILE *fp = fopen(path, "we");
        assert_non_null(fp);
        assert_true(fputs(text, fp) >= 0);
        assert_int_equal(fclose(fp), 0);
}

static int setup(void **state) {
        fixture *f = calloc(1, sizeof *f);
        struct crypt_pbkdf_type pbkdf = { .type = CRYPT_KDF_PBKDF2, .hash = "sha256", .iterations = 1000,
                                          .flags = CRYPT_PBKDF_NO_BENCHMARK };
        char vk[64] = {};
        char *raw;
        int fd;

        assert_non_null(f);
        f->dl = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
        if (!f->dl)
                fail_msg("dlopen %s: %s", plugin_path, dlerror());
        f->version = (version_fn) dlvsym(f->dl, "cryptsetup_token_version", ABI_VERSION);
        f->open = (open_fn) dlvsym(f->dl, "cryptsetup_token_open", ABI_VERSION);
        f->open_pin = (open_pin_fn) dlvsym(f->dl, "cryptsetup_token_open_pin", ABI_VERSION);
        f->buffer_free = (buffer_free_fn) dlvsym(f->dl, "cryptsetup_token_buffer_free", ABI_VERSION);
        f->validate = (validate_fn) dlvsym(f->dl, "cryptsetup_token_validate", ABI_VERSION);
        f->dump = (dump_fn) dlvsym(f->dl, "cryptsetup_token_dump", ABI_VERSION);

        raw = read_text("tests/fuzz/corpus/token/pin.json");
        f->token_pin = token_for_keyslot0(raw);
        free(raw);
        raw = read_text("tests/fuzz/corpus/token/no-pin.json");
        f->token_no_pin = token_for_keyslot0(raw);
        free(raw);

        snprintf(f->dir, sizeof f->dir, "/tmp/tpmguard-abi-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        snprintf(f->image, sizeof f->image, "%s/disk.img", f->dir);
        fd = open(f->image, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 20 << 20), 0);
        close(fd);

        assert_int_equal(crypt_init(&f->cd, f->image), 0);
        crypt_set_log_callback(f->cd, capture_log, f);
        assert_int_equal(crypt_set_pbkdf_type(f->cd, &pbkdf), 0);
        assert_int_equal(crypt_format(f->cd, CRYPT_LUKS2, "aes", "xts-plain64", NULL, vk, sizeof vk, NULL), 0);
        assert_int_equal(crypt_keyslot_add_by_volume_key(f->cd, 0, vk, sizeof vk, "recovery", 8), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        fixture *f = *state;
        char path[256];

        crypt_free(f->cd);
        dlclose(f->dl);
        free(f->token_pin);
        free(f->token_no_pin);
        for (const char *const *n = (const char *const[]) { "disk.img", "tpmguard.conf", "null_name",
                                                             "state/ek-signing-key.json", "state",
                                                             "cache/splash", "cache", NULL };
             *n; n++) {
                snprintf(path, sizeof path, "%s/%s", f->dir, *n);
                (void) remove(path);
        }
        (void) rmdir(f->dir);
        free(f);
        unsetenv("TPMGUARD_CONFIG");
        return 0;
}

static void test_exports_versioned(void **state) {
        fixture *f = *state;
        static const char *const names[] = {
                "cryptsetup_token_version", "cryptsetup_token_open", "cryptsetup_token_open_pin",
                "cryptsetup_token_buffer_free", "cryptsetup_token_validate", "cryptsetup_token_dump",
        };

        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
                assert_non_null(dlvsym(f->dl, names[i], ABI_VERSION));
                assert_null(dlvsym(f->dl, names[i], "CRYPTSETUP_TOKEN_2.0"));
        }
        /* Nothing of the core is reachable. */
        assert_null(dlsym(f->dl, "tg_unlock_token_json"));
        assert_null(dlsym(f->dl, "tg_token_from_string"));
        assert_string_equal(f->version(), TPMGUARD_VERSION);
}

static void test_validate(void **state) {
        fixture *f = *state;
        char *bad;

        assert_int_equal(f->validate(f->cd, f->token_pin), 0);
        assert_int_equal(f->validate(f->cd, f->token_no_pin), 0);
        assert_int_equal(f->validate(f->cd, "{\"type\":\"tpmguard\",\"keyslots\":[],\"version\":1}"), -EINVAL);
        assert_int_equal(f->validate(f->cd, "{"), -EINVAL);
        assert_int_equal(f->validate(f->cd, ""), -EINVAL);
        assert_int_equal(f->validate(f->cd, "[]"), -EINVAL);
        /* One field wrong in an otherwise real token. */
        bad = strdup(f->token_pin);
        memcpy(strstr(bad, "\"version\":1"), "\"version\":2", 11);
        assert_int_equal(f->validate(f->cd, bad), -EINVAL);
        free(bad);
}

static void test_dump(void **state) {
        fixture *f = *state;

        f->log[0] = '\0';
        f->dump(f->cd, f->token_pin);
        assert_non_null(strstr(f->log, "sha256"));
        assert_null(strstr(f->log, "invalid tpmguard token"));
        f->log[0] = '\0';
        f->dump(f->cd, "{\"type\":\"tpmguard\"}");
        assert_non_null(strstr(f->log, "(invalid tpmguard token)"));
}

static int add_token(fixture *f, const char *json) {
        int id = crypt_token_json_set(f->cd, CRYPT_ANY_TOKEN, json);
        assert_true(id >= 0);
        return id;
}

static void expect_open(fixture *f, int token, const char *pin, size_t pin_size, int want) {
        char *sentinel = (char *) f, *buffer = sentinel;
        size_t len = 4242;

        if (pin)
                assert_int_equal(f->open_pin(f->cd, token, pin, pin_size, &buffer, &len, NULL), want);
        else {
                assert_int_equal(f->open(f->cd, token, &buffer, &len, NULL), want);
                assert_int_equal(f->open_pin(f->cd, token, NULL, 0, &buffer, &len, NULL), want);
        }
        /* Output parameters are written only on success. */
        assert_ptr_equal(buffer, sentinel);
        assert_int_equal(len, 4242);
}

/* Checks and removes the records in DIR/cache/splash: as many as calls made, each "DEVICE: "
 * and a line per reason, want in one of them. */
static void expect_splash_records(fixture *f, int calls, const char *want) {
        char dir[256], path[512];
        struct dirent *de;
        int n = 0;
        DIR *d;

        snprintf(dir, sizeof dir, "%s/cache/splash", f->dir);
        d = opendir(dir);
        assert_non_null(d);
        while ((de = readdir(d))) {
                char buf[4096] = {};
                FILE *file;

                if (de->d_name[0] == '.')
                        continue;
                n++;
                snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
                file = fopen(path, "r");
                assert_non_null(file);
                assert_true(fread(buf, 1, sizeof buf - 1, file) > 0);
                fclose(file);
                assert_int_equal(unlink(path), 0);
                if (!strstr(buf, want) || strncmp(buf, f->image, strlen(f->image)) != 0 ||
                    buf[strlen(buf) - 1] != '\n')
                        fail_msg("splash record \"%s\": expected \"%s: ...%s...\"", buf, f->image, want);
        }
        closedir(d);
        if (n != calls)
                fail_msg("%d splash records for %d calls (\"%s\")", n, calls, want);
}

static void test_open_errors_without_tpm(void **state) {
        fixture *f = *state;
        char conf[512], path[256], *pinned;
        int malformed, with_pin, without_pin;
        char *buffer = NULL;
        size_t len = 0;

        /* A token libcryptsetup stores (generic LUKS2 checks only) but we reject. */
        malformed = add_token(f, "{\"type\":\"tpmguard\",\"keyslots\":[\"0\"],\"version\":1}");
        with_pin = add_token(f, f->token_pin);
        without_pin = add_token(f, f->token_no_pin);

        /* No such token: -ENOENT, libcryptsetup tries the next. */
        expect_open(f, 31, NULL, 0, -ENOENT);
        /* Malformed token: -ENOENT (never -EINVAL, which would end the token loop in 2.6). */
        expect_open(f, malformed, NULL, 0, -ENOENT);
        /* PIN needed and none given: no -ENOANO (a PIN prompt) when no PIN can work, here
         * because the configuration cannot be read (issue 29: a PIN only when one can work). */
        setenv("TPMGUARD_CONFIG", "/nonexistent/tpmguard.conf", 1);
        expect_open(f, with_pin, NULL, 0, -ENOENT);
        /* Missing output pointers are the caller's bug: -EINVAL. */
        assert_int_equal(f->open(f->cd, with_pin, NULL, &len, NULL), -EINVAL);
        assert_int_equal(f->open(f->cd, with_pin, &buffer, NULL, NULL), -EINVAL);

        /* No PIN needed, but nothing provisioned (empty state_dir): -ENOENT. */
        snprintf(path, sizeof path, "%s/state", f->dir);
        assert_int_equal(mkdir(path, 0700), 0);
        snprintf(conf, sizeof conf,
                 "tcti = swtpm:path=%s/no-such-socket\nstate_dir = %s/state\nnull_name_path = %s/null_name\n"
                 "kernel_null_name = required\ncache_dir = %s/cache\n", f->dir, f->dir, f->dir, f->dir);
        snprintf(path, sizeof path, "%s/tpmguard.conf", f->dir);
        write_file(path, conf);
        setenv("TPMGUARD_CONFIG", path, 1);
        expect_open(f, without_pin, NULL, 0, -ENOENT);
        /* A PIN given to a token that needs one goes on to the same check. */
        expect_open(f, with_pin, "1234", 4, -ENOENT);

        /* Provisioned, kernel null_name present, but no TPM answers: -EAGAIN (try later / next token). */
        pinned = read_text("tests/fuzz/corpus/pinned/ek-signing-key.json");
        snprintf(path, sizeof path, "%s/state/ek-signing-key.json", f->dir);
        write_file(path, pinned);
        free(pinned);
        pinned = read_text("tests/fuzz/corpus/null-name/sysfs");
        snprintf(path, sizeof path, "%s/null_name", f->dir);
        write_file(path, pinned);
        free(pinned);
        expect_open(f, without_pin, NULL, 0, -EAGAIN);
        /* The same for a PIN token called without a PIN: no TPM, no PIN prompt; and with
         * tpmguard-splash.path listening (its private directory), the reason is recorded for
         * plymouth, one line naming the device (issue 29: under systemd-cryptsetup the console
         * that gets libcryptsetup's log is hidden by the splash). */
        snprintf(path, sizeof path, "%s/cache", f->dir);
        assert_int_equal(mkdir(path, 0700), 0);
        snprintf(path, sizeof path, "%s/cache/splash", f->dir);
        assert_int_equal(mkdir(path, 0700), 0);
        expect_open(f, with_pin, NULL, 0, -EAGAIN);
        expect_splash_records(f, 2, "Not asking for the PIN: the TPM could not be verified");
        /* Nothing to say (no such token): nothing recorded. */
        expect_open(f, 31, NULL, 0, -ENOENT);
        expect_splash_records(f, 0, "");

        /* An invalid configuration: -ENOENT, the recovery passphrase still gets asked. */
        snprintf(path, sizeof path, "%s/tpmguard.conf", f->dir);
        write_file(path, "kernel_null_name = sometimes\n");
        expect_open(f, without_pin, NULL, 0, -ENOENT);
}

static void test_buffer_free(void **state) {
        fixture *f = *state;
        char *b = malloc(32);

        assert_non_null(b);
        memset(b, 0x5a, 32);
        f->buffer_free(b, 32);
        f->buffer_free(NULL, 0);
}

int main(int argc, char **argv) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exports_versioned),
                cmocka_unit_test(test_validate),
                cmocka_unit_test(test_dump),
                cmocka_unit_test(test_open_errors_without_tpm),
                cmocka_unit_test(test_buffer_free),
        };

        if (argc != 3) {
                fprintf(stderr, "usage: %s PLUGIN SOURCE_DIR\n", argv[0]);
                return 2;
        }
        plugin_path = argv[1];
        src_dir = argv[2];
        return cmocka_run_group_tests(tests, setup, teardown);
}
