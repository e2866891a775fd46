/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The fuzz targets without libFuzzer: every file named on the command line
 * (or every file of every directory named) is one input, replayed once
 * through LLVMFuzzerTestOneInput. Linked with each target in the ordinary
 * builds, so that every `meson test` (gcc, and the sanitizer build) replays
 * the committed seeds and regression inputs (tests/fuzz/regressions/), not
 * only the clang fuzz stage. A target's own assert() or abort() fails the
 * test; under the sanitizer build so does any report.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "fuzz.h"

#define REPLAY_MAX_INPUT (1024 * 1024)

static int replay_file(const char *path) {
        FILE *f = fopen(path, "rbe");
        uint8_t *buf;
        size_t n;

        if (!f) {
                fprintf(stderr, "replay: cannot open %s\n", path);
                return -1;
        }
        buf = malloc(REPLAY_MAX_INPUT);
        if (!buf)
                abort();
        n = fread(buf, 1, REPLAY_MAX_INPUT, f);
        fclose(f);
        /* An exact-size copy, so that an over-read is caught by the sanitizer build as libFuzzer would. */
        {
                uint8_t *exact = malloc(n ? n : 1);
                if (!exact)
                        abort();
                memcpy(exact, buf, n);
                free(buf);
                printf("replay: %s (%zu bytes)\n", path, n);
                fflush(stdout);
                (void) LLVMFuzzerTestOneInput(exact, n);
                free(exact);
        }
        return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) {
        return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char *argv[]) {
        unsigned count = 0;

        (void) LLVMFuzzerInitialize(&argc, &argv);
        for (int i = 1; i < argc; i++) {
                struct dirent **list = NULL;
                struct stat st;
                int n;

                if (stat(argv[i], &st) < 0) {
                        fprintf(stderr, "replay: %s: not found\n", argv[i]);
                        return 1;
                }
                if (!S_ISDIR(st.st_mode)) {
                        if (replay_file(argv[i]) < 0)
                                return 1;
                        count++;
                        continue;
                }
                n = scandir(argv[i], &list, NULL, by_name);
                if (n < 0) {
                        fprintf(stderr, "replay: cannot list %s\n", argv[i]);
                        return 1;
                }
                for (int k = 0; k < n; k++) {
                        char path[4096];

                        if (list[k]->d_name[0] != '.') {
                                snprintf(path, sizeof path, "%s/%s", argv[i], list[k]->d_name);
                                if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                                        if (replay_file(path) < 0)
                                                return 1;
                                        count++;
                                }
                        }
                        free(list[k]);
                }
                free(list);
        }
        printf("replay: %u inputs, none failed\n", count);
        return count > 0 ? 0 : 1;
}
