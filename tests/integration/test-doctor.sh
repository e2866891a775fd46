#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: `tpmguard doctor` against a real swtpm. The three states
# that matter most (fresh TPM, provisioned, TPM reset after boot) must get
# three different, correct explanations; then PCR drift, a missing kernel
# null_name, crypttab and the initrd check.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_createprimary tpm2_pcrextend cryptsetup cpio openssl

# Doctor on the test's own volume list and initrd only, never the host's.
doctor() {
        "$TPMGUARD" doctor --crypttab "$WORK/crypttab" --initrd "${INITRD:-$WORK/no-initrd}" "$@"
}

# A check's field from doctor --json: json_field CHECK FIELD (first match).
json_field() {
        python3 -c '
import json, sys
report = json.load(open(sys.argv[1]))
for c in report["checks"]:
    if c["check"] == sys.argv[2]:
        v = c[sys.argv[3]]
        print("" if v is None else v)
        break
else:
    sys.exit("no check " + sys.argv[2])' "$WORK/doctor.json" "$1" "$2"
}

report_field() {
        python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))[sys.argv[2]]; print("" if v is None else v)' \
                "$WORK/doctor.json" "$1"
}

setup_enrolled() {
        setup_enrolled_common
        : >"$WORK/crypttab"
}

# An initrd (gzip'ed newc cpio, as initramfs-tools makes) holding what the
# boot needs, less the paths given as arguments; an argument +PATH adds that
# file of the host at the same path.
make_initrd() {
        local root="$WORK/initrd-root" f
        rm -rf "$root"
        mkdir -p "$root/usr/sbin" "$root/usr/lib/x86_64-linux-gnu/cryptsetup" "$root/$WORK/state"
        cp "$TPMGUARD" "$root/usr/sbin/tpmguard"
        cp "$TPMGUARD_PLUGIN" "$root/usr/lib/x86_64-linux-gnu/cryptsetup/"
        cp "$WORK/state/ek-signing-key.json" "$root/$WORK/state/"
        [ ! -f "$WORK/state/volumes.json" ] || cp "$WORK/state/volumes.json" "$root/$WORK/state/"
        for f in "$@"; do
                case $f in
                +*) cp "${f#+}" "$root/${f#+}" ;;
                *) rm -f "$root/$f" ;;
                esac
        done
        # INITRD_EXTRA: paths added as empty files (what other modules put in).
        for f in ${INITRD_EXTRA:-}; do mkdir -p "$root/$(dirname "$f")"; : >"$root/$f"; done
        (cd "$root" && find . | cpio -o -H newc 2>/dev/null) | gzip >"$WORK/initrd.img"
        INITRD="$WORK/initrd.img"
}

test_case fresh_tpm_says_provision
fresh_tpm_says_provision() {
        tpm_setup
        : >"$WORK/crypttab"
        expect_exit 4 doctor
        expect_in "[FAIL] provisioning" "$OUT"
        expect_in "Run 'tpmguard provision'" "$OUT"
        expect_in "Most severe: not provisioned (exit code 4)" "$OUT"
        expect_in "[ ok ] tpm" "$OUT"
        expect_in "[skip] verification: Not run: not provisioned" "$OUT"
        doctor --json >"$WORK/doctor.json" || true
        [ "$(report_field verdict)" = problems ]
        [ "$(report_field most_severe)" = not-provisioned ]
        [ "$(report_field exit_code)" = 4 ]
        [ "$(json_field provisioning status)" = problem ]
        expect_in "tpmguard provision" "$(json_field provisioning next_step)"
        [ "$(json_field verification status)" = skipped ]
        [ "$(json_field kernel status)" = ok ]
}

test_case provisioned_all_fine
provisioned_all_fine() {
        setup_enrolled
        make_initrd
        expect_exit 0 doctor "$WORK/disk.img"
        expect_in "Everything is fine." "$OUT"
        expect_in "[ ok ] verification: TPM verified" "$OUT"
        expect_in "[ ok ] volume $WORK/disk.img token 0: Keyslot 1, sha256 PCRs 7, PIN" "$OUT"
        expect_in "[ ok ] ek-certificate" "$OUT"
        expect_in "[ ok ] initrd" "$OUT"
        if grep -q '^\[\(FAIL\|WARN\)\]' <<<"$OUT"; then echo "# a problem or warning on a good system" >&2; return 1; fi
        expect_exit 0 doctor --json "$WORK/disk.img"
        printf '%s\n' "$OUT" >"$WORK/doctor.json"
        [ "$(report_field verdict)" = ok ]
        [ "$(report_field exit_code)" = 0 ]
        [ -z "$(report_field most_severe)" ]
        [ "$(json_field volume status)" = ok ]
}

test_case reset_after_boot_says_interposer
reset_after_boot_says_interposer() {
        setup_enrolled
        "$FIXTURE" reset "$WORK/tpm"
        expect_exit 3 doctor "$WORK/disk.img"
        expect_in "[FAIL] verification" "$OUT"
        expect_in "interposer or TPM reset suspected" "$OUT"
        expect_in "reset since boot" "$OUT"
        expect_in "unlock with the recovery passphrase" "$OUT"
        # Unverified TPM: the PCR policy is not read from it.
        expect_in "PCR policy not checked: the TPM is not verified" "$OUT"
        doctor --json "$WORK/disk.img" >"$WORK/doctor.json" || true
        [ "$(report_field most_severe)" = interposer ]
        [ "$(json_field verification error)" = interposer ]
}

test_case three_states_three_explanations
three_states_three_explanations() {
        tpm_setup
        : >"$WORK/crypttab"
        doctor --json >"$WORK/fresh.json" || true
        "$TPMGUARD" provision >/dev/null
        doctor --json >"$WORK/good.json" || true
        "$FIXTURE" reset "$WORK/tpm"
        doctor --json >"$WORK/reset.json" || true
        local a b c
        a=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["most_severe"])' "$WORK/fresh.json")
        b=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["most_severe"])' "$WORK/good.json")
        c=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["most_severe"])' "$WORK/reset.json")
        [ "$a/$b/$c" = "not-provisioned/None/interposer" ] || { echo "# got $a/$b/$c" >&2; return 1; }
}

test_case pcr_change_says_reseal
pcr_change_says_reseal() {
        setup_enrolled
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                7:sha256=0000000000000000000000000000000000000000000000000000000000000001
        expect_exit 14 doctor "$WORK/disk.img"
        expect_in "do not satisfy the sealed policy" "$OUT"
        expect_in "tpmguard reseal $WORK/disk.img" "$OUT"
        expect_in "[ ok ] verification" "$OUT"
}

# Issue 29: a "pin" edited to false (format 1, pin_kdf removed, so that it parses) is an
# edited header, not a PCR change to reseal over.
test_case edited_pin_flag_is_not_a_pcr_change
edited_pin_flag_is_not_a_pcr_change() {
        setup_enrolled
        cryptsetup token export --token-id 0 "$WORK/disk.img" >"$WORK/token.json"
        python3 - "$WORK/token.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
t["pin"] = False
t["version"] = 1
t.pop("pin_kdf", None)
json.dump(t, open(sys.argv[1], "w"))
PY
        cryptsetup token remove --token-id 0 "$WORK/disk.img"
        cryptsetup token import --json-file "$WORK/token.json" --token-id 0 "$WORK/disk.img"
        expect_exit 15 doctor "$WORK/disk.img"
        expect_in "\"pin\" field does not match the sealed object: the header was edited" "$OUT"
        refute_in "do not satisfy the sealed policy" "$OUT"
        expect_in "tpmguard reseal $WORK/disk.img" "$OUT"
}

test_case volumes_from_crypttab
volumes_from_crypttab() {
        setup_enrolled
        truncate -s 1M "$WORK/plain.img"
        make_luks "$WORK/other.img"
        cat >"$WORK/crypttab" <<TAB
# a comment, then a blank line

root   $WORK/disk.img   none   luks,discard
swap   $WORK/plain.img  /dev/urandom swap
data   $WORK/other.img  none
TAB
        expect_exit 0 doctor
        expect_in "[ ok ] volume $WORK/disk.img token 0" "$OUT"
        expect_in "[skip] volume $WORK/plain.img: Listed in crypttab but not a LUKS2 volume" "$OUT"
        expect_in "[WARN] volume $WORK/other.img: No tpmguard token" "$OUT"
        expect_in "tpmguard enroll $WORK/other.img" "$OUT"
        echo "broken" >>"$WORK/crypttab"
        expect_exit 2 doctor
        expect_in "crypttab:6" "$OUT"
}

# Issue 32 §3: a guide's tpm2-measure-pcr=yes on a tpmguard volume turns its unlock off (dracut,
# systemd 253+) or is ignored (initramfs-tools); doctor names it, with the reason and the fix.
# The same option on a volume without a tpmguard token is not tpmguard's business.
test_case crypttab_options_named
crypttab_options_named() {
        setup_enrolled
        make_luks "$WORK/other.img"
        cat >"$WORK/crypttab" <<TAB
root   $WORK/disk.img   none   luks,discard,tpm2-measure-pcr=yes,headless=yes
data   $WORK/other.img  none   luks,fixate-volume-key=abc
TAB
        expect_exit 2 doctor
        expect_in "[FAIL] crypttab-options root: crypttab option 'tpm2-measure-pcr=yes'" "$OUT"
        expect_in "Remove 'tpm2-measure-pcr=yes' from the line of root in /etc/crypttab" "$OUT"
        expect_in "[WARN] crypttab-options root: crypttab option 'headless=yes': no PIN is asked" "$OUT"
        refute_in "crypttab-options data" "$OUT"
        # tpm2-measure-pcr=no measures nothing: nothing to name.
        sed -i 's/tpm2-measure-pcr=yes,headless=yes/tpm2-measure-pcr=no/' "$WORK/crypttab"
        expect_exit 0 doctor
        refute_in "crypttab-options" "$OUT"
}

test_case named_device_missing
named_device_missing() {
        setup_enrolled
        expect_exit 17 doctor "$WORK/nonexistent.img"
        expect_in "[FAIL] volume $WORK/nonexistent.img" "$OUT"
}

test_case initrd_without_plugin_or_pin
initrd_without_plugin_or_pin() {
        setup_enrolled
        make_initrd usr/lib/x86_64-linux-gnu/cryptsetup/libcryptsetup-token-tpmguard.so "$WORK/state/ek-signing-key.json"
        expect_exit 17 doctor "$WORK/disk.img"
        expect_in "The initrd lacks the token plugin, the pinned EK signing key" "$OUT"
        expect_in "update-initramfs -u" "$OUT"
        # Bindings on the system but not in the initrd: the initrd would unlock a decoy with a warning.
        make_initrd "$WORK/state/volumes.json"
        expect_exit 17 doctor "$WORK/disk.img"
        expect_in "The initrd lacks the volume bindings" "$OUT"
}

# The initrd sits unencrypted in /boot: root-only secrets of the state
# directory in it are a problem (the lockout password would let anyone with
# the disk reset the DA lockout and guess PINs without limit). And a
# pending-marker key that other users can read is refused, as the lifecycle
# commands refuse it.
test_case initrd_secrets_and_marker_key
initrd_secrets_and_marker_key() {
        setup_enrolled
        [ -s "$WORK/state/lockout-auth" ] || { echo "# provision stored no lockout password" >&2; return 1; }
        make_initrd "+$WORK/state/lockout-auth"
        expect_exit 2 doctor "$WORK/disk.img"
        expect_in "[FAIL] initrd" "$OUT"
        expect_in "carries $WORK/state/lockout-auth" "$OUT"
        expect_in "tpmguard lockout setup" "$OUT"
        expect_in "[ ok ] marker-key" "$OUT"
        head -c 32 /dev/urandom >"$WORK/state/marker.key"
        chmod 0644 "$WORK/state/marker.key"
        expect_exit 2 doctor "$WORK/disk.img"
        expect_in "[FAIL] marker-key" "$OUT"
        expect_in "other users can access it" "$OUT"
        chmod 0600 "$WORK/state/marker.key"
        make_initrd "+$WORK/state/marker.key"
        expect_exit 2 doctor "$WORK/disk.img"
        expect_in "carries $WORK/state/marker.key" "$OUT"
        refute_in "[FAIL] marker-key" "$OUT"
        make_initrd
        expect_exit 0 doctor "$WORK/disk.img"
        expect_in "[ ok ] marker-key $WORK/state/marker.key: The pending-marker key is root-only." "$OUT"
}

# Red-team review: the volume binding is checked by tpmguard's plugin only,
# and systemd-cryptsetup tries every token type after ours refuses a volume.
# An initrd that also carries systemd's TPM2 token plugin (dracut pulls in
# tpm2-tss for any crypttab tpm2-device=) or clevis' tpm2 pin unlocks a decoy
# with a token of that kind sealed to this TPM's PCRs, with no PIN and no
# binding check: doctor says so and how to leave them out.
test_case initrd_with_other_tpm_unlocker
initrd_with_other_tpm_unlocker() {
        setup_enrolled
        make_initrd
        expect_exit 0 doctor "$WORK/disk.img"
        refute_in "initrd-decoy" "$OUT"
        INITRD_EXTRA="usr/lib/x86_64-linux-gnu/cryptsetup/libcryptsetup-token-systemd-tpm2.so" make_initrd
        expect_exit 19 doctor "$WORK/disk.img"
        expect_in "[FAIL] initrd-decoy" "$OUT"
        expect_in "systemd's TPM2 token plugin" "$OUT"
        expect_in "omit_dracutmodules" "$OUT"
        INITRD_EXTRA="usr/bin/clevis-decrypt-tpm2" make_initrd
        expect_exit 19 doctor "$WORK/disk.img"
        expect_in "clevis' tpm2 pin" "$OUT"
}

test_case no_null_name_by_policy
no_null_name_by_policy() {
        setup_enrolled
        rm "$WORK/null_name"
        expect_exit 5 doctor "$WORK/disk.img"
        expect_in "[FAIL] kernel" "$OUT"
        expect_in "CONFIG_TCG_TPM2_HMAC=y" "$OUT"
        write_config prefer
        expect_exit 0 doctor "$WORK/disk.img"
        expect_in "[WARN] kernel" "$OUT"
        expect_in "boot anchor), not before it" "$OUT"
        expect_in "Reset anchor: boot" "$OUT"
        expect_in "No problems; " "$OUT"
        # Without the systemd-sleep hook every resume would be an alarm: said (this build's path).
        if [ ! -x "$(pkg-config --variable=systemdsleepdir systemd 2>/dev/null || echo /lib/systemd/system-sleep)/tpmguard" ]; then
                expect_in "[WARN] sleep" "$OUT"
                expect_in "system-sleep/tpmguard" "$OUT"
        fi
}

# A TPM without a resource manager (swtpm here, /dev/tpm0 on a machine)
# whose object slots are taken by what an earlier run left loaded: doctor
# says so, and the verification names the cause, not a bare "TPM error".
test_case tpm_object_memory_full
tpm_object_memory_full() {
        setup_enrolled
        local i
        for i in 1 2 3 4 5 6; do
                TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_createprimary -C o -c "$WORK/left$i.ctx" >/dev/null 2>&1 || break
        done
        expect_exit 7 doctor "$WORK/disk.img"
        expect_in "[FAIL] tpm-memory" "$OUT"
        expect_in "tpm2_flushcontext" "$OUT"
        expect_exit 7 "$TPMGUARD" verify
        expect_in "memory for loaded objects or sessions is full" "$ERR"
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_flushcontext -t >/dev/null
        expect_exit 0 doctor "$WORK/disk.img"
        refute_in "tpm-memory" "$OUT"
        expect_exit 0 "$TPMGUARD" verify
}

test_case ek_certificate_chain_rechecked
ek_certificate_chain_rechecked() {
        setup_enrolled
        # The swtpm CA of the configuration anchors the chain, and doctor names that root.
        expect_exit 0 doctor "$WORK/disk.img"
        expect_in "chains to the" "$OUT"
        expect_in "$(openssl x509 -in "$TPMGUARD_TEST_CA_ROOT" -noout -fingerprint -sha256 | cut -d= -f2 |
                tr -d : | tr 'A-F' 'a-f')" "$OUT"
        # Another manufacturer's CA: the certificate no longer chains.
        "$FIXTURE" start "$WORK/other" >/dev/null
        sed -i "s|^ek_ca = .*|ek_ca = $WORK/other/ca/bundle.pem|" "$WORK/tpmguard.conf"
        expect_exit 8 doctor "$WORK/disk.img"
        expect_in "[FAIL] ek-certificate" "$OUT"
        # The default store (TPM manufacturers' CAs): swtpm's private CA is none of them.
        sed -i '/^ek_ca = /d' "$WORK/tpmguard.conf"
        expect_exit 8 doctor "$WORK/disk.img"
        expect_in "[FAIL] ek-certificate" "$OUT"
}

test_case tpm_unreachable
tpm_unreachable() {
        tpm_setup
        : >"$WORK/crypttab"
        expect_exit 6 doctor --tcti "swtpm:path=$WORK/nonexistent.sock"
        expect_in "[FAIL] tpm" "$OUT"
        expect_in "firmware setup" "$OUT"
}

test_case progress_only_on_a_terminal
progress_only_on_a_terminal() {
        tpm_setup
        command -v script >/dev/null || { echo "# script (bsdutils) missing: case not run" >&2; return 0; }
        # On a terminal: a progress line per long step, erased before the result.
        script -qec "'$TPMGUARD' provision" /dev/null >"$WORK/tty.out" 2>&1
        expect_in "Provisioning: creating the EK signing key" "$(cat "$WORK/tty.out")"
        expect_in "Provisioning: proving the EK against its certificate" "$(cat "$WORK/tty.out")"
        expect_in "Provisioning: the lockout hierarchy" "$(cat "$WORK/tty.out")"
        grep -q $'\r\e\[KProvisioned\.' "$WORK/tty.out"
        # Not on a terminal (logs, pipes, the plugin): no progress at all.
        expect_exit 0 "$TPMGUARD" verify
        if grep -q "Verifying the TPM" <<<"$ERR$OUT"; then echo "# progress without a terminal" >&2; return 1; fi
        [ -z "$ERR" ] || { echo "# unexpected stderr: $ERR" >&2; return 1; }
}

run_cases
