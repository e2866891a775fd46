/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "macro.h"
#include "subprocess.h"

bool tg_find_program(const char *name, char *buf, size_t size) {
        const char *path = getenv("PATH") ?: "/usr/sbin:/usr/bin:/sbin:/bin";
        _cleanup_free_ char *copy = strdup(path);
        char *save = NULL;

        if (!copy)
                return false;
        for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                snprintf(buf, size, "%s/%s", dir, name);
                if (access(buf, X_OK) == 0)
                        return true;
        }
        return false;
}

int tg_run_capture(char *const argv[], char **ret_out, int *ret_status) {
        _cleanup_free_ char *out = NULL;
        size_t len = 0, cap = 0;
        int pipefd[2], status = 0;
        pid_t pid;

        if (pipe2(pipefd, O_CLOEXEC) < 0)
                return log_error_rc(-TG_ERR_IO, "pipe: %m");
        pid = fork();
        if (pid < 0) {
                close(pipefd[0]);
                close(pipefd[1]);
                return log_error_rc(-TG_ERR_IO, "fork: %m");
        }
        if (pid == 0) {
                int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
                if (dup2(pipefd[1], STDOUT_FILENO) < 0 || devnull < 0 || dup2(devnull, STDERR_FILENO) < 0 ||
                    dup2(devnull, STDIN_FILENO) < 0)
                        _exit(127);
                execv(argv[0], argv);
                _exit(127);
        }
        close(pipefd[1]);
        for (;;) {
                ssize_t n;
                if (cap - len < 4096) {
                        char *grown;
                        if (cap >= TG_SPAWN_OUTPUT_MAX)
                                break;
                        grown = realloc(out, cap + 65536 + 1);
                        if (!grown) {
                                close(pipefd[0]);
                                kill(pid, SIGKILL);
                                waitpid(pid, NULL, 0);
                                return -TG_ERR_NOMEM;
                        }
                        out = grown;
                        cap += 65536;
                }
                n = read(pipefd[0], out + len, cap - len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                len += (size_t) n;
        }
        close(pipefd[0]);
        if (waitpid(pid, &status, 0) < 0)
                return log_error_rc(-TG_ERR_IO, "waitpid: %m");
        if (!out && !(out = strdup("")))
                return -TG_ERR_NOMEM;
        out[len] = '\0';
        *ret_out = TAKE_PTR(out);
        *ret_status = status;
        return 0;
}
