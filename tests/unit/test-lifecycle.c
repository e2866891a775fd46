/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pending marker (lifecycle/pending-marker.h): the record that lets a later run
 * tell which keyslot an interrupted rotate/reseal left over. It decides
 * which keyslot gets destroyed, so the parser must be strict, writing then
 * parsing must give back exactly what was written, and only a marker with
 * this machine's MAC (lifecycle/marker-auth.c) may decide anything.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <syslog.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "marker-auth.h"
#include "pending-marker.h"
#include "recovery.h"

#define GOOD "{\"type\":\"tpmguard-pending\",\"keyslots\":[\"3\"],\"version\":1,\"operation\":\"rotate\"," \
             "\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}"

static void test_marker_round_trip(void **state) {
        tg_pending_marker in = { .operation = "reseal", .token = 4, .old_keyslot = 2, .new_keyslot = 31, .bound_keyslot = -1 };
        tg_pending_marker out;
        char *json = NULL;

        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_string_equal(out.operation, "reseal");
        assert_int_equal(out.token, 4);
        assert_int_equal(out.old_keyslot, 2);
        assert_int_equal(out.new_keyslot, 31);
        assert_int_equal(out.bound_keyslot, -1);

        in.bound_keyslot = 31;
        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_non_null(strstr(json, "\"keyslots\":[\"31\"]"));
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_int_equal(out.bound_keyslot, 31);
}

static void test_marker_parse_good(void **state) {
        tg_pending_marker m;

        assert_int_equal(tg_pending_marker_from_string(GOOD, &m), 0);
        assert_string_equal(m.operation, "rotate");
        assert_int_equal(m.token, 0);
        assert_int_equal(m.old_keyslot, 1);
        assert_int_equal(m.new_keyslot, 3);
        assert_int_equal(m.bound_keyslot, 3);
        /* Unknown keys are ignored, like in the token format. */
        assert_int_equal(tg_pending_marker_from_string(
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"reseal\","
                "\"token\":2,\"old_keyslot\":0,\"new_keyslot\":5,\"future\":true}", &m), 0);
        assert_int_equal(m.bound_keyslot, -1);
}

static void test_marker_parse_rejects(void **state) {
        static const char *const bad[] = {
                "",
                "[]",
                GOOD "x",
                GOOD " {}",
                "{\"type\":\"tpmguard\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":2,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"enroll\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":\"0\",\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":32,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":-1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":32}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":1}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1.5,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[\"3\",\"4\"],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[\"x\"],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[\"40\"],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":{},\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3}",
                /* The passphrase operations: committed only for them, and a boolean; pbkdf complete. */
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"rotate\",\"token\":0,\"old_keyslot\":1,\"new_keyslot\":3,\"committed\":true}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":1,\"new_keyslot\":3,\"committed\":1}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"recovery-key\",\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":1,\"new_keyslot\":3,\"pbkdf\":{\"type\":\"argon2id\",\"iterations\":4}}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":1,\"new_keyslot\":3,\"pbkdf\":{\"iterations\":4,\"memory\":1,\"parallel\":1}}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":1,\"new_keyslot\":3,\"pbkdf\":\"argon2id\"}",
                /* migrate: the old token is required (it is what the marker removes), committed is not its. */
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"migrate\",\"old_keyslot\":1,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"migrate\",\"token\":0,\"old_keyslot\":3,\"new_keyslot\":3}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"migrate\",\"token\":0,\"new_keyslot\":3,\"committed\":true}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"migrat\",\"token\":0,\"new_keyslot\":3}",
        };
        tg_pending_marker m = { .token = 77 };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = tg_pending_marker_from_string(bad[i], &m);
                if (r != -TG_ERR_TOKEN)
                        fail_msg("accepted or wrong error %d for case %zu: %s", r, i, bad[i]);
                /* ret is written only on success. */
                assert_int_equal(m.token, 77);
        }
        assert_int_equal(tg_pending_marker_from_string(NULL, &m), -TG_ERR_TOKEN);
}

static void test_marker_passphrase_ops(void **state) {
        tg_pending_marker in = { .operation = "recovery-key", .token = 2, .old_keyslot = -1, .new_keyslot = 4,
                                 .bound_keyslot = 4, .committed = true,
                                 .pbkdf = { .type = "argon2id", .iterations = 5, .memory_kb = 65536, .parallel = 2 } };
        tg_pending_marker out;
        char *json = NULL;

        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_null(strstr(json, "old_keyslot"));
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_true(tg_pending_marker_is_passphrase_op(&out));
        assert_int_equal(out.old_keyslot, -1);
        assert_int_equal(out.token, 2);
        assert_true(out.committed);
        assert_string_equal(out.pbkdf.type, "argon2id");
        assert_int_equal(out.pbkdf.iterations, 5);
        assert_int_equal(out.pbkdf.memory_kb, 65536);
        assert_int_equal(out.pbkdf.parallel, 2);

        in = (tg_pending_marker) { .operation = "passwd", .token = -1, .old_keyslot = 0, .new_keyslot = 2, .bound_keyslot = -1 };
        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_null(strstr(json, "\"token\""));
        assert_non_null(strstr(json, "\"committed\":false"));
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_int_equal(out.token, -1);
        assert_false(out.committed);
        assert_string_equal(out.pbkdf.type, "");

        /* rotate and reseal markers are not passphrase operations, and keep their format. */
        assert_int_equal(tg_pending_marker_from_string(GOOD, &out), 0);
        assert_false(tg_pending_marker_is_passphrase_op(&out));
        assert_false(out.committed);
}

/* migrate: an enrollment naming the token it replaces; the old keyslot only when it goes. */
static void test_marker_migrate(void **state) {
        tg_pending_marker in = { .operation = "migrate", .token = 1, .old_keyslot = 2, .new_keyslot = 3, .bound_keyslot = 3 };
        tg_pending_marker out;
        char *json = NULL;

        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_string_equal(out.operation, "migrate");
        assert_int_equal(out.token, 1);
        assert_int_equal(out.old_keyslot, 2);
        assert_int_equal(out.new_keyslot, 3);
        assert_int_equal(out.bound_keyslot, 3);
        assert_false(tg_pending_marker_is_passphrase_op(&out));

        in.old_keyslot = -1;
        assert_int_equal(tg_pending_marker_to_string(&in, &json), 0);
        assert_null(strstr(json, "old_keyslot"));
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        free(json);
        assert_int_equal(out.token, 1);
        assert_int_equal(out.old_keyslot, -1);

        assert_true(tg_migratable_token_type("systemd-tpm2"));
        assert_true(tg_migratable_token_type("clevis"));
        assert_false(tg_migratable_token_type("tpmguard"));
        assert_false(tg_migratable_token_type("systemd-fido2"));
        assert_false(tg_migratable_token_type(NULL));
}

#define UUID "6f1a7c3e-2b1d-4c5e-9a0f-1e2d3c4b5a69"

/* What libcryptsetup may do to a token: reparse it and write it back with other key order and spacing. */
static char *reserialize(const char *json) {
        json_object *in = json_tokener_parse(json), *out = json_object_new_object();
        const char *keys[16];
        size_t n = 0;
        char *s;

        assert_non_null(in);
        json_object_object_foreach(in, key, val) {
                (void) val;
                keys[n++] = key;
        }
        while (n > 0) {
                json_object *v;
                n--;
                assert_true(json_object_object_get_ex(in, keys[n], &v));
                json_object_object_add(out, keys[n], json_object_get(v));
        }
        s = strdup(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PRETTY));
        json_object_put(in);
        json_object_put(out);
        return s;
}

/* Does the marker in json carry the right MAC for key and UUID, after libcryptsetup-style re-serialization? */
static bool verifies(const tg_secret *key, const char *uuid, const char *json) {
        tg_pending_marker m;
        char *again = reserialize(json);
        int r = tg_pending_marker_from_string(again, &m);

        free(again);
        assert_int_equal(r, 0);
        return tg_pending_marker_mac_matches(key, uuid, &m);
}

/*
 * The MAC (lifecycle/marker-auth.c): a marker tpmguard signed verifies after any
 * re-serialization; changing any field it covers, the volume or the key makes
 * it fail; no "mac" never verifies. Only "keyslots" (libcryptsetup's to
 * change) is outside it.
 */
static void test_marker_mac(void **state) {
        const tg_pending_marker signed_base = {
                .operation = "recovery-key", .token = 2, .old_keyslot = 0, .new_keyslot = 1, .bound_keyslot = 1,
                .committed = true, .pbkdf = { .type = "argon2id", .iterations = 4, .memory_kb = 32768, .parallel = 1 },
                .nonce = "0123456789abcdef0123456789abcdef" };
        tg_secret *key = NULL, *other = NULL;
        tg_pending_marker m = signed_base, out;
        char *json = NULL;

        assert_int_equal(tg_secret_new_random(TG_MARKER_KEY_SIZE, &key), 0);
        assert_int_equal(tg_secret_new_random(TG_MARKER_KEY_SIZE, &other), 0);

        /* Round trip, re-serialized. */
        assert_int_equal(tg_pending_marker_mac(key, UUID, &m, m.mac), 0);
        assert_int_equal(strlen(m.mac), 64);
        assert_int_equal(tg_pending_marker_to_string(&m, &json), 0);
        assert_true(verifies(key, UUID, json));
        assert_int_equal(tg_pending_marker_from_string(json, &out), 0);
        assert_string_equal(out.mac, m.mac);
        assert_string_equal(out.nonce, m.nonce);
        assert_false(out.authenticated);  /* the parser never decides that */
        free(json);

        /* The wrong key or another volume: refused. */
        assert_int_equal(tg_pending_marker_to_string(&m, &json), 0);
        assert_false(verifies(other, UUID, json));
        assert_false(verifies(key, "6f1a7c3e-2b1d-4c5e-9a0f-1e2d3c4b5a6a", json));
        free(json);

        /* Every field changed after signing: refused. */
        for (int field = 0; field < 10; field++) {
                m = signed_base;
                assert_int_equal(tg_pending_marker_mac(key, UUID, &m, m.mac), 0);
                switch (field) {
                case 0: snprintf(m.operation, sizeof m.operation, "passwd"); break;
                case 1: m.token = 3; break;
                case 2: m.old_keyslot = 5; break;
                case 3: m.new_keyslot = 2; break;
                case 4: m.committed = false; break;
                case 5: snprintf(m.pbkdf.type, sizeof m.pbkdf.type, "argon2i"); break;
                case 6: m.pbkdf.iterations = 5; break;
                case 7: m.pbkdf.memory_kb = 65536; break;
                case 8: m.pbkdf.parallel = 2; break;
                case 9: m.nonce[0] = 'f'; break;   /* another operation's (registered) nonce */
                default: fail();
                }
                assert_int_equal(tg_pending_marker_to_string(&m, &json), 0);
                assert_false(verifies(key, UUID, json));
                free(json);
        }
        /* A token marker: the same for its fields. */
        m = (tg_pending_marker) { .operation = "rotate", .token = 0, .old_keyslot = 1, .new_keyslot = 2, .bound_keyslot = -1 };
        assert_int_equal(tg_pending_marker_mac(key, UUID, &m, m.mac), 0);
        assert_int_equal(tg_pending_marker_to_string(&m, &json), 0);
        assert_true(verifies(key, UUID, json));
        free(json);
        snprintf(m.operation, sizeof m.operation, "reseal");
        assert_int_equal(tg_pending_marker_to_string(&m, &json), 0);
        assert_false(verifies(key, UUID, json));
        free(json);

        /* The binding ("keyslots") is libcryptsetup's to write: outside the MAC. */
        m = signed_base;
        assert_int_equal(tg_pending_marker_mac(key, UUID, &m, m.mac), 0);
        m.bound_keyslot = -1;
        assert_int_equal(tg_pending_marker_to_string(&m, &json), 0);
        assert_true(verifies(key, UUID, json));
        free(json);

        /* No "mac" (an older tpmguard's marker, or a planted one): never verifies. */
        m = signed_base;
        assert_int_equal(tg_pending_marker_to_string(&m, &json), 0);
        assert_null(strstr(json, "\"mac\""));
        assert_false(verifies(key, UUID, json));
        free(json);

        /* A "mac" that is not 64 lowercase hex digits: a malformed marker. */
        static const char *const bad[] = {
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":0,\"new_keyslot\":1,\"mac\":\"00\"}",
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":0,\"new_keyslot\":1,\"mac\":1}",
                ("{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":0,\"new_keyslot\":1,"
                 "\"mac\":\"ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\"}"),
                /* A "nonce" that is not 32 lowercase hex digits: malformed too. */
                "{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":0,\"new_keyslot\":1,\"nonce\":\"00\"}",
                ("{\"type\":\"tpmguard-pending\",\"keyslots\":[],\"version\":1,\"operation\":\"passwd\",\"old_keyslot\":0,\"new_keyslot\":1,"
                 "\"nonce\":\"../../../../etc/passwd0123456789ab\"}"),
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(tg_pending_marker_from_string(bad[i], &out), -TG_ERR_TOKEN);

        tg_secret_free(key);
        tg_secret_free(other);
}

/* state_dir/marker.key: made once (0600), read back the same, refused when others can read it or it is short. */
static void test_marker_key_file(void **state) {
        char dir[] = "/tmp/tpmguard-marker-key.XXXXXX", path[64];
        tg_secret *a = NULL, *b = NULL;
        struct stat st;
        int fd;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof path, "%s/%s", dir, TG_MARKER_KEY_FILE_NAME);
        assert_int_equal(tg_marker_key_load(dir, false, &a), -TG_ERR_NOT_FOUND);
        assert_int_equal(tg_marker_key_load(dir, true, &a), 0);
        assert_int_equal(a->size, TG_MARKER_KEY_SIZE);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(st.st_size, TG_MARKER_KEY_SIZE);
        /* Never replaced once it exists. */
        assert_int_equal(tg_marker_key_load(dir, true, &b), 0);
        assert_memory_equal(a->data, b->data, TG_MARKER_KEY_SIZE);
        tg_secret_free(b);
        b = NULL;

        assert_int_equal(chmod(path, 0640), 0);
        assert_int_equal(tg_marker_key_load(dir, false, &b), -TG_ERR_CONFIG);
        assert_int_equal(chmod(path, 0600), 0);
        assert_int_equal(chmod(dir, 0777), 0);
        assert_int_equal(tg_marker_key_load(dir, false, &b), -TG_ERR_CONFIG);
        assert_int_equal(chmod(dir, 0700), 0);
        assert_int_equal(truncate(path, TG_MARKER_KEY_SIZE - 1), 0);
        assert_int_equal(tg_marker_key_load(dir, false, &b), -TG_ERR_CONFIG);
        assert_int_equal(unlink(path), 0);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, a->data, a->size), (ssize_t) a->size);
        assert_int_equal(write(fd, "x", 1), 1);
        close(fd);
        assert_int_equal(tg_marker_key_load(dir, false, &b), -TG_ERR_CONFIG);

        assert_int_equal(unlink(path), 0);
        assert_int_equal(rmdir(dir), 0);
        tg_secret_free(a);
}

/* systemd-cryptenroll's recovery-key form: 64 ModHex letters, 8 groups, 256 bits. */
static void test_recovery_key_format(void **state) {
        uint8_t bytes[TG_RECOVERY_KEY_BYTES];
        tg_secret *a = NULL, *b = NULL;

        static const uint8_t pattern[8] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef };

        for (size_t i = 0; i < sizeof bytes; i++)
                bytes[i] = pattern[i % 8];
        assert_int_equal(tg_recovery_key_format(bytes, sizeof bytes, &a), 0);
        assert_int_equal(a->size, 71);
        assert_memory_equal(a->data, "cbdefghi-jklnrtuv-cbdefghi-jklnrtuv-cbdefghi-jklnrtuv-cbdefghi-jklnrtuv", 71);
        assert_true(tg_recovery_key_is_wellformed(a->data, a->size));
        tg_secret_free(a);
        assert_int_equal(tg_recovery_key_format(bytes, sizeof bytes - 1, &a), -TG_ERR_INVALID);

        assert_int_equal(tg_recovery_key_new(&a), 0);
        assert_int_equal(tg_recovery_key_new(&b), 0);
        assert_true(tg_recovery_key_is_wellformed(a->data, a->size));
        assert_true(tg_recovery_key_is_wellformed(b->data, b->size));
        assert_false(a->size == b->size && memcmp(a->data, b->data, a->size) == 0);
        a->data[8] = 'c';
        assert_false(tg_recovery_key_is_wellformed(a->data, a->size));
        a->data[8] = '-';
        a->data[0] = 'a';
        assert_false(tg_recovery_key_is_wellformed(a->data, a->size));
        tg_secret_free(a);
        tg_secret_free(b);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_marker_round_trip),
                cmocka_unit_test(test_marker_parse_good),
                cmocka_unit_test(test_marker_parse_rejects),
                cmocka_unit_test(test_marker_passphrase_ops),
                cmocka_unit_test(test_marker_migrate),
                cmocka_unit_test(test_marker_mac),
                cmocka_unit_test(test_marker_key_file),
                cmocka_unit_test(test_recovery_key_format),
        };
        tg_log_set_max_level(LOG_CRIT);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
