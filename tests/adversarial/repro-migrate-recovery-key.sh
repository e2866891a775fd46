#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Reproduction of an OPEN finding (red-team review, not yet fixed; not
# registered in meson, so it does not fail the suite). Exits 1 while the
# finding is open.
#
# A header writer points the systemd-tpm2 token at the keyslot of a
# systemd-cryptenroll --recovery-key (which systemd gives the same minimal
# PBKDF2-SHA512 at 1000 iterations as its TPM keyslots) and removes the
# systemd-recovery label token. 'tpmguard migrate --token 0', authorized by
# another passphrase, then destroys the recovery key's keyslot as "the old
# token's" (tg_luks_keyslot_has_peer_pbkdf cannot tell them apart), and the
# real systemd-tpm2 keyslot stays, unreferenced and still exposed.
#
# Run from a build directory:
#   TPMGUARD=$PWD/cli/tpmguard TPMGUARD_SRC=.. TPMGUARD_PLUGIN=$PWD/plugin/libcryptsetup-token-tpmguard.so \
#       ../tests/adversarial/repro-migrate-recovery-key.sh
. "$TPMGUARD_SRC/tests/integration/lib.sh"
require_tools swtpm swtpm_setup cryptsetup python3 systemd-cryptenroll tpm2_flushcontext
token_types() { cryptsetup luksDump "$1" | sed -n '/^Tokens:/,/^Digests:/s/^  \([0-9]*\): \(.*\)$/\1:\2/p' | tr '\n' ' '; }
keyslots() { cryptsetup luksDump "$1" | sed -n '/^Keyslots:/,/^Tokens:/s/^  \([0-9]*\): luks2$/\1/p' | tr '\n' ' '; }
test_case migrate_keeps_systemd_recovery_key
migrate_keeps_systemd_recovery_key() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        peer_systemd_enroll "$WORK/disk.img" 1234
        systemd-cryptenroll --unlock-key-file="$WORK/recovery.key" --recovery-key "$WORK/disk.img" >"$WORK/rk.out" 2>&1
        rk=$(grep -oE '([a-z]{8}-){7}[a-z]{8}' "$WORK/rk.out" | head -1)
        echo "# recovery key: $rk; tokens: $(token_types "$WORK/disk.img"); keyslots: $(keyslots "$WORK/disk.img")"
        printf '%s' "$rk" >"$WORK/rk"
        cryptsetup open --test-passphrase --key-file "$WORK/rk" "$WORK/disk.img" && echo "# rk opens"
        cryptsetup luksDump "$WORK/disk.img" | grep -A8 '^  2: luks2' | grep -E 'PBKDF|Iterations|Hash' | sed 's/^/# /'
        # evil maid: systemd-tpm2 token now names the recovery key's keyslot; its label token goes
        "$TPMGUARD_SRC/tests/adversarial/luks2-edit" "$WORK/disk.img" 'tokens.0.keyslots=["2"]'
        cryptsetup token remove --token-id 1 "$WORK/disk.img"
        echo "# after edit: tokens: $(token_types "$WORK/disk.img")"
        "$TPMGUARD" migrate --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" --token 0 "$WORK/disk.img" 2>&1 | sed 's/^/# /'
        echo "# after migrate: tokens: $(token_types "$WORK/disk.img"); keyslots: $(keyslots "$WORK/disk.img")"
        if cryptsetup open --test-passphrase --key-file "$WORK/rk" "$WORK/disk.img"; then echo "# rk still opens"; else echo "# RECOVERY KEY DESTROYED"; return 1; fi
}
run_cases
