/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * lifecycle/update-record.c: what an update grace was prepared for (review10 H1). The record
 * round-trips through its file, a hostile file is refused naming the field, and the
 * comparison refuses exactly the changes docs/design.md §9.2 ("What finish binds to") lists.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "error.h"
#include "log.h"
#include "update-record.h"
#include "util.h"

#define UUID "0e9b4c0a-1d7e-4f53-9a1b-2f1e3c4d5e6f"

static tg_update_record base(uint32_t changing) {
        tg_update_record r = {
                .bank = TPM2_ALG_SHA256, .pcr_mask = (1u << 4) | (1u << 7), .changing = changing,
                .have_sb = true, .secure_boot = 1,
                .values = { .bank = TPM2_ALG_SHA256, .mask = (1u << 4) | (1u << 7), .value_size = 32 },
        };

        memset(r.values.value[4], 0x44, 32);
        memset(r.values.value[7], 0x77, 32);
        for (unsigned s = 0; s < TG_SB_N; s++) {
                r.sb_present[s] = true;
                memset(r.sb_digest[s], 0xa0 + s, 32);
        }
        return r;
}

/* compare(prepared, now): 0, or -TG_ERR_PCR_MISMATCH with a difference that contains needle. */
static void expect_compare(const tg_update_record *prepared, const tg_update_record *now, const char *needle) {
        char *diff = NULL;
        int r = tg_update_record_compare(prepared, now, &diff);

        if (!needle) {
                assert_int_equal(r, 0);
                assert_null(diff);
                return;
        }
        assert_int_equal(r, -TG_ERR_PCR_MISMATCH);
        assert_non_null(diff);
        if (!strstr(diff, needle))
                fail_msg("\"%s\" not in \"%s\"", needle, diff);
        free(diff);
}

/* A version 1 record (no PCR 7 events): the Secure Boot variables only. */
static void test_compare(void **state) {
        tg_update_record p = base(1u << 4), now = base(0);

        /* The boot it was prepared for, and a change of the declared PCR. */
        expect_compare(&p, &now, NULL);
        memset(now.values.value[4], 0x45, 32);
        expect_compare(&p, &now, NULL);
        /* PCR 7 changed, undeclared: refused, whatever the log says. */
        memset(now.values.value[7], 0x78, 32);
        expect_compare(&p, &now, "PCR 7 changed, which 'update prepare' did not declare");

        /* PCR 7 declared: a dbx update and a new boot loader signer are fine ... */
        p = base((1u << 4) | (1u << 7));
        now = base(0);
        memset(now.values.value[7], 0x78, 32);
        expect_compare(&p, &now, NULL);
        memset(now.sb_digest[TG_SB_DBX], 0x01, 32);
        expect_compare(&p, &now, NULL);
        /* ... Secure Boot turned off, or a new PK, KEK or db, never. */
        now = base(0);
        memset(now.values.value[7], 0x78, 32);
        now.secure_boot = 0;
        memset(now.sb_digest[TG_SB_SECURE_BOOT], 0x01, 32);
        expect_compare(&p, &now, "Secure Boot is no longer enabled");
        expect_compare(&p, &now, "the Secure Boot variable SecureBoot changed");
        for (unsigned s = TG_SB_PK; s <= TG_SB_DB; s++) {
                static const char *const names[] = { [TG_SB_PK] = "PK", [TG_SB_KEK] = "KEK", [TG_SB_DB] = "db" };
                char needle[64];

                now = base(0);
                memset(now.values.value[7], 0x78, 32);
                memset(now.sb_digest[s], 0x01, 32);
                (void) snprintf(needle, sizeof needle, "the Secure Boot variable %s changed", names[s]);
                expect_compare(&p, &now, needle);
                now.sb_present[s] = false;      /* an event gone from the log is a change too */
                expect_compare(&p, &now, needle);
        }
        /* A PCR 7 change no verified log explains: refused. */
        now = base(0);
        memset(now.values.value[7], 0x78, 32);
        now.have_sb = false;
        expect_compare(&p, &now, "no event log that replays");
        p.have_sb = false;
        now.have_sb = true;
        expect_compare(&p, &now, "had no verified event log");
        /* dbx changed while PCR 7 was not declared. */
        p = base(1u << 4);
        now = base(0);
        memset(now.values.value[7], 0x78, 32);
        memset(now.sb_digest[TG_SB_DBX], 0x01, 32);
        expect_compare(&p, &now, "dbx: PCR 7 was not declared");
        /* A record of other PCRs than the token's. */
        now = base(0);
        now.pcr_mask = 1u << 7;
        expect_compare(&p, &now, "other PCRs");
}

/* A version 2 record: PCR 7's events as OVMF measures them, dbx holding entries 1 and 2. */
static void with_events(tg_update_record *r, uint8_t db_authority) {
        static const struct {
                uint32_t type;
                const char *what;
        } events[] = {
                { 0x80000001, "SecureBoot" }, { 0x80000001, "PK" }, { 0x80000001, "KEK" }, { 0x80000001, "db" },
                { 0x80000001, "dbx" }, { 0x4, "separator" }, { 0x800000e0, "db (CN=Test db)" },
        };

        r->have_events = true;
        r->n_events = sizeof events / sizeof events[0];
        r->events = calloc(r->n_events + 2, sizeof *r->events);
        assert_non_null(r->events);
        for (size_t i = 0; i < r->n_events; i++) {
                r->events[i].type = events[i].type;
                r->events[i].what = strdup(events[i].what);
                assert_non_null(r->events[i].what);
                memset(r->events[i].digest, 0x10 + i, 32);
                r->events[i].dbx = i == 4;
        }
        r->events[6].digest[0] = db_authority;
        r->have_dbx = true;
        r->n_dbx_entries = 2;
        r->dbx_entries = calloc(3, 32);
        assert_non_null(r->dbx_entries);
        memset(r->dbx_entries[0], 0x01, 32);
        memset(r->dbx_entries[1], 0x02, 32);
}

/* Inserts an event at index at (with_events() left room for two). */
static void insert_event(tg_update_record *r, size_t at, uint32_t type, const char *what, uint8_t fill) {
        memmove(&r->events[at + 1], &r->events[at], (r->n_events - at) * sizeof *r->events);
        r->events[at] = (tg_update_event) { .type = type, .what = strdup(what) };
        assert_non_null(r->events[at].what);
        memset(r->events[at].digest, fill, 32);
        r->n_events++;
}

static void test_compare_events(void **state) {
        tg_update_record p = base(1u << 7), now = base(0);

        with_events(&p, 0x16);
        /* PCR 7 declared and changed, every event as recorded: a new boot loader of the same signer. */
        with_events(&now, 0x16);
        memset(now.values.value[7], 0x78, 32);
        expect_compare(&p, &now, NULL);

        /* A dbx update: the same place, a new digest, every recorded entry still there. */
        memset(now.events[4].digest, 0xdb, 32);
        memset(now.dbx_entries[2], 0x03, 32);
        now.n_dbx_entries = 3;
        expect_compare(&p, &now, NULL);
        /* ... not when its data is not what was measured, nor when it lost an entry (a rollback). */
        now.have_dbx = false;
        expect_compare(&p, &now, "this boot's dbx event is not a list of signatures");
        now.have_dbx = true;
        memset(now.dbx_entries[0], 0x00, 32);
        expect_compare(&p, &now, "dbx lost 1 of the 2 revocations");
        tg_update_record_done(&now);
        /* ... nor when PCR 7 was not declared. */
        p.changing = 0;
        with_events(&now, 0x16);
        memset(now.values.value[7], 0x78, 32);
        memset(now.events[4].digest, 0xdb, 32);
        expect_compare(&p, &now, "dbx: PCR 7 was not declared");
        p.changing = 1u << 7;
        tg_update_record_done(&now);

        /* Pre-boot DMA protection off: an action that is new. */
        with_events(&now, 0x16);
        memset(now.values.value[7], 0x78, 32);
        insert_event(&now, 5, 0x80000007, "DMA Protection Disabled", 0xd1);
        expect_compare(&p, &now, "PCR 7 event \"DMA Protection Disabled\" (EV_EFI_ACTION) is new since 'update prepare'");
        tg_update_record_done(&now);
        /* Another vendor's shim: an authority that is new; the db's signer gone or changed. */
        with_events(&now, 0x16);
        memset(now.values.value[7], 0x78, 32);
        insert_event(&now, 7, 0x800000e0, "Shim (CN=Evil)", 0xe1);
        expect_compare(&p, &now, "PCR 7 event \"Shim (CN=Evil)\" (EV_EFI_VARIABLE_AUTHORITY) is new");
        now.n_events = 6;
        expect_compare(&p, &now, "PCR 7 event \"db (CN=Test db)\" (EV_EFI_VARIABLE_AUTHORITY) is gone");
        now.n_events = 8;
        tg_update_record_done(&now);
        with_events(&now, 0x99);
        memset(now.values.value[7], 0x78, 32);
        expect_compare(&p, &now, "PCR 7 event \"db (CN=Test db)\" (EV_EFI_VARIABLE_AUTHORITY) changed");
        tg_update_record_done(&now);
        /* A Secure Boot variable: named as before. */
        with_events(&now, 0x16);
        memset(now.values.value[7], 0x78, 32);
        memset(now.events[1].digest, 0x01, 32);
        expect_compare(&p, &now, "the Secure Boot variable PK changed");
        tg_update_record_done(&now);
        /* A version 1 record: its comparison (the Secure Boot variables), which lets the action pass. */
        tg_update_record_done(&p);
        with_events(&now, 0x16);
        memset(now.values.value[7], 0x78, 32);
        insert_event(&now, 5, 0x80000007, "DMA Protection Disabled", 0xd1);
        expect_compare(&p, &now, NULL);
        tg_update_record_done(&now);
}

static char *state_dir(void) {
        char *dir = strdup("/tmp/test-update-record.XXXXXX");

        assert_non_null(dir);
        assert_non_null(mkdtemp(dir));
        return dir;
}

static void write_text(const char *dir, const char *text) {
        char path[256];
        FILE *f;

        (void) snprintf(path, sizeof path, "%s/update-prepared", dir);
        (void) mkdir(path, 0700);
        (void) snprintf(path, sizeof path, "%s/update-prepared/" UUID ".json", dir);
        f = fopen(path, "w");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static void cleanup_dir(const char *dir) {
        char path[256];

        (void) snprintf(path, sizeof path, "%s/update-prepared/" UUID ".json", dir);
        (void) unlink(path);
        (void) snprintf(path, sizeof path, "%s/update-prepared", dir);
        (void) rmdir(path);
        (void) rmdir(dir);
}

#define HEX32(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c
#define GOOD_VALUES "\"values\":{\"4\":\"" HEX32("44") "\",\"7\":\"" HEX32("77") "\"}"

static void test_file(void **state) {
        char *dir = state_dir();
        tg_update_record r = base(1u << 4), back;

        assert_int_equal(tg_update_record_read(dir, UUID, &back), -TG_ERR_NOT_FOUND);
        assert_int_equal(tg_update_record_write(dir, UUID, &r), 0);
        assert_int_equal(tg_update_record_read(dir, UUID, &back), 0);
        assert_int_equal(back.bank, r.bank);
        assert_int_equal(back.pcr_mask, r.pcr_mask);
        assert_int_equal(back.changing, r.changing);
        assert_true(back.have_sb);
        assert_int_equal(back.secure_boot, 1);
        assert_memory_equal(back.values.value[7], r.values.value[7], 32);
        assert_memory_equal(back.sb_digest[TG_SB_DB], r.sb_digest[TG_SB_DB], 32);
        expect_compare(&back, &r, NULL);
        /* The UUID comes from the header: never a path. */
        assert_int_equal(tg_update_record_write(dir, "../../etc/x", &r), -TG_ERR_INVALID);
        assert_int_equal(tg_update_record_read(dir, "../x", &back), -TG_ERR_INVALID);

        /* Hostile files: refused, the output untouched. */
        static const char *const bad[] = {
                "{\"version\":3,\"bank\":\"sha256\",\"pcrs\":[7],\"changing\":[]," GOOD_VALUES "}",
                /* Version 2 with the Secure Boot events needs PCR 7's; each field checked. */
                "{\"version\":2,\"bank\":\"sha256\",\"pcrs\":[4,7],\"changing\":[]," GOOD_VALUES
                        ",\"secure_boot_events\":{},\"secure_boot\":1}",
                "{\"version\":2,\"bank\":\"sha256\",\"pcrs\":[4,7],\"changing\":[]," GOOD_VALUES
                        ",\"secure_boot_events\":{},\"secure_boot\":1,\"pcr7_events\":[{\"type\":4294967296,"
                        "\"digest\":\"" HEX32("00") "\",\"what\":\"x\"}]}",
                "{\"version\":2,\"bank\":\"sha256\",\"pcrs\":[4,7],\"changing\":[]," GOOD_VALUES
                        ",\"secure_boot_events\":{},\"secure_boot\":1,\"pcr7_events\":[{\"type\":4,"
                        "\"digest\":\"00\",\"what\":\"x\"}]}",
                "{\"version\":2,\"bank\":\"sha256\",\"pcrs\":[4,7],\"changing\":[]," GOOD_VALUES
                        ",\"secure_boot_events\":{},\"secure_boot\":1,\"pcr7_events\":[{\"type\":4,"
                        "\"digest\":\"" HEX32("00") "\"}]}",
                "{\"version\":2,\"bank\":\"sha256\",\"pcrs\":[4,7],\"changing\":[]," GOOD_VALUES
                        ",\"secure_boot_events\":{},\"secure_boot\":1,\"pcr7_events\":[7]}",
                "{\"version\":2,\"bank\":\"sha256\",\"pcrs\":[4,7],\"changing\":[]," GOOD_VALUES
                        ",\"secure_boot_events\":{},\"secure_boot\":1,\"pcr7_events\":[],\"dbx_entries\":\"0011\"}",
                "{\"version\":1,\"bank\":\"md5\",\"pcrs\":[7],\"changing\":[]," GOOD_VALUES "}",
                "{\"version\":1,\"bank\":\"sha256\",\"pcrs\":[7,24],\"changing\":[]," GOOD_VALUES "}",
                "{\"version\":1,\"bank\":\"sha256\",\"pcrs\":[7],\"changing\":[4]," GOOD_VALUES "}",
                "{\"version\":1,\"bank\":\"sha256\",\"pcrs\":[],\"changing\":[]," GOOD_VALUES "}",
                "{\"version\":1,\"bank\":\"sha256\",\"pcrs\":[7],\"changing\":[],\"values\":{\"7\":\"77\"}}",
                "{\"version\":1,\"bank\":\"sha256\",\"pcrs\":[4,7],\"changing\":[],\"values\":{\"7\":\"" HEX32("77") "\"}}",
                "{\"version\":1,\"bank\":\"sha256\",\"pcrs\":[7],\"changing\":[]," GOOD_VALUES
                        ",\"secure_boot_events\":{\"PK\":\"00\"},\"secure_boot\":1}",
                "{\"version\":1,\"bank\":\"sha256\",\"pcrs\":[7],\"changing\":[]," GOOD_VALUES
                        ",\"secure_boot_events\":{},\"secure_boot\":7}",
                "{\"version\":1,\"bank\":\"sha256\",\"pcrs\":[7],\"changing\":[]," GOOD_VALUES "} trailing",
        };
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                tg_update_record sentinel;

                memset(&sentinel, 0x5a, sizeof sentinel);
                back = sentinel;
                write_text(dir, bad[i]);
                if (tg_update_record_read(dir, UUID, &back) >= 0)
                        fail_msg("accepted: %s", bad[i]);
                assert_memory_equal(&back, &sentinel, sizeof back);
        }
        /* Version 2: PCR 7's events and dbx's entries round-trip. */
        with_events(&r, 0x16);
        assert_int_equal(tg_update_record_write(dir, UUID, &r), 0);
        assert_int_equal(tg_update_record_read(dir, UUID, &back), 0);
        assert_true(back.have_events);
        assert_int_equal(back.n_events, r.n_events);
        assert_string_equal(back.events[6].what, "db (CN=Test db)");
        assert_true(back.events[4].dbx);
        assert_false(back.events[3].dbx);
        assert_int_equal(back.n_dbx_entries, 2);
        assert_memory_equal(back.dbx_entries[1], r.dbx_entries[1], 32);
        expect_compare(&back, &r, NULL);
        tg_update_record_done(&back);
        tg_update_record_done(&r);
        tg_update_record_remove(dir, UUID);
        assert_int_equal(tg_update_record_read(dir, UUID, &back), -TG_ERR_NOT_FOUND);
        cleanup_dir(dir);
        free(dir);
}

int main(void) {
        tg_log_set_journal(false);
        tg_log_set_max_level(LOG_CRIT);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_compare),
                cmocka_unit_test(test_compare_events),
                cmocka_unit_test(test_file),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
