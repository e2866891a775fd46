#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: genuine before typed (issue 32), against a real swtpm.
#   - 'totp enroll' prints the otpauth:// URI alone without a terminal, and
#     'totp show' prints the code an independent RFC 6238 implementation
#     (python3 hmac + hashlib, below) computes from that URI's secret for the
#     window 'show' says it is for;
#   - after a PCR extend, no code and a PCR-mismatch message;
#   - through a substituting interposer, no code and an interposer message;
#   - a passive recording of enroll and show holds the secret nowhere;
#   - a TOTP file whose check value is not the sealed secret's (a swapped
#     object, or an edited file): no code; other edits name their field;
#   - the documented limit (docs/security.md): an active interposer that runs
#     an Unseal of its own on a genuine boot reads the secret (it has no PIN);
#   - reseal keeps the secret (the app's entry stays valid) when it moves to
#     predicted PCR values before an update, and after the update the code is
#     the same RFC 6238 code of the enrolled URI; with the PCRs already
#     changed it refuses;
#   - one enrolment at a time, remove, and 'show --console' with nothing
#     enrolled shows nothing and fails nothing (the initrd runs it every boot).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_pcrextend python3

# The secret of the otpauth URI in $1, as hex.
uri_secret_hex() {
        python3 -c '
import base64, sys, urllib.parse
q = urllib.parse.parse_qs(urllib.parse.urlparse(sys.argv[1]).query)
s = q["secret"][0]
print(base64.b32decode(s + "=" * (-len(s) % 8)).hex())' "$1"
}

json_field() { python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

# Provisioned, PCR 7 extended once (as firmware would), a TOTP enrolled to it; the URI in $URI.
setup_totp() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                7:sha256=0000000000000000000000000000000000000000000000000000000000000007 >/dev/null
        expect_exit 0 "$TPMGUARD" totp enroll --pcrs 7
        URI=$OUT
        # PCR 7 measures no initrd: the user is told what a matching code then proves.
        expect_in "does not measure the kernel or the initrd" "$ERR"
}

test_case totp_code_matches_rfc6238
totp_code_matches_rfc6238() {
        local start code
        setup_totp
        # No terminal: the URI alone, one line, for scripts.
        [ "$(printf '%s\n' "$URI" | wc -l)" = 1 ]
        case $URI in otpauth://totp/tpmguard:*\?secret=*) ;; *) echo "# not a URI: $URI" >&2; return 1 ;; esac
        [ "$(uri_secret_hex "$URI" | wc -c)" = 41 ]   # 20 bytes, and a newline
        [ "$(stat -c %a "$WORK/state/totp.json")" = 600 ]
        # The secret is nowhere in the file.
        refute grep -qi "$(uri_secret_hex "$URI")" "$WORK/state/totp.json"
        expect_exit 0 "$TPMGUARD" totp show --json
        start=$(json_field window_start <<<"$OUT")
        code=$(json_field code <<<"$OUT")
        [ "$(json_field window_end <<<"$OUT")" = $((start + 30)) ]
        [ "$code" = "$(rfc6238 "$URI" "$start")" ] ||
                { echo "# tpmguard $code, RFC 6238 $(rfc6238 "$URI" "$start") at $start" >&2; return 1; }
        # The text form: the code (as the app groups it) and the UTC window it is for.
        expect_exit 0 "$TPMGUARD" totp show
        start=$(date -u -d "$(sed -n 's/^[0-9]\{3\} [0-9]\{3\}  for \(.*\) to .*/\1/p' <<<"$OUT") UTC" +%s)
        expect_in "$(rfc6238 "$URI" "$start" | sed 's/^\(...\)/\1 /')  for " "$OUT"
        expect_in "UTC (this machine's clock)" "$OUT"
        # The console (the initrd's screen) gets the code, and what to do with it; standard
        # output, which the initrd's unit sends to the persistent journal, does not.
        : >"$WORK/console"
        TPMGUARD_CONSOLE=$WORK/console expect_exit 0 "$TPMGUARD" totp show --console
        start=$(date -u -d "$(sed -n 's/.*code is [0-9]\{3\} [0-9]\{3\} (for \(.*\) to .*/\1/p' "$WORK/console") UTC" +%s)
        expect_in "this machine's code is $(rfc6238 "$URI" "$start" | sed 's/^\(...\)/\1 /') (for " "$(cat "$WORK/console")"
        expect_in "type the PIN only if they match" "$(cat "$WORK/console")"
        refute grep -q "[0-9]\{3\} [0-9]\{3\}" <<<"$OUT"
}

test_case totp_refused_after_pcr_change
totp_refused_after_pcr_change() {
        setup_totp
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                7:sha256=1111111111111111111111111111111111111111111111111111111111111111 >/dev/null
        expect_exit 14 "$TPMGUARD" totp show
        [ -z "$OUT" ]
        expect_in "No TOTP code" "$ERR"
        expect_in "PCR mismatch" "$ERR"
        expect_in "If you did not update it before this boot, suspect tampering: type neither the PIN nor the recovery passphrase here" "$ERR"
        # On the initrd's screen: no code, and why.
        : >"$WORK/console"
        TPMGUARD_CONSOLE=$WORK/console expect_exit 14 "$TPMGUARD" totp show --console
        expect_in "NO TOTP CODE: the boot chain is not the one the TOTP was enrolled under (PCR mismatch)" \
                "$(cat "$WORK/console")"
        refute grep -q "code is" "$WORK/console"
}

test_case totp_refused_through_substituting_interposer
totp_refused_through_substituting_interposer() {
        require_interposer
        setup_totp
        interposer_start --mode substitute --record "$WORK/capture.jsonl"
        expect_exit 3 "$TPMGUARD" totp show --json
        interposer_stop
        refute_in '"code"' "$OUT"
        expect_in "No TOTP code" "$ERR"
        expect_in "interposer" "$ERR"
        # The interposer did substitute (the refusal is its doing, not an accident).
        $PY -c 'import json, sys
f = json.load(open(sys.argv[1]))
sys.exit(0 if any(a.get("attack") == "substitute-public" for a in f.get("attacks", [])) else 1)' "$WORK/findings.json"
        # Without it, the code again.
        expect_exit 0 "$TPMGUARD" totp show --json
}

test_case totp_secret_not_on_the_bus
totp_secret_not_on_the_bus() {
        require_interposer
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        interposer_start --mode record --record "$WORK/capture.jsonl"
        expect_exit 0 "$TPMGUARD" totp enroll --pcrs 7
        URI=$OUT
        expect_exit 0 "$TPMGUARD" totp show --json
        interposer_stop
        # The unseal ran (and over the recorded connection).
        grep -q '"command": *"Unseal"' "$WORK/capture.jsonl" || grep -q '"Unseal"' "$WORK/capture.jsonl"
        $PY - "$WORK/capture.jsonl" "$WORK/findings.json" "$(uri_secret_hex "$URI")" <<'PY'
import json, sys
capture, findings, secret = sys.argv[1], sys.argv[2], bytes.fromhex(sys.argv[3])
records = [json.loads(l) for l in open(capture) if l.strip()]
bad = [r["seq"] for r in records for k in ("hex", "upstream_hex") if r.get(k) and secret in bytes.fromhex(r[k])]
f = json.load(open(findings))
if secret.hex() in json.dumps(f).lower():
    bad.append("findings")
print("# %d records searched for the 20-byte secret" % len(records))
sys.exit(1 if bad or len(records) < 10 else 0)
PY
}

# Not a defence: the limit docs/security.md states, kept true by a test. If this
# ever fails, the TOTP got a protection against injected commands: update the docs.
test_case totp_active_interposer_reads_the_secret
totp_active_interposer_reads_the_secret() {
        require_interposer
        setup_totp
        interposer_start --mode inject-unseal
        expect_exit 0 "$TPMGUARD" totp show
        interposer_stop
        $PY - "$WORK/findings.json" "$(uri_secret_hex "$URI")" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
assert any(a.get("attack") == "inject-unseal" and a.get("result") == "unsealed" for a in f.get("attacks", [])), f
assert sys.argv[2] in json.dumps(f.get("plaintexts", [])).lower(), "the injected Unseal did not read the secret"
PY
}

test_case totp_reseal_keeps_the_secret
totp_reseal_keeps_the_secret() {
        local update=2222222222222222222222222222222222222222222222222222222222222222 now predicted start
        setup_totp
        # Before an update that extends PCR 7 with $update: reseal to the value it will have.
        now=$(TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrread sha256:7 | sed -n 's/.*7 *: *0x\([0-9A-Fa-f]*\).*/\1/p')
        predicted=$(python3 -c 'import hashlib, sys; print(hashlib.sha256(bytes.fromhex(sys.argv[1] + sys.argv[2])).hexdigest())' \
                "$now" "$update")
        expect_exit 0 "$TPMGUARD" totp reseal --pcrs 7 --pcr "7=sha256:$predicted"
        expect_in "stays valid" "$OUT"
        # Sealed to the future: no code yet.
        expect_exit 14 "$TPMGUARD" totp show
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend "7:sha256=$update" >/dev/null
        expect_exit 0 "$TPMGUARD" totp show --json
        start=$(json_field window_start <<<"$OUT")
        [ "$(json_field code <<<"$OUT")" = "$(rfc6238 "$URI" "$start")" ] ||
                { echo "# after the reseal the code is not the enrolled URI's" >&2; return 1; }
        # Resealed to the values now, the same secret still.
        expect_exit 0 "$TPMGUARD" totp reseal
        expect_exit 0 "$TPMGUARD" totp show --json
        start=$(json_field window_start <<<"$OUT")
        [ "$(json_field code <<<"$OUT")" = "$(rfc6238 "$URI" "$start")" ]
        # The PCRs moved away from the sealed values: nothing to reseal from, and the file is untouched.
        cp "$WORK/state/totp.json" "$WORK/totp.before"
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend "7:sha256=$update" >/dev/null
        expect_exit 14 "$TPMGUARD" totp reseal
        cmp "$WORK/state/totp.json" "$WORK/totp.before"
}

test_case totp_file_check_and_fields
totp_file_check_and_fields() {
        setup_totp
        cp "$WORK/state/totp.json" "$WORK/totp.good"
        # A check value that is not the sealed secret's: the released secret is refused.
        python3 -c 'import json, sys
p = sys.argv[1]; d = json.load(open(p)); d["check"] = "00" * 32; json.dump(d, open(p, "w"))' "$WORK/state/totp.json"
        expect_exit 3 "$TPMGUARD" totp show
        [ -z "$OUT" ]
        expect_in "not the enrolled one" "$ERR"
        # Edited fields are named.
        python3 -c 'import json, sys
p = sys.argv[1]; d = json.load(open(sys.argv[2])); d["digits"] = 9; json.dump(d, open(p, "w"))' \
                "$WORK/state/totp.json" "$WORK/totp.good"
        expect_exit 15 "$TPMGUARD" totp show
        expect_in '"digits"' "$ERR"
        python3 -c 'import json, sys
p = sys.argv[1]; d = json.load(open(sys.argv[2])); d["sealed"]["pin"] = True; json.dump(d, open(p, "w"))' \
                "$WORK/state/totp.json" "$WORK/totp.good"
        expect_exit 15 "$TPMGUARD" totp show
        expect_in "sealed" "$ERR"
        # Trailing data after the object.
        { cat "$WORK/totp.good"; echo '{}'; } >"$WORK/state/totp.json"
        expect_exit 15 "$TPMGUARD" totp show
        expect_in "not one JSON object" "$ERR"
        # Writable by others: not read at all.
        cp "$WORK/totp.good" "$WORK/state/totp.json"
        chmod 666 "$WORK/state/totp.json"
        refute "$TPMGUARD" totp show >/dev/null 2>&1
        chmod 600 "$WORK/state/totp.json"
        expect_exit 0 "$TPMGUARD" totp show
}

test_case totp_enroll_once_remove_and_console
totp_enroll_once_remove_and_console() {
        setup_totp
        cp "$WORK/state/totp.json" "$WORK/totp.before"
        expect_exit 2 "$TPMGUARD" totp enroll --pcrs 7
        expect_in "already enrolled" "$ERR"
        cmp "$WORK/state/totp.json" "$WORK/totp.before"
        expect_exit 2 "$TPMGUARD" totp enroll --json
        expect_exit 2 "$TPMGUARD" totp show --pcrs 7
        expect_in "does not apply to 'totp show'" "$ERR"
        expect_exit 2 "$TPMGUARD" totp enroll --pcr "7=sha256:$(printf '%064d' 0)"
        expect_exit 0 "$TPMGUARD" totp remove
        [ ! -e "$WORK/state/totp.json" ]
        expect_exit 17 "$TPMGUARD" totp show
        expect_in "No TOTP is enrolled" "$ERR"
        expect_exit 17 "$TPMGUARD" totp remove
        # The initrd's call with nothing enrolled: nothing shown, nothing failed.
        : >"$WORK/console"
        TPMGUARD_CONSOLE=$WORK/console expect_exit 0 "$TPMGUARD" totp show --console
        [ -z "$OUT" ] && [ ! -s "$WORK/console" ]
        expect_exit 2 "$TPMGUARD" totp frobnicate
}

run_cases
