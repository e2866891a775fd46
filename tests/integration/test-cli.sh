#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The command line's conventions (tpmguard(8)): help for all and for each
# command, -V, a suggestion for a mistyped command, options that do not apply
# rejected, JSON on failure with --json, and the exit codes of the README's
# table on these paths. No TPM is needed: every case fails or ends before one.
set -uo pipefail
: "${TPMGUARD:?}"
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export TPMGUARD_CONFIG=$WORK/tpmguard.conf
printf 'state_dir = %s\ncache_dir = %s\ntcti = swtpm:path=%s/none\n' "$WORK" "$WORK" "$WORK" >"$TPMGUARD_CONFIG"

# run EXPECTED_EXIT DESCRIPTION CMD... ; output in $OUT, errors in $ERR
run() {
        local want=$1 what=$2 rc
        shift 2
        OUT=$("$@" 2>"$WORK/err" </dev/null)
        rc=$?
        ERR=$(cat "$WORK/err")
        if [ "$rc" = "$want" ]; then ok "$what (exit $rc)"; else not_ok "$what: exit $rc, expected $want"; printf "%s\n" "$ERR" | head -5 | sed "s/^/# /"; fi
}
has() { if grep -qF -- "$2" <<<"$3"; then ok "$1"; else not_ok "$1: no \"$2\" in: $3"; fi; }

echo "1..33"
commands=$("$TPMGUARD" help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF {print $1}')
run 0 "help lists the commands" "$TPMGUARD" help
has "help names enroll" "enroll DEV" "$OUT"
for c in enroll status config; do
        run 0 "$c --help" "$TPMGUARD" "$c" --help
        has "$c --help is the usage of $c" "Usage: tpmguard [OPTIONS] $c" "$OUT"
done
run 0 "help change-pin = change-pin --help" "$TPMGUARD" help change-pin
has "help change-pin names --new-pin-file" "--new-pin-file" "$OUT"
run 0 "-V prints the version" "$TPMGUARD" -V
has "-V says tpmguard" "tpmguard " "$OUT"
run 2 "a mistyped command" "$TPMGUARD" provison
has "it suggests the nearest command" 'Did you mean "provision"?' "$ERR"
run 2 "an option the command does not take" "$TPMGUARD" status --pcrs 7 /dev/null
has "the message names the option and the command" "--pcrs does not apply to status" "$ERR"
run 2 "an unknown option" "$TPMGUARD" --no-such-option verify
# Arguments are checked from the command table, before the configuration or a TPM.
run 2 "a stray argument" "$TPMGUARD" verify extra
has "the message names it" 'verify takes no arguments ("extra")' "$ERR"
run 2 "a device command without its device" "$TPMGUARD" remove
has "the message says what is missing" "remove takes one argument: the LUKS2 device" "$ERR"
# --json: JSON on failure too, with the exit code of the table.
run 4 "verify --json, not provisioned" "$TPMGUARD" verify --json
if python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["verdict"] == "not-provisioned" else 1)' <<<"$OUT"; then
        ok "verify --json prints its report on failure"; else not_ok "verify --json output: $OUT"; fi
run 2 "status --json on a bad option" "$TPMGUARD" status --json --pcrs 7 /dev/null
if python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["exit_code"] == 2 and d["error"] == "invalid" else 1)' <<<"$OUT"; then
        ok "status --json prints an error object with exit_code"; else not_ok "status --json output: $OUT"; fi
# A PIN needed and no terminal to ask on: exit 11 (pin-needed), before any TPM is touched.
head -c 32 /dev/urandom >"$WORK/secret"
run 11 "seal with no terminal and no --pin-file" setsid -w "$TPMGUARD" seal --secret-file "$WORK/secret"
has "it says how to give the PIN" "Give the PIN in a file" "$ERR"
if # PIN policy (issue 14 §3), all decided before the TPM is asked anything.
run 2 "seal --no-pin without allow_no_pin in the configuration" "$TPMGUARD" seal --no-pin --secret-file "$WORK/secret"
has "the refusal says what a token without a PIN exposes" "active interposer" "$ERR"
printf '123\n' >"$WORK/short-pin"
run 2 "a PIN shorter than pin_min_length (default 6)" "$TPMGUARD" seal --pin-file "$WORK/short-pin" --secret-file "$WORK/secret"
has "the message names the minimum" "at least 6" "$ERR"
printf '\n' >"$WORK/empty-pin"
run 18 "an empty PIN is no PIN (cancelled)" "$TPMGUARD" seal --pin-file "$WORK/empty-pin" --secret-file "$WORK/secret"
[ -n "$commands" ]; then ok "commands found"; else not_ok "no commands in help"; fi
[ "$failed" = 0 ]
