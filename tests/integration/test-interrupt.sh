#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Interruptions (issue 15 §4): SIGINT at every fault point (lib/fault.h,
# TPMGUARD_FAULT_SIGNAL_AT: after every header write and every TPM command)
# of enroll, rotate, change-pin and update finish. After each run the volume is as before (interrupted:
# exit 18, or killed by the signal before the first write) or the operation
# is complete (exit 0): never a keyslot without a token, never a marker left.
# And a crash (SIGKILL-like _exit) right after enroll's keyslot write leaves
# a marker that status reports and cleanup resolves.
# Needs a -Dfault_injection=true build.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_flushcontext cryptsetup unshare python3
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"
[ "${TPMGUARD_FAULT_INJECTION_BUILD:-false}" = true ] || skip_all "needs a build with -Dfault_injection=true"

active_keyslots() { cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: luks2'; }
tpmguard_tokens() { cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: tpmguard$' || true; }
pending_markers() { cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: tpmguard-pending$' || true; }
flush_dead_process() {
        local t
        for t in --transient-object --loaded-session --saved-session; do
                TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_flushcontext "$t" >/dev/null 2>&1 || true
        done
}
# header_is KEYSLOTS TOKENS MARKERS
header_is() {
        [ "$(active_keyslots)" = "$1" ] || return 1
        [ "$(tpmguard_tokens)" = "$2" ] || return 1
        [ "$(pending_markers)" = "$3" ]
}
enroll() {
        "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
}

test_case enroll_sigint_at_every_point
enroll_sigint_at_every_point() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        local n=1 rc undone=0
        while :; do
                rc=0
                TPMGUARD_FAULT_SIGNAL_AT=$n enroll >"$WORK/out" 2>&1 || rc=$?
                flush_dead_process
                if ! grep -q "fault-injection: SIGINT at point $n" "$WORK/out"; then
                        [ "$rc" = 0 ] || { cat "$WORK/out" >&2; echo "# point $n: enroll failed without a signal" >&2; return 1; }
                        break
                fi
                case $rc in
                0)      # interrupted after the token write: complete, and nothing left over
                        header_is 2 1 0 ||
                                { cat "$WORK/out" >&2; echo "# point $n: completed but the header is inconsistent" >&2; return 1; }
                        echo "# point $n: interrupted after the last write; the enrollment is kept" >&2
                        break ;;
                18 | 130)
                        header_is 1 0 0 ||
                                { cat "$WORK/out" >&2; echo "# point $n: exit $rc left keyslots=$(active_keyslots) tokens=$(tpmguard_tokens) markers=$(pending_markers)" >&2; return 1; }
                        [ "$rc" = 18 ] && undone=$((undone + 1))
                        ;;
                *) cat "$WORK/out" >&2; echo "# point $n: unexpected exit $rc" >&2; return 1 ;;
                esac
                n=$((n + 1))
        done
        echo "# enroll: $n points, $undone interruptions undone after a header write" >&2
        [ "$undone" -gt 0 ] || { echo "# no interruption happened after a header write" >&2; return 1; }
        "$TPMGUARD" cleanup "$WORK/disk.img" >"$WORK/out" 2>&1
        recovery_opens "$WORK/disk.img"
}

test_case enroll_crash_is_reported_and_cleaned_up
enroll_crash_is_reported_and_cleaned_up() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        local point
        point=$(TPMGUARD_FAULT_TRACE=1 TPMGUARD_FAULT_INJECT_AT=100000 enroll 2>&1 >/dev/null |
                sed -n 's/^fault-injection: point \([0-9]*\) (after-keyslot-add)$/\1/p')
        [ -n "$point" ] || { echo "# no after-keyslot-add point" >&2; return 1; }
        # Back to one keyslot: remove what the traced run enrolled.
        "$TPMGUARD" remove "$WORK/disk.img" >/dev/null 2>&1
        [ "$(active_keyslots)" = 1 ] || { echo "# could not reset the volume" >&2; return 1; }
        expect_exit 99 env TPMGUARD_FAULT_INJECT_AT="$point" "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        flush_dead_process
        header_is 2 0 1 || { echo "# the crash left no keyslot/marker" >&2; return 1; }
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "enroll" "$OUT"
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        header_is 1 0 0 ||
                { echo "# cleanup left keyslots=$(active_keyslots) markers=$(pending_markers)" >&2; return 1; }
        recovery_opens "$WORK/disk.img"
}

test_case rotate_sigint_keeps_old_or_new
rotate_sigint_keeps_old_or_new() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        enroll >/dev/null 2>&1
        local n=1 rc
        while :; do
                rc=0
                TPMGUARD_FAULT_SIGNAL_AT=$n "$TPMGUARD" rotate --pin-file "$WORK/pin" "$WORK/disk.img" >"$WORK/out" 2>&1 || rc=$?
                flush_dead_process
                grep -q "fault-injection: SIGINT at point $n" "$WORK/out" || break
                header_is 2 1 0 ||
                        { cat "$WORK/out" >&2; echo "# point $n: exit $rc left keyslots=$(active_keyslots) markers=$(pending_markers)" >&2; return 1; }
                case $rc in 0 | 18 | 130) ;; *) cat "$WORK/out" >&2; echo "# point $n: exit $rc" >&2; return 1 ;; esac
                n=$((n + 1))
        done
        echo "# rotate: $n points" >&2
        with_plugin cryptsetup open --test-passphrase --token-only --token-type tpmguard "$WORK/disk.img" <"$WORK/pin"
}

# change-pin is rotate with a new PIN: interrupted at any point, exactly one of the
# old and the new PIN opens the volume (undone, exit 18: the old one), never a marker left.
test_case change_pin_sigint_keeps_old_or_new
change_pin_sigint_keeps_old_or_new() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        printf '5678\n' >"$WORK/pin2"
        enroll >/dev/null 2>&1
        local n=1 rc cur=$WORK/pin other=$WORK/pin2 t swapped
        while :; do
                rc=0
                TPMGUARD_FAULT_SIGNAL_AT=$n "$TPMGUARD" change-pin --pin-file "$cur" --new-pin-file "$other" \
                        "$WORK/disk.img" >"$WORK/out" 2>&1 || rc=$?
                flush_dead_process
                grep -q "fault-injection: SIGINT at point $n" "$WORK/out" || break
                header_is 2 1 0 ||
                        { cat "$WORK/out" >&2; echo "# point $n: exit $rc left keyslots=$(active_keyslots) markers=$(pending_markers)" >&2; return 1; }
                case $rc in 0 | 18 | 130) ;; *) cat "$WORK/out" >&2; echo "# point $n: exit $rc" >&2; return 1 ;; esac
                # Exit 0, or killed by the signal after the last write (130): the new PIN.
                swapped=0
                if ! pin_opens "$cur"; then
                        [ "$rc" != 18 ] || { echo "# point $n: undone (exit 18), but the old PIN does not open" >&2; return 1; }
                        t=$cur; cur=$other; other=$t; swapped=1
                        pin_opens "$cur" || { echo "# point $n: exit $rc, and neither PIN opens" >&2; return 1; }
                elif pin_opens "$other"; then
                        echo "# point $n: both PINs open" >&2; return 1
                fi
                [ "$rc" != 0 ] || [ "$swapped" = 1 ] || { echo "# point $n: exit 0, but the old PIN still opens" >&2; return 1; }
                n=$((n + 1))
        done
        [ "$n" -gt 5 ] || { echo "# only $n fault points in change-pin" >&2; return 1; }
        echo "# change-pin: $n points" >&2
}

# update finish (docs/design.md §9.2) is rotate through an update seal: interrupted at any point,
# the volume keeps the old token (update seal included) or has the new one, and the PIN opens it.
# The predicted seal: over a grace, finish refuses a PCR 7 change no event log explains.
test_case update_finish_sigint_keeps_old_or_new
update_finish_sigint_keeps_old_or_new() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        enroll >/dev/null 2>&1
        local n=1 rc
        while :; do
                # An update seal and a changed PCR 7 for every point (a completed finish used them up).
                if ! cryptsetup token export --token-id 0 "$WORK/disk.img" | grep -q '"predicted"'; then
                        local pcr7
                        pcr7=$(TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrread sha256:7 | awk '/7 *:/ {print $3}')
                        pcr7=$(python3 -c 'import hashlib, sys; print(hashlib.sha256(bytes.fromhex(sys.argv[1][2:]) + bytes.fromhex(sys.argv[2])).hexdigest())' \
                                "$pcr7" "$(printf '%064x' "$n")")
                        "$TPMGUARD" update prepare --pcr "7=sha256:$pcr7" --pin-file "$WORK/pin" "$WORK/disk.img" \
                                >/dev/null 2>&1 || { echo "# point $n: update prepare failed" >&2; return 1; }
                        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                                "7:sha256=$(printf '%064x' "$n")" >/dev/null
                fi
                rc=0
                TPMGUARD_FAULT_SIGNAL_AT=$n "$TPMGUARD" update finish --pin-file "$WORK/pin" "$WORK/disk.img" \
                        >"$WORK/out" 2>&1 || rc=$?
                flush_dead_process
                grep -q "fault-injection: SIGINT at point $n" "$WORK/out" || break
                header_is 2 1 0 ||
                        { cat "$WORK/out" >&2; echo "# point $n: exit $rc left keyslots=$(active_keyslots) markers=$(pending_markers)" >&2; return 1; }
                case $rc in 0 | 18 | 130) ;; *) cat "$WORK/out" >&2; echo "# point $n: exit $rc" >&2; return 1 ;; esac
                pin_opens "$WORK/pin" || { echo "# point $n: exit $rc, and the PIN no longer opens the volume" >&2; return 1; }
                n=$((n + 1))
        done
        [ "$n" -gt 5 ] || { echo "# only $n fault points in update finish" >&2; return 1; }
        echo "# update finish: $n points" >&2
        pin_opens "$WORK/pin"
}

run_cases
