#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# tpmguard audit against tokens made by the real tools: systemd-cryptenroll
# of the installed systemd (--tpm2-device naming the test swtpm) and
# clevis luks bind with its tpm2 pin (TPM2TOOLS_TCTI), and tpmguard's own
# tokens under kernel_null_name = required and prefer. Every verdict is
# checked in the JSON output and in the human one, and the exit status
# (21 when something is exposed, 0 when nothing is).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup cryptsetup python3 systemd-cryptenroll clevis clevis-luks-bind jose tpm2_changeauth \
        tpm2_flushcontext tpm2_readpublic tpm2_getcap

# One field of the audit's JSON ($WORK/audit.json), by a python expression over a.
field() {
        python3 -c "import json,sys; a=json.load(open(sys.argv[1])); print($1)" "$WORK/audit.json"
}
# The verdicts of token $1 of the first volume, as "passive active reset header".
verdicts() {
        field "' '.join(t['verdicts'][k]['exposed'] for t in a['volumes'][0]['tokens'] if t['token'] == $1
                for k in ('passive_sniffer', 'active_interposer', 'tpm_reset', 'header_edit'))"
}
audit_json() {
        local want=$1; shift
        expect_exit "$want" "$TPMGUARD" audit --json "$@"
        printf '%s\n' "$OUT" >"$WORK/audit.json"
}
expect_eq() {
        [ "$1" = "$2" ] || { echo "# expected \"$2\", got \"$1\"${3:+ ($3)}" >&2; return 1; }
}

test_case audit_systemd_and_clevis
audit_systemd_and_clevis() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        peer_systemd_enroll "$WORK/disk.img" 1234
        peer_clevis_bind "$WORK/disk.img"
        audit_json 21 "$WORK/disk.img"
        expect_eq "$(field "a['exposed']")" True
        expect_eq "$(field "[t['type'] for t in a['volumes'][0]['tokens']]")" "['systemd-tpm2', 'clevis']"
        # systemd 252 with a PIN: nothing for a recording; an interposer that substitutes the primary is
        # in the session (the PIN falls to an offline search); after a reset the PIN is still needed;
        # a decoy volume with its UUID can ask for the PIN.
        # systemd >= 255 (Debian 13) pins the SRK in the token (tpm2_srk): here it is the real
        # one, which the pinned EK signing key certifies, so the interposer verdict is "no".
        if cryptsetup token export --token-id 0 "$WORK/disk.img" | grep -q '"tpm2_srk"'; then
                expect_eq "$(verdicts 0)" "no no no yes" "systemd-tpm2 with PIN, pinned SRK certified"
        else
                expect_eq "$(verdicts 0)" "no yes no yes" "systemd-tpm2 with PIN"
                expect_in "never verifies" "$(field "a['volumes'][0]['tokens'][0]['verdicts']['active_interposer']['reason']")"
                expect_eq "$(field "a['volumes'][0]['tokens'][0]['next_step']")" "tpmguard migrate --token 0 $WORK/disk.img"
        fi
        expect_eq "$(field "a['volumes'][0]['tokens'][0]['pin']")" True
        # clevis tpm2: the JWK in clear on the bus, no PIN: exposed to all four.
        expect_eq "$(verdicts 1)" "yes yes yes yes" "clevis tpm2"
        expect_in "in clear" "$(field "a['volumes'][0]['tokens'][1]['verdicts']['passive_sniffer']['reason']")"
        expect_eq "$(field "[(k['keyslot'], k['kind'], k['tokens']) for k in a['volumes'][0]['keyslots']]")" \
                "[(0, 'passphrase', []), (1, 'token', [0]), (2, 'token', [1])]"
        expect_eq "$(field "a['machine']['verification']")" verified
        expect_eq "$(field "a['machine']['dictionary_attack']['lockout_auth_set']")" True

        expect_exit 21 "$TPMGUARD" audit "$WORK/disk.img"
        expect_in "token 0 systemd-tpm2 (keyslot 1)" "$OUT"
        expect_in "token 1 clevis (keyslot 2): clevis tpm2 pin: sha256 PCRs 7, no PIN — EXPOSED" "$OUT"
        grep -qE '^    passive sniffer +YES +clevis' <<<"$OUT"
        grep -qE '^    passive sniffer +no +systemd salts' <<<"$OUT"
        expect_in "next step: tpmguard migrate --token 1 $WORK/disk.img" "$OUT"
        expect_in "keyslots: 0(passphrase) 1(token) 2(token)" "$OUT"
        expect_in "EXPOSED: 2 tokens (exit status 21)." "$OUT"
}

test_case audit_systemd_without_pin
audit_systemd_without_pin() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        peer_systemd_enroll "$WORK/disk.img" ""
        audit_json 21 "$WORK/disk.img"
        expect_eq "$(verdicts 0)" "no yes yes yes" "systemd-tpm2 without PIN"
        expect_eq "$(field "a['volumes'][0]['tokens'][0]['pin']")" False
        expect_in "no PIN" "$(field "a['volumes'][0]['tokens'][0]['verdicts']['tpm_reset']['reason']")"
}

# systemd >= 255 pins the SRK it salts to (tpm2_srk, an Esys_TR_Serialize()d ESYS_TR). systemd 252
# writes none, so the token gets one here: tpm2_readpublic -t serializes the TPM's SRK the same way.
# Certified by the pinned EK signing key it is this TPM's key; a blob naming another key is not.
test_case audit_systemd_pinned_srk
audit_systemd_pinned_srk() {
        local id
        setup_enrolled    # tpmguard's seal made the SRK at 0x81000001
        peer_systemd_enroll "$WORK/disk.img" 1234
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_readpublic -c 0x81000001 -t "$WORK/srk.tr" >/dev/null
        id=$(cryptsetup luksDump "$WORK/disk.img" | awk '/^  [0-9]+: systemd-tpm2$/ {sub(":", "", $1); print $1}')
        cryptsetup token export --token-id "$id" "$WORK/disk.img" >"$WORK/token.json"
        # good: the SRK as it is; public: a coordinate of its public area changed (another key);
        # name: the blob's name changed (it no longer matches what the HMAC is computed over).
        python3 - "$WORK" <<'PY'
import base64, json, sys
w = sys.argv[1]
t = json.load(open(w + "/token.json"))
blob = open(w + "/srk.tr", "rb").read()
for kind, offset in (("good", None), ("public", len(blob) - 8), ("name", 10)):
    b = bytearray(blob)
    if offset is not None:
        b[offset] ^= 1
    t["tpm2_srk"] = base64.b64encode(bytes(b)).decode()
    json.dump(t, open("%s/%s.json" % (w, kind), "w"))
PY
        cryptsetup token import --token-id "$id" --token-replace --json-file "$WORK/good.json" "$WORK/disk.img"
        audit_json 21 "$WORK/disk.img"
        expect_eq "$(verdicts "$id")" "no no no yes" "systemd-tpm2 with a certified SRK"
        expect_in "certified by the pinned EK signing key" \
                "$(field "a['volumes'][0]['tokens'][$id]['verdicts']['active_interposer']['reason']")"
        expect_in "pinned SRK" "$(field "a['volumes'][0]['tokens'][$id]['protection']")"
        for kind in public name; do
                cryptsetup token import --token-id "$id" --token-replace --json-file "$WORK/$kind.json" "$WORK/disk.img"
                audit_json 21 "$WORK/disk.img"
                expect_eq "$(verdicts "$id")" "no yes no yes" "systemd-tpm2 pinning another SRK ($kind)"
                expect_in "SRK not certified" \
                        "$(field "a['volumes'][0]['tokens'][$id]['verdicts']['active_interposer']['reason']")"
        done
        # The failed authorizations cost no DA try (the SRK is noDA; anything else is refused before).
        expect_eq "$(( $(da_counter) ))" 0
}

# tpmguard's own tokens: with a PIN, a held lockout password and a bound volume nothing is exposed.
test_case audit_tpmguard_required
audit_tpmguard_required() {
        setup_enrolled
        audit_json 0 "$WORK/disk.img"
        expect_eq "$(verdicts 0)" "no no no no" "tpmguard with PIN, kernel anchor"
        expect_eq "$(field "a['exposed']")" False
        expect_eq "$(field "a['complete']")" True
        expect_in "anchor kernel" "$(field "a['volumes'][0]['tokens'][0]['verdicts']['tpm_reset']['reason']")"
        expect_eq "$(field "a['machine']['kernel_null_name_policy']")" required
        expect_exit 0 "$TPMGUARD" audit "$WORK/disk.img"
        expect_in "Nothing exposed." "$OUT"
        expect_in "lockout password: set, held by tpmguard" "$OUT"

        # Without a PIN an active interposer unseals it with commands of its own.
        second_token --no-pin >/dev/null 2>&1
        audit_json 21 "$WORK/disk.img"
        expect_eq "$(verdicts 0)" "no no no no" "the PIN token"
        expect_eq "$(verdicts 1)" "no yes yes yes" "the no-PIN token"
        expect_eq "$(field "a['volumes'][0]['tokens'][1]['pin']")" False

        # Without a lockout password the DA counter can be reset: the PIN token's reset verdict turns.
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_changeauth -c l -p "hex:$(cat "$WORK/state/lockout-auth")" >/dev/null
        audit_json 21 "$WORK/disk.img"
        expect_eq "$(verdicts 0)" "no yes yes no" "the PIN token without a lockout password"
        expect_in "no password" "$(field "a['volumes'][0]['tokens'][0]['verdicts']['tpm_reset']['reason']")"
        expect_eq "$(field "a['machine']['dictionary_attack']['lockout_auth_set']")" False
}

test_case audit_tpmguard_prefer
audit_tpmguard_prefer() {
        setup_enrolled
        write_config prefer
        rm "$WORK/null_name"
        audit_json 0 "$WORK/disk.img"
        expect_eq "$(field "a['machine']['anchor']")" boot
        expect_eq "$(field "a['machine']['kernel_null_name']")" absent
        expect_eq "$(verdicts 0)" "no no no no" "tpmguard with PIN, boot anchor"
        expect_in "anchor boot" "$(field "a['volumes'][0]['tokens'][0]['verdicts']['tpm_reset']['reason']")"
        expect_in "policy prefer" "$(field "a['volumes'][0]['tokens'][0]['verdicts']['active_interposer']['reason']")"
        # An unbound volume: a decoy with its UUID could ask for the PIN.
        rm "$WORK/state/volumes.json"
        audit_json 21 "$WORK/disk.img"
        expect_eq "$(verdicts 0)" "no no no yes" "tpmguard, volume not bound"
        expect_in "tpmguard bind" "$(field "a['volumes'][0]['tokens'][0]['verdicts']['header_edit']['reason']")"
}

# No argument: every LUKS2 block device (sd-device enumeration); a loop device on the image is one.
test_case audit_enumerates_block_devices
audit_enumerates_block_devices() {
        [ "$(id -u)" = 0 ] || { echo "# needs root for a loop device" >&2; return 1; }
        setup_enrolled
        LOOP=$(losetup -f --show "$WORK/disk.img")
        trap 'losetup -d "$LOOP"; tpm_teardown' EXIT
        audit_json 0
        expect_eq "$(field "[v['device'] for v in a['volumes'] if v.get('uuid') == '$(cryptsetup luksUUID "$WORK/disk.img")']")" \
                "['$LOOP']"
        # No third-party lines in tpmguard's output: libcryptsetup's own (e.g. "Device /dev/vda does not
        # exist or access denied." for a listed device without a node) go to the debug log.
        if grep -v '^tpmguard: ' <<<"$ERR" | grep -q .; then
                echo "# lines not tpmguard's on standard error:" >&2
                grep -v '^tpmguard: ' <<<"$ERR" >&2
                return 1
        fi
}

test_case audit_cli_conventions
audit_cli_conventions() {
        setup_enrolled
        # An option audit does not take: exit 2, JSON too.
        expect_exit 2 "$TPMGUARD" audit --json --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in '"error": "invalid"' "$OUT"
        # A volume that cannot be read is reported, and its error is the exit status.
        expect_exit 17 "$TPMGUARD" audit --json "$WORK/missing.img" "$WORK/disk.img"
        printf '%s\n' "$OUT" >"$WORK/audit.json"
        expect_eq "$(field "[v.get('error') for v in a['volumes']]")" "['not-found', None]"
        expect_eq "$(field "a['complete']")" False
        expect_exit 0 "$TPMGUARD" help audit
        expect_in "Usage: tpmguard [OPTIONS] audit [DEV...]" "$OUT"
}

run_cases
