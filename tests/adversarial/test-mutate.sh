#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Response-mutation tier (issue 22: every byte from the bus is hostile).
# One tpmguard operation runs many times through tests/interposer's mutate
# mode, each run with exactly one TPM response mutated (mutate.py: bit flips,
# truncation, appended bytes, size and count fields set to 0, -1, +1 and
# their maximum, response codes, tags), against one swtpm:
#
#   clean          one run without a mutation: it must work, and it counts
#                  the responses (T) the operation receives;
#   huge K         for every K in 1..T: response K with every parameter-level
#                  size field at its maximum (parameterSize, the first
#                  parameter's size or count) - the forged parameterSize of
#                  issue 22, at every response that has one; where the
#                  response has both, a second run with the first
#                  parameter's size alone at its maximum (huge-inner);
#   seeded S       RUNS runs, seeds BASE..BASE+RUNS-1: the seed picks the
#                  response (1..T) and the mutation;
#   regression     every line of tests/adversarial/mutate-regressions for
#                  this operation (crashers found so far, kept for good).
#
# Criterion for every run: no crash (no signal, no sanitizer report, no exit
# code outside the documented ones), no hang (60 s), and no success after a
# mutation that changed the tag, response code or parameters of a
# security-relevant response (Certify, Unseal, ActivateCredential,
# ReadClock, PCR_Read, Create: what the operation's security rests on); an
# unlock that succeeds must return the real keyslot secret (token-open checks
# that it opens a keyslot), and the recovery passphrase opens afterwards.
# The seed and the mutation of every run are printed (TAP comments), so a
# failure replays with --only-seed.
#
#   test-mutate.sh --op OP [--runs N] [--seed BASE] [--only-seed S]
#
# OP: verify, seal, unlock-plugin-cold, unlock-plugin-warm, unlock-plugin-grace (through an update
# grace after PCR 7 changed: the seal chosen from PCR_Read and ReadClock), provision.
# Environment: TPMGUARD_MUTATE_RUNS (default 20), TPMGUARD_MUTATE_SEED
# (default 22; "random" picks one and prints it).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
require_tools swtpm swtpm_setup tpm2_flushcontext cryptsetup timeout
require_interposer
: "${TPMGUARD_TOKEN_OPEN:?set by meson: the token-open helper}"
export TSS2_LOG=all+none
REGRESSIONS="$TPMGUARD_SRC/tests/adversarial/mutate-regressions"
SECURITY_CCS=" Certify Unseal ActivateCredential ReadClock PCR_Read Create "

op="" runs=${TPMGUARD_MUTATE_RUNS:-20} base=${TPMGUARD_MUTATE_SEED:-22} only_seed=""
while [ $# -gt 0 ]; do
        case $1 in
        --op) op=$2; shift ;;
        --runs) runs=$2; shift ;;
        --seed) base=$2; shift ;;
        --only-seed) only_seed=$2; shift ;;
        *) echo "usage: $0 --op OP [--runs N] [--seed BASE] [--only-seed S]" >&2; exit 2 ;;
        esac
        shift
done
[ "$base" = random ] && base=$(( $(od -An -N2 -tu2 /dev/urandom) ))
case $op in
verify|seal|unlock-plugin-cold|unlock-plugin-warm|unlock-plugin-grace|provision) ;;
*) echo "test-mutate: unknown --op '$op'" >&2; exit 2 ;;
esac

# --- the operations ------------------------------------------------------------
# EXPECT_CODES are the exit codes a run may have (tpmguard(8); the plugin's
# errnos as token-open reports them). 65 (token-open: the plugin returned a
# secret that opens no keyslot) is never acceptable.
op_command() {
        case $op in
        verify) OP_CMD=("$TPMGUARD" verify) ;;
        seal) OP_CMD=("$TPMGUARD" seal --secret-file "$WORK/slot.key" --pcrs 7 --pin-file "$WORK/pin") ;;
        provision) OP_CMD=("$TPMGUARD" provision) ;;
        unlock-plugin-*) OP_CMD=("$TPMGUARD_TOKEN_OPEN" "$TPMGUARD_PLUGIN" "$WORK/disk.img" 0) ;;
        esac
}
# The documented outcomes (lib/error.c): the plugin's errnos 0, EPERM, ENOENT,
# EAGAIN, ENOMEM, ENOANO; tpmguard's exit codes 0-19 (tpmguard(8)).
case $op in
unlock-plugin-*) EXPECT_CODES=" 0 1 2 11 12 55 " ;;
*) EXPECT_CODES=" $(seq -s ' ' 0 19) " ;;
esac

setup() {
        tpm_setup || return 1
        cp "$WORK/tpmguard.conf" "$WORK/direct.conf"
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        head -c 32 /dev/urandom >"$WORK/slot.key"
        if [ "$op" != provision ]; then
                "$TPMGUARD" provision >/dev/null || return 1
                TPMGUARD_CONFIG=$WORK/direct.conf "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" \
                        --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img" >/dev/null || return 1
        fi
        if [ "$op" = unlock-plugin-grace ]; then
                TPMGUARD_CONFIG=$WORK/direct.conf "$TPMGUARD" update prepare --boots 16 --pin-file "$WORK/pin" \
                        "$WORK/disk.img" >/dev/null 2>&1 || return 1
                TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                        7:sha256=2222222222222222222222222222222222222222222222222222222222222222 >/dev/null || return 1
        fi
        echo "" >"$WORK/spec.json"
        interposer_start --mode mutate --mutate-spec "$WORK/spec.json"
}

teardown() {
        if [ -n "$WORK" ] && [ -s "$WORK/proxy.pid" ]; then
                local pid
                pid=$(cat "$WORK/proxy.pid")
                kill "$pid" 2>/dev/null
                for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        fi
        tpm_teardown
}

# Before each run: the TPM as a fresh client finds it (what the kernel's
# resource manager does when a client goes: flush what it left loaded), and
# for the warm unlock this boot's verification cache.
prepare_run() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_flushcontext --transient-object >/dev/null 2>&1 || true
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_flushcontext --loaded-session >/dev/null 2>&1 || true
        # A cold unlock fills the cache: empty it again.
        case $op in unlock-plugin-cold | unlock-plugin-grace) rm -f "$WORK/run/null-key.json" ;; esac
        if [ "$op" = unlock-plugin-warm ] && [ ! -s "$WORK/run/null-key.json" ]; then
                TPMGUARD_CONFIG=$WORK/direct.conf "$TPMGUARD" verify --record >/dev/null 2>&1 || true
        fi
}

# findings.json after a run: "RESPONSES MUTATED COMMAND PARAMS_TOUCHED DESCRIPTION"
read_findings() {
        $PY - "$WORK/findings.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
m = f.get("mutate") or {}
a = None
for x in f.get("attacks", []):
    if x.get("attack") == "mutate" and x.get("generation") == m.get("generation"):
        a = x
if a is None:
    print(m.get("responses", 0), "no - no -")
else:
    d = a["mutation"]
    print(m.get("responses", 0), "yes", a["command"], "yes" if d.get("params_touched") else "no",
          json.dumps(d, sort_keys=True).replace(" ", ""))
PY
}

SAN_DIR=""
RUN_N=0
FAILED=0
# run_one NAME SPEC-JSON: one run; prints its TAP line.
run_one() {
        local name=$1 spec=$2 rc=0 responses mutated cmd touched desc why=""
        RUN_N=$((RUN_N + 1))
        prepare_run
        # Each run a new generation (the proxy counts responses from here),
        # even when two runs share a spec.
        printf '%s\n' "${spec%\}},\"run\":$RUN_N}" >"$WORK/spec.json"
        SAN_DIR=$(mktemp -d "$WORK/sanitizer.XXXXXX")
        ASAN_OPTIONS="${BASE_ASAN:+$BASE_ASAN:}log_path=$SAN_DIR/asan" \
        UBSAN_OPTIONS="${BASE_UBSAN:+$BASE_UBSAN:}log_path=$SAN_DIR/ubsan" \
                timeout -k 5 60 "${OP_CMD[@]}" <"$WORK/pin" >"$WORK/op.out" 2>&1 || rc=$?
        read -r responses mutated cmd touched desc <<<"$(read_findings)"
        [ "$rc" = 124 ] || [ "$rc" = 137 ] && why="hang (no answer within 60 s)"
        [ -z "$why" ] && [ "$rc" -ge 128 ] && why="killed by signal $((rc - 128))"
        [ -z "$why" ] && [ "$rc" = 65 ] && why="the plugin returned a secret that opens no keyslot"
        [ -z "$why" ] && [[ $EXPECT_CODES != *" $rc "* ]] && why="exit code $rc is none of the documented ones"
        if [ -z "$why" ] && ls "$SAN_DIR"/* >/dev/null 2>&1; then
                why="sanitizer report"
                sed 's/^/#   /' "$SAN_DIR"/* | head -40 >&2
        fi
        if [ -z "$why" ] && [ "$rc" = 0 ] && [ "$mutated" = yes ] && [ "$touched" = yes ] &&
                [[ $SECURITY_CCS == *" $cmd "* ]]; then
                why="the operation succeeded although the parameters of its $cmd response were forged"
        fi
        if [ -z "$why" ] && [[ $op == unlock-* ]] && ! recovery_opens "$WORK/disk.img" >/dev/null 2>&1; then
                why="the recovery passphrase no longer opens"
        fi
        if [ -n "$why" ]; then
                echo "not ok $RUN_N - $op $name: $why"
                echo "#   spec $spec, mutated response: $mutated $cmd $desc" >&2
                sed 's/^/#   /' "$WORK/op.out" | tail -8 >&2
                FAILED=$((FAILED + 1))
        else
                echo "ok $RUN_N - $op $name: exit $rc, response $cmd of $responses mutated ($mutated)"
                echo "#   $desc"
        fi
        LAST_RESPONSES=$responses
        LAST_DESC=$desc
}

main() {
        BASE_ASAN=${ASAN_OPTIONS:-} BASE_UBSAN=${UBSAN_OPTIONS:-}
        trap teardown EXIT
        setup || { echo "Bail out! setup failed"; exit 1; }
        op_command
        local t0=$SECONDS seed k total regressions=()
        if [ -f "$REGRESSIONS" ]; then
                mapfile -t regressions < <(awk -v op="$op" '$1 == op && !/^#/ {print $2}' "$REGRESSIONS")
        fi
        echo "# $op: seeds $base..$((base + runs - 1)), ${#regressions[@]} regression specs"
        run_one clean '{}'
        total=$LAST_RESPONSES
        if [ "$FAILED" != 0 ] || [ "${total:-0}" = 0 ]; then
                echo "Bail out! the operation does not work without a mutation ($total responses)"
                exit 1
        fi
        if [ -n "$only_seed" ]; then
                run_one "seed $only_seed" "{\"seed\":$only_seed,\"at\":$((only_seed % total + 1))}"
        else
                for spec in "${regressions[@]}"; do
                        run_one "regression $spec" "$spec"
                done
                for k in $(seq 1 "$total"); do
                        run_one "huge at $k/$total" "{\"seed\":0,\"at\":$k,\"kind\":\"huge\"}"
                        # A forged parameterSize is refused first: the first parameter's
                        # size gets its own run where the response has one.
                        if [[ $LAST_DESC == *parameterSize* ]] && [[ $LAST_DESC == *param0.u16* ]]; then
                                run_one "huge-inner at $k/$total" "{\"seed\":0,\"at\":$k,\"kind\":\"huge-inner\"}"
                        fi
                done
                for seed in $(seq "$base" $((base + runs - 1))); do
                        # The seed picks the response (every one is reachable) and, in the proxy, the mutation.
                        run_one "seed $seed" "{\"seed\":$seed,\"at\":$(( (seed * 7919) % total + 1 ))}"
                done
        fi
        echo "1..$RUN_N"
        echo "# $op: $RUN_N runs in $((SECONDS - t0)) s, $FAILED failed (base seed $base)"
        [ "$FAILED" = 0 ]
}
main
