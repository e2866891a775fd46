#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: the lifecycle commands (change-pin, rotate, reseal,
# remove, status, cleanup) against a real swtpm, with the real cryptsetup
# binary and our plugin for every unlock check. Happy paths and bad input;
# bad input must leave the image byte for byte unchanged.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_pcrextend tpm2_pcrread cryptsetup unshare sha256sum python3
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"

setup_enrolled() {
        setup_enrolled_common "$@"
        printf '5678\n' >"$WORK/pin2"
        printf '9999\n' >"$WORK/wrong"
}

# Exactly one tpmguard token and keyslots for the recovery passphrase and it.
one_token_two_keyslots() {
        [ "$(tpmguard_tokens)" = 1 ] || { echo "# $(tpmguard_tokens) tpmguard tokens" >&2; return 1; }
        [ "$(active_keyslots)" = 2 ] || { echo "# $(active_keyslots) keyslots" >&2; return 1; }
}

image_sum() { sha256sum "$WORK/disk.img" | cut -d' ' -f1; }

# The PIN options command $1 takes (an option a command does not take is an
# error): into the array PIN_OPTS.
pin_opts() {
        case $1 in
        change-pin) PIN_OPTS=(--pin-file "$WORK/pin" --new-pin-file "$WORK/pin2") ;;
        rotate|reseal) PIN_OPTS=(--pin-file "$WORK/pin") ;;
        *) PIN_OPTS=() ;;
        esac
}

active_keyslots() { cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: luks2'; }

tpmguard_tokens() { cryptsetup luksDump "$WORK/disk.img" | grep -c '^  [0-9]*: tpmguard$' || true; }

# A field of `tpmguard status --json`, by a Python expression on the object s.
status_field() {
        "$TPMGUARD" status --json "$WORK/disk.img" 2>/dev/null |
                python3 -c "import json,sys; s=json.load(sys.stdin); print($1)"
}

pcr7() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrread sha256:7 | awk '/7 *:/ {print tolower($3)}' | sed 's/^0x//'
}

# change-pin moves the token to a new secret in a new keyslot (rotate's
# crash-safe keyslot change) and destroys the old keyslot.
test_case change_pin_moves_token_to_new_secret
change_pin_moves_token_to_new_secret() {
        setup_enrolled
        expect_exit 0 "$TPMGUARD" change-pin --pin-file "$WORK/pin" --new-pin-file "$WORK/pin2" "$WORK/disk.img"
        expect_in "Changed the PIN of token 0: a new secret in keyslot 2 replaces keyslot 1" "$OUT"
        cryptsetup luksDump "$WORK/disk.img" >"$WORK/dump"
        refute grep -q '^  1: luks2' "$WORK/dump"
        refute grep -q tpmguard-pending "$WORK/dump"
        pin_opens "$WORK/pin2"
        refute pin_opens "$WORK/pin"
        one_token_two_keyslots
        recovery_opens "$WORK/disk.img"
}

# The attacker's header write: the token copied before ($WORK/old-token.json)
# put back in place of token 0, naming the keyslot token 0 names now (the old
# keyslot, if gone, cannot be named: cryptsetup refuses a token that does).
old_token_written_back() {
        local slots
        slots=$(cryptsetup token export --token-id 0 "$WORK/disk.img" |
                python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["keyslots"]))')
        python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); t["keyslots"]=json.loads(sys.argv[2]); print(json.dumps(t))' \
                "$WORK/old-token.json" "$slots" >"$WORK/planted.json"
        cryptsetup token remove --token-id 0 "$WORK/disk.img"
        cryptsetup token import --token-id 0 "$WORK/disk.img" <"$WORK/planted.json"
}

# Security review (old_token_copy_opens_after_change_pin): the LUKS2 header is
# plaintext, so whoever learnt the old PIN may have copied the token. Written
# back after change-pin, the copy must not open the volume with the old PIN:
# the secret it seals opens no keyslot any more.
test_case old_token_copy_opens_nothing_after_change_pin
old_token_copy_opens_nothing_after_change_pin() {
        setup_enrolled
        cryptsetup token export --token-id 0 "$WORK/disk.img" >"$WORK/old-token.json"
        expect_exit 0 "$TPMGUARD" change-pin --pin-file "$WORK/pin" --new-pin-file "$WORK/pin2" "$WORK/disk.img"
        refute pin_opens "$WORK/pin"
        pin_opens "$WORK/pin2"
        old_token_written_back
        refute pin_opens "$WORK/pin"
        recovery_opens "$WORK/disk.img"
}

# The same for a token with no PIN that gets one: its old copy would open
# the volume with no PIN at all.
test_case old_no_pin_token_copy_opens_nothing_after_change_pin
old_no_pin_token_copy_opens_nothing_after_change_pin() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '5678\n' >"$WORK/pin2"
        : >"$WORK/empty"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --no-pin --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        pin_opens "$WORK/empty"
        cryptsetup token export --token-id 0 "$WORK/disk.img" >"$WORK/old-token.json"
        expect_exit 0 "$TPMGUARD" change-pin --new-pin-file "$WORK/pin2" "$WORK/disk.img"
        pin_opens "$WORK/pin2"
        old_token_written_back
        refute pin_opens "$WORK/empty"
        recovery_opens "$WORK/disk.img"
}

test_case change_pin_reads_both_pins_from_stdin
change_pin_reads_both_pins_from_stdin() {
        setup_enrolled
        printf '1234\n5678\n' >"$WORK/both"
        expect_exit 0 "$TPMGUARD" change-pin --pin-file - --new-pin-file - "$WORK/disk.img" <"$WORK/both"
        pin_opens "$WORK/pin2"
}

test_case change_pin_wrong_current_pin_changes_nothing
change_pin_wrong_current_pin_changes_nothing() {
        setup_enrolled
        local before
        before=$(image_sum)
        expect_exit 12 "$TPMGUARD" change-pin --pin-file "$WORK/wrong" --new-pin-file "$WORK/pin2" "$WORK/disk.img"
        expect_in "Wrong PIN" "$ERR"
        expect_in "nothing was changed" "$ERR"
        [ "$(image_sum)" = "$before" ]
        pin_opens "$WORK/pin"
}

test_case rotate_moves_token_to_new_keyslot
rotate_moves_token_to_new_keyslot() {
        setup_enrolled
        expect_exit 0 "$TPMGUARD" rotate --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "keyslot 2 replaces keyslot 1" "$OUT"
        cryptsetup luksDump "$WORK/disk.img" >"$WORK/dump"
        refute grep -q '^  1: luks2' "$WORK/dump"
        grep -q '^  2: luks2' "$WORK/dump"
        one_token_two_keyslots
        refute grep -q tpmguard-pending "$WORK/dump"
        pin_opens "$WORK/pin"
        recovery_opens "$WORK/disk.img"
}

test_case reseal_after_pcr_change_needs_recovery_passphrase
reseal_after_pcr_change_needs_recovery_passphrase() {
        setup_enrolled
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                7:sha256=0000000000000000000000000000000000000000000000000000000000000001
        refute pin_opens "$WORK/pin"
        [ "$(status_field 's["tokens"][0]["pcr_policy"]')" = not-satisfied ]
        local before
        before=$(image_sum)
        # No terminal here to ask for the recovery passphrase on: exit 14, naming the file option.
        expect_exit 14 "$TPMGUARD" reseal --pin-file "$WORK/pin" "$WORK/disk.img" </dev/null
        expect_in "--unlock-key-file" "$ERR"
        expect_in "its PIN cannot authorize the reseal" "$ERR"
        [ "$(image_sum)" = "$before" ]
        printf 'wrong passphrase' >"$WORK/bad.key"
        expect_exit 12 "$TPMGUARD" reseal --pin-file "$WORK/pin" --unlock-key-file "$WORK/bad.key" "$WORK/disk.img"
        [ "$(image_sum)" = "$before" ]
        expect_exit 0 "$TPMGUARD" reseal --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        expect_in "new keyslot" "$OUT"
        pin_opens "$WORK/pin"
        [ "$(status_field 's["tokens"][0]["pcr_policy"]')" = satisfied ]
        one_token_two_keyslots
        recovery_opens "$WORK/disk.img"
}

# Issue 29: after a PCR change, a plain reseal on a terminal asks for the
# recovery passphrase itself, never for the current PIN (which cannot work).
test_case reseal_after_pcr_change_asks_recovery_passphrase
reseal_after_pcr_change_asks_recovery_passphrase() {
        setup_enrolled
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                7:sha256=0000000000000000000000000000000000000000000000000000000000000001
        local rc=0 line
        line=$("$TPMGUARD_SRC/tests/integration/pty-answer" --prompt '(PIN|passphrase): ' --log "$WORK/tty.log" \
                "$(cat "$WORK/recovery.key")" "$(cat "$WORK/pin")" "$(cat "$WORK/pin")" -- \
                "$TPMGUARD" reseal "$WORK/disk.img") || rc=$?
        echo "# reseal on a terminal: exit $rc, $line" >&2
        [ "$rc" = 0 ] || { sed 's/^/#   /' "$WORK/tty.log" >&2; return 1; }
        refute grep -q "Current TPM PIN" "$WORK/tty.log"
        grep -q "Recovery passphrase: " "$WORK/tty.log"
        pin_opens "$WORK/pin"
        [ "$(status_field 's["tokens"][0]["pcr_policy"]')" = satisfied ]
        recovery_opens "$WORK/disk.img"
}

test_case reseal_by_unseal_changes_pcr_list
reseal_by_unseal_changes_pcr_list() {
        setup_enrolled
        expect_exit 0 "$TPMGUARD" reseal --pcrs 7,8 --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "Resealed token 0 into a new keyslot 2 with a new secret, replacing keyslot 1" "$OUT"
        one_token_two_keyslots
        [ "$(status_field 's["tokens"][0]["pcrs"]')" = "[7, 8]" ]
        pin_opens "$WORK/pin"
        # Now PCR 8 matters.
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                8:sha256=0000000000000000000000000000000000000000000000000000000000000002
        refute pin_opens "$WORK/pin"
}

# Security review (old_token_copy_opens_after_reseal_pcr): a token saved before
# a PIN-authorized reseal, written back, must not open the volume in the PCR
# state it was sealed to (a rollback to the old boot chain), as 'update
# finish' already ensures by rotating.
test_case old_token_copy_opens_nothing_after_reseal
old_token_copy_opens_nothing_after_reseal() {
        setup_enrolled
        cryptsetup token export --token-id 0 "$WORK/disk.img" >"$WORK/old-token.json"
        # To a value as 'pcrs --predict' prints it: the PCRs now no longer satisfy the new seal.
        expect_exit 0 "$TPMGUARD" reseal --pcrs 7 --pcr "7=sha256:$(printf '1%.0s' {1..64})" \
                --pin-file "$WORK/pin" "$WORK/disk.img"
        refute pin_opens "$WORK/pin"
        old_token_written_back
        refute pin_opens "$WORK/pin"
        recovery_opens "$WORK/disk.img"
}

test_case reseal_to_given_future_pcr_value
reseal_to_given_future_pcr_value() {
        setup_enrolled
        local digest=00000000000000000000000000000000000000000000000000000000000000ab future
        # What PCR 7 will be after extending it with digest: SHA-256(old || digest).
        future=$(python3 -c "import hashlib,sys; print(hashlib.sha256(bytes.fromhex(sys.argv[1]) + bytes.fromhex(sys.argv[2])).hexdigest())" \
                "$(pcr7)" "$digest")
        expect_exit 0 "$TPMGUARD" reseal --pcr "7=sha256:$future" --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "cannot be test-unsealed" "$ERR"
        refute pin_opens "$WORK/pin"
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend "7:sha256=$digest"
        pin_opens "$WORK/pin"
}

test_case reseal_rejects_wrong_bank_and_length
reseal_rejects_wrong_bank_and_length() {
        setup_enrolled
        local before
        before=$(image_sum)
        expect_exit 2 "$TPMGUARD" reseal --pcr 7=sha1:0000000000000000000000000000000000000000 \
                --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "bank" "$ERR"
        expect_exit 2 "$TPMGUARD" reseal --pcr 7=sha256:abcd --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "32 bytes" "$ERR"
        expect_exit 2 "$TPMGUARD" reseal --pcr "9=sha256:$(printf '%064d' 0)" --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_exit 2 "$TPMGUARD" reseal --pcrs 7,99 --pin-file "$WORK/pin" "$WORK/disk.img"
        [ "$(image_sum)" = "$before" ]
        pin_opens "$WORK/pin"
}

test_case remove_token_and_keyslot
remove_token_and_keyslot() {
        setup_enrolled
        expect_exit 0 "$TPMGUARD" remove "$WORK/disk.img"
        expect_in "Removed token 0 and keyslot 1" "$OUT"
        [ "$(tpmguard_tokens)" = 0 ]
        [ "$(active_keyslots)" = 1 ]
        recovery_opens "$WORK/disk.img"
        expect_exit 17 "$TPMGUARD" remove "$WORK/disk.img"
        expect_in "no tpmguard token" "$ERR"
}

# The keyslot a token names is the header's word. An evil maid points the
# token at the recovery passphrase's keyslot 0: the unlock fails, the owner
# checks that the recovery passphrase works and follows the advice (reseal
# with it), or removes the token. Neither may destroy keyslot 0.
test_case edited_keyslot_reference_never_destroys_a_passphrase
edited_keyslot_reference_never_destroys_a_passphrase() {
        setup_enrolled
        # The recovery keyslot does not have tpmguard's PBKDF (else this test would prove nothing).
        cryptsetup luksDump "$WORK/disk.img" | sed -n '/^  0: luks2/,/^  1: luks2/p' | grep -q "Hash: *sha256"
        "$TPMGUARD_SRC/tests/adversarial/luks2-edit" "$WORK/disk.img" 'tokens.0.keyslots=["0"]'
        recovery_opens "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" reseal --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        expect_in "Keeping keyslot 0" "$ERR"
        recovery_opens "$WORK/disk.img"
        pin_opens "$WORK/pin"
        "$TPMGUARD_SRC/tests/adversarial/luks2-edit" "$WORK/disk.img" 'tokens.0.keyslots=["0"]'
        expect_exit 0 "$TPMGUARD" remove "$WORK/disk.img"
        expect_in "Keeping keyslot 0" "$ERR"
        [ "$(tpmguard_tokens)" = 0 ]
        recovery_opens "$WORK/disk.img"
}

test_case remove_refuses_last_keyslot
remove_refuses_last_keyslot() {
        setup_enrolled
        cryptsetup luksKillSlot --batch-mode "$WORK/disk.img" 0
        local before
        before=$(image_sum)
        expect_exit 2 "$TPMGUARD" remove "$WORK/disk.img"
        expect_in "last keyslot" "$ERR"
        [ "$(image_sum)" = "$before" ]
        pin_opens "$WORK/pin"
}

test_case two_tokens_need_token_option
two_tokens_need_token_option() {
        setup_enrolled
        # enroll refuses a second token (issue 34: --wipe-slot replaces); seal and import still make one.
        second_token --pin-file "$WORK/pin2"
        local before cmd
        before=$(image_sum)
        for cmd in rotate remove reseal change-pin; do
                pin_opts "$cmd"
                expect_exit 2 "$TPMGUARD" "$cmd" "${PIN_OPTS[@]}" "$WORK/disk.img"
                expect_in "2 tpmguard tokens: token 0 (keyslot 1), token 1 (keyslot 2)" "$ERR"
                expect_in "--token" "$ERR"
        done
        [ "$(image_sum)" = "$before" ]
        expect_exit 0 "$TPMGUARD" rotate --token 1 --pin-file "$WORK/pin2" "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" remove --token 0 "$WORK/disk.img"
        [ "$(tpmguard_tokens)" = 1 ]
        pin_opens "$WORK/pin2"
        expect_exit 17 "$TPMGUARD" remove --token 0 "$WORK/disk.img"
}

test_case bad_devices_change_nothing
bad_devices_change_nothing() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        printf '1234\n' >"$WORK/pin"
        local cmd
        printf '5678\n' >"$WORK/pin2"
        for cmd in change-pin rotate reseal remove status cleanup; do
                pin_opts "$cmd"
                expect_exit 17 "$TPMGUARD" "$cmd" "${PIN_OPTS[@]}" "$WORK/nonexistent.img"
        done
        head -c 20M /dev/zero >"$WORK/plain.img"
        for cmd in change-pin rotate reseal remove status cleanup; do
                pin_opts "$cmd"
                expect_exit 2 "$TPMGUARD" "$cmd" "${PIN_OPTS[@]}" "$WORK/plain.img"
                expect_in "not a LUKS2 volume" "$ERR"
        done
        [ "$(sha256sum <"$WORK/plain.img" | cut -d' ' -f1)" = "$(head -c 20M /dev/zero | sha256sum | cut -d' ' -f1)" ]
        make_luks "$WORK/disk.img"
        local before
        before=$(image_sum)
        for cmd in change-pin rotate reseal remove; do
                pin_opts "$cmd"
                expect_exit 17 "$TPMGUARD" "$cmd" "${PIN_OPTS[@]}" "$WORK/disk.img"
                expect_in "no tpmguard token" "$ERR"
        done
        [ "$(image_sum)" = "$before" ]
        expect_exit 2 "$TPMGUARD" rotate "$WORK/disk.img" "$WORK/disk.img"
        expect_exit 2 "$TPMGUARD" rotate --token 40 "$WORK/disk.img"
}

test_case unprovisioned_changes_nothing
unprovisioned_changes_nothing() {
        setup_enrolled
        rm "$WORK/state/ek-signing-key.json"
        local before cmd
        before=$(image_sum)
        for cmd in change-pin rotate reseal; do
                pin_opts "$cmd"
                expect_exit 4 "$TPMGUARD" "$cmd" "${PIN_OPTS[@]}" "$WORK/disk.img"
                expect_in "provision" "$ERR"
        done
        [ "$(image_sum)" = "$before" ]
        expect_exit 0 "$TPMGUARD" status --json "$WORK/disk.img"
        [ "$(status_field 's["tpm"]["provisioned"]')" = False ]
        [ "$(status_field 's["tpm"]["verification"]')" = not-provisioned ]
        [ "$(status_field 's["tokens"][0]["pcr_policy"]')" = unknown ]
}

test_case locked_out_tpm_changes_nothing
locked_out_tpm_changes_nothing() {
        setup_enrolled --strict-da
        local before rc cmd
        before=$(image_sum)
        for _ in 1 2 3; do
                rc=0
                "$TPMGUARD" change-pin --pin-file "$WORK/wrong" --new-pin-file "$WORK/pin2" "$WORK/disk.img" \
                        2>/dev/null || rc=$?
                [ "$rc" = 12 ] || [ "$rc" = 13 ]
        done
        [ "$(status_field 's["tpm"]["dictionary_attack"]["in_lockout"]')" = True ]
        for cmd in change-pin rotate reseal; do
                pin_opts "$cmd"
                expect_exit 13 "$TPMGUARD" "$cmd" "${PIN_OPTS[@]}" "$WORK/disk.img"
                expect_in "lockout" "$ERR"
                expect_in "nothing was changed" "$ERR"
        done
        [ "$(image_sum)" = "$before" ]
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "IN LOCKOUT" "$OUT"
        recovery_opens "$WORK/disk.img"
}

test_case status_reports_policy_pin_tpm_state
status_reports_policy_pin_tpm_state() {
        setup_enrolled
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "token 0: keyslot 1, sha256 PCRs 7, PIN, current PCR values: satisfied" "$OUT"
        expect_in "keyslots: 0(passphrase) 1(token)" "$OUT"
        expect_in "verification: verified, kernel null_name: present" "$OUT"
        expect_in "DA: not locked out" "$OUT"
        [ "$(status_field 's["tokens"][0]["pin"]')" = True ]
        [ "$(status_field 's["tpm"]["dictionary_attack"]["max_failures"]')" = 1000 ]
        [ "$(status_field 's["cleanup_needed"]')" = False ]
        # Without the kernel's null_name (and the policy allowing that) status says so.
        rm "$WORK/null_name"
        write_config if-available
        [ "$(status_field 's["tpm"]["kernel_null_name"]')" = absent ]
        [ "$(status_field 's["tpm"]["verification"]')" = verified ]
        write_config required
        [ "$(status_field 's["tpm"]["verification"]')" = no-null-name ]
}

# A crash between "keyslot added" and "marker bound", recreated by hand with
# cryptsetup alone, so that recognising and cleaning up an orphan is tested in
# every build (the fault-injection test covers every other crash point).
test_case status_and_cleanup_find_orphan_keyslot
status_and_cleanup_find_orphan_keyslot() {
        setup_enrolled
        head -c 32 /dev/urandom | base64 | tr -d '\n' >"$WORK/orphan.key"
        printf '{"type":"tpmguard-pending","keyslots":[],"version":1,"operation":"rotate","token":0,"old_keyslot":1,"new_keyslot":2}' \
                >"$WORK/marker.json"
        sign_marker "$WORK/marker.json" "$WORK/disk.img"
        cryptsetup token import --json-file "$WORK/marker.json" "$WORK/disk.img"
        cryptsetup luksAddKey --batch-mode --pbkdf pbkdf2 --hash sha512 --pbkdf-force-iterations 1000 \
                --key-file "$WORK/recovery.key" --new-key-slot 2 "$WORK/disk.img" "$WORK/orphan.key"
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "interrupted rotate (marker token 1)" "$OUT"
        expect_in "orphan keyslot 2 (new keyslot of an interrupted operation)" "$OUT"
        expect_in "clean up with: tpmguard cleanup $WORK/disk.img" "$OUT"
        [ "$(status_field 's["orphans"][0]["cleanup"]')" = "tpmguard cleanup $WORK/disk.img" ]
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        expect_in "2 repairs" "$OUT"
        one_token_two_keyslots
        [ "$(status_field 's["cleanup_needed"]')" = False ]
        pin_opens "$WORK/pin"
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        expect_in "Nothing to clean up" "$OUT"
}

# The same orphan with a marker tpmguard did not sign (an older tpmguard's,
# or planted): nothing is destroyed, the marker goes with a warning that
# names its keyslots and the next step.
test_case cleanup_unsigned_marker_destroys_nothing
cleanup_unsigned_marker_destroys_nothing() {
        setup_enrolled
        head -c 32 /dev/urandom | base64 | tr -d '\n' >"$WORK/orphan.key"
        printf '{"type":"tpmguard-pending","keyslots":[],"version":1,"operation":"rotate","token":0,"old_keyslot":1,"new_keyslot":2}' \
                >"$WORK/marker.json"
        cryptsetup token import --json-file "$WORK/marker.json" "$WORK/disk.img"
        cryptsetup luksAddKey --batch-mode --pbkdf pbkdf2 --hash sha512 --pbkdf-force-iterations 1000 \
                --key-file "$WORK/recovery.key" --new-key-slot 2 "$WORK/disk.img" "$WORK/orphan.key"
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "UNAUTHENTICATED pending rotate marker (token 1)" "$OUT"
        refute_in "orphan keyslot 2" "$OUT"
        [ "$(status_field 's["pending"][0]["authenticated"]')" = False ]
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        expect_in "has no MAC" "$ERR"
        expect_in "names keyslots 1 (old) and 2 (new)" "$ERR"
        expect_in "cryptsetup luksKillSlot $WORK/disk.img N" "$ERR"
        cryptsetup open --test-passphrase --key-file "$WORK/orphan.key" "$WORK/disk.img"
        refute grep -q tpmguard-pending <(cryptsetup luksDump "$WORK/disk.img")
        pin_opens "$WORK/pin"
}

# A keyslot named by an unbound marker that tpmguard did not create (another
# PBKDF) is never destroyed: the marker goes, the keyslot stays.
test_case cleanup_keeps_foreign_keyslot
cleanup_keeps_foreign_keyslot() {
        setup_enrolled
        printf 'second passphrase' >"$WORK/second.key"
        printf '{"type":"tpmguard-pending","keyslots":[],"version":1,"operation":"rotate","token":0,"old_keyslot":1,"new_keyslot":2}' \
                >"$WORK/marker.json"
        sign_marker "$WORK/marker.json" "$WORK/disk.img"
        cryptsetup token import --json-file "$WORK/marker.json" "$WORK/disk.img"
        cryptsetup luksAddKey --batch-mode --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
                --key-file "$WORK/recovery.key" --new-key-slot 2 "$WORK/disk.img" "$WORK/second.key"
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        expect_in "Keeping keyslot 2" "$ERR"
        cryptsetup open --test-passphrase --key-file "$WORK/second.key" "$WORK/disk.img"
        refute grep -q tpmguard-pending <(cryptsetup luksDump "$WORK/disk.img")
        pin_opens "$WORK/pin"
}

# Issue 14 §2: an evil maid edits only the token ("pin": false, "pcrs":
# [23]). The unlock then fails with a reseal hint; following it must not
# re-enrol the volume under the attacker's policy: reseal takes the policy
# from the command line or tpmguard.conf, never from the header. rotate and
# change-pin refuse to carry the weaker policy over, status and doctor say so.
test_case header_edit_never_weakens_a_token
header_edit_never_weakens_a_token() {
        setup_enrolled
        sed -i 's/^allow_no_pin = .*/allow_no_pin = no/' "$WORK/tpmguard.conf"
        cryptsetup token export --token-id 0 "$WORK/disk.img" >"$WORK/token.json"
        python3 - "$WORK/token.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["pin"] = False
t.pop("pin_kdf", None)
# Format 2 exists only with a PIN (a format 2 token without one is refused as
# malformed, test-token.c): the edit that drops the PIN also writes format 1.
t["version"] = 1
t["pcrs"] = [23]
json.dump(t, open(sys.argv[1], "w"))
PY
        cryptsetup token remove --token-id 0 "$WORK/disk.img"
        cryptsetup token import --token-id 0 --json-file "$WORK/token.json" "$WORK/disk.img"
        # status and doctor name the downgrade.
        [ "$(status_field 's["tokens"][0]["weaker_than_config"]')" = True ]
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "WEAKER than the configuration" "$OUT"
        # rotate and change-pin refuse to carry it over (exit 15, malformed/edited token).
        expect_exit 15 "$TPMGUARD" rotate --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "weaker than the configuration" "$ERR"
        expect_exit 15 "$TPMGUARD" change-pin --pin-file "$WORK/pin" --new-pin-file "$WORK/pin2" "$WORK/disk.img"
        # reseal with the recovery passphrase: the new token has the configured policy (PIN, PCR 7).
        expect_exit 0 "$TPMGUARD" reseal --unlock-key-file "$WORK/recovery.key" --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "sha256 PCRs 7, PIN" "$OUT"
        [ "$(status_field 's["tokens"][0]["pin"]')" = True ]
        [ "$(status_field 's["tokens"][0]["pcrs"]')" = "[7]" ]
        [ "$(status_field 's["tokens"][0]["weaker_than_config"]')" = False ]
        pin_opens "$WORK/pin"
        refute token_open </dev/null
        recovery_opens "$WORK/disk.img"
}

# Red-team review: systemd-cryptenroll gives its recovery keys the PBKDF
# tpmguard gives its own keyslots (PBKDF2-SHA512, 1000 iterations), so
# "ours by the PBKDF" could not tell them apart. A header writer points the
# tpmguard token at the recovery key's keyslot (and drops its
# systemd-recovery label): neither 'reseal --unlock-key-file' nor 'remove'
# may destroy it. Only a keyslot tpmguard recorded as its own (its KDF salt
# in state_dir/keyslots.json, written when enroll proved it) goes.
enroll_systemd_recovery_key() {
        command -v systemd-cryptenroll >/dev/null || { echo "# systemd-cryptenroll not installed" >&2; return 1; }
        systemd-cryptenroll --unlock-key-file="$WORK/recovery.key" --recovery-key "$WORK/disk.img" >"$WORK/rk.out" 2>&1
        grep -oE '([a-z]{8}-){7}[a-z]{8}' "$WORK/rk.out" | head -1 | tr -d '\n' >"$WORK/rk"
        [ -s "$WORK/rk" ]
        cryptsetup open --test-passphrase --key-file "$WORK/rk" "$WORK/disk.img"
}
point_token_at_keyslot() {
        cryptsetup token remove --token-id 1 "$WORK/disk.img"   # the systemd-recovery label
        "$TPMGUARD_SRC/tests/adversarial/luks2-edit" "$WORK/disk.img" "tokens.0.keyslots=[\"$1\"]"
}

test_case edited_token_never_destroys_systemd_recovery_key
edited_token_never_destroys_systemd_recovery_key() {
        setup_enrolled
        enroll_systemd_recovery_key
        [ "$(cryptsetup luksDump "$WORK/disk.img" | sed -n '/^  2: luks2/,/Salt/p' | awk '/Hash:/ {print $2}')" = sha512 ]
        point_token_at_keyslot 2
        expect_exit 0 "$TPMGUARD" reseal --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        expect_in "Keeping keyslot 2" "$ERR"
        cryptsetup open --test-passphrase --key-file "$WORK/rk" "$WORK/disk.img"
        pin_opens "$WORK/pin"
        recovery_opens "$WORK/disk.img"
        # remove: the same edit, the same answer.
        new=$(cryptsetup luksDump --dump-json-metadata "$WORK/disk.img" |
                python3 -c 'import json,sys; m=json.load(sys.stdin); print([t for t in m["tokens"].values() if t["type"]=="tpmguard"][0]["keyslots"][0])')
        "$TPMGUARD_SRC/tests/adversarial/luks2-edit" "$WORK/disk.img" 'tokens.0.keyslots=["2"]'
        expect_exit 0 "$TPMGUARD" remove "$WORK/disk.img"
        expect_in "Keeping keyslot 2" "$ERR"
        cryptsetup open --test-passphrase --key-file "$WORK/rk" "$WORK/disk.img"
        recovery_opens "$WORK/disk.img"
        [ "$(tpmguard_tokens)" = 0 ]
        # The keyslot tpmguard made (and recorded) is still there: it was never named.
        cryptsetup luksDump "$WORK/disk.img" | grep -q "^  $new: luks2"
}

# The other side: keyslots tpmguard proved its own still go (enroll records them; a rotate records the
# keyslot its unseal opened, so a keyslot enrolled before the record existed is recognised after one).
test_case recorded_keyslots_still_go
recorded_keyslots_still_go() {
        setup_enrolled
        rm -f "$WORK/state/keyslots.json"
        expect_exit 0 "$TPMGUARD" remove "$WORK/disk.img"
        expect_in "Keeping keyslot 1" "$ERR"
        cryptsetup luksKillSlot --batch-mode "$WORK/disk.img" 1
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" \
                "$WORK/disk.img"
        rm -f "$WORK/state/keyslots.json"
        expect_exit 0 "$TPMGUARD" rotate --pin-file "$WORK/pin" "$WORK/disk.img"
        one_token_two_keyslots
        expect_exit 0 "$TPMGUARD" remove "$WORK/disk.img"
        refute_in "Keeping keyslot" "$ERR"
        [ "$(active_keyslots)" = 1 ]
        recovery_opens "$WORK/disk.img"
}

run_cases
