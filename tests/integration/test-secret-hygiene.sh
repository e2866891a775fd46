#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Secret hygiene, measured against a real swtpm: no PIN or secret in process
# memory after an unlock (test-memscan-plugin), in any log at any verbosity,
# and the CLI is not dumpable and makes no core file.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_createprimary cryptsetup unshare setpriv
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"

PIN=739184

setup_enrolled() {
        tpm_setup
        "$TPMGUARD" -q provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '%s\n' "$PIN" >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" -q enroll --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
}

test_case no_secret_in_memory_after_unlock
no_secret_in_memory_after_unlock() {
        if [ -n "${TPMGUARD_ASAN_RUNTIME:-}" ]; then
                # ASan's shadow and allocator are terabyte-sized mappings; the
                # scan runs in the default build.
                echo "# skipped under AddressSanitizer"
                return 0
        fi
        setup_enrolled
        # glibc's MALLOC_PERTURB_ (set by meson test) fills freed memory and
        # would hide a missing wipe: the scan runs without it.
        expect_exit 0 env -u MALLOC_PERTURB_ "$TPMGUARD_MEMSCAN" "$TPMGUARD_PLUGIN" "$WORK/disk.img" "$PIN"
        printf '%s\n' "$ERR" | sed 's/^/# /'
}

# Neither the PIN nor the keyslot secret, raw, hex or base64, in $1.
assert_no_secret() {
        local text=$1 secret_b64 secret_hex
        secret_b64=$(base64 -w0 <"$WORK/secret")
        secret_hex=$(od -An -tx1 <"$WORK/secret" | tr -d ' \n')
        ! grep -qF -- "$PIN" <<<"$text" || { echo "# the PIN appears in the output" >&2; return 1; }
        ! grep -qF -- "$secret_b64" <<<"$text" || { echo "# the secret (base64) appears in the output" >&2; return 1; }
        ! grep -qiF -- "$secret_hex" <<<"$text" || { echo "# the secret (hex) appears in the output" >&2; return 1; }
        ! grep -qF -- "$(cat "$WORK/slot.key")" <<<"$text" || { echo "# the keyslot passphrase appears in the output" >&2; return 1; }
}

test_case no_secret_in_logs_at_any_verbosity
no_secret_in_logs_at_any_verbosity() {
        tpm_setup
        "$TPMGUARD" -q provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '%s\n' "$PIN" >"$WORK/pin"
        head -c 32 /dev/urandom >"$WORK/secret"
        base64 -w0 <"$WORK/secret" >"$WORK/slot.key"
        cryptsetup luksAddKey --batch-mode --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
                --key-file "$WORK/recovery.key" --new-key-slot 3 "$WORK/disk.img" "$WORK/slot.key"
        # The CLI at debug verbosity, seal and enroll.
        expect_exit 0 "$TPMGUARD" -v -v seal --secret-file "$WORK/slot.key" --pcrs 7 --pin-file "$WORK/pin"
        printf '%s' "$OUT" >"$WORK/token.json"
        assert_no_secret "$(grep -v '"blob"' <<<"$OUT")$ERR"
        # Debug verbosity really was on: debug lines carry the function name.
        grep -qE '^tpmguard: [a-z_]+: ' <<<"$ERR" || { echo "# no debug output from -v -v" >&2; return 1; }
        # The plugin under cryptsetup --debug: import, dump, unlock with the PIN, and a wrong PIN.
        expect_exit 0 with_plugin cryptsetup --debug token import --json-file "$WORK/token.json" --key-slot 3 "$WORK/disk.img"
        expect_exit 0 with_plugin cryptsetup --debug luksDump "$WORK/disk.img"
        assert_no_secret "$OUT$ERR"
        expect_exit 0 with_plugin cryptsetup --debug open --test-passphrase --token-only --token-type tpmguard \
                "$WORK/disk.img" <"$WORK/pin"
        expect_in "tpmguard" "$OUT$ERR"
        expect_in "Key slot 3 unlocked" "$OUT$ERR"
        assert_no_secret "$OUT$ERR"
        printf '%s\n' 000000 >"$WORK/wrong"
        with_plugin cryptsetup --debug open --test-passphrase --token-only --token-type tpmguard \
                "$WORK/disk.img" <"$WORK/wrong" >"$WORK/out" 2>&1 && { echo "# wrong PIN unlocked" >&2; return 1; }
        expect_in "Wrong PIN" "$(cat "$WORK/out")"
        assert_no_secret "$(cat "$WORK/out")"
        ! grep -qF 000000 "$WORK/out" || { echo "# the wrong PIN appears in the output" >&2; return 1; }
}

test_case cli_is_not_dumpable
cli_is_not_dumpable() {
        tpm_setup
        "$TPMGUARD" -q provision >/dev/null
        # The CLI waits for its PIN on a FIFO: inspect the live process.
        mkfifo "$WORK/pinfifo"
        head -c 32 /dev/urandom >"$WORK/secret"
        "$TPMGUARD" seal --secret-file "$WORK/secret" --pcrs 7 --pin-file "$WORK/pinfifo" >/dev/null 2>&1 &
        local pid=$!
        for _ in $(seq 1 100); do
                grep -q pinfifo <(ls -l "/proc/$pid/fd" 2>/dev/null) && break
                sleep 0.05
        done
        # RLIMIT_CORE 0 (soft and hard), as the kernel reports it.
        grep -qE '^Max core file size +0 +0 ' "/proc/$pid/limits" ||
                { grep 'core' "/proc/$pid/limits" >&2; kill "$pid"; return 1; }
        # PR_SET_DUMPABLE 0: the kernel makes /proc/PID/ of a non-dumpable
        # process owned by root:root whatever the process's uid. Run the CLI
        # as an unprivileged uid to see it (same check as "ps -o dumpable").
        printf '%s\n' "$PIN" >"$WORK/pinfifo"
        wait "$pid" || true
        if command -v setpriv >/dev/null; then
                chmod 755 "$WORK"
                chmod 644 "$WORK/secret" "$WORK/tpmguard.conf"
                rm -f "$WORK/pinfifo"; mkfifo -m 666 "$WORK/pinfifo"
                setpriv --reuid 65534 --regid 65534 --clear-groups \
                        "$TPMGUARD" seal --secret-file "$WORK/secret" --pcrs 7 --pin-file "$WORK/pinfifo" >/dev/null 2>&1 &
                pid=$!
                for _ in $(seq 1 100); do
                        [ -r "/proc/$pid/status" ] && grep -q pinfifo <(ls -l "/proc/$pid/fd" 2>/dev/null) && break
                        sleep 0.05
                done
                local owner
                owner=$(stat -c %u "/proc/$pid/status")
                grep -q '^Uid:.*65534' "/proc/$pid/status" || { echo "# the CLI did not run as uid 65534" >&2; kill "$pid"; return 1; }
                printf '%s\n' "$PIN" >"$WORK/pinfifo"
                wait "$pid" || true
                [ "$owner" = 0 ] || { echo "# /proc/PID of the CLI is owned by $owner: the process is dumpable" >&2; return 1; }
        fi
}

run_cases
