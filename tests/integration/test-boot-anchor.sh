#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: the boot anchor (design §2.7, issue 13). Without the
# kernel's null_name, the first verification of a boot records the certified
# NULL key and the TPM's reset and restart counters in cache_dir; a TPM reset
# and PCR replay after that is refused like a null_name mismatch; an anchor
# of another boot is ignored; a damaged anchor costs a warning and is never
# taken as a match. Real swtpm, real resets (swtpm CMD_INIT + Startup(CLEAR)).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_createprimary tpm2_pcrextend python3

ANCHOR=""

# Provisioned, booted (PCR 7 extended once), no kernel null_name, policy prefer.
booted_without_null_name() {
        tpm_setup
        booted_without_null_name_here
}

booted_without_null_name_here() {
        write_config prefer
        ANCHOR=$WORK/run/boot-anchor.json
        "$TPMGUARD" provision >/dev/null
        rm "$WORK/null_name"
        boot_extend
}

boot_extend() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                7:sha256=3d458cfe55cc03ea1f443f1562beec8df51c75e14a9fcf9a7234a13f198e7969 >/dev/null
}

# A TPM reset, then the boot's PCR extend replayed: what an attacker on the bus does.
reset_and_replay() {
        "$FIXTURE" reset "$WORK/tpm"
        boot_extend
}

# The installed system-sleep hook (units/tpmguard-sleep.in, as built), called
# as systemd-sleep calls it: pre|post and the sleep type.
sleep_hook() {
        TPMGUARD_BIN=$TPMGUARD sh "$TPMGUARD_BUILD/units/tpmguard-sleep" "$@"
}

# The hook as systemd calls it around one phase of a suspend-then-hibernate.
phase_hook() {
        local phase=$1
        shift
        SYSTEMD_SLEEP_ACTION=$phase TPMGUARD_BIN=$TPMGUARD sh "$TPMGUARD_BUILD/units/tpmguard-sleep" "$@"
}

# What a suspend to RAM does to the TPM: Shutdown(STATE), power kept
# (swtpm's _TPM_Init stands for the resume), Startup(STATE): a TPM Resume,
# restartCount + 1, the NULL seed and the PCRs kept.
suspend_resume() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_shutdown
        swtpm_ioctl --unix "$WORK/tpm/tpm.sock.ctrl" -i >/dev/null
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_startup
}

# A TPM Restart: Shutdown(STATE), then Startup(CLEAR): the PCRs reset.
restart() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_shutdown
        swtpm_ioctl --unix "$WORK/tpm/tpm.sock.ctrl" -i >/dev/null
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_startup --clear
}

# What a hibernation does to the TPM, measured on swtpm: the kernel's Shutdown
# (STATE, or CLEAR with HibernateMode=shutdown), the power lost (swtpm killed:
# nothing more reaches the TPM), and the resuming boot's firmware
# Startup(CLEAR) (the fixture's resume starts swtpm with startup-clear); the
# resuming boot then measures the PCRs anew (boot_extend, where a test wants it). Shutdown(STATE) gives a TPM Restart (the NULL
# key and resetCount kept, restartCount + 1); Shutdown(CLEAR) a TPM Reset (a
# new NULL key, resetCount + 1, restartCount 0). The PCRs are reset by both.
hibernate_power_cycle() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_shutdown ${1:+--clear}
        kill -9 "$(cat "$WORK/tpm/swtpm.pid")"
        while kill -0 "$(cat "$WORK/tpm/swtpm.pid")" 2>/dev/null; do sleep 0.05; done
        "$FIXTURE" resume "$WORK/tpm"
}

counters() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_readclock |
                awk '/reset_count/ {r = $2} /restart_count/ {s = $2} END {print r, s}'
}

json_field() { python3 -c 'import json, sys; print(json.loads(sys.argv[1])[sys.argv[2]])' "$OUT" "$1"; }

test_case anchor_recorded_then_reset_refused
anchor_recorded_then_reset_refused() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify --json
        [ "$(json_field anchor)" = boot ]
        [ "$(json_field anchor_recorded)" = True ]
        # root-only, in the private cache directory
        [ "$(stat -c %a "$ANCHOR")" = 600 ]
        grep -q "\"null_name\": *\"$(json_field null_name)\"" "$ANCHOR"

        # A second verification of the same boot finds the same key and counters.
        expect_exit 0 "$TPMGUARD" verify --json
        [ "$(json_field anchor)" = boot ]
        [ "$(json_field anchor_recorded)" = False ]

        # Reset + PCR replay: refused, as an interposer (exit 3), and again
        # (the anchor is not overwritten by the refused verification).
        reset_and_replay
        expect_exit 3 "$TPMGUARD" verify --json
        expect_in '"verdict": "interposer"' "$OUT"
        expect_in "first verification" "$ERR"
        expect_exit 3 "$TPMGUARD" verify
}

test_case restart_refused
restart_refused() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify
        # TPM Restart: Shutdown(STATE) then Startup(CLEAR) resets the PCRs but
        # keeps the NULL seed; only restartCount tells.
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_shutdown
        swtpm_ioctl --unix "$WORK/tpm/tpm.sock.ctrl" -i >/dev/null
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_startup --clear
        boot_extend
        expect_exit 3 "$TPMGUARD" verify
        expect_in "was restarted since" "$ERR"
}

# The same Restart after the boot service warmed this boot's cache: the
# cached NULL key still loads and proves (the NULL seed survives a Restart),
# so the plugin's warm path must read the counters itself (audited
# ReadClock) and refuse, not unseal in the replayed PCR state.
test_case restart_after_warm_cache_refused
restart_after_warm_cache_refused() {
        booted_without_null_name
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" \
                "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" verify --record
        [ -s "$WORK/run/null-key.json" ]
        expect_exit 0 with_plugin cryptsetup open --test-passphrase --token-only --token-type tpmguard -v \
                "$WORK/disk.img" <"$WORK/pin"
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_shutdown
        swtpm_ioctl --unix "$WORK/tpm/tpm.sock.ctrl" -i >/dev/null
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_startup --clear
        boot_extend
        expect_exit 1 with_plugin cryptsetup open --test-passphrase --token-only --token-type tpmguard -v \
                "$WORK/disk.img" <"$WORK/pin"
        expect_in "was restarted since" "$ERR$OUT"
        recovery_opens "$WORK/disk.img"
}

# Daily life: a suspend to RAM announced by the sleep hook leaves verify,
# the warm plugin unlock and later suspends working (the default policy,
# no null_name). The same suspend without the hook stays an alarm, whose
# message names the likely cause (the hook) first.
test_case suspend_through_sleep_hook
suspend_through_sleep_hook() {
        booted_without_null_name
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" \
                "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" verify --record
        local before
        before=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["restart_count"])' "$ANCHOR")

        expect_exit 0 sleep_hook pre suspend
        expect_in '"sleep"' "$(cat "$ANCHOR")"
        suspend_resume
        expect_exit 0 sleep_hook post suspend
        expect_in "Resumed from suspend" "$OUT"
        expect_exit 0 "$TPMGUARD" verify --json
        [ "$(json_field restart_count)" = $((before + 1)) ]
        [ "$(json_field anchor_recorded)" = False ]
        # the warm unlock (this boot's cache, proven by an audited ReadClock) too
        expect_exit 0 with_plugin cryptsetup open --test-passphrase --token-only --token-type tpmguard -v \
                "$WORK/disk.img" <"$WORK/pin"

        # A second suspend, and a sleep that never reached the TPM.
        expect_exit 0 sleep_hook pre suspend
        suspend_resume
        expect_exit 0 sleep_hook post suspend
        expect_exit 0 sleep_hook pre suspend
        expect_exit 0 sleep_hook post suspend
        expect_in "did not move" "$OUT"
        expect_exit 0 "$TPMGUARD" verify

        # Without the hook: still an alarm, the likely cause first.
        suspend_resume
        expect_exit 3 "$TPMGUARD" verify
        expect_in "sleep hook" "$ERR"
        expect_in "reboot" "$ERR"
        # and the hook cannot bless it afterwards
        expect_exit 3 sleep_hook post suspend
        expect_exit 3 "$TPMGUARD" verify
}

# An announced suspend does not cover a TPM started anew (Startup(CLEAR))
# during it: the PCRs are not the ones recorded before sleep.
test_case restart_during_announced_suspend_refused
restart_during_announced_suspend_refused() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify
        expect_exit 0 sleep_hook pre suspend
        restart
        # Before the hook's "post": not ready, never verified, never an alarm (the hook decides).
        expect_exit 6 "$TPMGUARD" verify
        expect_in "has not yet checked the PCRs" "$ERR"
        expect_exit 3 sleep_hook post suspend
        expect_in "PCRs are not the ones" "$ERR"
        # After the hook's refusal: the alarm that names it, not "try again", not "no sleep announced".
        expect_exit 3 "$TPMGUARD" verify
        expect_in "sleep hook refused the resume from the suspend" "$ERR"
        # A suspend does not explain a reset either.
        expect_exit 0 "$FIXTURE" reset "$WORK/tpm"
        boot_extend
        expect_exit 3 sleep_hook post suspend
}

# Hibernate, as measured on swtpm (hibernate_power_cycle): the hook's post
# accepts exactly a Restart (same NULL key and resetCount, restartCount + 1) or
# a Reset (new key, resetCount + 1, restartCount 0), with the PCRs measured
# anew, and verify works after it; a suspend announced for the same move is
# refused (its PCRs are compared).
test_case hibernate_through_sleep_hook
hibernate_through_sleep_hook() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify
        local before after
        before=$(counters)
        expect_exit 0 sleep_hook pre hibernate
        hibernate_power_cycle
        boot_extend
        after=$(counters)
        if [ "${after% *}" != "${before% *}" ] || [ "${after#* }" != $((${before#* } + 1)) ]; then
                echo "# Shutdown(STATE) + power cycle + Startup(CLEAR): counters $before -> $after" >&2
                return 1
        fi
        # Before the hook's "post" (an unlock right after the thaw): not ready, never an alarm.
        expect_exit 6 "$TPMGUARD" verify
        expect_in "has not yet checked the PCRs" "$ERR"
        refute_in "interposer" "$ERR"
        expect_exit 0 sleep_hook post hibernate
        expect_in "Resumed from hibernate" "$OUT"
        expect_exit 0 "$TPMGUARD" verify

        before=$(counters)
        expect_exit 0 sleep_hook pre hibernate
        hibernate_power_cycle clear
        boot_extend
        after=$(counters)
        if [ "${after% *}" != $((${before% *} + 1)) ] || [ "${after#* }" != 0 ]; then
                echo "# Shutdown(CLEAR) + power cycle + Startup(CLEAR): counters $before -> $after" >&2
                return 1
        fi
        expect_exit 0 sleep_hook post hibernate
        expect_exit 0 "$TPMGUARD" verify

        # The same Restart announced as a suspend: its PCRs are reset (not replayed here).
        expect_exit 0 sleep_hook pre suspend
        hibernate_power_cycle
        expect_exit 3 sleep_hook post suspend
        expect_in "PCRs are not the ones" "$ERR"
}

# hybrid-sleep resumes from RAM (a Resume: the PCRs kept, compared like a
# suspend's); a Restart during it is refused with the likely cause first (the
# power ran out and the machine resumed from disk) and the next step; a Reset
# is never what a hybrid-sleep does.
test_case hybrid_sleep_compares_pcrs
hybrid_sleep_compares_pcrs() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify
        expect_exit 0 sleep_hook pre hybrid-sleep
        suspend_resume
        expect_exit 0 sleep_hook post hybrid-sleep
        expect_in "PCRs are unchanged" "$OUT"
        expect_exit 0 "$TPMGUARD" verify
        expect_exit 0 sleep_hook pre hybrid-sleep
        restart
        expect_exit 3 sleep_hook post hybrid-sleep
        expect_in "the power ran out during the sleep and the machine resumed from disk" "$ERR"
        expect_in "reboot" "$ERR"
        expect_exit 3 "$TPMGUARD" verify
}

test_case hybrid_sleep_refuses_reset
hybrid_sleep_refuses_reset() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify
        expect_exit 0 sleep_hook pre hybrid-sleep
        reset_and_replay
        expect_exit 3 sleep_hook post hybrid-sleep
        expect_in "reset since" "$ERR"
}

# suspend-then-hibernate: systemd runs the hooks around each phase, naming it
# in SYSTEMD_SLEEP_ACTION; the hook checks the suspend phase like a suspend
# (PCRs compared) and the hibernation like a hibernation. Without the phase
# (an older systemd), a move by one restart is a suspend and its PCRs are
# compared too.
test_case suspend_then_hibernate_phases
suspend_then_hibernate_phases() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify
        expect_exit 0 phase_hook suspend pre suspend-then-hibernate
        suspend_resume
        expect_exit 0 phase_hook suspend post suspend-then-hibernate
        expect_in "Resumed from suspend" "$OUT"
        expect_exit 0 phase_hook hibernate pre suspend-then-hibernate
        hibernate_power_cycle
        boot_extend
        expect_exit 0 phase_hook hibernate post suspend-then-hibernate
        expect_in "Resumed from hibernate" "$OUT"
        expect_exit 0 "$TPMGUARD" verify
        # The suspend phase with a Restart and fresh PCRs in it: refused.
        expect_exit 0 phase_hook suspend pre suspend-then-hibernate
        restart
        expect_exit 3 phase_hook suspend post suspend-then-hibernate
        expect_in "PCRs are not the ones" "$ERR"
}

test_case suspend_then_hibernate_without_phase
suspend_then_hibernate_without_phase() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify
        # Woke before hibernating: one Restart with fresh PCRs is not a resume.
        expect_exit 0 sleep_hook pre suspend-then-hibernate
        restart
        expect_exit 3 sleep_hook post suspend-then-hibernate
        expect_in "PCRs are not the ones" "$ERR"
}

test_case suspend_then_hibernate_without_phase_hibernated
suspend_then_hibernate_without_phase_hibernated() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify
        # Suspended (a Resume), then hibernated (a Restart): + 2, the PCRs measured anew.
        expect_exit 0 sleep_hook pre suspend-then-hibernate
        suspend_resume
        hibernate_power_cycle
        boot_extend
        expect_exit 0 sleep_hook post suspend-then-hibernate
        expect_exit 0 "$TPMGUARD" verify
}

# The PCRs a sleep must keep are compared in every active bank, not only
# SHA-256: a Restart during a suspend that replays SHA-256 exactly but leaves
# SHA-1 (a bank a token may be sealed to) otherwise is refused.
test_case suspend_compares_every_bank
suspend_compares_every_bank() {
        tpm_setup
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrallocate sha1:all+sha256:all >/dev/null
        "$FIXTURE" reset "$WORK/tpm"
        "$FIXTURE" null-name "$WORK/tpm" "$WORK/null_name"
        booted_without_null_name_here
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend 7:sha1=0123456789abcdef0123456789abcdef01234567 >/dev/null
        expect_exit 0 "$TPMGUARD" verify
        expect_exit 0 sleep_hook pre suspend
        restart
        boot_extend
        # SHA-256 is exactly as before sleep; SHA-1 PCR 7 is not.
        expect_exit 3 sleep_hook post suspend
        expect_in "PCRs are not the ones" "$ERR"
}

# A Restart with PCR replay, nobody announced a sleep: exit 3, and the
# hook's post does not re-anchor it.
test_case restart_replay_without_suspend_refused
restart_replay_without_suspend_refused() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify
        restart
        boot_extend
        expect_exit 3 sleep_hook post suspend
        expect_exit 3 "$TPMGUARD" verify
        expect_in "no suspend or hibernate was announced" "$ERR"
}

# The "no null_name" notice: said once, with its reason, where the state is
# read (provision, status, doctor), not on every command's standard error.
test_case null_name_notice_once
null_name_notice_once() {
        tpm_setup
        write_config prefer
        rm "$WORK/null_name"
        expect_exit 0 "$TPMGUARD" provision
        expect_in "exports no TPM null_name" "$OUT"
        expect_in "CONFIG_TCG_TPM2_HMAC=y" "$OUT"
        boot_extend
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" \
                "$WORK/disk.img"
        refute_in "null_name" "$ERR"
        expect_exit 0 "$TPMGUARD" verify
        refute_in "null_name" "$ERR"
        expect_in "reset anchor: boot" "$OUT"
        expect_exit 0 with_plugin cryptsetup open --test-passphrase --token-only --token-type tpmguard \
                "$WORK/disk.img" <"$WORK/pin"
        refute_in "null_name" "$ERR"
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "exports no TPM null_name" "$OUT"
        expect_in "CONFIG_TCG_TPM2_HMAC=y" "$OUT"
}

test_case stale_anchor_ignored
stale_anchor_ignored() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify
        # An anchor of another boot (as if /run had survived a reboot) is stale:
        # this boot records its own, without a warning.
        sed -i 's/"boot_id": *"[0-9a-f]*"/"boot_id":"00000000000000000000000000000000"/' "$ANCHOR"
        grep -q '"boot_id":"00000000000000000000000000000000"' "$ANCHOR"
        reset_and_replay
        expect_exit 0 "$TPMGUARD" verify --json
        [ "$(json_field anchor)" = boot ]
        [ "$(json_field anchor_recorded)" = True ]
        if grep -qi "damaged" <<<"$ERR"; then echo "# a stale anchor was reported as damaged" >&2; return 1; fi
        grep -q "\"boot_id\":\"$(tr -d - </proc/sys/kernel/random/boot_id)\"" "$ANCHOR"
}

test_case damaged_anchor_warns
damaged_anchor_warns() {
        booted_without_null_name
        expect_exit 0 "$TPMGUARD" verify
        # Damaged: a full verification, a warning, anchor "none" for this run,
        # and never a silent accept; the anchor is recorded anew.
        echo '{"version": 1, "boot_id": "x"' >"$ANCHOR"
        expect_exit 0 "$TPMGUARD" verify --json
        expect_in "damaged" "$ERR"
        [ "$(json_field anchor)" = none ]
        expect_exit 0 "$TPMGUARD" verify --json
        [ "$(json_field anchor)" = boot ]
        [ "$(json_field anchor_recorded)" = False ]
        # Not private: the same.
        chmod 644 "$ANCHOR"
        expect_exit 0 "$TPMGUARD" verify --json
        expect_in "damaged" "$ERR"
        [ "$(json_field anchor)" = none ]
        [ "$(stat -c %a "$ANCHOR")" = 600 ]
        # A forged anchor that names another key is not "damaged": it refuses.
        sed -i 's/"null_name": *"000b\(.\)/"null_name":"000b0/' "$ANCHOR"
        python3 - "$ANCHOR" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
n = a["null_name"]
a["null_name"] = n[:-1] + ("0" if n[-1] != "0" else "1")
json.dump(a, open(sys.argv[1], "w"))
PY
        expect_exit 3 "$TPMGUARD" verify
}

test_case kernel_anchor_when_null_name
kernel_anchor_when_null_name() {
        tpm_setup
        write_config prefer
        "$TPMGUARD" provision >/dev/null
        expect_exit 0 "$TPMGUARD" verify --json
        [ "$(json_field anchor)" = kernel ]
        [ ! -e "$WORK/run/boot-anchor.json" ]
        if grep -qi "boot anchor" <<<"$ERR"; then echo "# a notice with a kernel null_name" >&2; return 1; fi
}

test_case if_available_means_prefer
if_available_means_prefer() {
        booted_without_null_name
        write_config if-available
        expect_exit 0 "$TPMGUARD" verify --json
        [ "$(json_field anchor)" = boot ]
        [ "$(json_field policy)" = if-available ]
        reset_and_replay
        expect_exit 3 "$TPMGUARD" verify
}

run_cases
