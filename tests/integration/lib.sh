# shellcheck shell=bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Shell test library for the integration tier: TAP output, one fresh swtpm
# per test case (tests/fixture/swtpm-fixture), clean teardown on every path.
#
# Environment (set by meson): TPMGUARD (the CLI), TPMGUARD_SRC (source root),
# TPMGUARD_PLUGIN (the token plugin), TPMGUARD_BUILD (build root).

set -uo pipefail

: "${TPMGUARD_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
FIXTURE="$TPMGUARD_SRC/tests/fixture/swtpm-fixture"

# Debian's python3 for every "python3" of the test scripts: the one
# python3-cryptography is installed for and the interposer's #! line names,
# not whatever comes first in PATH. A version manager's shim there (pyenv's
# is a bash script that runs "pyenv exec") costs about a second per call, and
# the integration tier calls python a few hundred times.
if [ -x /usr/bin/python3 ]; then
        python3() { /usr/bin/python3 "$@"; }
fi

_tap_n=0
_tap_failed=0
_tap_cases=()
WORK=""

skip_all() {
        echo "1..0 # SKIP $*"
        exit 0
}

require_tools() {
        local t
        for t in "$@"; do
                command -v "$t" >/dev/null 2>&1 || skip_all "$t not installed"
        done
}

# Declare a test case: a shell function name and a description.
test_case() { _tap_cases+=("$1"); }

# A fresh private TPM for the current case, and a config pointing at it.
tpm_setup() {
        local variant=("$@")
        WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpmguard-test.XXXXXX")
        "$FIXTURE" start "$WORK/tpm" "${variant[@]}" >/dev/null || return 1
        # shellcheck disable=SC1091
        . "$WORK/tpm/env"
        mkdir -p "$WORK/state"
        mkdir -m 700 "$WORK/run"
        "$FIXTURE" null-name "$WORK/tpm" "$WORK/null_name" || return 1
        write_config required
}

write_config() {
        local policy=${1:-required}
        cat >"$WORK/tpmguard.conf" <<CONF
tcti = $TPMGUARD_TEST_TCTI
state_dir = $WORK/state
null_name_path = $WORK/null_name
kernel_null_name = $policy
ek_ca = $TPMGUARD_TEST_CA_BUNDLE
cache_dir = $WORK/run
da_max_tries = ${TPMGUARD_TEST_DA_MAX_TRIES:-1000}
da_recovery_time = ${TPMGUARD_TEST_DA_RECOVERY_TIME:-1}
da_lockout_recovery = ${TPMGUARD_TEST_DA_LOCKOUT_RECOVERY:-1}
# The tests' PINs are 4 digits (the default minimum is 6), and some cases
# enrol without a PIN on purpose.
pin_min_length = 4
allow_no_pin = yes
# swtpm runs no firmware: PCR 7 is never extended unless a test does it.
allow_unextended_pcrs = yes
# Format 2 at the parser's floor (32 MiB, benchmarked to 10 ms: one pass):
# every PIN token is format 2, and the hundreds of seals and unseals of the
# suite each cost one Argon2id pass, not a second.
pin_kdf_memory = 32
pin_kdf_time_ms = 10
CONF
        export TPMGUARD_CONFIG="$WORK/tpmguard.conf"
}

tpm_teardown() {
        [ -n "$WORK" ] || return 0
        # A case that failed half-way leaves its interposer running: stopped here.
        [ -f "$WORK/tpmguard.conf" ] && interposer_stop >/dev/null 2>&1
        [ -d "$WORK/tpm" ] && "$FIXTURE" stop "$WORK/tpm" >/dev/null 2>&1
        for d in "$WORK"/tpm2 "$WORK"/other; do
                [ -d "$d" ] && "$FIXTURE" stop "$d" >/dev/null 2>&1
        done
        rm -rf "$WORK"
        WORK=""
        unset TPMGUARD_CONFIG
}

# Runs a command, captures stdout/stderr into $OUT/$ERR, checks the exit code.
expect_exit() {
        local want=$1; shift
        local rc=0
        OUT=$("$@" 2>"$WORK/stderr") || rc=$?
        ERR=$(cat "$WORK/stderr")
        if [ "$rc" != "$want" ]; then
                echo "# expected exit $want, got $rc: $*" >&2
                echo "# stdout: $OUT" | head -20 >&2
                echo "# stderr: $ERR" | head -20 >&2
                return 1
        fi
}

expect_in() {
        local needle=$1 haystack=$2
        if ! grep -qiF -- "$needle" <<<"$haystack"; then
                echo "# expected to find \"$needle\" in: $haystack" | head -5 >&2
                return 1
        fi
}

refute_in() {
        local needle=$1 haystack=$2
        if grep -qiF -- "$needle" <<<"$haystack"; then
                echo "# did not expect \"$needle\" in: $haystack" | head -5 >&2
                return 1
        fi
}

# Sanitizer reports (build-asan) fail the case that produced them, even when
# the crashing command was expected to fail: every sanitized process writes
# its report into a per-case directory, checked after the case.
if [ -n "${TPMGUARD_ASAN_RUNTIME:-}" ]; then
        export LD_PRELOAD_ASAN=$TPMGUARD_ASAN_RUNTIME
fi
_sanitizer_dir=""

sanitizer_reports() {
        local f found=1
        for f in "$_sanitizer_dir"/*; do
                [ -f "$f" ] || continue
                found=0
                echo "# sanitizer report $f:" >&2
                sed 's/^/#   /' "$f" | head -40 >&2
        done
        return $found
}

run_cases() {
        # TPMGUARD_CASES="a b": only those cases (when working on one).
        if [ -n "${TPMGUARD_CASES:-}" ]; then
                local _tap_selected=() k
                for k in "${_tap_cases[@]}"; do
                        case " $TPMGUARD_CASES " in *" $k "*) _tap_selected+=("$k") ;; esac
                done
                _tap_cases=("${_tap_selected[@]}")
        fi
        echo "1..${#_tap_cases[@]}"
        local c rc base_asan=${ASAN_OPTIONS:-} base_ubsan=${UBSAN_OPTIONS:-}
        for c in "${_tap_cases[@]}"; do
                _tap_n=$((_tap_n + 1))
                _sanitizer_dir=$(mktemp -d "${TMPDIR:-/tmp}/tpmguard-sanitizer.XXXXXX")
                export ASAN_OPTIONS="${base_asan:+$base_asan:}log_path=$_sanitizer_dir/asan"
                export UBSAN_OPTIONS="${base_ubsan:+$base_ubsan:}log_path=$_sanitizer_dir/ubsan"
                # A plain statement, never in an "if" or an "||" list: bash
                # ignores set -e inside a subshell whose status is tested, and
                # a failing step must end the case. (The outer shell has no -e.)
                local rc
                ( set -e; trap tpm_teardown EXIT; "$c" )
                rc=$?
                sanitizer_reports && rc=1
                rm -rf "$_sanitizer_dir"
                if [ "$rc" = 0 ]; then
                        echo "ok $_tap_n - $c"
                else
                        echo "not ok $_tap_n - $c"
                        _tap_failed=$((_tap_failed + 1))
                fi
        done
        [ "$_tap_failed" = 0 ]
}

# A LUKS2 image with a recovery passphrase (fast pbkdf2 keyslot).
make_luks() {
        local img=$1
        truncate -s 40M "$img"
        printf 'recovery passphrase' >"$WORK/recovery.key"
        cryptsetup luksFormat --type luks2 --batch-mode --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
                --key-file "$WORK/recovery.key" "$img" >/dev/null
}

# A provisioned TPM and a LUKS2 image enrolled with PIN 1234 ($WORK/pin) and
# PCR 7; arguments go to tpm_setup. Scripts that need no more call it as
# setup_enrolled.
setup_enrolled_common() {
        tpm_setup "$@"
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
}

setup_enrolled() { setup_enrolled_common "$@"; }

# A second tpmguard token on $WORK/disk.img (enroll refuses one since issue 34):
# a random secret in a new keyslot, sealed by 'tpmguard seal' with the seal
# options given ("--pin-file F" or "--no-pin", ...) and imported.
second_token() {
        head -c 32 /dev/urandom | base64 | tr -d '\n' >"$WORK/slot2.key"
        cryptsetup luksAddKey --batch-mode --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
                --key-file "$WORK/recovery.key" "$WORK/disk.img" "$WORK/slot2.key" || return
        local slot
        slot=$(cryptsetup luksDump "$WORK/disk.img" | awk '/^  [0-9]+: luks2/ {sub(":", "", $1); s = $1} END {print s}')
        "$TPMGUARD" seal --pcrs 7 "$@" --secret-file "$WORK/slot2.key" >"$WORK/token2.json" || return
        cryptsetup token import --json-file "$WORK/token2.json" --key-slot "$slot" "$WORK/disk.img"
}

# Signs the pending marker in file $1 for image $2 as tpmguard does
# (lifecycle/marker-auth.c): HMAC-SHA256 under $WORK/state/marker.key over the
# canonical field string, written as "mac". A marker without a "nonce" gets
# one, registered in $WORK/state/pending-markers as an open operation's is
# (so the result is what a real interrupted operation leaves). An
# independent implementation of the canonical form, so a change to it
# breaks these tests. The key exists once tpmguard has written one marker
# (enroll does).
sign_marker() {
        python3 - "$1" "$(cryptsetup luksUUID "$2")" "$WORK/state" <<'PY'
import hashlib, hmac, json, os, sys
path, uuid, state = sys.argv[1:4]
m = json.load(open(path))
m.pop("mac", None)
if "nonce" not in m:
    m["nonce"] = os.urandom(16).hex()
    os.makedirs(os.path.join(state, "pending-markers"), mode=0o700, exist_ok=True)
    open(os.path.join(state, "pending-markers", m["nonce"]), "w").close()
p = m.get("pbkdf", {})
msg = ("tpmguard pending marker v2\nuuid=%s\nversion=%d\noperation=%s\nnonce=%s\ntoken=%d\nold_keyslot=%d\n"
       "new_keyslot=%d\ncommitted=%d\npbkdf=%d,%d,%d,%s\n") % (
    uuid, m["version"], m["operation"], m["nonce"], m.get("token", -1), m.get("old_keyslot", -1), m["new_keyslot"],
    1 if m.get("committed") else 0, p.get("iterations", 0), p.get("memory", 0), p.get("parallel", 0),
    p.get("type", ""))
m["mac"] = hmac.new(open(os.path.join(state, "marker.key"), "rb").read(), msg.encode(), hashlib.sha256).hexdigest()
json.dump(m, open(path, "w"))
PY
}

# Runs a command (cryptsetup, or a wrapper such as valgrind around it) with
# libcryptsetup loading tokens from a directory that holds only our freshly
# built plugin:
#   - cryptsetup >= 2.7 (Debian 13) has --external-tokens-path: it is inserted
#     after the cryptsetup word of the command;
#   - cryptsetup 2.6 (Debian 12) has no such option: the command runs in a
#     private mount namespace in which the compiled-in token directory is
#     bind-mounted over. Nothing leaks into the host's mounts.
# Which of the two is used depends on what cryptsetup --help offers, never on
# the release's name.
cryptsetup_has_external_tokens_path() {
        if [ -z "${_TG_EXT_TOKENS_PATH:-}" ]; then
                local help
                # Not piped into grep -q: under pipefail its early exit would fail the pipe.
                help=$(cryptsetup --help 2>/dev/null) || true
                _TG_EXT_TOKENS_PATH=no
                case $help in *--external-tokens-path*) _TG_EXT_TOKENS_PATH=yes ;; esac
        fi
        [ "$_TG_EXT_TOKENS_PATH" = yes ]
}

with_plugin() {
        local plugdir="$WORK/tokendir" a inserted=
        local cmd=() ext=
        mkdir -p "$plugdir"
        cp "$TPMGUARD_PLUGIN" "$plugdir/"
        if cryptsetup_has_external_tokens_path; then
                ext=yes
        elif [ ! -d "$TPMGUARD_SYSTEM_TOKENDIR" ]; then
                echo "# with_plugin: cryptsetup has no --external-tokens-path and its token directory" \
                        "$TPMGUARD_SYSTEM_TOKENDIR does not exist to be bind-mounted over" >&2
                return 125
        fi
        # A sanitized plugin (build-asan) needs the ASan runtime preloaded into
        # the uninstrumented cryptsetup, and only there: a wrapper in front of
        # it (the pty driver is python) would report its own leaks.
        for a in "$@"; do
                if [ -z "$inserted" ] && [ "${a##*/}" = cryptsetup ]; then
                        [ -z "${LD_PRELOAD_ASAN:-}" ] || cmd+=(env LD_PRELOAD="$LD_PRELOAD_ASAN")
                        cmd+=("$a")
                        [ -z "$ext" ] || cmd+=(--external-tokens-path "$plugdir")
                        inserted=1
                        continue
                fi
                cmd+=("$a")
        done
        [ -n "$inserted" ] || { echo "# with_plugin: no cryptsetup in: $*" >&2; return 125; }
        if [ -n "$ext" ]; then
                "${cmd[@]}"
                return
        fi
        # shellcheck disable=SC2016 # expanded by the inner sh
        unshare -m sh -c 'mount --bind "$0" "$1" && shift && exec "$@"' \
                "$plugdir" "$TPMGUARD_SYSTEM_TOKENDIR" "${cmd[@]}"
}

# The test swtpm has no resource manager: objects and sessions a process
# leaves loaded (a killed one, or tpm2-tools under clevis) stay in the TPM's
# few slots. Flush them, as the kernel's /dev/tpmrm0 would.
tpm_flush_contexts() {
        local t
        for t in --transient-object --loaded-session --saved-session; do
                TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_flushcontext "$t" >/dev/null 2>&1 || true
        done
}

# Tokens of tpmguard's peers, made by the real tools against the test swtpm,
# authorized by $WORK/recovery.key (tests/adversarial/peers-table does the same):
#   peer_systemd_enroll IMG PIN   systemd-cryptenroll --tpm2-device (PIN "" = none), PCR 7
#   peer_clevis_bind IMG          clevis luks bind, tpm2 pin, sha256 PCR 7
peer_systemd_enroll() {
        local pin=()
        [ -z "$2" ] || pin=(--tpm2-with-pin=yes)
        chmod 600 "$WORK/recovery.key"
        NEWPIN=$2 systemd-cryptenroll --unlock-key-file="$WORK/recovery.key" --tpm2-device="$TPMGUARD_TEST_TCTI" \
                --tpm2-pcrs=7 "${pin[@]}" "$1" >"$WORK/peer.log" 2>&1 || { cat "$WORK/peer.log" >&2; return 1; }
        tpm_flush_contexts
}
peer_clevis_bind() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI clevis luks bind -d "$1" -k "$WORK/recovery.key" tpm2 \
                '{"pcr_bank":"sha256","pcr_ids":"7"}' >"$WORK/peer.log" 2>&1 || { cat "$WORK/peer.log" >&2; return 1; }
        tpm_flush_contexts
}

# The interposer (tests/interposer/tpm-interposer) between tpmguard and the
# test's swtpm, on $WORK/evil.sock:
#   interposer_start ARGS...  starts it with ARGS (its mode and options; its
#                             findings go to $WORK/findings.json), waits until
#                             it listens, and points tpmguard.conf's tcti at it;
#   interposer_stop           stops it and points the tcti back at swtpm.
PROXY="$TPMGUARD_SRC/tests/interposer/tpm-interposer"
interposer_start() {
        "$PROXY" --listen "$WORK/evil.sock" --upstream "$WORK/tpm/tpm.sock" --findings "$WORK/findings.json" \
                --pidfile "$WORK/proxy.pid" "$@" >"$WORK/proxy.log" 2>&1 &
        for _ in $(seq 1 200); do
                [ -S "$WORK/evil.sock" ] && [ -s "$WORK/proxy.pid" ] && break
                sleep 0.05
        done
        [ -S "$WORK/evil.sock" ] || { echo "# proxy did not start" >&2; cat "$WORK/proxy.log" >&2; return 1; }
        sed -i "s|^tcti = .*|tcti = swtpm:path=$WORK/evil.sock|" "$WORK/tpmguard.conf"
}
interposer_stop() {
        [ -s "$WORK/proxy.pid" ] || return 0
        local pid
        pid=$(cat "$WORK/proxy.pid")
        kill "$pid" 2>/dev/null
        for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        ! kill -0 "$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null
        rm -f "$WORK/proxy.pid"
        sed -i "s|^tcti = .*|tcti = $TPMGUARD_TEST_TCTI|" "$WORK/tpmguard.conf"
}

# The volume's tpmguard token through the plugin, as cryptsetup's unlock
# runs it (the PIN, if any, on stdin); pin_opens FILE: does that PIN open it?
token_open() {
        with_plugin cryptsetup open --test-passphrase --token-only --token-type tpmguard "$WORK/disk.img"
}
pin_opens() { token_open <"$1" >/dev/null 2>&1; }

# "! cmd" never trips set -e; this does.
refute() {
        if "$@"; then
                echo "# unexpectedly succeeded: $*" >&2
                return 1
        fi
}

# The interposer's python needs python3-cryptography: skips the script without it.
require_interposer() {
        PY=/usr/bin/python3   # Debian's python3, as the interposer's own #! line uses
        [ -x $PY ] || PY=python3
        $PY -c 'import cryptography' 2>/dev/null || skip_all "python3-cryptography not installed (the interposer needs it)"
}

# Does the recovery passphrase still open the volume?
recovery_opens() {
        cryptsetup open --test-passphrase --key-file "$WORK/recovery.key" "$1"
}

# The TPM's DA failure counter (TPM2_PT_LOCKOUT_COUNTER).
da_counter() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_getcap properties-variable |
                awk '/TPM2_PT_LOCKOUT_COUNTER/ {print $2}'
}

# pty_open TRIES PIN...: cryptsetup on a terminal (tests/integration/pty-answer
# types each PIN at its prompt); sets PROMPTS and RC, the terminal output is in
# $WORK/tty.log. tty_has / tty_lacks TEXT check that output.
PTY_ANSWER="$TPMGUARD_SRC/tests/integration/pty-answer"
pty_open() {
        local tries=$1 line
        shift
        RC=0
        line=$(with_plugin "$PTY_ANSWER" --prompt 'Enter token( [0-9]+)? PIN: ' --log "$WORK/tty.log" "$@" -- \
                cryptsetup open --test-passphrase --token-only --token-type tpmguard --tries "$tries" \
                "$WORK/disk.img") || RC=$?
        # shellcheck disable=SC2034 # read by the test scripts that source this file
        PROMPTS=$(printf '%s\n' "$line" | sed -n 's/^prompts=\([0-9]*\) .*/\1/p')
        echo "# cryptsetup --tries $tries: exit $RC, $line" >&2
}

tty_has() {
        grep -q -- "$1" "$WORK/tty.log" || { echo "# terminal output lacks \"$1\":" >&2; sed 's/^/#   /' "$WORK/tty.log" >&2; return 1; }
}

tty_lacks() {
        ! grep -q -- "$1" "$WORK/tty.log" || { echo "# terminal output has \"$1\":" >&2; sed 's/^/#   /' "$WORK/tty.log" >&2; return 1; }
}

# Firmware event logs for tests (issue 30; tests/fixture/make-eventlog): the
# Secure Boot variables of a test boot in $WORK/sb (eventlog_sb_setup); a boot's
# log written to $1 and its events extended into the TPM, the rest of the
# arguments overriding this boot's variables (eventlog_boot); the next boot:
# a TPM reset (PCRs back to zero, the new NULL key's name recorded as the
# kernel would), then eventlog_boot (eventlog_reboot).
EVENTLOG_MAKE="$TPMGUARD_SRC/tests/fixture/make-eventlog"
EFI_OWNER=77777777-1111-2222-3333-444444444444
eventlog_sb_setup() {
        mkdir -p "$WORK/sb" &&
                "$EVENTLOG_MAKE" certs "$WORK/sb" &&
                "$EVENTLOG_MAKE" esl-x509 "$EFI_OWNER" "$WORK/sb/pk.der" >"$WORK/sb/pk.esl" &&
                "$EVENTLOG_MAKE" esl-x509 "$EFI_OWNER" "$WORK/sb/kek.der" >"$WORK/sb/kek.esl" &&
                "$EVENTLOG_MAKE" esl-x509 "$EFI_OWNER" "$WORK/sb/db.der" >"$WORK/sb/db.esl" &&
                "$EVENTLOG_MAKE" esl-sha256 "$EFI_OWNER" 20 dbx-2025 >"$WORK/sb/dbx.esl"
}
eventlog_boot() {
        local log=$1
        shift
        "$EVENTLOG_MAKE" log --pk "$WORK/sb/pk.esl" --kek "$WORK/sb/kek.esl" --db "$WORK/sb/db.esl" \
                --dbx "$WORK/sb/dbx.esl" --authority "$WORK/sb/db.der" --authority-owner "$EFI_OWNER" \
                "$@" --out "$log" --extends "$log.extends" || return
        local pcr sha1 sha256
        while read -r pcr sha1 sha256; do
                TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend "$pcr:sha1=$sha1,sha256=$sha256" || return
        done <"$log.extends"
}
eventlog_reboot() {
        "$FIXTURE" reset "$WORK/tpm" >/dev/null
        "$FIXTURE" null-name "$WORK/tpm" "$WORK/null_name"
        eventlog_boot "$@"
}

# RFC 6238, written here from the RFC (not tpmguard's code): the code of the URI's secret at unix time $2.
rfc6238() {
        python3 -c '
import base64, hashlib, hmac, struct, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
q = {k: v[0] for k, v in urllib.parse.parse_qs(u.query).items()}
assert u.scheme == "otpauth" and u.netloc == "totp", u
assert q["algorithm"] == "SHA1" and q["digits"] == "6" and q["period"] == "30" and q["issuer"] == "tpmguard", q
key = base64.b32decode(q["secret"] + "=" * (-len(q["secret"]) % 8))
mac = hmac.new(key, struct.pack(">Q", int(sys.argv[2]) // 30), hashlib.sha1).digest()
o = mac[-1] & 0x0f
print("%06d" % ((struct.unpack(">I", mac[o:o + 4])[0] & 0x7fffffff) % 10 ** 6))' "$1" "$2"
}

# 'tpmguard totp show --json' succeeds and prints the code of the otpauth URI $1 for the window it names.
totp_shows_code_of() {
        local start code
        expect_exit 0 "$TPMGUARD" totp show --json || return 1
        start=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["window_start"])' <<<"$OUT")
        code=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["code"])' <<<"$OUT")
        [ "$code" = "$(rfc6238 "$1" "$start")" ] ||
                { echo "# tpmguard shows $code, the enrolled URI's RFC 6238 code at $start is $(rfc6238 "$1" "$start")" >&2; return 1; }
}
