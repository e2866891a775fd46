#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# tpmguard migrate against tokens made by the real systemd-cryptenroll and
# clevis luks bind (tests/integration/lib.sh: peer_*): authorized by the
# recovery passphrase only; afterwards the recovery passphrase opens, the new
# tpmguard token unlocks through the plugin and the real cryptsetup, the old
# token is gone, and a second audit reports nothing exposed. The old keyslot
# goes only when this run proved it the old token's (systemd's own plugin
# opened exactly it with the token's secret); otherwise (clevis, a PIN not
# given, an edited token) it is kept, with the command to remove it.
# --keep-old keeps the old token (still exposed); refusals change nothing.
# Crash safety is in test-fault-injection.sh.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup cryptsetup python3 systemd-cryptenroll clevis clevis-luks-bind jose tpm2_flushcontext unshare
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"
# Under the sanitizer pass: systemd 252's plugin, which migrate loads to prove
# the old keyslot, leaks inside its own code (tests/integration/lsan-peers.supp).
if [ -n "${TPMGUARD_ASAN_RUNTIME:-}" ]; then
        export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}print_suppressions=0:suppressions=$TPMGUARD_SRC/tests/integration/lsan-peers.supp"
fi

token_types() { cryptsetup luksDump "$1" | sed -n '/^Tokens:/,/^Digests:/s/^  \([0-9]*\): \(.*\)$/\1:\2/p' | tr '\n' ' '; }
keyslots() { cryptsetup luksDump "$1" | sed -n '/^Keyslots:/,/^Tokens:/s/^  \([0-9]*\): luks2$/\1/p' | tr '\n' ' '; }
pin_unlocks() {
        with_plugin cryptsetup open --test-passphrase --token-only --token-type tpmguard "$1" <"$WORK/pin" >/dev/null 2>&1
}
expect_eq() {
        [ "$1" = "$2" ] || { echo "# expected \"$2\", got \"$1\"${3:+ ($3)}" >&2; return 1; }
}
setup_peers() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
}
migrate() {
        "$TPMGUARD" migrate --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" "$@"
}

test_case migrate_systemd_tpm2
migrate_systemd_tpm2() {
        setup_peers
        peer_systemd_enroll "$WORK/disk.img" 1234
        expect_eq "$(token_types "$WORK/disk.img")" "0:systemd-tpm2 "
        expect_exit 21 "$TPMGUARD" audit "$WORK/disk.img"
        expect_exit 0 migrate --token 0 --old-pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "replaces systemd-tpm2 token 0; removed token 0 and keyslot 1" "$OUT"
        # The same PIN for both: it crossed the bus in sessions salted to a key nobody verified.
        expect_in "The new PIN is the old token's" "$ERR"
        # Token 0 and keyslot 1 (systemd's) are gone; the new token and keyslot were taken before they were freed.
        expect_eq "$(token_types "$WORK/disk.img")" "1:tpmguard "
        expect_eq "$(keyslots "$WORK/disk.img")" "0 2 "
        recovery_opens "$WORK/disk.img"
        pin_unlocks "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" audit "$WORK/disk.img"
        expect_in "Nothing exposed." "$OUT"
}

# A systemd-tpm2 token without a PIN: the proof needs nothing from the owner.
test_case migrate_systemd_tpm2_no_pin
migrate_systemd_tpm2_no_pin() {
        setup_peers
        peer_systemd_enroll "$WORK/disk.img" ""
        expect_exit 0 migrate --token 0 "$WORK/disk.img"
        expect_in "replaces systemd-tpm2 token 0; removed token 0 and keyslot 1" "$OUT"
        expect_eq "$(keyslots "$WORK/disk.img")" "0 2 "
        recovery_opens "$WORK/disk.img"
        pin_unlocks "$WORK/disk.img"
}

# A PIN token and no old PIN (no --old-pin-file, no terminal): nothing proves the keyslot, so it stays.
test_case migrate_systemd_tpm2_without_old_pin_keeps_keyslot
migrate_systemd_tpm2_without_old_pin_keeps_keyslot() {
        setup_peers
        peer_systemd_enroll "$WORK/disk.img" 1234
        expect_exit 0 migrate --token 0 "$WORK/disk.img" </dev/null
        expect_in "removed token 0, kept keyslot 1: the old token named it, but it could not be proven" "$OUT"
        expect_in "cryptsetup luksKillSlot $WORK/disk.img 1" "$OUT"
        expect_in "has a PIN and none was given" "$ERR"
        # The kept keyslot is labelled (highest free token id), so audit keeps reporting it exposed.
        expect_eq "$(token_types "$WORK/disk.img")" "1:tpmguard 30:tpmguard-kept "
        expect_eq "$(keyslots "$WORK/disk.img")" "0 1 2 "
        pin_unlocks "$WORK/disk.img"
        expect_exit 21 "$TPMGUARD" audit --json "$WORK/disk.img"
        expect_in '"kind": "kept-unproven"' "$OUT"
        expect_in "\"next_step\": \"if no passphrase or recovery key of yours opens keyslot 1: cryptsetup luksKillSlot $WORK/disk.img 1; then tpmguard cleanup $WORK/disk.img\"" "$OUT"
        # Done as it says: the label goes with its keyslot, and nothing is exposed.
        cryptsetup luksKillSlot --batch-mode "$WORK/disk.img" 1
        expect_exit 0 "$TPMGUARD" status --json "$WORK/disk.img"
        expect_in "kept-keyslot label without a keyslot" "$OUT"
        expect_exit 0 "$TPMGUARD" cleanup "$WORK/disk.img"
        expect_eq "$(token_types "$WORK/disk.img")" "1:tpmguard "
        expect_exit 0 "$TPMGUARD" audit "$WORK/disk.img"
        expect_in "Nothing exposed." "$OUT"
        recovery_opens "$WORK/disk.img"
        pin_unlocks "$WORK/disk.img"
}

# clevis: nothing here can run its pin to prove which keyslot its secret opens; the keyslot stays.
test_case migrate_clevis
migrate_clevis() {
        setup_peers
        peer_clevis_bind "$WORK/disk.img"
        expect_eq "$(token_types "$WORK/disk.img")" "0:clevis "
        expect_exit 0 migrate --token 0 "$WORK/disk.img"
        expect_in "replaces clevis token 0; removed token 0, kept keyslot 1: the old token named it" "$OUT"
        expect_in "cannot run the clevis pin" "$ERR"
        expect_eq "$(token_types "$WORK/disk.img")" "1:tpmguard 30:tpmguard-kept "
        expect_eq "$(keyslots "$WORK/disk.img")" "0 1 2 "
        recovery_opens "$WORK/disk.img"
        pin_unlocks "$WORK/disk.img"
        # clevis's secret crossed the bus in clear at every unlock and still opens keyslot 1: exposed until
        # the owner removes it (the red team found audit calling this volume safe).
        expect_exit 21 "$TPMGUARD" audit --json "$WORK/disk.img"
        expect_in '"type": "tpmguard-kept"' "$OUT"
        expect_in "clevis's tpm2 pin sent the sealed JWK in clear" "$OUT"
}

# Both peers on one volume, one after the other: the audit's next steps, run as given.
test_case migrate_both_as_audit_says
migrate_both_as_audit_says() {
        local step
        setup_peers
        peer_systemd_enroll "$WORK/disk.img" 1234
        peer_clevis_bind "$WORK/disk.img"
        expect_exit 21 "$TPMGUARD" audit --json "$WORK/disk.img"
        for step in $(python3 -c 'import json,sys; a=json.load(sys.stdin)
for t in a["volumes"][0]["tokens"]: print(t["next_step"].split()[3])' <<<"$OUT"); do
                expect_exit 0 migrate --token "$step" --old-pin-file "$WORK/pin" "$WORK/disk.img"
        done
        # systemd's keyslot was proven and went; clevis's is kept, labelled, and audit names the next step.
        expect_eq "$(token_types "$WORK/disk.img")" "0:tpmguard 2:tpmguard 30:tpmguard-kept "
        expect_exit 21 "$TPMGUARD" audit --json "$WORK/disk.img"
        step=$(python3 -c 'import json,sys; a=json.load(sys.stdin)
print(*[t["next_step"] for t in a["volumes"][0]["tokens"] if t["type"] == "tpmguard-kept"])' <<<"$OUT")
        [[ $step =~ ^if\ no\ passphrase.*:\ cryptsetup\ luksKillSlot\ ([^ ]+)\ ([0-9]+)\;\ then\ tpmguard\ cleanup\ ([^ ]+)$ ]] ||
                { echo "# unexpected next step: $step" >&2; return 1; }
        recovery_opens "$WORK/disk.img"
        cryptsetup luksKillSlot --batch-mode "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
        expect_exit 0 "$TPMGUARD" cleanup "${BASH_REMATCH[3]}"
        expect_eq "$(token_types "$WORK/disk.img")" "0:tpmguard 2:tpmguard "
        expect_exit 0 "$TPMGUARD" audit "$WORK/disk.img"
        recovery_opens "$WORK/disk.img"
        pin_unlocks "$WORK/disk.img"
}

test_case migrate_keep_old
migrate_keep_old() {
        setup_peers
        peer_systemd_enroll "$WORK/disk.img" ""
        expect_exit 0 migrate --keep-old --token 0 "$WORK/disk.img"
        expect_in "the old token 0 and keyslot 1 were kept (--keep-old)" "$OUT"
        expect_eq "$(token_types "$WORK/disk.img")" "0:systemd-tpm2 1:tpmguard "
        expect_eq "$(keyslots "$WORK/disk.img")" "0 1 2 "
        pin_unlocks "$WORK/disk.img"
        # The old token is still there, and still exposed.
        expect_exit 21 "$TPMGUARD" audit --json "$WORK/disk.img"
        expect_in '"next_step": "tpmguard migrate --token 0' "$OUT"
}

# The header is attacker-editable: a systemd-tpm2 token edited to name another passphrase's keyslot
# never gets that keyslot destroyed (its PBKDF is not the PBKDF2 at 1000 iterations that systemd and
# clevis give their secrets); the token goes, the passphrase keeps opening.
test_case migrate_edited_token_keeps_a_passphrase
migrate_edited_token_keeps_a_passphrase() {
        setup_peers
        printf 'second passphrase' >"$WORK/second.key"
        cryptsetup luksAddKey --batch-mode --pbkdf argon2id --pbkdf-force-iterations 4 --pbkdf-memory 32 \
                --key-file "$WORK/recovery.key" --new-key-slot 1 "$WORK/disk.img" "$WORK/second.key"
        peer_systemd_enroll "$WORK/disk.img" 1234
        cryptsetup token export --token-id 0 "$WORK/disk.img" |
                python3 -c 'import json, sys; t = json.load(sys.stdin); t["keyslots"] = ["1"]; print(json.dumps(t))' \
                >"$WORK/edited.json"
        cryptsetup token import --token-id 0 --token-replace --json-file "$WORK/edited.json" "$WORK/disk.img"
        expect_exit 0 migrate --token 0 --old-pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "removed token 0, kept keyslot 1" "$OUT"
        expect_in "nothing shows it is the old token's" "$ERR"
        cryptsetup open --test-passphrase --key-file "$WORK/second.key" "$WORK/disk.img"
        recovery_opens "$WORK/disk.img"
        pin_unlocks "$WORK/disk.img"
}

# The red team's finding: a systemd-cryptenroll --recovery-key has the very PBKDF (PBKDF2-SHA512, 1000
# iterations) of systemd's TPM keyslots. A header writer points the systemd-tpm2 token at the recovery
# key's keyslot and removes its systemd-recovery label token; migrate, authorized by another passphrase
# and given the right old PIN, must not destroy it: the token's secret opens its own keyslot, not that one.
test_case edited_peer_token_never_destroys_systemd_recovery_key
edited_peer_token_never_destroys_systemd_recovery_key() {
        local rk
        setup_peers
        peer_systemd_enroll "$WORK/disk.img" 1234
        systemd-cryptenroll --unlock-key-file="$WORK/recovery.key" --recovery-key "$WORK/disk.img" >"$WORK/rk.out" 2>&1
        rk=$(grep -oE '([a-z]{8}-){7}[a-z]{8}' "$WORK/rk.out" | head -1)
        [ -n "$rk" ] || { cat "$WORK/rk.out" >&2; return 1; }
        printf '%s' "$rk" >"$WORK/rk"
        expect_eq "$(token_types "$WORK/disk.img")" "0:systemd-tpm2 1:systemd-recovery "
        expect_eq "$(keyslots "$WORK/disk.img")" "0 1 2 "
        cryptsetup open --test-passphrase --key-file "$WORK/rk" --key-slot 2 "$WORK/disk.img"
        "$TPMGUARD_SRC/tests/adversarial/luks2-edit" "$WORK/disk.img" 'tokens.0.keyslots=["2"]'
        cryptsetup token remove --token-id 1 "$WORK/disk.img"
        expect_eq "$(token_types "$WORK/disk.img")" "0:systemd-tpm2 "
        expect_exit 0 migrate --token 0 --old-pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "removed token 0, kept keyslot 2: the old token named it, but it could not be proven" "$OUT"
        expect_in "Keeping keyslot 2" "$ERR"
        expect_eq "$(keyslots "$WORK/disk.img")" "0 1 2 3 "
        cryptsetup open --test-passphrase --key-file "$WORK/rk" --key-slot 2 "$WORK/disk.img"
        recovery_opens "$WORK/disk.img"
        pin_unlocks "$WORK/disk.img"
}

# Refusals change nothing: a wrong passphrase, a token that is not a peer's, no --token, no PIN policy given,
# an old PIN with --keep-old.
test_case migrate_refusals
migrate_refusals() {
        local sum
        setup_peers
        peer_systemd_enroll "$WORK/disk.img" 1234
        sum=$(sha256sum <"$WORK/disk.img")
        printf 'wrong' >"$WORK/wrong.key"
        expect_exit 12 "$TPMGUARD" migrate --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/wrong.key" \
                --token 0 "$WORK/disk.img"
        expect_exit 2 migrate "$WORK/disk.img"
        expect_in "needs the token to replace" "$ERR"
        expect_exit 17 migrate --token 5 "$WORK/disk.img"
        expect_exit 2 migrate --key-slot 3 --token 0 "$WORK/disk.img"
        expect_exit 2 migrate --keep-old --old-pin-file "$WORK/pin" --token 0 "$WORK/disk.img"
        expect_in "--old-pin-file does not apply" "$ERR"
        expect_eq "$(sha256sum <"$WORK/disk.img")" "$sum" "the header changed"
        expect_exit 0 migrate --token 0 "$WORK/disk.img"
        expect_exit 2 migrate --token 1 "$WORK/disk.img"
        expect_in "tpmguard's already" "$ERR"
}

run_cases
