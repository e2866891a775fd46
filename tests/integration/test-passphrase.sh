#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: tpmguard recovery-key and tpmguard passwd against a real
# swtpm and the real cryptsetup binary. The new recovery key or passphrase
# must open the volume with plain `cryptsetup open` (no tpmguard involved);
# the replaced one must not; the token keeps working; refused input must
# leave the image byte for byte unchanged.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup cryptsetup unshare sha256sum python3
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"

# argon2id at 100 ms instead of cryptsetup's 2 s: the same code path, faster.
FAST=(--iter-time 100)

setup_enrolled() {
        setup_enrolled_common
        printf 'a new passphrase\n' >"$WORK/new.pass"
        printf '9999\n' >"$WORK/wrong"
}
image_sum() { sha256sum "$WORK/disk.img" | cut -d' ' -f1; }
# Opens with exactly the bytes of file $1, by the cryptsetup binary alone.
key_opens() { cryptsetup open --test-passphrase --key-file "$1" "$WORK/disk.img" >/dev/null 2>&1; }
# The recovery key printed in $OUT, into file $1 (no newline: the keyslot passphrase is the 71 characters).
recovery_key_from_output() {
        local k
        k=$(grep -oE '[cbdefghijklnrtuv]{8}(-[cbdefghijklnrtuv]{8}){7}' <<<"$OUT" | head -1)
        [ ${#k} = 71 ] || { echo "# no recovery key in the output: $OUT" >&2; return 1; }
        printf '%s' "$k" >"$1"
}
status_field() {
        "$TPMGUARD" status --json "$WORK/disk.img" 2>/dev/null |
                python3 -c "import json,sys; s=json.load(sys.stdin); print($1)"
}
kinds() { status_field '" ".join("%d:%s" % (k["keyslot"], k["kind"]) for k in s["keyslots"])'; }
pbkdf_of() { cryptsetup luksDump "$WORK/disk.img" | awk -v s="  $1: luks2" '$0 == s {f=1; next} f && /PBKDF:/ {print $2; exit}'; }

# The issue's "done": an owner who knows only the PIN replaces the recovery
# passphrase with a fresh recovery key, which then opens with plain cryptsetup.
test_case recovery_key_by_pin_replaces_recovery_passphrase
recovery_key_by_pin_replaces_recovery_passphrase() {
        setup_enrolled
        expect_exit 0 "$TPMGUARD" recovery-key "${FAST[@]}" --pin-file "$WORK/pin" --replace 0 "$WORK/disk.img"
        expect_in "shown only now" "$OUT"
        expect_in "Recovery key enrolled in keyslot 2 (label token 1); keyslot 0 removed." "$OUT"
        recovery_key_from_output "$WORK/rk"
        key_opens "$WORK/rk"
        refute key_opens "$WORK/recovery.key"
        pin_opens "$WORK/pin"
        [ "$(pbkdf_of 2)" = argon2id ]
        [ "$(kinds)" = "1:token 2:recovery-key" ]
        [ "$(status_field 's["cleanup_needed"]')" = False ]
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "keyslots: 1(token) 2(recovery-key)" "$OUT"
        # Never written anywhere else: not in the header, not in the logs of the run.
        refute grep -qF "$(cat "$WORK/rk")" "$WORK/disk.img"
        # And a second one replaces the first: its label goes with it.
        cp "$WORK/rk" "$WORK/rk1"
        expect_exit 0 "$TPMGUARD" recovery-key "${FAST[@]}" --unlock-key-file "$WORK/rk1" --replace 2 "$WORK/disk.img"
        recovery_key_from_output "$WORK/rk"
        key_opens "$WORK/rk"
        refute key_opens "$WORK/rk1"
        [ "$(kinds)" = "0:recovery-key 1:token" ]
        [ "$(cryptsetup luksDump "$WORK/disk.img" | grep -c 'tpmguard-recovery$')" = 1 ]
}

# No TPM needed when an existing passphrase authorizes, and no token needed.
test_case recovery_key_by_passphrase_without_tpm
recovery_key_by_passphrase_without_tpm() {
        tpm_setup
        make_luks "$WORK/disk.img"
        "$FIXTURE" stop "$WORK/tpm" >/dev/null
        expect_exit 0 "$TPMGUARD" recovery-key "${FAST[@]}" --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        expect_in "Recovery key enrolled in keyslot 1 (label token 0)." "$OUT"
        recovery_key_from_output "$WORK/rk"
        key_opens "$WORK/rk"
        key_opens "$WORK/recovery.key"
}

test_case passwd_by_pin
passwd_by_pin() {
        setup_enrolled
        expect_exit 0 "$TPMGUARD" passwd "${FAST[@]}" --pin-file "$WORK/pin" --new-passphrase-file "$WORK/new.pass" \
                "$WORK/disk.img"
        expect_in "keyslot 2 replaces keyslot 0" "$OUT"
        printf 'a new passphrase' >"$WORK/new.key"
        key_opens "$WORK/new.key"
        refute key_opens "$WORK/recovery.key"
        pin_opens "$WORK/pin"
        [ "$(kinds)" = "1:token 2:passphrase" ]
        [ "$(pbkdf_of 2)" = argon2id ]
}

test_case passwd_by_current_passphrase_and_stdin
passwd_by_current_passphrase_and_stdin() {
        setup_enrolled
        printf 'a new passphrase\n' | expect_exit 0 "$TPMGUARD" passwd "${FAST[@]}" --unlock-key-file "$WORK/recovery.key" \
                --new-passphrase-file - "$WORK/disk.img"
        printf 'a new passphrase' >"$WORK/new.key"
        key_opens "$WORK/new.key"
        refute key_opens "$WORK/recovery.key"
        # PIN and new passphrase from one stdin, a line each.
        printf '1234\nthird one\n' | expect_exit 0 "$TPMGUARD" passwd "${FAST[@]}" --pin-file - \
                --new-passphrase-file - "$WORK/disk.img"
        printf 'third one' >"$WORK/third.key"
        key_opens "$WORK/third.key"
        refute key_opens "$WORK/new.key"
}

test_case refusals_change_nothing
refusals_change_nothing() {
        setup_enrolled
        local before
        before=$(image_sum)
        expect_exit 12 "$TPMGUARD" recovery-key "${FAST[@]}" --pin-file "$WORK/wrong" "$WORK/disk.img"
        expect_in "nothing was changed" "$ERR"
        expect_exit 12 "$TPMGUARD" passwd "${FAST[@]}" --pin-file "$WORK/wrong" --new-passphrase-file "$WORK/new.pass" \
                "$WORK/disk.img"
        printf 'not the passphrase' >"$WORK/bad.key"
        expect_exit 12 "$TPMGUARD" recovery-key "${FAST[@]}" --unlock-key-file "$WORK/bad.key" "$WORK/disk.img"
        # Never a keyslot a token uses.
        expect_exit 2 "$TPMGUARD" recovery-key "${FAST[@]}" --pin-file "$WORK/pin" --replace 1 "$WORK/disk.img"
        expect_in "a token uses keyslot 1" "$ERR"
        expect_exit 2 "$TPMGUARD" passwd "${FAST[@]}" --pin-file "$WORK/pin" --key-slot 1 \
                --new-passphrase-file "$WORK/new.pass" "$WORK/disk.img"
        expect_in "A token uses keyslot 1" "$ERR"
        expect_exit 17 "$TPMGUARD" recovery-key "${FAST[@]}" --pin-file "$WORK/pin" --replace 5 "$WORK/disk.img"
        expect_exit 2 "$TPMGUARD" recovery-key --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        expect_exit 2 "$TPMGUARD" passwd --replace 0 "$WORK/disk.img"
        [ "$(image_sum)" = "$before" ]
        # A recovery key is replaced by recovery-key, not changed by passwd.
        expect_exit 0 "$TPMGUARD" recovery-key "${FAST[@]}" --pin-file "$WORK/pin" "$WORK/disk.img"
        recovery_key_from_output "$WORK/rk"
        before=$(image_sum)
        expect_exit 2 "$TPMGUARD" passwd "${FAST[@]}" --unlock-key-file "$WORK/rk" --new-passphrase-file "$WORK/new.pass" \
                "$WORK/disk.img"
        expect_in "is a recovery key" "$ERR"
        # Two typed secrets besides the token, one of them a recovery key: passwd by PIN finds the passphrase.
        [ "$(image_sum)" = "$before" ]
        expect_exit 0 "$TPMGUARD" passwd "${FAST[@]}" --pin-file "$WORK/pin" --new-passphrase-file "$WORK/new.pass" \
                "$WORK/disk.img"
        expect_in "replaces keyslot 0" "$OUT"
        key_opens "$WORK/rk"
        pin_opens "$WORK/pin"
}

# A crash between "keyslot added" and "marker bound", recreated with
# cryptsetup alone (every build; the fault-injection test covers every other
# point): the marker's PBKDF fingerprint tells tpmguard's own keyslot from
# one someone else added at that number.
test_case cleanup_undoes_unbound_passwd_by_fingerprint
cleanup_undoes_unbound_passwd_by_fingerprint() {
        setup_enrolled
        printf 'half-added' >"$WORK/half.key"
        cryptsetup luksAddKey --batch-mode --pbkdf argon2id --pbkdf-force-iterations 4 --pbkdf-memory 32768 \
                --pbkdf-parallel 1 --key-file "$WORK/recovery.key" --new-key-slot 2 "$WORK/disk.img" "$WORK/half.key"
        printf '{"type":"tpmguard-pending","keyslots":[],"version":1,"operation":"passwd","old_keyslot":0,"new_keyslot":2,"committed":false,"pbkdf":{"type":"argon2id","iterations":4,"memory":32768,"parallel":1}}' \
                >"$WORK/marker.json"
        sign_marker "$WORK/marker.json" "$WORK/disk.img"
        cryptsetup token import --json-file "$WORK/marker.json" "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "interrupted passwd" "$OUT"
        expect_in "orphan keyslot 2 (new keyslot of an interrupted operation)" "$OUT"
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        refute key_opens "$WORK/half.key"
        key_opens "$WORK/recovery.key"
        # Another PBKDF at that number: someone else's passphrase, kept.
        cryptsetup luksAddKey --batch-mode --pbkdf argon2id --pbkdf-force-iterations 5 --pbkdf-memory 32768 \
                --pbkdf-parallel 1 --key-file "$WORK/recovery.key" --new-key-slot 2 "$WORK/disk.img" "$WORK/half.key"
        # (A marker of another open operation: the first one's is over, so replaying it would decide nothing.)
        python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); [m.pop(k) for k in ("nonce","mac")]; json.dump(m,open(sys.argv[1],"w"))' \
                "$WORK/marker.json"
        sign_marker "$WORK/marker.json" "$WORK/disk.img"
        cryptsetup token import --json-file "$WORK/marker.json" "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        expect_in "Keeping keyslot 2" "$ERR"
        key_opens "$WORK/half.key"
        key_opens "$WORK/recovery.key"
        pin_opens "$WORK/pin"
}

# The review's attack: a planted "committed" passwd marker whose old keyslot
# is the recovery passphrase's (0) and whose new keyslot is the token's, with
# that keyslot's PBKDF copied in. Unsigned, or signed and then edited, it
# destroys nothing, in cleanup and in any lifecycle command; only a marker
# signed with this machine's key (a real interrupted passwd) is completed.
plant_passwd_marker() {
        python3 - "$WORK/disk.img" "$WORK/marker.json" "$1" <<'PY'
import json, subprocess, sys
meta = json.loads(subprocess.run(["cryptsetup", "luksDump", "--dump-json-metadata", sys.argv[1]],
                                 check=True, capture_output=True, text=True).stdout)
new = [t for t in meta["tokens"].values() if t["type"] == "tpmguard"][0]["keyslots"][0]
kdf = meta["keyslots"][new]["kdf"]
m = {"type": "tpmguard-pending", "keyslots": [], "version": 1, "operation": "passwd",
     "old_keyslot": int(sys.argv[3]), "new_keyslot": int(new), "committed": True,
     "pbkdf": {"type": kdf["type"], "iterations": kdf.get("iterations", kdf.get("time", 0)),
               "memory": kdf.get("memory", 0), "parallel": kdf.get("cpus", 0)}}
json.dump(m, open(sys.argv[2], "w"))
PY
}

keyslot0_active() { cryptsetup luksDump "$WORK/disk.img" | grep -q '^  0: luks2'; }

test_case planted_passwd_marker_destroys_nothing
planted_passwd_marker_destroys_nothing() {
        setup_enrolled
        keyslot0_active
        # Unsigned: status says so, cleanup removes only the marker.
        plant_passwd_marker 0
        cryptsetup token import --json-file "$WORK/marker.json" "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "UNAUTHENTICATED pending passwd marker" "$OUT"
        refute_in "orphan keyslot 0" "$OUT"
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        expect_in "has no MAC" "$ERR"
        expect_in "names keyslots 0 (old) and 1 (new)" "$ERR"
        keyslot0_active
        key_opens "$WORK/recovery.key"
        refute grep -q tpmguard-pending <(cryptsetup luksDump "$WORK/disk.img")
        # Unsigned, then a lifecycle command: the same.
        cryptsetup token import --json-file "$WORK/marker.json" "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" rotate --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "has no MAC" "$ERR"
        keyslot0_active
        key_opens "$WORK/recovery.key"
        pin_opens "$WORK/pin"
        # Signed with this machine's key for keyslot 3, then edited to name keyslot 0: the MAC fails.
        plant_passwd_marker 3
        sign_marker "$WORK/marker.json" "$WORK/disk.img"
        sed -i 's/"old_keyslot": 3/"old_keyslot": 0/' "$WORK/marker.json"
        grep -q '"old_keyslot": 0' "$WORK/marker.json"
        cryptsetup token import --json-file "$WORK/marker.json" "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "UNAUTHENTICATED pending passwd marker" "$OUT"
        expect_exit 0 "$TPMGUARD" passwd "${FAST[@]}" --pin-file "$WORK/pin" --key-slot 0 \
                --new-passphrase-file "$WORK/new.pass" "$WORK/disk.img"
        expect_in "has a MAC that does not verify" "$ERR"
        expect_in "replaces keyslot 0" "$OUT"
        printf 'a new passphrase' >"$WORK/new.key"
        key_opens "$WORK/new.key"
        # Signed with this machine's key (what a real interrupted passwd leaves): it is completed, and
        # its old keyslot goes. The MAC alone decides; without it the checks above would prove nothing.
        new_slot=$(sed -n 's/.*keyslot \([0-9]*\) replaces keyslot 0.*/\1/p' <<<"$OUT")
        [ -n "$new_slot" ]
        plant_passwd_marker "$new_slot"
        sign_marker "$WORK/marker.json" "$WORK/disk.img"
        cryptsetup token import --json-file "$WORK/marker.json" "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "interrupted passwd" "$OUT"
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        refute key_opens "$WORK/new.key"
        pin_opens "$WORK/pin"
}

# Replay (red-team review): a marker that carries this machine's MAC was
# captured from the header while a passwd ran (or left there by a crash),
# and is planted again later, after another passwd has put the recovery
# passphrase back into the keyslot the old marker names as "old". The MAC
# still verifies (same volume, same fields), so an authentic-but-stale
# marker must not destroy that keyslot: only a marker of an operation this
# machine still has open directs anything.
test_case replayed_passwd_marker_destroys_nothing
replayed_passwd_marker_destroys_nothing() {
        [ "${TPMGUARD_FAULT_INJECTION_BUILD:-}" = true ] || { echo "# needs -Dfault_injection=true to capture a real marker"; return 0; }
        local n
        setup_enrolled
        printf 'second passphrase\n' >"$WORK/second.pass"
        printf 'second passphrase' >"$WORK/second.key"
        printf 'a new passphrase' >"$WORK/new.key"
        # The point at which passwd has committed (marker "committed": true on disk, old keyslot not yet gone).
        cp "$WORK/disk.img" "$WORK/trace.img"
        n=$(TPMGUARD_FAULT_TRACE=1 "$TPMGUARD" passwd "${FAST[@]}" --pin-file "$WORK/pin" \
                --new-passphrase-file "$WORK/new.pass" "$WORK/trace.img" 2>&1 >/dev/null |
                sed -n 's/^fault-injection: point \([0-9]*\) (after-commit)$/\1/p')
        [ -n "$n" ]
        rm -f "$WORK/trace.img"
        expect_exit 99 env TPMGUARD_FAULT_INJECT_AT="$n" "$TPMGUARD" passwd "${FAST[@]}" --pin-file "$WORK/pin" \
                --new-passphrase-file "$WORK/new.pass" "$WORK/disk.img"
        tpm_flush_contexts
        # What the attacker reads from the header: the committed marker (old keyslot 0, new keyslot 2).
        python3 - "$WORK/disk.img" "$WORK/captured.json" <<'PY'
import json, subprocess, sys
meta = json.loads(subprocess.run(["cryptsetup", "luksDump", "--dump-json-metadata", sys.argv[1]],
                                 check=True, capture_output=True, text=True).stdout)
m = [t for t in meta["tokens"].values() if t["type"] == "tpmguard-pending"][0]
assert m["committed"] and m["old_keyslot"] == 0 and m["new_keyslot"] == 2 and m.get("mac"), m
m["keyslots"] = []
json.dump(m, open(sys.argv[2], "w"))
PY
        # The owner's next command completes it: keyslot 0 goes, the new passphrase is in keyslot 2.
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        refute key_opens "$WORK/recovery.key"
        key_opens "$WORK/new.key"
        # Later, another passwd: the passphrase moves to the free keyslot 0.
        expect_exit 0 "$TPMGUARD" passwd "${FAST[@]}" --pin-file "$WORK/pin" --key-slot 2 \
                --new-passphrase-file "$WORK/second.pass" "$WORK/disk.img"
        expect_in "keyslot 0 replaces keyslot 2" "$OUT"
        key_opens "$WORK/second.key"
        # The replay: the captured marker again, then any tpmguard command.
        cryptsetup token import --json-file "$WORK/captured.json" "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        key_opens "$WORK/second.key"
        keyslot0_active
        pin_opens "$WORK/pin"
        refute grep -q tpmguard-pending <(cryptsetup luksDump "$WORK/disk.img")
}

run_cases
