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

# ---- a leaking TPM (docs/security.md): a TPM firmware flaw, a fault attack on a
# firmware TPM or a decapped chip gives the attacker what the TPM holds, without
# the PIN. The shim (tests/integration/unseal-leak.c), preloaded into the real
# cryptsetup, writes what TPM2_Unseal released during a normal PIN unlock to $2.
leak_unseal() {
        local pinfile=$1 out=$2
        rm -f "$out"
        if [ -n "${LD_PRELOAD_ASAN:-}" ]; then
                LD_PRELOAD_ASAN="$LD_PRELOAD_ASAN $TPMGUARD_UNSEAL_LEAK" TPMGUARD_LEAK_FILE=$out token_open <"$pinfile"
        else
                LD_PRELOAD=$TPMGUARD_UNSEAL_LEAK TPMGUARD_LEAK_FILE=$out token_open <"$pinfile"
        fi
}

# Does $1 (a key file) open any keyslot of the disk, as it is, base64-encoded or hex-encoded?
opens_raw_or_encoded() {
        base64 -w0 <"$1" >"$1.b64"
        od -An -tx1 <"$1" | tr -d ' \n' >"$1.hex"
        for f in "$1" "$1.b64" "$1.hex"; do
                cryptsetup open --test-passphrase --key-file "$f" "$WORK/disk.img" >/dev/null 2>&1 && { echo "$f"; return 0; }
        done
        return 1
}

test_case leaking_tpm_format2_opens_nothing_without_the_pin
leaking_tpm_format2_opens_nothing_without_the_pin() {
        local token opened
        setup_enrolled
        token=$(cryptsetup token export --token-id 0 "$WORK/disk.img")
        expect_in '"version":2' "$token"
        expect_in '"type":"argon2id"' "$token"
        # The PIN unlock works through the real cryptsetup, with the shim in it.
        leak_unseal "$WORK/pin" "$WORK/leak" || { echo "# the PIN unlock failed" >&2; return 1; }
        [ -s "$WORK/leak" ] || { echo "# the shim saw no Unseal: the test proves nothing" >&2; return 1; }
        # What the TPM released is the keyslot passphrase's size, and opens nothing.
        [ "$(stat -c %s "$WORK/leak")" = 44 ] || { echo "# Unseal released $(stat -c %s "$WORK/leak") bytes" >&2; return 1; }
        if opened=$(opens_raw_or_encoded "$WORK/leak"); then
                echo "# what a leaking TPM gives opens the volume without the PIN ($opened)" >&2
                return 1
        fi
        recovery_opens "$WORK/disk.img"
}

# An enrolled volume whose only token is format 1 (as tpmguard wrote PIN tokens before format 2),
# checked to be exposed: what the TPM released during a PIN unlock ($WORK/leak) opens it.
setup_format1_exposed() {
        local t opened
        setup_enrolled
        t="env TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI"
        # A format 1 token as tpmguard wrote them before format 2 (token-format.md): the TPM
        # holds the keyslot passphrase S itself, authorized by PBKDF2(PIN) under the same policy.
        cryptsetup token export --token-id 0 "$WORK/disk.img" >"$WORK/v2.json"
        head -c 32 /dev/urandom | base64 -w0 >"$WORK/s1.key"
        cryptsetup luksAddKey --batch-mode --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
                --key-file "$WORK/recovery.key" --new-key-slot 5 "$WORK/disk.img" "$WORK/s1.key"
        /usr/bin/python3 - "$WORK" "$PIN" <<'PY'
import base64, hashlib, json, os, sys
w, pin = sys.argv[1], sys.argv[2].encode()
t = json.load(open(w + "/v2.json"))
salt = os.urandom(32)
open(w + "/auth.hex", "w").write(hashlib.pbkdf2_hmac("sha256", pin, salt, 1000, 32).hex())
open(w + "/policy.bin", "wb").write(bytes.fromhex(t["policy_hash"]))
json.dump({"salt": base64.b64encode(salt).decode(), "v2": t}, open(w + "/v1.in", "w"))
PY
        $t tpm2_create -C 0x81000001 -g sha256 -i "$WORK/s1.key" -L "$WORK/policy.bin" \
                -a "fixedtpm|fixedparent|adminwithpolicy" -p "hex:$(cat "$WORK/auth.hex")" \
                -u "$WORK/s1.pub" -r "$WORK/s1.priv" >/dev/null
        /usr/bin/python3 - "$WORK" <<'PY'
import base64, json, sys
w = sys.argv[1]
i = json.load(open(w + "/v1.in"))
v2 = i["v2"]
blob = open(w + "/s1.priv", "rb").read() + open(w + "/s1.pub", "rb").read()
t = {"type": "tpmguard", "keyslots": [], "version": 1, "blob": base64.b64encode(blob).decode(),
     "pcr_bank": v2["pcr_bank"], "pcrs": v2["pcrs"], "policy_hash": v2["policy_hash"], "pin": True,
     "pin_kdf": {"type": "pbkdf2-sha256", "iterations": 1000, "salt": i["salt"]},
     "parent_name": v2["parent_name"]}
json.dump(t, open(w + "/v1.json", "w"))
PY
        cryptsetup token remove --token-id 0 "$WORK/disk.img"
        cryptsetup luksKillSlot --batch-mode "$WORK/disk.img" 1
        cryptsetup token import --json-file "$WORK/v1.json" --key-slot 5 --token-id 0 "$WORK/disk.img"

        # status and audit name it.
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "format 1" "$OUT"
        expect_in "leaking TPM: exposed" "$OUT"
        expect_exit 21 "$TPMGUARD" audit --json "$WORK/disk.img"
        expect_in '"leaking_tpm":{"exposed":"yes"' "$(tr -d ' \n' <<<"$OUT")"

        # The reason for the upgrade: what a leaking TPM gives opens a format 1 volume.
        leak_unseal "$WORK/pin" "$WORK/leak" || { echo "# the PIN unlock failed" >&2; return 1; }
        opened=$(opens_raw_or_encoded "$WORK/leak") ||
                { echo "# the control failed: a format 1 token's Unseal output does not open the volume" >&2; return 1; }
        [ "$opened" = "$WORK/leak" ] || { echo "# format 1 opened only encoded ($opened)" >&2; return 1; }
}

test_case leaking_tpm_format1_opens_and_change_pin_upgrades
leaking_tpm_format1_opens_and_change_pin_upgrades() {
        setup_format1_exposed
        # change-pin writes format 2 with a new secret in a new keyslot: the old blob, which
        # every header backup still holds, opens nothing any more.
        printf '%s\n' 4321 >"$WORK/pin2"
        expect_exit 0 "$TPMGUARD" change-pin --pin-file "$WORK/pin" --new-pin-file "$WORK/pin2" "$WORK/disk.img"
        expect_in '"version":2' "$(cryptsetup token export --token-id 0 "$WORK/disk.img")"
        refute cryptsetup open --test-passphrase --key-file "$WORK/leak" "$WORK/disk.img"
        pin_opens "$WORK/pin2"
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "leaking TPM: protected" "$OUT"
}

test_case leaking_tpm_format1_reseal_upgrades
leaking_tpm_format1_reseal_upgrades() {
        setup_format1_exposed
        # reseal authorized by the PIN: format 2, and a new secret for the same reason.
        expect_exit 0 "$TPMGUARD" reseal --pcrs 7 --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in '"version":2' "$(cryptsetup token export --token-id 0 "$WORK/disk.img")"
        refute cryptsetup open --test-passphrase --key-file "$WORK/leak" "$WORK/disk.img"
        pin_opens "$WORK/pin"
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
