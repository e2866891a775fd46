/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The response fuzzer's driver as a plain program (tpm-response.h):
 *
 *   tpm-response record SCENARIO TCTI SEED-FILE [CONTEXT-DIR]
 *       runs scenario U, S, P or V against a real TPM and writes the
 *       responses it received as a fuzz-tpm-response input; S also writes
 *       CONTEXT-DIR/token.json and P CONTEXT-DIR/ek-signing-key.json
 *       (tests/fuzz/make-seeds);
 *   tpm-response replay [--expect-success] FILE|DIR...
 *       runs every input once, as the fuzzer would: the seeds and the
 *       regression inputs under every `meson test` (also in the sanitizer
 *       build). --expect-success: each must succeed (the unmutated seeds,
 *       which shows that replay really reaches the end of each scenario).
 *
 * Logs go to stderr with TPMGUARD_TPM_RESPONSE_VERBOSE=1, else nowhere.
 */
#include <dirent.h>

#include "fuzz.h"
#include "tpm-response.h"

static int replay_file(const char *path, bool expect_success) {
        _cleanup_fclose_ FILE *f = fopen(path, "re");
        uint8_t *buf = NULL;
        size_t size = 0;
        int r;

        if (!f) {
                fprintf(stderr, "tpm-response: %s: %m\n", path);
                return -1;
        }
        buf = malloc(1 << 20);
        if (!buf)
                abort();
        size = fread(buf, 1, 1 << 20, f);
        r = tgr_run(buf, size);
        free(buf);
        printf("%s: %s (%d)\n", path, r == 0 ? "succeeded" : tg_err_id(r), r);
        return expect_success && r != 0 ? -1 : 0;
}

static int scandir_filter(const struct dirent *de) {
        return de->d_name[0] != '.';
}

/* A file, or every file in a directory (sorted). */
static int replay_path(const char *path, bool expect_success) {
        struct dirent **entries = NULL;
        struct stat st;
        int n, failed = 0;

        if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode))
                return replay_file(path, expect_success);
        n = scandir(path, &entries, scandir_filter, alphasort);
        if (n < 0) {
                fprintf(stderr, "tpm-response: %s: %m\n", path);
                return -1;
        }
        for (int i = 0; i < n; i++) {
                char *p = tgr_path(path, entries[i]->d_name);
                if (replay_file(p, expect_success) < 0)
                        failed = -1;
                free(p);
                free(entries[i]);
        }
        free(entries);
        return failed;
}

int main(int argc, char **argv) {
        int failed = 0;

        if (!getenv("TPMGUARD_TPM_RESPONSE_VERBOSE"))
                fuzz_silence_logs();
        else
                tg_log_set_journal(false);
        if (tgr_setup(TGR_CONTEXT_DIR, TGR_MODULE_PATH) < 0) {
                fprintf(stderr, "tpm-response: setup failed\n");
                return 1;
        }
        if (argc >= 5 && strcmp(argv[1], "record") == 0) {
                const char *dir = argc >= 6 ? argv[5] : TGR_CONTEXT_DIR;
                const uint8_t *rec;
                size_t n;
                FILE *f;
                int r;

                if (tgr.record(argv[3]) < 0)
                        return 1;
                r = tgr_scenario(argv[2][0], dir);
                rec = tgr.recorded(&n);
                if (r < 0) {
                        fprintf(stderr, "tpm-response: scenario %c failed against %s: %s\n", argv[2][0], argv[3],
                                tg_err_id(r));
                        return 1;
                }
                f = fopen(argv[4], "we");
                if (!f || fputc(argv[2][0], f) == EOF || fwrite(rec, 1, n, f) != n || fclose(f) != 0)
                        return 1;
                return 0;
        }
        if (argc >= 2 && strcmp(argv[1], "replay") == 0) {
                bool expect = argc >= 3 && strcmp(argv[2], "--expect-success") == 0;
                for (int i = expect ? 3 : 2; i < argc; i++)
                        if (replay_path(argv[i], expect) < 0)
                                failed = 1;
                return failed;
        }
        fprintf(stderr, "usage: %s record SCENARIO TCTI SEED-FILE [CONTEXT-DIR] | replay [--expect-success] FILE...\n",
                argv[0]);
        return 2;
}
