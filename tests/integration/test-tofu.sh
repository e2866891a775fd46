#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: `tpmguard provision --trust-on-first-use` (issue 15 §3) on
# a swtpm started WITHOUT EK certificates in NV, as many firmware TPMs are.
# Plain provision refuses and names the flag; with it the EK signing key is
# pinned unproven, said loudly, recorded, and named by verify, verify --json,
# status and doctor; a PIN unlock works; and what the pin still protects is
# checked: a key substituted later by an interposer, and another TPM in the
# place of the first, are both refused against the pinned key.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_createprimary tpm2_nvreadpublic cryptsetup unshare python3
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"
PY=/usr/bin/python3
[ -x $PY ] || PY=python3

# The fixture really made a TPM without EK certificates: no index of the TCG
# EK certificate range is defined (checked with tpm2-tools, not tpmguard).
no_ek_cert_in_nv() {
        local idx
        idx=$(TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_nvreadpublic 2>/dev/null | grep -oiE '^0x01c0000[0-9a-f]|^0x01c000[1-9a-f][0-9a-f]' || true)
        [ -z "$idx" ] || { echo "# the fixture left EK certificate indices: $idx" >&2; return 1; }
}

test_case plain_provision_names_the_flag
plain_provision_names_the_flag() {
        tpm_setup --no-ek-cert
        no_ek_cert_in_nv
        expect_exit 8 "$TPMGUARD" provision
        expect_in "no EK certificate in NV" "$ERR"
        expect_in "--trust-on-first-use" "$ERR"
        expect_in "--ek-cert" "$ERR"
        [ ! -e "$WORK/state/ek-signing-key.json" ] || { echo "# something was pinned" >&2; return 1; }
        # The flag never stands in for a certificate that is given.
        expect_exit 2 "$TPMGUARD" provision --trust-on-first-use --ek-cert /dev/null
        expect_in "exclude each other" "$ERR"
}

test_case tofu_pins_says_so_and_unlocks
tofu_pins_says_so_and_unlocks() {
        tpm_setup --no-ek-cert
        expect_exit 0 "$TPMGUARD" provision --trust-on-first-use
        expect_in "TRUST ON FIRST USE" "$ERR"
        expect_in "nothing proves" "$ERR"
        # The kernel's null_name authenticates "no certificate" only against an
        # interposer that came after boot, and the warning says so.
        expect_in "one present since boot can" "$ERR"
        expect_in "Provisioned ON TRUST" "$OUT"
        grep -q '"ek_trust": "trust-on-first-use"' "$WORK/state/ek-signing-key.json" ||
                { echo "# the pin does not record TOFU" >&2; cat "$WORK/state/ek-signing-key.json" >&2; return 1; }
        # Provision went on to the lockout hierarchy, over a verification with the pin.
        test -s "$WORK/state/lockout-auth"

        expect_exit 0 "$TPMGUARD" verify
        expect_in "TPM verified" "$OUT"
        expect_in "pinned on first use" "$ERR"
        expect_exit 0 "$TPMGUARD" verify --json
        expect_in '"verdict": "verified"' "$OUT"
        expect_in '"ek_trust": "trust-on-first-use"' "$OUT"

        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        expect_exit 0 token_open <"$WORK/pin"

        expect_exit 0 "$TPMGUARD" status --json "$WORK/disk.img"
        expect_in '"ek_trust": "trust-on-first-use"' "$OUT"
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "ON TRUST" "$OUT"
        "$TPMGUARD" doctor --json --initrd /dev/null "$WORK/disk.img" >"$WORK/doctor.json" 2>/dev/null || true
        "$PY" - "$WORK/doctor.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
checks = [c for c in d["checks"] if c["check"] == "provisioning"]
assert checks and checks[0]["status"] == "warning", checks
assert "TRUST ON FIRST USE" in checks[0]["summary"], checks[0]
PY
}

test_case certified_pin_is_not_reported_as_tofu
certified_pin_is_not_reported_as_tofu() {
        # A TPM with its EK certificate: the flag changes nothing, the key is proven.
        tpm_setup
        expect_exit 0 "$TPMGUARD" provision --trust-on-first-use
        expect_in "not used" "$ERR"
        refute_in "TRUST ON FIRST USE" "$ERR"
        expect_in "proven against EK certificate" "$OUT"
        expect_exit 0 "$TPMGUARD" verify --json
        expect_in '"ek_trust": "ek-certificate"' "$OUT"
}

proxy_start() { interposer_start --mode "$1" --record "$WORK/capture.jsonl"; }

proxy_stop() { interposer_stop; }

test_case later_substitution_is_detected
later_substitution_is_detected() {
        tpm_setup --no-ek-cert
        expect_exit 0 "$TPMGUARD" provision --trust-on-first-use
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"

        # An interposer that arrives after provisioning swaps the keys the TPM
        # returns for its own: the NULL key it offers is not certified by the
        # pinned key, so verify and the unlock refuse (exit 3; the plugin
        # fails, cryptsetup says why), and no session is salted to its key.
        proxy_start substitute
        expect_exit 3 "$TPMGUARD" verify --json
        expect_in '"verdict": "interposer"' "$OUT"
        expect_exit 1 token_open <"$WORK/pin"
        expect_in "interposer" "$ERR"
        proxy_stop
        "$PY" - "$WORK/findings.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
assert any(a["attack"] == "substitute-public" for a in f["attacks"]), f["attacks"]
assert not any(k.get("verified") for k in f.get("session_keys", [])), f["session_keys"]
assert not f.get("plaintexts"), f["plaintexts"]
PY

        # Another TPM (also without certificates) in the place of the pinned
        # one, as a relay installed after provisioning would offer: its EK
        # signing key is not the pinned one.
        "$FIXTURE" start "$WORK/other" --no-ek-cert >/dev/null
        sed -i "s|^tcti = .*|tcti = $("$FIXTURE" tcti "$WORK/other")|" "$WORK/tpmguard.conf"
        "$FIXTURE" null-name "$WORK/other" "$WORK/null_name"
        expect_exit 3 "$TPMGUARD" verify
        expect_in "not the pinned one" "$ERR"

        # Back on the pinned TPM, everything works again.
        sed -i "s|^tcti = .*|tcti = $TPMGUARD_TEST_TCTI|" "$WORK/tpmguard.conf"
        "$FIXTURE" null-name "$WORK/tpm" "$WORK/null_name"
        expect_exit 0 token_open <"$WORK/pin"
}

# An interposer present at provisioning hides the TPM's EK certificates
# (GetCapability of the certificate range answered "none") so that
# --trust-on-first-use pins a key of its choosing instead of proving the
# EK. With the kernel's null_name the listing is read in a session salted
# to the kernel's NULL key, as an audit session: the forged answer carries
# no valid response HMAC, and provisioning refuses, pinning nothing.
test_case hidden_certificates_refused_with_null_name
hidden_certificates_refused_with_null_name() {
        tpm_setup
        proxy_start hide-ek-certs
        expect_exit 3 "$TPMGUARD" provision --trust-on-first-use
        expect_in "interposer" "$ERR"
        refute_in "TRUST ON FIRST USE" "$ERR"
        proxy_stop
        [ ! -e "$WORK/state/ek-signing-key.json" ] || { echo "# something was pinned" >&2; return 1; }
        "$PY" - "$WORK/findings.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
assert any(a["attack"] == "hide-ek-certs" for a in f["attacks"]), f["attacks"]
PY
        # Directly, the same TPM is proven against its certificate.
        expect_exit 0 "$TPMGUARD" provision --trust-on-first-use
        expect_in "proven against EK certificate" "$OUT"
}

# Without a null_name the listing is still read in the bootstrap session,
# as an audit session: hiding the certificates alone is refused there too (an
# interposer would have to substitute the NULL key first and forge the
# response HMAC). Where the TPM really has no certificate, TOFU goes ahead and
# says that the answer could not be checked. An unproven pin is kept only
# once the verification made with it and the lockout step pass: whatever
# ends the run before (an interposer caught there, a dropped connection)
# leaves the previous pin byte for byte, or none.
test_case tofu_without_null_name
tofu_without_null_name() {
        tpm_setup
        write_config if-available
        rm -f "$WORK/null_name"
        proxy_start hide-ek-certs
        expect_exit 3 "$TPMGUARD" provision --trust-on-first-use
        expect_in "interposer" "$ERR"
        proxy_stop
        [ ! -e "$WORK/state/ek-signing-key.json" ] || { echo "# something was pinned" >&2; return 1; }
        tpm_teardown

        tpm_setup --no-ek-cert
        write_config if-available
        rm -f "$WORK/null_name"
        expect_exit 0 "$TPMGUARD" provision --trust-on-first-use
        expect_in "nothing authenticates the TPM's answer" "$ERR"
        expect_in "TRUST ON FIRST USE" "$ERR"
        cp "$WORK/state/ek-signing-key.json" "$WORK/pin.before"

        proxy_start substitute
        expect_exit 3 "$TPMGUARD" provision --trust-on-first-use
        expect_in "was not kept" "$ERR"
        proxy_stop
        cmp "$WORK/state/ek-signing-key.json" "$WORK/pin.before"
        expect_exit 0 "$TPMGUARD" verify

        # An interposer that expects to be caught ends the run another way: it
        # closes the connection at the lockout step's CreatePrimary (a TPM that
        # stopped answering, exit 6). The previous pin is untouched all the same.
        interposer_start --mode substitute,drop --drop CreatePrimary:3 --drop-action close \
                --record "$WORK/capture.jsonl"
        expect_exit 6 "$TPMGUARD" provision --trust-on-first-use
        expect_in "was not kept" "$ERR"
        proxy_stop
        cmp "$WORK/state/ek-signing-key.json" "$WORK/pin.before"

        # With no earlier pin, none is left; no temporary pin either.
        rm -rf "${WORK:?}/state"/*
        proxy_start substitute
        expect_exit 3 "$TPMGUARD" provision --trust-on-first-use
        proxy_stop
        [ ! -e "$WORK/state/ek-signing-key.json" ] || { echo "# the unproven pin was kept" >&2; return 1; }
        for f in "$WORK/state"/.tofu-pin.*; do
                [ ! -e "$f" ] || { echo "# a temporary pin was left: $f" >&2; return 1; }
        done
}

run_cases
