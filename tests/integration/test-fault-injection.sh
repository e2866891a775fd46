#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Crash safety of the lifecycle commands, by fault injection: for each of
# change-pin, rotate, reseal (by unseal and by recovery passphrase), enroll
# --wipe-slot tpmguard, remove,
# recovery-key, passwd and migrate (of a real systemd-cryptenroll token), kill the process at fault point 1, 2, 3, ... (after every
# libcryptsetup header write and every TPM command; lib/fault.h) until
# a run completes without reaching the point. After every kill:
#   - the recovery passphrase opens the volume (recovery-key, passwd: the
#     old recovery passphrase or the new key or passphrase, and the new key
#     only if it was already shown);
#   - the old or the new TPM credential unlocks through the plugin and the
#     real cryptsetup binary;
#   - status reports every leftover keyslot as an orphan, with the command
#     that cleans it up;
#   - rerunning the same command succeeds (change-pin: when the kill came
#     after the token was already switched to its new keyslot, the old PIN
#     is rightly refused and nothing changes but the interrupted change's
#     completion);
#   - afterwards: exactly one tpmguard token, no pending marker, no orphan
#     keyslot (recovery + one tpmguard keyslot), and it unlocks.
# One provisioned swtpm per operation; the state after each rerun is the
# starting state of the next point. One more case kills migrate after its
# token write and renumbers keyslots offline before cleanup (a systemd
# recovery key given the proven keyslot's number must survive).
#
# Needs a build with -Dfault_injection=true (./run-tests makes one). In any
# other build the hook must not exist: then this test checks only that the
# binaries do not contain it and that the variables are ignored.
# The op_* hooks are defined per test case and called by inject_all.
# shellcheck disable=SC2317
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_flushcontext cryptsetup unshare python3 systemd-cryptenroll
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"

active_keyslots() { cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: luks2'; }
tpmguard_tokens() { cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: tpmguard$' || true; }
pending_markers() { cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: tpmguard-pending$' || true; }
# Tokens of tpmguard's peers (migrate's old tokens): their keyslots are no leftovers.
peer_tokens() { cryptsetup luksDump "$WORK/disk.img" | grep -cE '^  [0-9]*: (systemd-tpm2|clevis)$' || true; }
image_sum() { sha256sum "$WORK/disk.img" | cut -d' ' -f1; }
status_field() {
        "$TPMGUARD" status --json "$WORK/disk.img" 2>/dev/null |
                python3 -c "import json,sys; s=json.load(sys.stdin); print($1)"
}
# Inside functions called from "||" bash ignores set -e: every check returns explicitly.
fail() { echo "# point $POINT ($POINT_NAME): $*" >&2; return 1; }

# A process killed mid-transaction leaves its objects and sessions loaded.
# The kernel resource manager (/dev/tpmrm0) flushes them when the process
# dies; the test swtpm has no resource manager, so do what it would do.
flush_dead_process() { tpm_flush_contexts; }

setup_volume() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        printf '5678\n' >"$WORK/pin2"
        enroll
}
enroll() {
        "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" \
                "$WORK/disk.img" >/dev/null 2>&1
}

# Every kill: leftovers are visible to status, with the cleanup command.
check_leftovers_reported() {
        local extra=$(( $(active_keyslots) - 1 - $(tpmguard_tokens) - $(peer_tokens) ))
        if [ "$extra" -gt 0 ]; then
                [ "$(status_field 'len([o for o in s["orphans"] if "keyslot" in o])')" -ge "$extra" ] ||
                        { fail "$extra leftover keyslot(s) not reported by status"; return 1; }
                [ "$(status_field 's["orphans"][0]["cleanup"]')" = "tpmguard cleanup $WORK/disk.img" ] ||
                        { fail "status names no cleanup command"; return 1; }
        fi
        if [ "$(pending_markers)" -gt 0 ]; then
                [ "$(status_field 'len(s["pending"])')" = "$(pending_markers)" ] || { fail "pending marker not reported"; return 1; }
        fi
}

# The clean end state, with PIN file $1 unlocking.
check_clean() {
        [ "$(tpmguard_tokens)" = 1 ] || { fail "$(tpmguard_tokens) tpmguard tokens after the rerun"; return 1; }
        [ "$(active_keyslots)" = 2 ] || { fail "$(active_keyslots) keyslots after the rerun (orphan left)"; return 1; }
        [ "$(pending_markers)" = 0 ] || { fail "a pending marker is left after the rerun"; return 1; }
        [ "$(status_field 's["cleanup_needed"]')" = False ] || { fail "status still asks for a cleanup"; return 1; }
        pin_opens "$1" || { fail "the PIN does not unlock after the rerun"; return 1; }
        recovery_opens "$WORK/disk.img" >/dev/null || { fail "the recovery passphrase does not open"; return 1; }
}

# Runs op_run with a fault at point 1, 2, ... and op_after_kill after each
# kill, until op_run completes; then op_after_success. Reports the points.
POINT=0
POINT_NAME=""
inject_all() {
        local op=$1 rc names="" t0=$SECONDS
        POINT=1
        while :; do
                rc=0
                TPMGUARD_FAULT_INJECT_AT=$POINT op_run >"$WORK/run.out" 2>&1 || rc=$?
                if [ "$rc" = 0 ]; then
                        op_after_success || return 1
                        break
                fi
                [ "$rc" = 99 ] || { cat "$WORK/run.out" >&2; POINT_NAME="?"; fail "exit $rc instead of the injected fault"; return 1; }
                POINT_NAME=$(sed -n "s/^fault-injection: exit at point $POINT (\(.*\))$/\1/p" "$WORK/run.out")
                [ -n "$POINT_NAME" ] || { cat "$WORK/run.out" >&2; fail "no fault-injection line"; return 1; }
                names="$names $POINT_NAME"
                flush_dead_process
                # Some typed secret the owner knows opens (the passphrase operations
                # say which: the old one or the new one).
                if declare -F op_owner_opens >/dev/null; then
                        op_owner_opens || { fail "no passphrase the owner knows opens"; return 1; }
                else
                        recovery_opens "$WORK/disk.img" >/dev/null || { fail "recovery passphrase does not open"; return 1; }
                fi
                check_leftovers_reported || return 1
                op_after_kill || return 1
                POINT=$((POINT + 1))
        done
        local summary
        summary=$(tr ' ' '\n' <<<"$names" | grep -v '^$' | uniq -c | awk '{printf "%s%s x%d", sep, $2, $1; sep=", "}')
        echo "# $op: $((POINT - 1)) fault points in $((SECONDS - t0)) s: $summary"
}

if [ "${TPMGUARD_FAULT_INJECTION_BUILD:-}" != true ]; then
        test_case production_build_has_no_fault_hook
        production_build_has_no_fault_hook() {
                local f
                for f in "$TPMGUARD" "$TPMGUARD_PLUGIN"; do
                        if grep -q -e TPMGUARD_FAULT_INJECT_AT -e fault-injection "$f"; then
                                echo "# $f contains the fault-injection hook" >&2
                                return 1
                        fi
                done
                setup_volume
                TPMGUARD_FAULT_INJECT_AT=1 TPMGUARD_FAULT_TRACE=1 \
                        expect_exit 0 "$TPMGUARD" rotate --pin-file "$WORK/pin" "$WORK/disk.img"
                if grep -q fault-injection <<<"$ERR"; then
                        echo "# the variables had an effect: $ERR" >&2
                        return 1
                fi
                pin_opens "$WORK/pin"
        }
        run_cases
        exit
fi

test_case fault_change_pin
fault_change_pin() {
        setup_volume
        CUR=$WORK/pin OTHER=$WORK/pin2
        op_run() { "$TPMGUARD" change-pin --pin-file "$CUR" --new-pin-file "$OTHER" "$WORK/disk.img"; }
        swap() { local t=$CUR; CUR=$OTHER; OTHER=$t; }
        op_after_kill() {
                local before
                if pin_opens "$CUR"; then
                        pin_opens "$OTHER" && { fail "both PINs unlock"; return 1; }
                        "$TPMGUARD" change-pin --pin-file "$CUR" --new-pin-file "$OTHER" "$WORK/disk.img" \
                                >/dev/null 2>&1 || { fail "rerun failed"; return 1; }
                        swap
                elif pin_opens "$OTHER"; then
                        # Killed after the token was switched to the new keyslot: the change is
                        # complete, and the same command rightly refuses the old PIN. It changes
                        # nothing, but for destroying the old keyslot when the kill left its
                        # marker (the rerun resolves it first).
                        local markers rc=0
                        markers=$(pending_markers)
                        before=$(image_sum)
                        "$TPMGUARD" change-pin --pin-file "$CUR" --new-pin-file "$OTHER" "$WORK/disk.img" \
                                >/dev/null 2>&1 || rc=$?
                        [ "$rc" = 12 ] || { fail "rerun with the old PIN: exit $rc, expected 12"; return 1; }
                        [ "$markers" != 0 ] || [ "$(image_sum)" = "$before" ] ||
                                { fail "a refused rerun changed the image"; return 1; }
                        swap
                else
                        fail "neither the old nor the new PIN unlocks"
                        return 1
                fi
                check_clean "$CUR"
        }
        op_after_success() { swap; check_clean "$CUR"; }
        inject_all change-pin
}

# rotate and reseal keep the PIN: the same PIN must unlock after every kill,
# whether the token still has the old secret or already the new one.
same_pin_after_kill() {
        pin_opens "$WORK/pin" || { fail "the PIN unlocks neither the old nor the new secret"; return 1; }
        op_run >"$WORK/rerun.out" 2>&1 || { cat "$WORK/rerun.out" >&2; fail "rerun failed"; return 1; }
        check_clean "$WORK/pin"
}

test_case fault_rotate
fault_rotate() {
        setup_volume
        op_run() { "$TPMGUARD" rotate --pin-file "$WORK/pin" "$WORK/disk.img"; }
        op_after_kill() { same_pin_after_kill; }
        op_after_success() { check_clean "$WORK/pin"; }
        inject_all rotate
}

test_case fault_reseal_by_unseal
fault_reseal_by_unseal() {
        setup_volume
        op_run() { "$TPMGUARD" reseal --pcrs 7 --pin-file "$WORK/pin" "$WORK/disk.img"; }
        op_after_kill() { same_pin_after_kill; }
        op_after_success() { check_clean "$WORK/pin"; }
        inject_all reseal
}

test_case fault_reseal_by_recovery_passphrase
fault_reseal_by_recovery_passphrase() {
        setup_volume
        op_run() {
                "$TPMGUARD" reseal --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        }
        op_after_kill() { same_pin_after_kill; }
        op_after_success() { check_clean "$WORK/pin"; }
        inject_all "reseal --unlock-key-file"
}

# enroll --wipe-slot tpmguard: the new token takes the old one's id in one
# write, and its marker destroys the old keyslot. After every kill the old or
# the new PIN unlocks, and a rerun ends with exactly one token (the new PIN).
test_case fault_enroll_wipe_slot
fault_enroll_wipe_slot() {
        setup_volume
        op_run() {
                "$TPMGUARD" enroll --wipe-slot tpmguard --pcrs 7 --pin-file "$WORK/pin2" \
                        --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        }
        op_after_kill() {
                pin_opens "$WORK/pin" || pin_opens "$WORK/pin2" || { fail "neither the old nor the new PIN unlocks"; return 1; }
                op_run >"$WORK/rerun.out" 2>&1 || { cat "$WORK/rerun.out" >&2; fail "rerun failed"; return 1; }
                check_clean "$WORK/pin2"
        }
        op_after_success() { check_clean "$WORK/pin2"; }
        inject_all "enroll --wipe-slot tpmguard"
}

test_case fault_remove
fault_remove() {
        setup_volume
        op_run() { "$TPMGUARD" remove "$WORK/disk.img"; }
        removed_clean() {
                [ "$(tpmguard_tokens)" = 0 ] || { fail "$(tpmguard_tokens) tokens after remove"; return 1; }
                [ "$(active_keyslots)" = 1 ] || { fail "$(active_keyslots) keyslots after remove"; return 1; }
                recovery_opens "$WORK/disk.img" >/dev/null || { fail "recovery does not open"; return 1; }
        }
        op_after_kill() {
                local rc=0
                # The old credential still works wherever the token still has its keyslot.
                if [ "$(tpmguard_tokens)" = 1 ] && [ "$(active_keyslots)" = 2 ]; then
                        pin_opens "$WORK/pin" || { fail "token and keyslot present but the PIN does not unlock"; return 1; }
                fi
                "$TPMGUARD" remove "$WORK/disk.img" >"$WORK/rerun.out" 2>&1 || rc=$?
                # Killed after the last write: nothing is left to remove, and remove says so.
                if [ "$rc" = 17 ]; then
                        grep -q "no tpmguard token" "$WORK/rerun.out" || { fail "rerun: exit 17 without reason"; return 1; }
                elif [ "$rc" != 0 ]; then
                        cat "$WORK/rerun.out" >&2
                        fail "rerun failed with exit $rc"
                        return 1
                fi
                removed_clean || return 1
                enroll || { fail "re-enrolling for the next point failed"; return 1; }
        }
        op_after_success() { removed_clean; }
        inject_all remove
}

# recovery-key and passwd replace the typed secret itself: $WORK/recovery.key
# always holds the current one (raw bytes), so check_clean checks it.
key_opens() { cryptsetup open --test-passphrase --key-file "$1" "$WORK/disk.img" >/dev/null 2>&1; }
# The keyslot a key file opens.
slot_of() { cryptsetup open --test-passphrase -v --key-file "$1" "$WORK/disk.img" 2>&1 | sed -n 's/^Key slot \([0-9]*\) unlocked.*/\1/p'; }
# The recovery key a run printed (only once shown), into file $2.
shown_key() {
        local k
        k=$(grep -oE '[cbdefghijklnrtuv]{8}(-[cbdefghijklnrtuv]{8}){7}' "$1" | head -1)
        [ -n "$k" ] || return 1
        printf '%s' "$k" >"$2"
}

test_case fault_recovery_key
fault_recovery_key() {
        setup_volume
        op_run() {
                "$TPMGUARD" recovery-key --iter-time 100 --pin-file "$WORK/pin" --replace "$(slot_of "$WORK/recovery.key")" \
                        "$WORK/disk.img"
        }
        op_owner_opens() {
                recovery_opens "$WORK/disk.img" >/dev/null 2>&1 && return 0
                # The old one is gone: the new key must open, and must have been shown.
                shown_key "$WORK/run.out" "$WORK/new.key" || { fail "the old key is gone and the new one was never shown"; return 1; }
                key_opens "$WORK/new.key"
        }
        op_after_kill() {
                pin_opens "$WORK/pin" || { fail "the PIN no longer unlocks"; return 1; }
                "$TPMGUARD" cleanup "$WORK/disk.img" >"$WORK/rerun.out" 2>&1 || { cat "$WORK/rerun.out" >&2; fail "cleanup failed"; return 1; }
                if recovery_opens "$WORK/disk.img" >/dev/null 2>&1; then
                        # Undone: a key shown before the commit must not open now.
                        if shown_key "$WORK/run.out" "$WORK/new.key" && key_opens "$WORK/new.key"; then
                                fail "old and new key both open after cleanup"
                                return 1
                        fi
                else
                        shown_key "$WORK/run.out" "$WORK/new.key" || { fail "completed, but the key was never shown"; return 1; }
                        key_opens "$WORK/new.key" || { fail "neither the old nor the new key opens after cleanup"; return 1; }
                        cp "$WORK/new.key" "$WORK/recovery.key"
                fi
                check_clean "$WORK/pin"
        }
        op_after_success() {
                shown_key "$WORK/run.out" "$WORK/recovery.key" || { fail "no key shown"; return 1; }
                check_clean "$WORK/pin"
                [ "$(status_field '[k["kind"] for k in s["keyslots"]].count("recovery-key")')" = 1 ] ||
                        { fail "status does not show the recovery key"; return 1; }
        }
        inject_all recovery-key
}

test_case fault_passwd
fault_passwd() {
        setup_volume
        N=1
        next_passphrase() { printf 'passphrase number %d' "$N" >"$WORK/other.key"; printf 'passphrase number %d\n' "$N" >"$WORK/other.line"; N=$((N + 1)); }
        next_passphrase
        op_run() {
                "$TPMGUARD" passwd --iter-time 100 --pin-file "$WORK/pin" --new-passphrase-file "$WORK/other.line" "$WORK/disk.img"
        }
        op_owner_opens() { recovery_opens "$WORK/disk.img" >/dev/null 2>&1 || key_opens "$WORK/other.key"; }
        changed() {
                key_opens "$WORK/other.key" || { fail "the new passphrase does not open"; return 1; }
                if recovery_opens "$WORK/disk.img" >/dev/null 2>&1; then fail "the old passphrase still opens"; return 1; fi
                cp "$WORK/other.key" "$WORK/recovery.key"
                next_passphrase
                check_clean "$WORK/pin"
        }
        op_after_kill() {
                pin_opens "$WORK/pin" || { fail "the PIN no longer unlocks"; return 1; }
                op_run >"$WORK/rerun.out" 2>&1 || { cat "$WORK/rerun.out" >&2; fail "rerun failed"; return 1; }
                changed
        }
        op_after_success() { changed; }
        inject_all passwd
}

# migrate: a real systemd-cryptenroll token (PIN, PCR 7; its PIN given with --old-pin-file, so that
# systemd's plugin proves the old keyslot the token's and it goes) replaced by a tpmguard one. After every
# kill the recovery passphrase opens (inject_all), a tpmguard token that was written already unlocks,
# cleanup completes or undoes, and a rerun (when the old token is still there) completes; the end
# state has the tpmguard token only. The volume as systemd left it is restored for the next point.
test_case fault_migrate
fault_migrate() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        peer_systemd_enroll "$WORK/disk.img" 1234
        cp "$WORK/disk.img" "$WORK/disk.orig"
        op_run() {
                "$TPMGUARD" migrate --token 0 --pcrs 7 --pin-file "$WORK/pin" --old-pin-file "$WORK/pin" \
                        --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        }
        migrated_clean() {
                [ "$(peer_tokens)" = 0 ] || { fail "the systemd-tpm2 token is still there"; return 1; }
                check_clean "$WORK/pin"
        }
        op_after_kill() {
                if [ "$(tpmguard_tokens)" = 1 ]; then
                        pin_opens "$WORK/pin" || { fail "the tpmguard token was written but does not unlock"; return 1; }
                fi
                "$TPMGUARD" cleanup "$WORK/disk.img" >"$WORK/rerun.out" 2>&1 || { cat "$WORK/rerun.out" >&2; fail "cleanup failed"; return 1; }
                if [ "$(peer_tokens)" = 1 ]; then
                        [ "$(tpmguard_tokens)" = 0 ] || { fail "cleanup left both the old and the new token"; return 1; }
                        op_run >"$WORK/rerun.out" 2>&1 || { cat "$WORK/rerun.out" >&2; fail "rerun failed"; return 1; }
                fi
                migrated_clean || return 1
                cp "$WORK/disk.orig" "$WORK/disk.img"
        }
        op_after_success() { migrated_clean; }
        inject_all migrate
}

# The red team's finding: killed after the tpmguard token is written, migrate leaves a marker naming the
# proven old keyslot by number. An offline header writer then gives that number to a systemd recovery key
# (a new keyslot the recovery key opens, with systemd's PBKDF, PBKDF2-SHA512 at 1000 iterations, and the
# old one killed). cleanup must not destroy it: the proof recorded the proven keyslot's KDF salt, and the
# keyslot under that number now has another.
test_case migrate_crash_then_renumbered_recovery_key_survives
migrate_crash_then_renumbered_recovery_key_survives() {
        local n rk rc
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        peer_systemd_enroll "$WORK/disk.img" 1234
        systemd-cryptenroll --unlock-key-file="$WORK/recovery.key" --recovery-key "$WORK/disk.img" >"$WORK/rk.out" 2>&1
        rk=$(grep -oE '([a-z]{8}-){7}[a-z]{8}' "$WORK/rk.out" | head -1)
        [ -n "$rk" ] || { cat "$WORK/rk.out" >&2; return 1; }
        printf '%s' "$rk" >"$WORK/rk"
        op_run() {
                "$TPMGUARD" migrate --token 0 --pcrs 7 --pin-file "$WORK/pin" --old-pin-file "$WORK/pin" \
                        --unlock-key-file "$WORK/recovery.key" "$1"
        }
        # The fault point's number, from traced runs on copies (the first also persists the SRK, so
        # the second counts what the real run sends).
        cp "$WORK/disk.img" "$WORK/dry.img"
        op_run "$WORK/dry.img" >/dev/null 2>&1
        cp "$WORK/disk.img" "$WORK/dry.img"
        TPMGUARD_FAULT_TRACE=1 op_run "$WORK/dry.img" >"$WORK/dry.out" 2>&1
        n=$(sed -n 's/^fault-injection: point \([0-9]*\) (after-token-write)$/\1/p' "$WORK/dry.out")
        [ -n "$n" ] || { cat "$WORK/dry.out" >&2; fail "no after-token-write point"; return 1; }
        rc=0
        TPMGUARD_FAULT_INJECT_AT=$n op_run "$WORK/disk.img" >"$WORK/run.out" 2>&1 || rc=$?
        grep -q "^fault-injection: exit at point $n (after-token-write)$" "$WORK/run.out" ||
                { cat "$WORK/run.out" >&2; fail "not killed after the token write (exit $rc)"; return 1; }
        flush_dead_process
        # Offline: keyslot 1 (systemd's, proven) is replaced by one the recovery key opens.
        cryptsetup luksKillSlot --batch-mode "$WORK/disk.img" 1
        cryptsetup luksAddKey --batch-mode --pbkdf pbkdf2 --hash sha512 --pbkdf-force-iterations 1000 \
                --key-file "$WORK/rk" --new-key-slot 1 "$WORK/disk.img" "$WORK/rk"
        cryptsetup luksKillSlot --batch-mode "$WORK/disk.img" 2
        "$TPMGUARD" cleanup "$WORK/disk.img" >"$WORK/cleanup.out" 2>&1 || { cat "$WORK/cleanup.out" >&2; fail "cleanup failed"; return 1; }
        grep -q "Keeping keyslot 1: it is not the keyslot this machine's migrate proved" "$WORK/cleanup.out" ||
                { cat "$WORK/cleanup.out" >&2; fail "cleanup did not keep keyslot 1"; return 1; }
        cryptsetup open --test-passphrase --key-file "$WORK/rk" --key-slot 1 "$WORK/disk.img" ||
                { fail "the recovery key no longer opens"; return 1; }
        [ "$(peer_tokens)" = 0 ] || { fail "the systemd-tpm2 token is still there"; return 1; }
        pin_opens "$WORK/pin" || { fail "the tpmguard token does not unlock"; return 1; }
        recovery_opens "$WORK/disk.img" >/dev/null || { fail "the recovery passphrase does not open"; return 1; }
}

run_cases
