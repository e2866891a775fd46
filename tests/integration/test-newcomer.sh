#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: a newcomer's first week (issue 34). A private swtpm and
# real cryptsetup; the terminal is a pseudo-terminal (pty-answer types each
# answer at its prompt, as a person at the console would):
#   - cheap checks first: enroll on a file that is not LUKS, on LUKS1 and on
#     a read-only loop device names the cause (and for LUKS1 the conversion)
#     before any secret is asked, with or without a terminal;
#   - a wrong passphrase or current PIN is named before a new PIN is asked;
#   - a PCR change is named before a PIN is asked (rotate, change-pin);
#   - a mistyped or too short new PIN or passphrase is asked again at the
#     terminal (3 times, the rule stated); a file fails at once.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_pcrextend cryptsetup python3

# answer PROMPT_REGEX ANSWER... -- COMMAND...: the command on a terminal; sets
# RC and PROMPTS, the terminal output is in $WORK/tty.log (tty_has / tty_lacks).
answer() {
        local prompt=$1 line
        shift
        RC=0
        line=$("$PTY_ANSWER" --prompt "$prompt" --log "$WORK/tty.log" "$@") || RC=$?
        PROMPTS=$(printf '%s\n' "$line" | sed -n 's/^prompts=\([0-9]*\) .*/\1/p')
        echo "# exit $RC, $line" >&2
        sed "s/^/#   /" "$WORK/tty.log" >&2
}
# A prompt is the last thing on the terminal (a message ends with a newline).
ANY_PROMPT='(PIN|passphrase|password|recovery key)[^:\n]*: $'

pcr7_extend() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                7:sha256=3d458cfe55cc03ea1f443f1562beec8df51c75e14a9fcf9a7234a13f198e7969 >/dev/null
}

test_case enroll_not_luks_before_any_secret
enroll_not_luks_before_any_secret() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        truncate -s 8M "$WORK/plain.img"
        # No terminal: the cause, not "No terminal to ask for the PIN".
        expect_exit 2 setsid -w "$TPMGUARD" enroll "$WORK/plain.img" </dev/null
        expect_in "is not a LUKS2 volume: no LUKS header" "$ERR"
        refute_in "terminal" "$ERR"
        # On a terminal: nothing is asked.
        answer "$ANY_PROMPT" -- "$TPMGUARD" enroll "$WORK/plain.img"
        [ "$RC" = 2 ] && [ "$PROMPTS" = 0 ]
        tty_has "is not a LUKS2 volume: no LUKS header"
        answer "$ANY_PROMPT" -- "$TPMGUARD" enroll "$WORK/missing.img"
        [ "$RC" = 17 ] && [ "$PROMPTS" = 0 ]
        tty_has "No such file or directory"
}

test_case enroll_luks1_names_the_conversion
enroll_luks1_names_the_conversion() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        truncate -s 40M "$WORK/luks1.img"
        printf 'recovery passphrase' >"$WORK/recovery.key"
        cryptsetup luksFormat --type luks1 --batch-mode --pbkdf-force-iterations 1000 \
                --key-file "$WORK/recovery.key" "$WORK/luks1.img" >/dev/null
        answer "$ANY_PROMPT" -- "$TPMGUARD" enroll "$WORK/luks1.img"
        [ "$RC" = 2 ] && [ "$PROMPTS" = 0 ]
        tty_has "is a LUKS1 volume"
        tty_has "cryptsetup convert --type luks2 $WORK/luks1.img"
        tty_has "luksHeaderBackup"
}

test_case enroll_read_only_before_any_secret
enroll_read_only_before_any_secret() {
        command -v losetup >/dev/null && [ -e /dev/loop-control ] || { echo "# no loop devices: skipped" >&2; return 0; }
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        local loop
        loop=$(losetup --find --show --read-only "$WORK/disk.img")
        answer "$ANY_PROMPT" -- "$TPMGUARD" enroll "$loop"
        losetup -d "$loop"
        [ "$RC" != 0 ] && [ "$PROMPTS" = 0 ]
        tty_has "is read-only"
        tty_has "blockdev --setrw"
        tty_lacks "pending marker"
}

test_case enroll_wrong_passphrase_before_the_pin
enroll_wrong_passphrase_before_the_pin() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        answer "$ANY_PROMPT" "not the passphrase" 5678 5678 -- "$TPMGUARD" enroll --pcrs 7 "$WORK/disk.img"
        [ "$RC" != 0 ] && [ "$PROMPTS" = 1 ]
        tty_has "No keyslot of $WORK/disk.img opens with the given passphrase"
        tty_lacks "New TPM PIN"
}

test_case change_pin_checks_the_current_pin_first
change_pin_checks_the_current_pin_first() {
        setup_enrolled
        answer "$ANY_PROMPT" 9999 5678 5678 -- "$TPMGUARD" change-pin "$WORK/disk.img"
        [ "$RC" != 0 ] && [ "$PROMPTS" = 1 ]
        tty_lacks "New TPM PIN"
        # The right one: then the new PIN, twice.
        answer "$ANY_PROMPT" 1234 5678 5678 -- "$TPMGUARD" change-pin "$WORK/disk.img"
        [ "$RC" = 0 ] && [ "$PROMPTS" = 3 ]
        printf '5678\n' >"$WORK/pin"
        pin_opens "$WORK/pin"
}

test_case pcr_change_named_before_the_pin
pcr_change_named_before_the_pin() {
        setup_enrolled
        pcr7_extend
        for cmd in change-pin rotate; do
                answer "$ANY_PROMPT" 1234 5678 5678 -- "$TPMGUARD" "$cmd" "$WORK/disk.img"
                [ "$RC" != 0 ] && [ "$PROMPTS" = 0 ]
                tty_has "no PIN can unseal it"
                tty_has "tpmguard reseal $WORK/disk.img"
        done
}

test_case mistyped_new_pin_asked_again
mistyped_new_pin_asked_again() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        # Two that differ, then one too short, then the same twice.
        answer "$ANY_PROMPT" "recovery passphrase" 5678 5679 12 4321 4321 -- \
                "$TPMGUARD" enroll --pcrs 7 "$WORK/disk.img"
        [ "$RC" = 0 ] && [ "$PROMPTS" = 6 ]
        tty_has "The two PINs differ"
        tty_has "Try again (2 of 3)"
        tty_has "at least 4 are required (pin_min_length in $WORK/tpmguard.conf)"
        tty_has "Try again (3 of 3)"
        printf '4321\n' >"$WORK/pin"
        pin_opens "$WORK/pin"
        # Three mistakes end it; nothing was changed.
        answer "$ANY_PROMPT" 4321 1111 2222 1111 2222 1111 2222 -- "$TPMGUARD" change-pin "$WORK/disk.img"
        [ "$RC" = 2 ] && [ "$PROMPTS" = 7 ]
        tty_has "No new PIN after 3 tries. Nothing was changed."
        pin_opens "$WORK/pin"
        # A file is read once: a short PIN fails at once, naming the rule.
        printf '12\n' >"$WORK/short"
        expect_exit 2 "$TPMGUARD" change-pin --pin-file "$WORK/pin" --new-pin-file "$WORK/short" "$WORK/disk.img"
        expect_in "The PIN from $WORK/short has 2 characters; at least 4 are required" "$ERR"
}

test_case mistyped_new_passphrase_asked_again
mistyped_new_passphrase_asked_again() {
        setup_enrolled
        answer "$ANY_PROMPT" 1234 "new one" "new 0ne" "new one" "new one" -- \
                "$TPMGUARD" passwd --key-slot 0 "$WORK/disk.img"
        [ "$RC" = 0 ] && [ "$PROMPTS" = 5 ]
        tty_has "The two passphrases differ"
        tty_lacks "No new passphrase given"
        printf 'new one' >"$WORK/new.key"
        cryptsetup open --test-passphrase --key-file "$WORK/new.key" "$WORK/disk.img"
}

# provision without a kernel null_name, under the shipped default: the
# verification at its end runs as "prefer", and never names the old
# "if-available" to a user who set nothing (nor to one who set "required",
# which provisioning relaxes to the default).
test_case provision_uses_the_default_policy
provision_uses_the_default_policy() {
        local policy
        for policy in default required; do
                tpm_setup
                rm "$WORK/null_name"
                [ "$policy" = required ] || sed -i '/^kernel_null_name = /d' "$WORK/tpmguard.conf"
                expect_exit 0 "$TPMGUARD" -v -v provision
                expect_in "kernel_null_name = prefer" "$ERR"
                refute_in "if-available" "$ERR$OUT"
                tpm_teardown
        done
}

# --json: a failure's object carries the diagnostic that went to standard
# error, and its exit code; lockout export --json prints JSON.
test_case json_errors_carry_the_diagnostic
json_errors_carry_the_diagnostic() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        expect_exit 17 "$TPMGUARD" status --json "$WORK/missing.img"
        expect_in "Cannot open $WORK/missing.img: No such file or directory" "$ERR"
        python3 - "$OUT" "$WORK/missing.img" <<'PY'
import json, sys
o = json.loads(sys.argv[1])
assert o["exit_code"] == 17, o
assert o["error"] == "not-found", o
assert "Cannot open %s: No such file or directory" % sys.argv[2] in o["message"], o
PY
        expect_exit 0 "$TPMGUARD" lockout export --json
        [ "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["lockout_password_hex"])' "$OUT")" = \
          "$(head -n1 "$WORK/state/lockout-auth")" ]
}

# ^C during an operation: "Interrupted (^C)", never strsignal's "Interrupted by Interrupt".
test_case interrupt_says_interrupted
interrupt_says_interrupted() {
        [ "${TPMGUARD_FAULT_INJECTION_BUILD:-false}" = true ] || { echo "# not a fault-injection build: skipped" >&2; return 0; }
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        local n rc
        # The first fault point inside the keyslot change (before it the signal simply ends the process).
        for n in $(seq 1 60); do
                rc=0
                TPMGUARD_FAULT_SIGNAL_AT=$n "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" \
                        --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img" >"$WORK/out" 2>&1 || rc=$?
                tpm_flush_contexts
                [ "$rc" = 18 ] && break
        done
        [ "$rc" = 18 ]
        expect_in "Interrupted (^C)" "$(cat "$WORK/out")"
        refute_in "Interrupted by Interrupt" "$(cat "$WORK/out")"
}

# Every option a command's help lists is taken by that command: walks the
# command table (tpmguard help) and each command's options (COMMAND --help),
# giving each alone, and refuses any "does not apply" / "takes no options".
# No TPM answers here: only the option handling is under test.
test_case every_listed_option_is_taken
every_listed_option_is_taken() {
        WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpmguard-test.XXXXXX")
        printf 'state_dir = %s\ncache_dir = %s\ntcti = swtpm:path=%s/none\n' "$WORK" "$WORK" "$WORK" >"$WORK/tpmguard.conf"
        export TPMGUARD_CONFIG=$WORK/tpmguard.conf
        local cmd opt arg args value rc checked=0
        for cmd in $("$TPMGUARD" help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF {print $1}'); do
                case $(
                        "$TPMGUARD" help | sed -n '/^Commands:/,/^$/p' | awk -v c="$cmd" '$1 == c {print $2}'
                ) in
                DEV) args=("$WORK/missing.img") ;;
                setup\|export) args=(setup) ;;
                pre\|post) args=(pre suspend) ;;
                get) args=(get pcrs) ;;
                *) args=() ;;
                esac
                while read -r opt arg; do
                        case $opt in --config | --tcti | --verbose | --quiet | --help | --version) continue ;; esac
                        case $arg in
                        "") value=() ;;
                        N | SLOT) value=(1) ;;
                        LIST) value=(7) ;;
                        BANK) value=(sha256) ;;
                        MS) value=(100) ;;
                        N=BANK:HEX) value=("7=sha256:$(printf '%064d' 0)") ;;
                        *) value=("$WORK/nofile") ;;
                        esac
                        rc=0
                        timeout 20 setsid -w "$TPMGUARD" "$cmd" "$opt" "${value[@]}" "${args[@]}" \
                                </dev/null >/dev/null 2>"$WORK/err" || rc=$?
                        if grep -qE "does not apply|do not apply|takes no options" "$WORK/err"; then
                                echo "# $cmd lists $opt but refuses it: $(cat "$WORK/err")" >&2
                                return 1
                        fi
                        [ "$rc" != 124 ] || { echo "# $cmd $opt hung" >&2; return 1; }
                        checked=$((checked + 1))
                done < <("$TPMGUARD" "$cmd" --help | python3 -c '
import re, sys
for line in sys.stdin:
    m = re.match(r"\s+(?:-\w )?(--[\w-]+)(?: (\S+))?", line)
    if m:
        print(m.group(1), m.group(2) or "")')
        done
        echo "# $checked command options checked" >&2
        [ "$checked" -gt 50 ]
}

# Discovery: a bare tpmguard fits a screen (at most 40 lines) with the five
# first commands and where to read more; every command's --help ends with
# examples of that command using only options it lists.
test_case usage_is_short_and_help_has_examples
usage_is_short_and_help_has_examples() {
        WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpmguard-test.XXXXXX")
        expect_exit 2 "$TPMGUARD"
        [ "$(wc -l <<<"$OUT")" -le 40 ] || { echo "# bare usage: $(wc -l <<<"$OUT") lines" >&2; return 1; }
        local cmd
        for cmd in provision enroll status doctor reseal; do
                grep -qE "^  $cmd( |\$)" <<<"$OUT" || { echo "# bare usage lacks $cmd" >&2; return 1; }
        done
        expect_in "'tpmguard help'" "$OUT"
        expect_in "tpmguard(8)" "$OUT"
        for cmd in $("$TPMGUARD" help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF {print $1}'); do
                "$TPMGUARD" "$cmd" --help >"$WORK/help"
                python3 - "$cmd" "$WORK/help" <<'PY'
import re, sys
cmd, text = sys.argv[1], open(sys.argv[2]).read()
assert "\nExamples:\n" in text, "%s --help has no examples" % cmd
examples = text.split("\nExamples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
options = set(re.findall(r"^\s+(?:-\w )?(--[\w-]+)", text.split("\nExamples:\n")[0], re.M))
assert examples, cmd
for line in examples:
    words = line.split()
    assert words[:2] == ["tpmguard", cmd], "%s: example %r" % (cmd, line)
    for w in words:
        if w.startswith("--"):
            assert w in options, "%s: example %r uses %s, which %s does not list" % (cmd, line, w, cmd)
PY
        done
}

# Replace, don't add: a second enroll is refused before any secret and names
# --wipe-slot tpmguard; with it exactly one token is left, the new one (the
# old keyslot destroyed). --wipe-slot N never wipes the only passphrase.
test_case second_enroll_refused_wipe_slot_replaces
second_enroll_refused_wipe_slot_replaces() {
        setup_enrolled
        answer "$ANY_PROMPT" "recovery passphrase" 5678 5678 -- "$TPMGUARD" enroll --pcrs 7 "$WORK/disk.img"
        [ "$RC" = 2 ] && [ "$PROMPTS" = 0 ]
        tty_has "already has a tpmguard token (token 0)"
        tty_has "tpmguard enroll --wipe-slot tpmguard $WORK/disk.img"
        # A passphrase keyslot is no way round the refusal.
        expect_exit 2 "$TPMGUARD" enroll --wipe-slot 0 --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "--wipe-slot tpmguard" "$ERR"
        printf '5678\n' >"$WORK/pin2"
        expect_exit 0 "$TPMGUARD" enroll --wipe-slot tpmguard --pcrs 7 --pin-file "$WORK/pin2" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        expect_in "replaces the old token 0" "$OUT"
        [ "$(cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: tpmguard$')" = 1 ]
        [ "$(cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: tpmguard-pending$')" = 0 ]
        [ "$(cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: luks2')" = 2 ]
        pin_opens "$WORK/pin2"
        refute pin_opens "$WORK/pin"
        recovery_opens "$WORK/disk.img"
        # --wipe-slot N with N the token's keyslot replaces that token too.
        local slot
        slot=$(cryptsetup token export --token-id 0 "$WORK/disk.img" | python3 -c 'import json,sys; print(json.load(sys.stdin)["keyslots"][0])')
        expect_exit 0 "$TPMGUARD" enroll --wipe-slot "$slot" --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        [ "$(cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: luks2')" = 2 ]
        pin_opens "$WORK/pin"
}

test_case wipe_slot_never_the_only_passphrase
wipe_slot_never_the_only_passphrase() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        answer "$ANY_PROMPT" "recovery passphrase" 1234 1234 -- "$TPMGUARD" enroll --wipe-slot 0 "$WORK/disk.img"
        [ "$RC" = 2 ] && [ "$PROMPTS" = 0 ]
        tty_has "keyslot 0 is the only passphrase of"
        tty_has "tpmguard recovery-key"
        # Another token's keyslot (here a stand-in for a systemd-tpm2 or FIDO2 one) is no passphrase.
        head -c 32 /dev/urandom >"$WORK/other.key"
        cryptsetup luksAddKey --batch-mode --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --new-key-slot 3 \
                --key-file "$WORK/recovery.key" "$WORK/disk.img" "$WORK/other.key"
        printf '{"type":"x-other-token","keyslots":["3"]}' >"$WORK/other.json"
        cryptsetup token import --token-id 5 --json-file "$WORK/other.json" "$WORK/disk.img"
        expect_exit 2 "$TPMGUARD" enroll --wipe-slot 0 --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "keyslot 0 is the only passphrase of" "$ERR"
        cryptsetup token remove --token-id 5 "$WORK/disk.img"
        cryptsetup luksKillSlot --batch-mode "$WORK/disk.img" 3
        # With a second passphrase, keyslot 0 goes once the new token is in.
        printf 'second passphrase' >"$WORK/second.key"
        cryptsetup luksAddKey --batch-mode --pbkdf pbkdf2 --pbkdf-force-iterations 1000 --key-file "$WORK/recovery.key" \
                "$WORK/disk.img" "$WORK/second.key"
        expect_exit 0 "$TPMGUARD" enroll --wipe-slot 0 --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/second.key" "$WORK/disk.img"
        expect_in "keyslot 0 was destroyed" "$OUT"
        refute recovery_opens "$WORK/disk.img"
        cryptsetup open --test-passphrase --key-file "$WORK/second.key" "$WORK/disk.img"
        pin_opens "$WORK/pin"
}

# Names users type: UUID=, PARTUUID-less loop devices by UUID, a crypttab name;
# status with no argument lists the machine's tpmguard volumes (a loop device
# here) and the crypttab lines that name one.
test_case device_names_and_status_listing
device_names_and_status_listing() {
        command -v losetup >/dev/null && [ -e /dev/loop-control ] || { echo "# no loop devices: skipped" >&2; return 0; }
        setup_enrolled
        local loop uuid
        loop=$(losetup --find --show "$WORK/disk.img")
        echo "$loop" >"$WORK/loop"
        uuid=$(cryptsetup luksUUID "$WORK/disk.img")
        printf '# a comment\ncryptnewcomer UUID=%s none luks\nother /dev/nonexistent-%s none\n' "$uuid" "$$" \
                >"$WORK/crypttab"
        export TPMGUARD_CRYPTTAB=$WORK/crypttab
        # The loop device goes with the case, whatever happens in it.
        trap 'while read -r l; do losetup -d "$l"; done <"$WORK/loop"; tpm_teardown' EXIT
        expect_exit 0 "$TPMGUARD" status "UUID=$uuid"
        expect_in "token 0: keyslot 1" "$OUT"
        expect_exit 0 "$TPMGUARD" status cryptnewcomer
        expect_in "token 0: keyslot 1" "$OUT"
        expect_exit 17 "$TPMGUARD" status "UUID=00000000-0000-0000-0000-000000000000"
        expect_in "No block device has UUID=00000000-0000-0000-0000-000000000000" "$ERR"
        # No argument: the loop device, with its crypttab name; the other line names no device here.
        expect_exit 0 "$TPMGUARD" status
        expect_in "$loop: UUID $uuid, 1 tpmguard token, crypttab name cryptnewcomer" "$OUT"
        expect_in "crypttab other: /dev/nonexistent-$$ (no such device here)" "$OUT"
        expect_exit 0 "$TPMGUARD" status --json
        python3 - "$OUT" "$loop" "$uuid" <<'PY'
import json, sys
o = json.loads(sys.argv[1])
v = [v for v in o["volumes"] if v["device"] == sys.argv[2]]
assert len(v) == 1 and v[0]["uuid"] == sys.argv[3] and v[0]["tokens"] == [0] and v[0]["crypttab"] == "cryptnewcomer", o
c = {e["name"]: e for e in o["crypttab"]}
assert c["cryptnewcomer"]["tpmguard"] is True and c["cryptnewcomer"]["resolved"] == sys.argv[2], o
assert c["other"]["resolved"] is None and c["other"]["tpmguard"] is False, o
PY
        # A copy of the volume (or a decoy) with the same UUID: the UUID names neither.
        cp "$WORK/disk.img" "$WORK/copy.img"
        losetup --find --show "$WORK/copy.img" >>"$WORK/loop"
        expect_exit 2 "$TPMGUARD" status "UUID=$uuid"
        expect_in "names more than one block device" "$ERR"
        losetup -d "$(tail -n1 "$WORK/loop")"
        sed -i '$d' "$WORK/loop"
        # A crypttab name works for the commands that change the volume too.
        printf '5678\n' >"$WORK/pin2"
        expect_exit 0 "$TPMGUARD" change-pin --pin-file "$WORK/pin" --new-pin-file "$WORK/pin2" cryptnewcomer
}

# PCR 7 with Secure Boot off or in setup mode binds almost nothing: doctor
# and enroll say so (a fake efivarfs: 4 attribute bytes and one data byte).
test_case secure_boot_off_warned
secure_boot_off_warned() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        mkdir "$WORK/efivars"
        local guid=8be4df61-93ca-11d2-aa0d-00e098032b8c
        printf '\006\000\000\000\000' >"$WORK/efivars/SecureBoot-$guid"
        printf '\006\000\000\000\000' >"$WORK/efivars/SetupMode-$guid"
        export TPMGUARD_EFIVARS=$WORK/efivars
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" \
                "$WORK/disk.img"
        expect_in "Sealing to PCR 7, but Secure Boot is off" "$ERR"
        expect_exit 0 "$TPMGUARD" doctor --json "$WORK/disk.img" || true
        python3 - "$OUT" <<'PY'
import json, sys
o = json.loads(sys.argv[1])
c = [c for c in o["checks"] if c["check"] == "secure-boot"]
assert len(c) == 1 and c[0]["status"] == "warning" and "Secure Boot is off" in c[0]["summary"], c
assert "tpmguard reseal" in c[0]["next_step"], c
PY
        # On, but in setup mode: warned too; on and enforced: no warning.
        printf '\006\000\000\000\001' >"$WORK/efivars/SecureBoot-$guid"
        printf '\006\000\000\000\001' >"$WORK/efivars/SetupMode-$guid"
        "$TPMGUARD" doctor "$WORK/disk.img" >"$WORK/doctor.out" 2>&1 || true
        expect_in "setup mode" "$(cat "$WORK/doctor.out")"
        printf '\006\000\000\000\000' >"$WORK/efivars/SetupMode-$guid"
        "$TPMGUARD" doctor "$WORK/disk.img" >"$WORK/doctor.out" 2>&1 || true
        refute_in "secure-boot" "$(cat "$WORK/doctor.out")"
        refute_in "Secure Boot is off" "$(cat "$WORK/doctor.out")"
}

# --dry-run says what would change and changes nothing: the header's bytes
# are the same before and after, for enroll, remove, rotate and reseal.
test_case dry_run_changes_nothing
dry_run_changes_nothing() {
        setup_enrolled
        local before
        before=$(head -c 16M "$WORK/disk.img" | sha256sum)
        expect_exit 0 "$TPMGUARD" enroll --dry-run --wipe-slot tpmguard --pcrs 7 "$WORK/disk.img" </dev/null
        expect_in "write its token over tpmguard token 0, then destroy that token's keyslot 1" "$OUT"
        expect_in "add keyslot 2 with a new random secret, sealed to sha256 PCRs 7" "$OUT"
        expect_exit 0 "$TPMGUARD" rotate --dry-run "$WORK/disk.img" </dev/null
        expect_in "move token 0 (sha256 PCRs 7, PIN) from keyslot 1 to a new keyslot 2" "$OUT"
        expect_exit 0 "$TPMGUARD" reseal --dry-run --pcrs 7 "$WORK/disk.img" </dev/null
        expect_in "authorized by its current PIN, with a new random secret in a new keyslot 2; then destroy keyslot 1" "$OUT"
        expect_exit 0 "$TPMGUARD" remove --dry-run "$WORK/disk.img" </dev/null
        expect_in "destroy keyslot 1, then remove token 0" "$OUT"
        pcr7_extend
        expect_exit 0 "$TPMGUARD" reseal --dry-run "$WORK/disk.img" </dev/null
        expect_in "authorized by the recovery passphrase" "$OUT"
        [ "$(head -c 16M "$WORK/disk.img" | sha256sum)" = "$before" ]
}

# After a PCR change reseal asks for the recovery passphrase, not the PIN,
# and proves it before the new PIN is asked (a mistyped one ends it there).
test_case reseal_after_pcr_change_asks_recovery_passphrase
reseal_after_pcr_change_asks_recovery_passphrase() {
        setup_enrolled
        pcr7_extend
        answer "$ANY_PROMPT" "not the passphrase" 5678 5678 -- "$TPMGUARD" reseal "$WORK/disk.img"
        [ "$RC" != 0 ] && [ "$PROMPTS" = 1 ]
        tty_has "Recovery passphrase: "
        tty_lacks "New TPM PIN"
        tty_lacks "Current TPM PIN"
        answer "$ANY_PROMPT" "recovery passphrase" 5678 5678 -- "$TPMGUARD" reseal "$WORK/disk.img"
        [ "$RC" = 0 ] && [ "$PROMPTS" = 3 ]
        tty_has "The PCR values no longer match the token's sealed policy"
        printf '5678\n' >"$WORK/pin2"
        pin_opens "$WORK/pin2"
}

# The package: an initrd generator recommended, tpm2-tools suggested, and a
# README.Debian with the first-run path whose commands exist (docs-agree
# checks its options).
test_case package_recommends_and_readme_debian
package_recommends_and_readme_debian() {
        WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpmguard-test.XXXXXX")
        local control=$TPMGUARD_SRC/debian/control readme=$TPMGUARD_SRC/debian/README.Debian
        sed -n '/^Package: tpmguard$/,/^$/p' "$control" | tr '\n' ' ' | grep -q 'Recommends:[^:]*cryptsetup-initramfs | dracut'
        sed -n '/^Package: tpmguard$/,/^$/p' "$control" | grep -q '^Suggests:.*tpm2-tools'
        local cmd
        for cmd in doctor provision enroll; do
                grep -q "tpmguard $cmd" "$readme" || { echo "# README.Debian lacks tpmguard $cmd" >&2; return 1; }
        done
}

# A full filesystem under state_dir (a full /etc): one line that names the cause
# and the next step, not three overlapping ones; nothing changed on the volume.
test_case full_state_dir_names_the_next_step
full_state_dir_names_the_next_step() {
        local before rc=0
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        before=$(cryptsetup luksDump "$WORK/disk.img" | sha256sum)
        cp -a "$WORK/state" "$WORK/state.copy"
        mount -t tmpfs -o size=64k,mode=0700 tmpfs "$WORK/state"
        cp -a "$WORK/state.copy/." "$WORK/state/"
        dd if=/dev/zero of="$WORK/state/fill" bs=4k 2>/dev/null || :
        expect_exit 1 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" \
                "$WORK/disk.img" || rc=1
        umount "$WORK/state"
        [ "$rc" = 0 ] || return 1
        expect_in "No space left on device" "$ERR"
        expect_in "The filesystem is full: free space on it" "$ERR"
        refute_in "Cannot sign the pending marker" "$ERR"
        [ "$(cryptsetup luksDump "$WORK/disk.img" | sha256sum)" = "$before" ] ||
                { echo "# the volume changed" >&2; return 1; }
}

run_cases
