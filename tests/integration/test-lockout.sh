#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The lockout hierarchy and the hierarchy passwords (issue 14, sections 1
# and 5), against a real swtpm that starts like a factory-fresh TPM: empty
# lockout password, permissive DA parameters. tpm2-tools is the independent
# client that checks what tpmguard did, and tests/interposer records the bus.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_createprimary tpm2_dictionarylockout tpm2_getcap cryptsetup python3
PY=/usr/bin/python3
[ -x $PY ] || PY=python3

tpm2() { TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI "$@"; }

# One TPM property, as tpm2-tools reports it (hex for numbers, 0/1 for bits).
prop() {
        tpm2 tpm2_getcap properties-variable | awk -v k="$1:" '$1 == k {print $2; exit}'
}

# The DA configuration tpmguard.conf gives (write_config writes the fixture's).
set_da_config() {
        sed -i '/^da_/d' "$WORK/tpmguard.conf"
        [ $# = 0 ] || printf 'da_max_tries = %s\nda_recovery_time = %s\nda_lockout_recovery = %s\n' "$@" \
                >>"$WORK/tpmguard.conf"
}

# n DA failures: a DA-protected primary (no noDA) used with a wrong password.
da_failures() {
        local n=$1 i
        for i in $(seq 1 "$n"); do
                # A fresh context file each time: tpm2-tools spoils it after a failure.
                tpm2 tpm2_createprimary -C o -G ecc -p right -c "$WORK/da$i.ctx" >/dev/null
                ! tpm2 tpm2_create -C "$WORK/da$i.ctx" -P wrong -G ecc -u "$WORK/x.pub" -r "$WORK/x.priv" \
                        >/dev/null 2>&1 || { echo "# a wrong password was accepted" >&2; return 1; }
                tpm2 tpm2_flushcontext -t >/dev/null 2>&1 || true
        done
}

test_case provision_takes_lockout_and_sets_safe_da
provision_takes_lockout_and_sets_safe_da() {
        tpm_setup
        # The fixture starts as a factory TPM: no lockout password, permissive DA.
        [ "$(prop lockoutAuthSet)" = 0 ]
        [ "$(prop TPM2_PT_MAX_AUTH_FAIL)" = 0x3E8 ]
        set_da_config # tpmguard's defaults
        expect_exit 0 "$TPMGUARD" provision --lockout-auth-copy "$WORK/lockout.copy"
        expect_in "took the TPM's lockout hierarchy" "$OUT"
        # What an independent client sees: a lockout password, and the defaults
        # (32 tries, one forgiven every 7200 s, 86400 s after a wrong lockout password).
        [ "$(prop lockoutAuthSet)" = 1 ]
        [ "$(prop TPM2_PT_MAX_AUTH_FAIL)" = 0x20 ]
        [ "$(prop TPM2_PT_LOCKOUT_INTERVAL)" = 0x1C20 ]
        [ "$(prop TPM2_PT_LOCKOUT_RECOVERY)" = 0x15180 ]
        # Stored root-only, 64 hex digits, exported on demand; never printed to a standard output
        # that is not a terminal (an automated run's log), copied to the file the user named.
        [ "$(stat -c %a "$WORK/state/lockout-auth")" = 400 ]
        grep -qxE '[0-9a-f]{64}' "$WORK/state/lockout-auth"
        refute_in "$(cat "$WORK/state/lockout-auth")" "$OUT"
        expect_in "not a terminal" "$OUT"
        [ "$(cat "$WORK/lockout.copy")" = "$(cat "$WORK/state/lockout-auth")" ]
        [ "$(stat -c %a "$WORK/lockout.copy")" = 600 ]
        expect_exit 0 "$TPMGUARD" lockout export
        [ "$OUT" = "$(cat "$WORK/state/lockout-auth")" ]
        # Without the password nobody resets the DA counter or weakens the parameters.
        ! tpm2 tpm2_dictionarylockout --clear-lockout >/dev/null 2>&1 ||
                { echo "# DictionaryAttackLockReset without the password succeeded" >&2; return 1; }
        ! tpm2 tpm2_dictionarylockout --setup-parameters --max-tries=1000 --recovery-time=1 \
                --lockout-recovery-time=1 >/dev/null 2>&1 ||
                { echo "# DictionaryAttackParameters without the password succeeded" >&2; return 1; }
        [ "$(prop TPM2_PT_MAX_AUTH_FAIL)" = 0x20 ]
        # Provisioning again keeps everything (and needs no lockout command,
        # which the TPM now refuses for 86400 s after the wrong password above).
        expect_exit 0 "$TPMGUARD" provision --json
        expect_in '"ownership": "held"' "$OUT"
        expect_in '"params_set": true' "$OUT"
        ! grep -qF "$(cat "$WORK/state/lockout-auth")" <<<"$OUT" || { echo "# the password is in the JSON" >&2; return 1; }
        expect_exit 0 "$TPMGUARD" doctor --json
        expect_in '"check": "lockout"' "$OUT"
        "$PY" - "$OUT" <<'PY'
import json, sys
checks = {c["check"]: c["status"] for c in json.loads(sys.argv[1])["checks"]}
assert checks["lockout"] == "ok" and checks["da-parameters"] == "ok", checks
PY
}

test_case doctor_reports_empty_lockout_and_weak_da
doctor_reports_empty_lockout_and_weak_da() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        # Undo what provisioning did, as a TPM cleared or taken by someone else would be.
        tpm2 tpm2_changeauth -c l -p "hex:$(cat "$WORK/state/lockout-auth")" >/dev/null
        rm -f "$WORK/state/lockout-auth"
        set_da_config 32 7200 86400 # stricter than the TPM's 1000 tries, 1 s
        expect_exit 4 "$TPMGUARD" doctor --json # not-provisioned: what 'tpmguard lockout setup' finishes
        "$PY" - "$OUT" <<'PY'
import json, sys
checks = {c["check"]: c for c in json.loads(sys.argv[1])["checks"]}
for cid, words in (("lockout", "no password"), ("da-parameters", "fast PIN guessing")):
    c = checks[cid]
    assert c["status"] == "problem", c
    assert words in c["summary"], c
    assert "tpmguard lockout setup" in c["next_step"], c
PY
        # The command doctor names fixes both; at a terminal it shows the new password once.
        expect_exit 0 "$TPMGUARD_SRC/tests/integration/pty-answer" --prompt 'no prompt expected' --log "$WORK/tty.log" \
                -- "$TPMGUARD" lockout setup
        expect_in "took the TPM's lockout hierarchy" "$(cat "$WORK/tty.log")"
        expect_in "$(cat "$WORK/state/lockout-auth")" "$(cat "$WORK/tty.log")"
        [ "$(prop TPM2_PT_MAX_AUTH_FAIL)" = 0x20 ]
        expect_exit 0 "$TPMGUARD" doctor --json
        "$PY" - "$OUT" <<'PY'
import json, sys
checks = {c["check"]: c["status"] for c in json.loads(sys.argv[1])["checks"]}
assert checks["lockout"] == "ok" and checks["da-parameters"] == "ok", checks
PY
}

test_case lockout_reset_needs_the_password
lockout_reset_needs_the_password() {
        tpm_setup --strict-da # 3 tries, 10 s; tpmguard.conf says the same
        "$TPMGUARD" provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        da_failures 3
        [ "$(prop inLockout)" = 1 ]
        expect_exit 0 "$TPMGUARD" status --json "$WORK/disk.img"
        "$PY" - "$OUT" <<'PY'
import json, sys
da = json.loads(sys.argv[1])["tpm"]["dictionary_attack"]
assert da["in_lockout"] and da["lockout_auth_set"] and da["lockout_auth_held"], da
assert not da["weaker_than_configured"], da
PY
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "Lockout password: set, held by tpmguard" "$OUT"
        # An attacker's reset without the password is refused (and locks the
        # lockout hierarchy for its 10 s lockout recovery).
        ! tpm2 tpm2_dictionarylockout --clear-lockout >/dev/null 2>&1 ||
                { echo "# DictionaryAttackLockReset without the password succeeded" >&2; return 1; }
        [ "$(prop inLockout)" = 1 ]
        sleep 11
        # The owner's reset, with the stored password.
        expect_exit 0 "$TPMGUARD" lockout-reset
        expect_in "not in lockout" "$OUT"
        [ "$(prop inLockout)" = 0 ]
        [ "$(prop TPM2_PT_LOCKOUT_COUNTER)" = 0x0 ]
        # Without the stored password, and none given, it says what it needs.
        mv "$WORK/state/lockout-auth" "$WORK/lockout-auth"
        expect_exit 10 "$TPMGUARD" lockout-reset
        expect_in "--lockout-auth-file" "$ERR"
        expect_exit 0 "$TPMGUARD" lockout-reset --lockout-auth-file "$WORK/lockout-auth"
        # The recovery passphrase opens the volume throughout.
        recovery_opens "$WORK/disk.img"
}

test_case foreign_lockout_password
foreign_lockout_password() {
        tpm_setup
        tpm2 tpm2_changeauth -c l other-owner >/dev/null
        set_da_config 5 600 3600
        # Said, not fatal: the key is pinned, nothing of the lockout hierarchy changed.
        expect_exit 0 "$TPMGUARD" provision
        expect_in "another owner" "$OUT$ERR"
        test -s "$WORK/state/ek-signing-key.json"
        test ! -e "$WORK/state/lockout-auth"
        [ "$(prop TPM2_PT_MAX_AUTH_FAIL)" = 0x3E8 ]
        expect_exit 4 "$TPMGUARD" doctor --json
        "$PY" - "$OUT" <<'PY'
import json, sys
checks = {c["check"]: c["status"] for c in json.loads(sys.argv[1])["checks"]}
assert checks["lockout"] == "warning" and checks["da-parameters"] == "problem", checks
PY
        # A wrong one is refused and says so.
        printf 'not-it\n' >"$WORK/wrong"
        expect_exit 10 "$TPMGUARD" lockout setup --lockout-auth-file "$WORK/wrong"
        expect_in "refused the given lockout password" "$ERR"
        sleep 2 # the fixture's 1 s lockout recovery
        printf 'other-owner\n' >"$WORK/lauth"
        expect_exit 0 "$TPMGUARD" lockout setup --lockout-auth-file "$WORK/lauth"
        [ "$(prop TPM2_PT_MAX_AUTH_FAIL)" = 0x5 ]
        [ "$(prop TPM2_PT_LOCKOUT_INTERVAL)" = 0x258 ]
        [ "$(prop TPM2_PT_LOCKOUT_RECOVERY)" = 0xE10 ]
        expect_exit 0 "$TPMGUARD" lockout-reset --lockout-auth-file - <"$WORK/lauth"
}

# --- nothing secret on the bus ---------------------------------------------------

proxy_start() { interposer_start --mode record --record "$WORK/capture.jsonl"; }

proxy_stop() { interposer_stop; }

# Fails when the capture or the findings hold one of the secrets (hex, one a line).
bus_holds_no_secret() {
        "$PY" - "$WORK/capture.jsonl" "$WORK/findings.json" "$WORK/secrets" <<'PY'
import json, sys
capture, findings, secrets_path = sys.argv[1:4]
secrets = [bytes.fromhex(l.strip()) for l in open(secrets_path) if l.strip()]
records = [json.loads(l) for l in open(capture)]
bad = []
for r in records:
    for key in ("hex", "upstream_hex"):
        if r.get(key) and any(s in bytes.fromhex(r[key]) for s in secrets):
            bad.append("capture seq %s (%s %s) holds a hierarchy password" % (r["seq"], r["command"], r["dir"]))
f = json.load(open(findings))
text = json.dumps(f).lower()
for s in secrets:
    if s.hex() in text:
        bad.append("the findings hold %s..." % s.hex()[:8])
for a in f.get("auth_values", []):
    if a.get("auth_value"):
        bad.append("an auth value in clear: %s" % a)
commands = {r["command"] for r in records}
print("# %d records; commands: %s" % (len(records), " ".join(sorted(commands))))
for b in bad:
    print("# " + b)
sys.exit(1 if bad else 0)
PY
}

test_case no_hierarchy_password_on_the_bus
no_hierarchy_password_on_the_bus() {
        tpm_setup
        $PY -c 'import cryptography' 2>/dev/null || { echo "# python3-cryptography missing: skipped"; return 0; }
        # Every hierarchy password set, as an administrator might (directly, not through the proxy).
        printf 'endorsement-pw-7f3a\n' >"$WORK/eauth"
        printf 'owner-pw-91c2\n' >"$WORK/oauth"
        tpm2 tpm2_changeauth -c e endorsement-pw-7f3a >/dev/null
        tpm2 tpm2_changeauth -c o owner-pw-91c2 >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        head -c 32 /dev/urandom >"$WORK/secret"

        proxy_start
        expect_exit 0 "$TPMGUARD" provision --endorsement-auth-file "$WORK/eauth"
        expect_exit 0 "$TPMGUARD" verify --endorsement-auth-file "$WORK/eauth"
        expect_exit 0 "$TPMGUARD" seal --secret-file "$WORK/secret" --pcrs 7 --pin-file "$WORK/pin" \
                --endorsement-auth-file "$WORK/eauth" --owner-auth-file "$WORK/oauth"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" \
                --endorsement-auth-file "$WORK/eauth" --owner-auth-file "$WORK/oauth" "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" lockout setup --endorsement-auth-file "$WORK/eauth"
        expect_exit 0 "$TPMGUARD" lockout-reset --endorsement-auth-file "$WORK/eauth"
        proxy_stop

        # The lockout password provisioning set (the TPM has it: an independent client uses it).
        tpm2 tpm2_dictionarylockout --clear-lockout -p "hex:$(cat "$WORK/state/lockout-auth")" >/dev/null
        {
                printf 'endorsement-pw-7f3a' | od -An -v -tx1 | tr -d ' \n'; echo
                printf 'owner-pw-91c2' | od -An -v -tx1 | tr -d ' \n'; echo
                cat "$WORK/state/lockout-auth"
        } >"$WORK/secrets"
        grep -q '"command": "HierarchyChangeAuth"' "$WORK/capture.jsonl" ||
                { echo "# the capture has no HierarchyChangeAuth: the lockout password was never set through it" >&2; return 1; }
        bus_holds_no_secret

        # The check can fail: a client that sends the endorsement password in a
        # password session (TPM_RS_PW; tpm2-tools would use an HMAC session),
        # through the same proxy, is caught.
        proxy_start
        "$PY" - "$WORK/evil.sock" endorsement-pw-7f3a <<'PY'
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
pw = sys.argv[2].encode()
def call(cmd):
    s.sendall(cmd)
    head = s.recv(10, socket.MSG_WAITALL)
    rest = s.recv(struct.unpack(">I", head[2:6])[0] - 10, socket.MSG_WAITALL)
    return struct.unpack(">I", head[6:10])[0], rest
# CreatePrimary(endorsement), password session, an ECC P-256 restricted decrypt key.
auth = struct.pack(">IH", 0x40000009, 0) + b"\x01" + struct.pack(">H", len(pw)) + pw
public = bytes.fromhex("0023000b00030072000000060080004300100003001000000000")
params = bytes.fromhex("000400000000") + struct.pack(">H", len(public)) + public + bytes.fromhex("000000000000")
body = struct.pack(">I", 0x4000000B) + struct.pack(">I", len(auth)) + auth + params
rc, rest = call(struct.pack(">HII", 0x8002, 10 + len(body), 0x131) + body)
assert rc == 0, hex(rc)
handle = rest[:4]
rc, _ = call(struct.pack(">HII", 0x8001, 14, 0x165) + handle)
assert rc == 0, hex(rc)
PY
        proxy_stop
        ! bus_holds_no_secret >/dev/null || { echo "# a password in clear went unnoticed" >&2; return 1; }
}

run_cases
