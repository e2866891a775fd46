#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Adversarial tier: the attack matrix (design §1, §6 tier 3; issue 5).
# Every tpmguard operation runs through tests/interposer/tpm-interposer in
# every mode, against its own swtpm (a copy of a state provisioned once per
# run). For each case the test asserts, on exit codes and on the proxy's
# findings and capture files:
#
#   record     the operation works, and no secret crosses the bus: the
#              capture (every command and response, byte-aligned in each hex
#              field) holds neither the keyslot secret, nor the PIN, nor
#              SHA-256(PIN), nor the authValue of any tpmguard token on the
#              image (format 1: PBKDF2-HMAC-SHA256(PIN, token salt, token
#              iterations); format 2: its HKDF of the PIN's Argon2id, and the
#              mask K and S XOR K, by tests/integration/pin-derive.c).
#              The keyslot secret searched for: seal-import, the random
#              secret the test gave it; the plugin unlocks, the secret the
#              plugin returned (token-open --secret-out, checked to open a
#              keyslot); enroll and the cryptsetup-binary unlocks, the secret
#              unsealed afterwards, directly, by the plugin in process;
#              provision and verify handle no keyslot secret (PIN values
#              only);
#   active     the operation fails closed with the expected exit code (or,
#              for the plugin, the expected errno, and for the cryptsetup
#              binary the interposer message, which is the deliverable there),
#              the attack really happened (findings.attacks is not empty),
#              the findings hold no secret (no unsealed or sensitive
#              plaintext, no PIN, no authValue equal to the secret ones, no
#              verified session key of a session that carried a secret), the
#              capture holds none either, and the recovery keyslot opens.
#
# Adding an operation is one `op` line (plus its run function); adding an
# attack is one `mode` line. `--shard K/N` runs every Nth case (meson runs
# the shards in parallel); `--only REGEX` picks cases by name.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
require_tools swtpm swtpm_setup tpm2_createprimary cryptsetup unshare python3 systemd-cryptenroll tpm2_flushcontext
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"
require_interposer
: "${TPMGUARD_TOKEN_OPEN:?set by meson: the token-open helper}"
export TSS2_LOG=all+none
PIN=1234
PIN2=5678   # change-pin's new PIN

shard=1/1 only=.
while [ $# -gt 0 ]; do
        case $1 in
        --shard) shard=$2; shift ;;
        --only) only=$2; shift ;;
        *) echo "usage: $0 [--shard K/N] [--only REGEX]" >&2; exit 2 ;;
        esac
        shift
done

# --- operations -------------------------------------------------------------
# op NAME STATE CACHE TAGS... : STATE is the template the case starts from
# (bare: TPM and a LUKS image with only the recovery keyslot; enrolled:
# provisioned, and keyslot 1 enrolled with PIN + PCR 7). CACHE "warm" fills
# cache_dir/null-key.json (tpmguard verify --record, directly) before the
# proxy starts; "cold" leaves it empty. TAGS name the TPM commands the
# operation relies on; a mode runs against the operations with its tag.
# run_NAME runs the operation through the proxy; it may leave the keyslot
# secret (hex) in $WORK/secret.hex for the capture search.
OPS=()
op() { OPS+=("$*"); }
op provision              bare     cold activatecred
op verify                 enrolled cold certify
op enroll                 enrolled cold certify create pcrread readpublic load unseal
op seal-import            enrolled cold certify create pcrread readpublic
op unlock-plugin-cold     enrolled cold certify load unseal inject
op unlock-plugin-warm     enrolled warm readclock readpublic load unseal ctxload
op unlock-cryptsetup-cold enrolled cold certify load unseal
op unlock-cryptsetup-warm enrolled warm readclock readpublic load unseal ctxload
op change-pin             enrolled cold certify create unseal
op rotate                 enrolled cold certify create unseal
op reseal                 enrolled cold certify create unseal
op recovery-key           enrolled cold certify unseal
op passwd                 enrolled cold certify unseal
# A kernel without null_name (Debian's; kernel_null_name = if-available):
# the fresh NULL key is still certified at every use.
op verify-no-null-name        enrolled cold certify
op unlock-plugin-no-null-name enrolled cold certify unseal
# The same policy for every other operation that verifies, against the
# modes that attack what the kernel's name would otherwise catch (the
# redirect modes, issue 13) and record ("narrow": not the other "all" modes).
op enroll-no-null-name                 enrolled cold narrow
op seal-import-no-null-name            enrolled cold narrow
op unlock-cryptsetup-no-null-name      enrolled cold narrow
op unlock-plugin-warm-no-null-name     enrolled warm narrow
op unlock-cryptsetup-warm-no-null-name enrolled warm narrow
op change-pin-no-null-name             enrolled cold narrow
op rotate-no-null-name                 enrolled cold narrow
op reseal-no-null-name                 enrolled cold narrow
# Provisioning and the lockout hierarchy on such a kernel: the bootstrap
# session and the verification salt to a NULL key that nothing vouches for
# until its certification (red-team review: these were not in the matrix).
op provision-no-null-name              bare     cold activatecred
op lockout-setup-no-null-name          enrolled cold certify
op lockout-reset-no-null-name          enrolled cold certify
# The lockout hierarchy (issue 14): taking it through the proxy (its password
# cleared first, as on a factory TPM), and resetting the DA counter with it.
op lockout-setup          enrolled cold certify
op lockout-reset          enrolled cold certify
# migrate (issue 19): a token of the real systemd-cryptenroll (no PIN, made
# directly, as at install time) replaced by a tpmguard one through the proxy;
# an enrollment underneath, so enroll's tags.
op migrate                enrolled cold certify create pcrread readpublic load unseal
# A token without a PIN (issue 14 §3: --no-pin with allow_no_pin = yes),
# enrolled directly before the proxy starts, unlocked through the plugin.
# Against the injected unseal it is exposed, as documented (tpmguard(8),
# docs/security.md); the PIN token (unlock-plugin-cold) withstands it. The
# verification in front of the unseal is the PIN token's, so it meets the
# "all" modes and the injected unseal only.
op unlock-plugin-no-pin   enrolled cold inject
# tpmguard pcrs (issue 30): a firmware event log whose events are extended
# into the TPM before the proxy starts; the replay is compared with PCR
# values read over the verified session, so a tampered PCR_Read, or any
# attack on the verification, fails closed (exit 3) instead of vouching for
# the log.
op pcrs                   enrolled cold certify pcrread
# The update path (issue 30, docs/design.md §9.2): update prepare's grace (its
# resetCount read in an audited ReadClock, its seal a CreateLoaded), update
# finish over the grace after PCR 7 changed (the PCR values it binds to read
# over the audit session), and the plugin's unlock through the grace (the seal
# chosen from audited reads; the TPM checks the bound and the PIN).
op update-prepare         enrolled cold certify unseal readclock grace
op update-finish          enrolled cold certify unseal pcrread grace
op unlock-plugin-grace    enrolled cold certify load unseal pcrread readclock inject
# Genuine before typed (issue 32): the TOTP secret, sealed without a PIN,
# enrolled through the proxy, and its code shown through the proxy (the
# secret enrolled directly first). Like the no-PIN token, the injected
# unseal reads it (documented in docs/security.md); every other attack
# leaves no code and leaks nothing.
op totp-enroll            enrolled cold certify create pcrread readpublic load unseal
op totp-show              enrolled cold certify readpublic load unseal inject

run_provision() { expect_exit 0 "$TPMGUARD" provision && test -s "$WORK/state/ek-signing-key.json"; }
run_verify() { expect_exit 0 "$TPMGUARD" verify; }
run_enroll() {
        expect_exit 0 "$TPMGUARD" enroll --wipe-slot tpmguard --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img" || return
        # The new keyslot secret, for the capture search: unsealed afterwards
        # directly from the TPM (the proxy has stopped seeing traffic by then).
        after_proxy=fetch_enrolled_secret
}
# Unseals the newest tpmguard token's secret directly from the TPM, after the
# proxy has gone (a fresh null_name first: a reset mode changed the NULL seed,
# as a reboot would).
fetch_enrolled_secret() {
        local id
        # A reboot: a failed operation may have left objects in swtpm's few
        # slots (ESAPI refuses to flush after a refused response, and the SYS
        # layer underneath, which tpmguard then flushes through, after a
        # response cut short; the kernel's resource manager flushes at close).
        "$FIXTURE" stop "$WORK/tpm" >/dev/null
        "$FIXTURE" resume "$WORK/tpm" >/dev/null
        "$FIXTURE" null-name "$WORK/tpm" "$WORK/null_name"
        id=$(cryptsetup luksDump "$WORK/disk.img" | awk '/^  [0-9]+: tpmguard/ {sub(":", "", $1); t=$1} END {print t}')
        "$TPMGUARD_TOKEN_OPEN" "$TPMGUARD_PLUGIN" "$WORK/disk.img" "$id" --secret-out "$WORK/secret.one" \
                <"$WORK/pin" >/dev/null && cat "$WORK/secret.one" >>"$WORK/secret.hex"
}
run_seal-import() {
        local slot
        # The first free of keyslots 5..7 (a replay mode runs this twice).
        slot=$(cryptsetup luksDump "$WORK/disk.img" | awk '/^  [0-9]+: luks2/ {sub(":", "", $1); used[$1] = 1}
                END {for (s = 5; s <= 7; s++) if (!(s in used)) {print s; exit}}')
        head -c 32 /dev/urandom >"$WORK/slot.key"
        od -An -v -tx1 "$WORK/slot.key" | tr -d ' \n' >>"$WORK/secret.hex"
        echo >>"$WORK/secret.hex"
        cryptsetup luksAddKey --batch-mode --pbkdf pbkdf2 --pbkdf-force-iterations 1000 \
                --key-file "$WORK/recovery.key" --new-key-slot "$slot" "$WORK/disk.img" "$WORK/slot.key" || return
        expect_exit 0 "$TPMGUARD" seal --secret-file "$WORK/slot.key" --pcrs 7 --pin-file "$WORK/pin" || return
        printf '%s' "$OUT" >"$WORK/token.json"
        with_plugin cryptsetup token import --json-file "$WORK/token.json" --key-slot "$slot" "$WORK/disk.img"
}
run_unlock-plugin-cold() {
        rm -f "$WORK/run/null-key.json"
        after_proxy=fetch_enrolled_secret
        expect_exit 0 "$TPMGUARD_TOKEN_OPEN" "$TPMGUARD_PLUGIN" "$WORK/disk.img" 0 \
                --secret-out "$WORK/secret.hex" <"$WORK/pin"
}
run_unlock-plugin-warm() {
        test -s "$WORK/run/null-key.json" || { echo "# warm case without a cache" >&2; return 1; }
        after_proxy=fetch_enrolled_secret
        expect_exit 0 "$TPMGUARD_TOKEN_OPEN" "$TPMGUARD_PLUGIN" "$WORK/disk.img" 0 \
                --secret-out "$WORK/secret.hex" <"$WORK/pin"
}
unlock_cryptsetup() {
        after_proxy=fetch_enrolled_secret
        expect_exit 0 with_plugin cryptsetup open --test-passphrase --token-only --token-type tpmguard \
                "$WORK/disk.img" <"$WORK/pin"
}
run_unlock-cryptsetup-cold() {
        rm -f "$WORK/run/null-key.json"
        unlock_cryptsetup
}
# The lifecycle operations unseal the enrolled secret and seal a new one
# (change-pin: under the new PIN; rotate: a new secret; reseal: the current
# PCR values). before_OP runs directly, before the proxy starts: it reads the
# enrolled secret, so that the capture search covers the old secret too.
# Afterwards, worked or refused, some tpmguard token must still unlock with
# the old or the new PIN (lose nothing); every secret it gives is searched for.
still_unlocks() {
        local id pin opened=""
        "$FIXTURE" stop "$WORK/tpm" >/dev/null
        "$FIXTURE" resume "$WORK/tpm" >/dev/null
        "$FIXTURE" null-name "$WORK/tpm" "$WORK/null_name"
        # The boot chain's measurements of this boot, as the case's TPM saw them (update-finish).
        ${after_resume:-true}
        for id in $(cryptsetup luksDump "$WORK/disk.img" | awk '/^  [0-9]+: tpmguard/ {sub(":", "", $1); print $1}'); do
                for pin in "$WORK/pin" "$WORK/pin2"; do
                        if "$TPMGUARD_TOKEN_OPEN" "$TPMGUARD_PLUGIN" "$WORK/disk.img" "$id" \
                                --secret-out "$WORK/secret.one" <"$pin" >/dev/null 2>&1; then
                                cat "$WORK/secret.one" >>"$WORK/secret.hex"
                                opened=1
                        fi
                done
        done
        [ -n "$opened" ] || { echo "# no tpmguard token unlocks with the old or the new PIN" >&2; return 1; }
}
before_change-pin() { fetch_enrolled_secret; }
run_change-pin() {
        after_proxy=still_unlocks
        expect_exit 0 "$TPMGUARD" change-pin --pin-file "$WORK/pin" --new-pin-file "$WORK/pin2" "$WORK/disk.img"
}
before_rotate() { fetch_enrolled_secret; }
run_rotate() {
        after_proxy=still_unlocks
        expect_exit 0 "$TPMGUARD" rotate --pin-file "$WORK/pin" "$WORK/disk.img"
}
before_reseal() { fetch_enrolled_secret; }
run_reseal() {
        after_proxy=still_unlocks
        expect_exit 0 "$TPMGUARD" reseal --pin-file "$WORK/pin" "$WORK/disk.img"
}
# The passphrase operations (issue 21): authorized by the token's unseal,
# they replace the recovery passphrase (keyslot 0). The capture search
# covers the old recovery passphrase, the new passphrase or recovery key and
# the unsealed keyslot secret (before_*). Refused, they must leave the image
# byte for byte unchanged; worked, $WORK/recovery.key becomes the new secret
# (for run_case's "recovery keyslot still opens").
before_recovery-key() { fetch_enrolled_secret; }
before_passwd() { fetch_enrolled_secret; }
passphrase_op_begin() {
        od -An -v -tx1 "$WORK/recovery.key" | tr -d ' \n' >>"$WORK/secret.hex"
        echo >>"$WORK/secret.hex"
        sha256sum "$WORK/disk.img" | cut -d' ' -f1 >"$WORK/image.before"
        after_proxy=passphrase_op_end
}
passphrase_op_end() {
        if [ "${LAST_EXIT:-0}" != 0 ] && [ "$(sha256sum "$WORK/disk.img" | cut -d' ' -f1)" != "$(cat "$WORK/image.before")" ]; then
                echo "# refused, but the image changed" >&2
                return 1
        fi
        still_unlocks
}
# The keyslot the current recovery secret opens.
recovery_slot() {
        cryptsetup open --test-passphrase -v --key-file "$WORK/recovery.key" "$WORK/disk.img" 2>&1 |
                sed -n 's/^Key slot \([0-9]*\) unlocked.*/\1/p'
}
run_recovery-key() {
        passphrase_op_begin
        expect_exit 0 "$TPMGUARD" recovery-key --iter-time 100 --pin-file "$WORK/pin" --replace "$(recovery_slot)" \
                "$WORK/disk.img" || return
        grep -oE '[cbdefghijklnrtuv]{8}(-[cbdefghijklnrtuv]{8}){7}' <<<"$OUT" | head -1 | tr -d '\n' >"$WORK/recovery.key"
        od -An -v -tx1 "$WORK/recovery.key" | tr -d ' \n' >>"$WORK/secret.hex"
        echo >>"$WORK/secret.hex"
}
run_passwd() {
        passphrase_op_begin
        printf 'a new passphrase' >"$WORK/new.key"
        od -An -v -tx1 "$WORK/new.key" | tr -d ' \n' >>"$WORK/secret.hex"
        echo >>"$WORK/secret.hex"
        printf 'a new passphrase\n' >"$WORK/new.line"
        expect_exit 0 "$TPMGUARD" passwd --iter-time 100 --pin-file "$WORK/pin" --new-passphrase-file "$WORK/new.line" \
                "$WORK/disk.img" || return
        cp "$WORK/new.key" "$WORK/recovery.key"
}
# migrate's old token: a systemd-cryptenroll token made directly (never through
# the proxy) unless the volume has one (a replay mode's first run consumed
# it), and its keyslot secret for the capture search: the passphrase systemd's
# own plugin returns, and the 32 sealed bytes it is the base64 of.
SYSTEMD_TPM2_PLUGIN=${TPMGUARD_SYSTEM_TOKENDIR:-/usr/lib/x86_64-linux-gnu/cryptsetup}/libcryptsetup-token-systemd-tpm2.so
systemd_token_id() {
        cryptsetup luksDump "$WORK/disk.img" | awk '/^  [0-9]+: systemd-tpm2$/ {sub(":", "", $1); print $1; exit}'
}
systemd_token_ready() {
        local id
        [ -z "$(systemd_token_id)" ] || return 0
        peer_systemd_enroll "$WORK/disk.img" "" || return 1
        id=$(systemd_token_id)
        "$TPMGUARD_TOKEN_OPEN" "$SYSTEMD_TPM2_PLUGIN" "$WORK/disk.img" "$id" --systemd-device "$TPMGUARD_TEST_TCTI" \
                --secret-out "$WORK/secret.one" </dev/null >/dev/null 2>&1 ||
                { echo "# cannot read the systemd-tpm2 token's secret back" >&2; return 1; }
        tpm_flush_contexts
        { cat "$WORK/secret.one"; echo; } >>"$WORK/secret.hex"
        $PY -c 'import base64, sys; print(base64.b64decode(bytes.fromhex(open(sys.argv[1]).read().strip())).hex())' \
                "$WORK/secret.one" >>"$WORK/secret.hex"
}
before_migrate() { systemd_token_ready; }
run_migrate() {
        local id
        systemd_token_ready || return
        id=$(systemd_token_id)
        after_proxy=still_unlocks
        expect_exit 0 "$TPMGUARD" migrate --token "$id" --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img" || return
        # The old keyslot goes only when systemd's own plugin opened it with the token's secret, here
        # through the proxy (record). A tampered Load (the plugin's: tpmguard's CreateLoaded needs
        # none) fails that proof, and the keyslot is kept.
        case $m in
        record) expect_in "removed token $id and keyslot" "$OUT" ;;
        tamper-load) expect_in "kept keyslot" "$OUT" ;;
        esac
}
without_null_name() {
        sed -i 's/^kernel_null_name = .*/kernel_null_name = if-available/' "$WORK/tpmguard.conf"
        rm -f "$WORK/null_name"
}
# Clear the lockout password directly, so that lockout setup takes the
# hierarchy through the proxy: HierarchyChangeAuth with the new password.
before_lockout-setup() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_changeauth -c l -p "hex:$(cat "$WORK/state/lockout-auth")" >/dev/null &&
                rm -f "$WORK/state/lockout-auth"
}
run_lockout-setup() { expect_exit 0 "$TPMGUARD" lockout setup && test -s "$WORK/state/lockout-auth"; }
run_lockout-reset() { expect_exit 0 "$TPMGUARD" lockout-reset; }
before_pcrs() { eventlog_sb_setup && eventlog_boot "$WORK/eventlog"; }
run_pcrs() { expect_exit 0 "$TPMGUARD" pcrs --event-log "$WORK/eventlog"; }
before_unlock-plugin-no-pin() {
        # A second token beside the PIN token (enroll refuses a second one since issue 34: seal + import).
        second_token --no-pin >/dev/null 2>&1 || { echo "# enrolling the no-PIN token failed" >&2; return 1; }
        nopin_token_id=$(cryptsetup luksDump "$WORK/disk.img" | awk '/^  [0-9]+: tpmguard/ {sub(":", "", $1); t=$1} END {print t}')
        if [ -z "$nopin_token_id" ] || [ "$nopin_token_id" = 0 ]; then
                echo "# no second tpmguard token after the no-PIN enrolment" >&2
                return 1
        fi
}
run_unlock-plugin-no-pin() {
        rm -f "$WORK/run/null-key.json"
        after_proxy=fetch_enrolled_secret
        expect_exit 0 "$TPMGUARD_TOKEN_OPEN" "$TPMGUARD_PLUGIN" "$WORK/disk.img" "$nopin_token_id" \
                --secret-out "$WORK/secret.hex" </dev/null
}
before_update-prepare() { fetch_enrolled_secret; }
run_update-prepare() {
        after_proxy=still_unlocks
        expect_exit 0 "$TPMGUARD" update prepare --pin-file "$WORK/pin" "$WORK/disk.img"
}
# Directly, before the proxy: the grace, then a boot chain change (PCR 7). First a TPM Reset: the
# case's TPM was resumed (Shutdown(STATE), Startup(CLEAR): a Restart, as fetch_enrolled_secret does
# too), and a grace opens only in a boot from a Reset (restartCount 0; PCR 7 is at its reset value
# either way).
prepared_and_changed() {
        fetch_enrolled_secret
        "$FIXTURE" reset "$WORK/tpm" >/dev/null
        "$FIXTURE" null-name "$WORK/tpm" "$WORK/null_name"
        rm -f "$WORK/run/"*
        "$TPMGUARD" update prepare --pin-file "$WORK/pin" "$WORK/disk.img" >/dev/null 2>&1 ||
                { echo "# update prepare failed" >&2; return 1; }
        extend_pcr7_b
        tpm_flush_contexts
}
extend_pcr7_b() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                7:sha256=2222222222222222222222222222222222222222222222222222222222222222 >/dev/null
}
# update finish over the grace now needs a change the event log explains (lifecycle/update-record.h),
# which a raw PCR 7 extend is not: the case finishes over the predicted seal, whose values it names.
before_update-finish() {
        fetch_enrolled_secret
        local pcr7
        pcr7=$(TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrread sha256:7 | awk '/7 *:/ {print $3}')
        pcr7=$($PY -c 'import hashlib, sys; print(hashlib.sha256(bytes.fromhex(sys.argv[1][2:]) + bytes([0x22]) * 32).hexdigest())' "$pcr7")
        "$TPMGUARD" update prepare --pcr "7=sha256:$pcr7" --pin-file "$WORK/pin" "$WORK/disk.img" >/dev/null 2>&1 ||
                { echo "# update prepare --pcr failed" >&2; return 1; }
        extend_pcr7_b
        tpm_flush_contexts
}
# Afterwards the token is sealed to the changed PCR 7 (or, refused, still opens through the grace).
run_update-finish() {
        after_proxy=still_unlocks after_resume=extend_pcr7_b
        expect_exit 0 "$TPMGUARD" update finish --pin-file "$WORK/pin" "$WORK/disk.img"
}
before_unlock-plugin-grace() { prepared_and_changed; }
run_unlock-plugin-grace() {
        rm -f "$WORK/run/null-key.json"
        after_proxy=fetch_enrolled_secret
        expect_exit 0 "$TPMGUARD_TOKEN_OPEN" "$TPMGUARD_PLUGIN" "$WORK/disk.img" 0 \
                --secret-out "$WORK/secret.hex" <"$WORK/pin"
}
# The TOTP secret of the otpauth URI in $1, as hex, for the capture search.
totp_secret_hex() {
        $PY -c 'import base64, sys, urllib.parse
s = urllib.parse.parse_qs(urllib.parse.urlparse(sys.argv[1]).query)["secret"][0]
print(base64.b32decode(s + "=" * (-len(s) % 8)).hex())' "$1"
}
run_totp-enroll() {
        # One TOTP at a time: a replay mode's first run enrolled one already.
        rm -f "$WORK/state/totp.json"
        expect_exit 0 "$TPMGUARD" totp enroll --pcrs 7 || return
        totp_secret_hex "$OUT" >>"$WORK/secret.hex"
}
before_totp-show() {
        local uri
        uri=$("$TPMGUARD" totp enroll --pcrs 7 2>/dev/null) || { echo "# enrolling the TOTP failed" >&2; return 1; }
        totp_secret_hex "$uri" >>"$WORK/secret.hex"
}
run_totp-show() {
        rm -f "$WORK/run/null-key.json"
        expect_exit 0 "$TPMGUARD" totp show || return
        grep -qE '^[0-9]{3} [0-9]{3}  for ' <<<"$OUT"
}
run_verify-no-null-name() {
        without_null_name
        run_verify
}
run_unlock-plugin-no-null-name() {
        without_null_name
        run_unlock-plugin-cold
}
run_enroll-no-null-name() { without_null_name; run_enroll; }
run_seal-import-no-null-name() { without_null_name; run_seal-import; }
run_unlock-cryptsetup-no-null-name() { without_null_name; run_unlock-cryptsetup-cold; }
run_unlock-plugin-warm-no-null-name() { without_null_name; run_unlock-plugin-warm; }
run_unlock-cryptsetup-warm-no-null-name() { without_null_name; run_unlock-cryptsetup-warm; }
before_change-pin-no-null-name() { fetch_enrolled_secret; }
run_change-pin-no-null-name() { without_null_name; run_change-pin; }
before_rotate-no-null-name() { fetch_enrolled_secret; }
run_rotate-no-null-name() { without_null_name; run_rotate; }
before_reseal-no-null-name() { fetch_enrolled_secret; }
run_reseal-no-null-name() { without_null_name; run_reseal; }
run_provision-no-null-name() { without_null_name; run_provision; }
before_lockout-setup-no-null-name() { before_lockout-setup; }
run_lockout-setup-no-null-name() { without_null_name; run_lockout-setup; }
run_lockout-reset-no-null-name() { without_null_name; run_lockout-reset; }
run_unlock-cryptsetup-warm() {
        test -s "$WORK/run/null-key.json" || { echo "# warm case without a cache" >&2; return 1; }
        unlock_cryptsetup
}

# --- modes ------------------------------------------------------------------
# mode NAME TAG PROXY-ARGS... : runs against every operation with TAG ("all":
# every operation not tagged "narrow"; TAG may list alternatives, a|b), with
# the interposer's arguments. "record" is passive;
# every other mode is an attack. A mode named replay-* runs the operation
# once through the proxy first (so that it has responses to replay);
# boot-reset runs tpm2_getrandom through the proxy first, so the reset (and
# the replay of PCR extends) happens before the operation, as a reset
# attacker's would after boot.
MODES=()
mode() { MODES+=("$*"); }
mode record                 'all|narrow' --mode record
# The narrow operations (no null_name) meet the plain substitution too: the
# NULL key they salt to is caught only by its certification there.
mode substitute             'all|narrow' --mode substitute
mode substitute-pin-crack   'all|narrow' --mode substitute,pin-crack
# Only the first NULL key is substituted, the one salting provisioning's
# bootstrap session; every later key passes genuine, so the certification at
# the end succeeds. With null_name it is the kernel's name that refuses it;
# without, the comparison with the certified key (provision/provision.c).
mode substitute-bootstrap   activatecred --mode substitute --substitute-first 1
mode tamper-createprimary   all          --mode tamper --tamper CreatePrimary:40:0x01
mode boot-reset             all          --mode reset --reset-after GetRandom:1
# Without the kernel's null_name, the boot anchor: a verification (directly,
# as the initrd's) anchors the boot first, then the reset and PCR replay.
mode anchored-reset         'certify|narrow' --mode reset --reset-after GetRandom:1
# Issue 13: the interposer puts a key of its own into the TPM in place of the
# NULL primary and hands out its handle, so that the password-authorized
# Certify certifies it: a loadable key it holds the private part of (stopped
# by the template check; on swtpm also by the qualified-name check, see
# trust/attest.c), or a fixedTPM owner primary of the exact template (stopped
# by the qualified-name check).
mode substitute-loaded-key  'certify|narrow' --mode loaded-key
mode substitute-owner-key   'certify|narrow' --mode owner-key
# A NULL primary the TPM made, but decrypt without restricted: the TPM runs
# ECDH_ZGen with it for anyone, so the interposer learns the salt (stopped by
# the template check alone: its qualified name is a NULL primary's).
mode substitute-zgen-key    'certify|narrow' --mode zgen-key
mode tamper-certify-attest  certify      --mode tamper --tamper Certify:70:0x01
mode tamper-certify-sig     certify      --mode tamper --tamper Certify:@SIG@:0x01
mode reset-after-certify    certify      --mode reset --reset-after Certify:1
mode drop-certify           certify      --mode drop --drop Certify
mode replay-certify         certify      --mode replay --replay Certify:2
mode tamper-activatecred    activatecred --mode tamper --tamper ActivateCredential:4:0x01
mode replay-activatecred    activatecred --mode replay --replay ActivateCredential:2
mode tamper-readclock       readclock    --mode tamper --tamper ReadClock:4:0x01
mode replay-readclock       readclock    --mode replay --replay ReadClock:2
mode tamper-readpublic-area readpublic   --mode tamper --tamper ReadPublic:40:0x01
mode tamper-readpublic-name readpublic   --mode tamper --tamper ReadPublic:100:0x01
mode tamper-pcrread         pcrread      --mode tamper --tamper PCR_Read:@PCRVAL@:0x01
mode drop-create            create       --mode drop --drop Create
mode tamper-load            load         --mode tamper --tamper Load:8:0x01
mode tamper-unseal          unseal       --mode tamper --tamper Unseal:4:0x01
mode reset-before-unseal    unseal       --mode reset --reset-after PolicyAuthValue:1
mode drop-unseal            unseal       --mode drop --drop Unseal
mode replay-unseal          unseal       --mode replay --replay Unseal:2
# Issue 14 §3: during a normal unlock the interposer unseals the token with
# commands of its own (Load, PolicyPCR, Unseal in its own unsalted policy
# session), after the client left the bus, in the same boot. No verification
# can stop this: the client is not involved. Only a secret in the policy can.
mode inject-unseal          inject       --mode inject-unseal
# Issue 29: the policy session of every unseal salted to another key (the SRK)
# than the verified NULL key: caught by the proof of the session before the
# PIN-bearing Unseal (an interposer alert, no DA try); the Unseal's response
# HMAC forged (the TPM unsealed with the right PIN): an interposer alert; a
# PCR extended just before the first Unseal (a race with another process):
# retried, the operation works.
mode redirect-salt          unseal       --mode redirect-salt --redirect-salt-type policy
mode tamper-hmac-unseal     unseal       --mode tamper-hmac --tamper-hmac Unseal
mode extend-before-unseal   unseal       --mode extend-before --extend-before Unseal:1
# Issue 30: the update seal's CreateLoaded answer altered (its public area, where the
# authPolicy is: a widened policy, or one without the PIN): the response HMAC fails.
mode tamper-createloaded    grace        --mode tamper --tamper CreateLoaded:180:0x01
# The saved context of this boot's cached NULL key swapped, at its ContextLoad,
# for another NULL primary's ("ctxload": the warm operations, which load it):
# the TPM then derives another session key than ours. The proof of the cached
# key (trust/verify.c), or of the unlock's policy session (tokens/seal.c),
# refuses it as an interposer, never a silent full verification, never a
# "wrong PIN" (issue 29).
mode swap-context           ctxload      --mode swap-context

# --- expectations -----------------------------------------------------------
# What each case must do:
#   ok          works, and nothing leaks;
#   n/a         set at run time when the operation never issues the attacked
#               command (or the proxy found nothing to substitute): it must
#               then work and leak nothing;
#   exit:N      the CLI fails with exit code N (tpmguard(8));
#   errno:N     the plugin fails with -N ("+interposer": and says so: for
#               the plugin the message is the only diagnosis it can give, as
#               libcryptsetup maps every failure onto a few errnos);
#   refused     the cryptsetup binary fails and prints the interposer message;
#   failed      the cryptsetup binary fails (for attacks that are not
#               diagnosed as an interposer: see the exceptions).
#   exposed     the operation works, and the attack read the keyslot secret
#               (a documented exposure, not a pass: the case fails if the
#               secret is NOT in the interposer's findings, so the table
#               cannot claim a protection that does not exist);
#   withstood   the operation works, the attack ran and the TPM refused it;
#               nothing leaks.
# Every failing case must also leave the recovery keyslot working.
expect_of() {
        local o=$1 m=$2 cli=exit:3 plugin=errno:2+interposer binary=refused
        case $o/$m in
        # A full verification reads no public area since issue 33: the
        # persisted EK signing key is named from the pin, and its Certify,
        # checked with the pinned public key, is what proves it (a substituted
        # key there is caught at that Certify: test-provision-verify.sh,
        # substituted_persisted_key_is_caught). So verify and the cold
        # unlocks, with the kernel's null_name, have no readpublic tag. The
        # SRK's ReadPublic in enroll, seal and migrate is harmless when its
        # public area is tampered (its name is checked against the hash of the
        # public area and by the TPM in HMACs naming it); totp show, which
        # keeps the SRK's ESYS_TR for its HMAC-authorized Load, uses only the
        # name, which the TPM checks in that HMAC: a tampered public area there
        # changes nothing it relies on, and it works over the genuine SRK.
        totp-show/tamper-readpublic-area) echo ok; return ;;
        # cryptsetup's warm unlock now reads one public area: the call without a
        # PIN verifies first (is there a PIN that can work? docs/design.md §2.4),
        # and its cached-key proof is an audited ReadPublic of the SRK, whose name
        # ESAPI reads unauthenticated first. A tampered name there makes the TPM
        # refuse the proof's HMAC: an interposer alarm before any prompt (issue
        # 29; before, verification fell back to a full one in silence). The
        # token-open rows, which pass the PIN at once, read no public area: n/a.
        unlock-cryptsetup-warm/tamper-readpublic-name) echo refused; return ;;
        # The injected unseal (issue 14 §3): the victim's unlock is not
        # touched, so it works either way. Without a PIN the interposer's own
        # policy session satisfies the policy and reads the secret; with one
        # the TPM refuses its Unseal (PolicyAuthValue needs the PIN).
        unlock-plugin-no-pin/inject-unseal) echo exposed; return ;;
        # The TOTP secret has no PIN either (its code shows before the PIN is typed).
        totp-show/inject-unseal) echo exposed; return ;;
        # totp show's Load is HMAC-authorized under the SRK whose ESYS_TR the
        # verification's ReadPublic made: an altered name there breaks that HMAC
        # at the TPM (TPM_RC_BAD_AUTH on the Load, no DA: the SRK has none).
        # Caught, no code, nothing leaked, but reported as the TPM's refusal
        # (exit 7), not as an interposer: the diagnosis gap the plugin's unlock
        # without the kernel's null_name has (below).
        totp-show/tamper-readpublic-name) echo exit:7; return ;;
        */inject-unseal) echo withstood; return ;;
        # verify's last verification command is Certify; a reset after it
        # answered changes nothing verify reported (its FlushContexts then
        # fail, harmlessly). The next operation sees the reset (boot-reset).
        verify/reset-after-certify|verify-no-null-name/reset-after-certify) echo ok; return ;;
        # Without the kernel's null_name a reset before the boot anchor was
        # recorded cannot be told from a boot (design §2.7; said on every run
        # and in docs/security.md): the operation works on the reset TPM, over
        # a freshly certified NULL key, leaking nothing, and anchors the boot.
        # After the anchor (anchored-reset) it is refused.
        *-no-null-name/boot-reset) echo ok; return ;;
        # migrate's only Load is systemd's token plugin's, proving which
        # keyslot the old token's secret opens (tpmguard's CreateLoaded needs
        # no Load): tampered, the proof fails, and the migration completes
        # keeping the old keyslot (run_migrate checks), leaking nothing.
        migrate/tamper-load) echo ok; return ;;
        # A PCR race is not an attack on anything the operation relies on: it
        # runs the policy again and works (issue 29).
        */extend-before-unseal) echo ok; return ;;
        esac
        case $m in
        record) echo ok; return ;;
        # The PIN's Unseal answered "retry" again after its one resend: not sent
        # a third time (each would be a DA try if the answer was forged after a
        # wrong PIN); the check that follows finds the policy session gone (the
        # TPM unsealed at the first send, with the right PIN): the alarm.
        drop-unseal) cli=exit:3 plugin=errno:2 binary=failed ;;
        # A dropped command looks like a TPM that did not answer: "TPM
        # unreachable" (exit 6, -EAGAIN: other tokens, then the passphrase).
        drop-*) cli=exit:6 plugin=errno:11 binary=failed ;;
        # A reset right before the Unseal: the check of its refusal finds
        # neither the object nor the policy session in the TPM, an alarm
        # that names a reset (exit 3). A reset after Certify makes the TPM
        # forget the operation's handles; tpmguard reports the TPM's refusal
        # (exit 7), not a reset. It fails closed; the next operation reports
        # the reset (boot-reset). A diagnosis gap, listed in docs/security.md.
        reset-before-unseal) cli=exit:3 plugin=errno:2 binary=failed ;;
        reset-after-certify) cli=exit:7 plugin=errno:2 binary=failed ;;
        # An altered SRK name: enroll and seal compare it with the hash of the
        # public area (exit 3). (At an unlock that reads the SRK, i.e. without
        # the kernel's null_name, it would break Load's HMAC at the TPM:
        # caught, but not diagnosed as an interposer.)
        tamper-readpublic-name) plugin=errno:2 binary=failed ;;
        esac
        case $o in
        unlock-plugin-*) echo "$plugin" ;;
        unlock-cryptsetup-*) echo "$binary" ;;
        *) echo "$cli" ;;
        esac
}

# --- templates ----------------------------------------------------------------
TEMPLATES=""
make_templates() {
        TEMPLATES=$(mktemp -d "${TMPDIR:-/tmp}/tpmguard-matrix.XXXXXX")
        local kind
        for kind in bare enrolled; do
                WORK=$TEMPLATES/$kind
                mkdir -p "$WORK"
                "$FIXTURE" start "$WORK/tpm" >/dev/null || return 1
                # shellcheck disable=SC1091 # written by swtpm-fixture
                . "$WORK/tpm/env"
                mkdir -p "$WORK/state"
                mkdir -m 700 "$WORK/run"
                "$FIXTURE" null-name "$WORK/tpm" "$WORK/null_name"
                write_config
                make_luks "$WORK/disk.img"
                printf '%s\n' "$PIN" >"$WORK/pin"
                printf '%s\n' "$PIN2" >"$WORK/pin2"
                if [ "$kind" = enrolled ]; then
                        "$TPMGUARD" provision >/dev/null || return 1
                        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" \
                                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img" || return 1
                fi
                "$FIXTURE" stop "$WORK/tpm" >/dev/null
                rm -f "$WORK/run/"*
        done
        WORK=""
}

# A private copy of a template, its swtpm resumed (Startup(CLEAR): a new NULL
# seed, so a new kernel-style null_name, as after a reboot).
case_setup() {
        local kind=$1
        WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpmguard-case.XXXXXX")
        cp -a --sparse=always "$TEMPLATES/$kind/." "$WORK/"
        sed -i "s|$TEMPLATES/$kind|$WORK|g" "$WORK/tpm/env" "$WORK/tpm/localca.conf"
        # shellcheck disable=SC1091 # written by swtpm-fixture
        . "$WORK/tpm/env"
        "$FIXTURE" resume "$WORK/tpm" >/dev/null
        "$FIXTURE" null-name "$WORK/tpm" "$WORK/null_name"
        write_config
}

proxy_start() {
        rm -f "$WORK/findings.json" "$WORK/capture.jsonl"
        interposer_start "$@" --record "$WORK/capture.jsonl" --crack-timeout 20
}

proxy_stop() { interposer_stop; }

# The secrets the capture and the findings must not hold, one hex string a
# line: keyslot secret, PIN, SHA-256(PIN), authValue (from every tpmguard
# token on the image: its KDF parameters; format 2 adds K and S XOR K), and the TPM's lockout
# password (provision, or lockout setup, set it; it is stored as hex).
secrets_file() {
        {
                [ -s "$WORK/secret.hex" ] && cat "$WORK/secret.hex"
                [ -s "$WORK/state/lockout-auth" ] && cat "$WORK/state/lockout-auth"
                local id
                for id in $(cryptsetup luksDump "$WORK/disk.img" | awk '/^  [0-9]+: tpmguard/ {sub(":", "", $1); print $1}'); do
                        cryptsetup token export --token-id "$id" "$WORK/disk.img"
                        echo
                done | TG_SECRET_HEX=$([ -s "$WORK/secret.hex" ] && tr '\n' , <"$WORK/secret.hex") $PY -c '
import base64, hashlib, json, os, sys
cache_path, pins = sys.argv[1], [p.encode() for p in sys.argv[2:]]
# Most cases keep the template'"'"'s token: its authValues (PBKDF2, 100000
# iterations each) are derived once per shard, not once per case.
try:
    cache = json.load(open(cache_path))
except (OSError, ValueError):
    cache = {}
for pin in pins:
    print(pin.hex())
    print(hashlib.sha256(pin).hexdigest())
derive, secret_hex = os.environ["TPMGUARD_PIN_DERIVE"], os.environ.get("TG_SECRET_HEX", "")
for line in sys.stdin:
    if not line.strip():
        continue
    t = json.loads(line)
    k = t.get("pin_kdf")
    for pin in pins if k else []:
        if k.get("type") == "argon2id":
            # Format 2 (docs/token-format.md): the authValue, the mask K (its first 32 bytes) and,
            # with the keyslot secret S known, S XOR K, what the TPM holds and releases: each from
            # tokens/pin.c through test-pin-derive (python has no Argon2id).
            key = "%s/%s/argon2id/%d/%d/%d" % (pin.hex(), k["salt"], k["time"], k["memory"], k["parallel"])
            if key not in cache:
                import subprocess, tempfile
                with tempfile.NamedTemporaryFile("w", delete=False) as tf, \
                        tempfile.NamedTemporaryFile("wb", delete=False) as pf:
                    tf.write(line)
                    pf.write(pin + b"\n")
                try:
                    out = subprocess.run([derive, tf.name, pf.name], stdout=subprocess.PIPE, text=True,
                                         check=True).stdout.split()
                finally:
                    os.unlink(tf.name)
                    os.unlink(pf.name)
                cache[key] = out[0] + "/" + out[1]
            auth, mask = cache[key].split("/")
            print(auth)
            print(mask[:64])
            for sh in filter(None, secret_hex.split(",")):
                s = bytes.fromhex(sh.strip())
                print(bytes(a ^ b for a, b in zip(s, bytes.fromhex(mask))).hex())
            continue
        key = "%s/%s/%d" % (pin.hex(), k["salt"], k["iterations"])
        if key not in cache:
            cache[key] = hashlib.pbkdf2_hmac("sha256", pin, base64.b64decode(k["salt"]), k["iterations"], 32).hex()
        print(cache[key])
with open(cache_path + ".new", "w") as f:
    json.dump(cache, f)
os.replace(cache_path + ".new", cache_path)
' "$TEMPLATES/authvalue-cache.json" "$PIN" "$PIN2"
        } >"$WORK/secrets"
}

# Asserts that neither the capture nor the findings hold a secret, and that
# an active mode's attack happened (or, for "n/a", that the command was never
# issued). Prints a one-line summary of the findings.
check_findings() {
        local expect=$1 attacked_cmd=$2
        "$PY" - "$WORK/findings.json" "$WORK/capture.jsonl" "$WORK/secrets" "$expect" "$attacked_cmd" <<'PY'
import json, sys
findings, capture, secrets_path, expect, attacked = sys.argv[1:6]
f = json.load(open(findings))
secrets = [bytes.fromhex(l.strip()) for l in open(secrets_path) if l.strip()]
bad = []
def holds_secret(b):
    return any(s and s in b for s in secrets)
records = [json.loads(l) for l in open(capture)]
# The injected unseal's own commands (inject-unseal): what the attack read.
exposed = []
for r in records:
    for key in ("hex", "upstream_hex"):
        if r.get(key) and holds_secret(bytes.fromhex(r[key])):
            (exposed if r.get("injected") else bad).append(
                "capture seq %s (%s %s, %s) holds a secret" % (r["seq"], r["command"], r["dir"], key))
if f.get("pins"):
    bad.append("PINs learned: %s" % f["pins"])
for p in f.get("plaintexts", []):
    if p.get("injected"):
        if holds_secret(bytes.fromhex(p.get("unsealed") or "")):
            exposed.append("the injected Unseal read the keyslot secret")
        else:
            bad.append("the injected Unseal read something that is not the keyslot secret")
    elif p.get("unsealed") or p.get("sensitive_data") or holds_secret(bytes.fromhex(p.get("data") or "")):
        bad.append("secret plaintext: %s %s" % (p.get("command"), p.get("direction")))
if expect == "exposed":
    if not exposed:
        bad.append("expected the injected unseal to read the keyslot secret, but it did not")
else:
    bad.extend(exposed)
inject = [a for a in f.get("attacks", []) if a.get("attack") == "inject-unseal"]
if expect == "withstood":
    if not inject:
        bad.append("the injected unseal never ran")
    elif any(a.get("result") != "refused" for a in inject) or not any(
            s.get("command") == "Unseal" and s.get("rc") not in (None, "0x00000000")
            for a in inject for s in a.get("steps", [])):
        bad.append("the injected unseal was not refused by the TPM's Unseal: %s" % inject)
for a in f.get("auth_values", []):
    v = bytes.fromhex(a.get("auth_value") or "")
    if v and (v in secrets or holds_secret(v)):
        bad.append("secret authValue learned: %s" % a.get("command"))
secret_cmds = {"Unseal", "Create", "CreateLoaded", "ObjectChangeAuth", "GetRandom"}
verified = {k.get("session") for k in f.get("session_keys", []) if k.get("verified")}
for r in records:
    if r["dir"] == "command" and r["command"] in secret_cmds:
        for s in r.get("sessions", []):
            if s.get("handle") in verified:
                bad.append("verified session key for %s session %s" % (r["command"], s["handle"]))
attacks = [a for a in f.get("attacks", [])]
issued = any(r["dir"] == "command" and r["command"] == attacked for r in records)
if expect == "n/a":
    if attacked and issued:
        bad.append("expected the operation not to issue %s, but it did" % attacked)
    if not attacked and attacks:
        bad.append("n/a, yet the proxy attacked")
elif expect != "ok" and not attacks:
    bad.append("the attack never happened (no findings.attacks)")
print("# findings: %d commands, attacks %s, verified session keys %d, plaintexts %d, auth_values %d, pins %d" % (
    sum(1 for r in records if r["dir"] == "command" and not r.get("injected")),
    sorted({a["attack"] for a in attacks}) or "none", len(verified),
    len(f.get("plaintexts", [])), len(f.get("auth_values", [])), len(f.get("pins", []))))
for b in bad:
    print("# LEAK/ASSERT: " + b)
sys.exit(1 if bad else 0)
PY
}

# Offsets fixed by the response layouts (TPM 2.0 Part 2/3, and tpmguard's
# 32-byte nonce, TG_NONCE_SIZE): @SIG@ = a byte of the Certify signature's r
# (past the attestation), @PCRVAL@ = a byte of the first PCR digest in
# PCR_Read's pcrValues.
resolve_offsets() {
        local args=$*
        case $args in
        *@SIG@*|*@PCRVAL@*) ;;
        *) echo "$args"; return ;;
        esac
        "$PY" - "$args" <<'PY'
import sys
# Parameter areas (Part 3): Certify: TPM2B_ATTEST certifyInfo, TPMT_SIGNATURE;
# the attestation of an object certified over a 32-byte nonce by a primary is
# 2 + 4+2 + (2+34) + (2+32) + 17 + 8 + (2+34) + (2+34) = 173 bytes; the
# signature's r starts 2+2+2 bytes after it. PCR_Read: UINT32 updateCounter,
# TPML_PCR_SELECTION (count 4 + one selection 2+1+3), TPML_DIGEST (count 4,
# then TPM2B sizes): the first digest's bytes start at 4+10+4+2.
a = sys.argv[1].replace("@SIG@", str(173 + 6 + 4)).replace("@PCRVAL@", str(4 + 10 + 4 + 2 + 3))
print(a)
PY
}

run_case() {
        local name=$1 opline=$2 modeline=$3
        local o state cache tags m tag args expect attacked
        read -r o state cache tags <<<"$opline"
        read -r m tag args <<<"$modeline"
        args=$(resolve_offsets "$args")
        expect=$(expect_of "$o" "$m")
        attacked=""
        case $args in
        *--tamper*|*--drop*|*--replay*|*--reset-after*)
                attacked=$(grep -oE -- '--(tamper-hmac|tamper|drop|replay|reset-after) [A-Za-z_]+' <<<"$args" | head -1 | cut -d' ' -f2) ;;
        esac
        case $m in boot-reset|anchored-reset) attacked="" ;; esac
        case_setup "$state"
        if [ "$cache" = warm ]; then
                "$TPMGUARD" verify --record >/dev/null 2>&1 || { echo "# warming the cache failed" >&2; return 1; }
        fi
        if declare -F "before_$o" >/dev/null; then
                "before_$o" || { echo "# before_$o failed" >&2; return 1; }
        fi
        if [ "$m" = anchored-reset ] && [[ $o == *-no-null-name ]]; then
                without_null_name
                "$TPMGUARD" verify >/dev/null 2>&1 || { echo "# anchoring the boot failed" >&2; return 1; }
                test -s "$WORK/run/boot-anchor.json" || { echo "# no boot anchor recorded" >&2; return 1; }
        fi
        # shellcheck disable=SC2086
        proxy_start $args || return 1
        case $m in
        replay-*)
                ( "run_$o" ) >/dev/null 2>&1 || true
                # What the kernel's resource manager does when a client
                # closes: flush what it left loaded (a run whose response
                # failed its HMAC cannot flush: ESAPI refuses further commands).
                TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_flushcontext --transient-object >/dev/null 2>&1 || true
                TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_flushcontext --loaded-session >/dev/null 2>&1 || true
                ;;
        boot-reset|anchored-reset)
                TPM2TOOLS_TCTI="swtpm:path=$WORK/evil.sock" tpm2_getrandom 8 >/dev/null 2>&1 || true ;;
        esac
        after_proxy="" after_resume=""
        local rc=0
        "run_$o" >"$WORK/op.out" 2>&1 || rc=$?
        OUT_ALL=$(cat "$WORK/op.out" "$WORK/stderr" 2>/dev/null)
        proxy_stop
        # enroll leaves after_proxy set only when it worked; unlocks always.
        if [ -n "$after_proxy" ]; then
                $after_proxy || { echo "# could not read the keyslot secret back for the capture search" >&2; return 1; }
        fi
        # An attack on a command the operation never issues, or a substitution
        # with nothing to substitute, is "n/a": the operation must then simply
        # work and leak nothing.
        # The injected unseal never counts as n/a: it must have run.
        if [ "$m" != record ] && [ "$m" != inject-unseal ] && ! $PY -c '
import json, sys
capture, findings, attacked = sys.argv[1:4]
if attacked:
    sys.exit(0 if any(json.loads(l)["dir"] == "command" and json.loads(l)["command"] == attacked
                      for l in open(capture)) else 1)
sys.exit(0 if json.load(open(findings)).get("attacks") else 1)' "$WORK/capture.jsonl" "$WORK/findings.json" "$attacked"; then
                expect=n/a
        fi
        secrets_file
        check_findings "$expect" "$attacked" || return 1
        case $expect in
        ok|n/a|exposed|withstood)
                [ "$rc" = 0 ] || { echo "# expected the operation to work: $OUT_ALL" | head -5 >&2; return 1; } ;;
        exit:*)
                [ "$rc" != 0 ] || { echo "# the operation worked under attack" >&2; return 1; }
                [ "$LAST_EXIT" = "${expect#exit:}" ] || { echo "# expected exit ${expect#exit:}, got $LAST_EXIT: $OUT_ALL" | head -5 >&2; return 1; } ;;
        errno:*)
                local want=${expect#errno:}
                [ "$rc" != 0 ] || { echo "# the plugin unlocked under attack" >&2; return 1; }
                [ "$LAST_EXIT" = "${want%+*}" ] || { echo "# expected errno ${want%+*}, got $LAST_EXIT: $OUT_ALL" | head -5 >&2; return 1; }
                [ "$want" = "${want%+interposer}" ] || expect_in "interposer" "$OUT_ALL" ;;
        refused)
                [ "$rc" != 0 ] || { echo "# cryptsetup unlocked under attack" >&2; return 1; }
                expect_in "interposer" "$OUT_ALL" ;;
        failed)
                [ "$rc" != 0 ] || { echo "# cryptsetup unlocked under attack" >&2; return 1; } ;;
        esac
        recovery_opens "$WORK/disk.img" >/dev/null || { echo "# the recovery keyslot no longer opens" >&2; return 1; }
        echo "# $name: expected $expect, exit ${LAST_EXIT:-0}"
        echo "$name $expect ${LAST_EXIT:-0}" >>"$RESULTS"
}

# Like lib.sh's expect_exit, and it keeps the exit code for the case checks.
expect_exit() {
        local want=$1 rc=0
        shift
        OUT=$("$@" 2>"$WORK/stderr") || rc=$?
        LAST_EXIT=$rc
        [ "$rc" = "$want" ]
}

# mode_applies MODE-TAG "OP-TAGS": whether a mode runs against an operation.
mode_applies() {
        local alt alts
        IFS='|' read -r -a alts <<<"$1"
        for alt in "${alts[@]}"; do
                if [ "$alt" = all ]; then
                        [[ " $2 " == *" narrow "* ]] || return 0
                elif [[ " $2 " == *" $alt "* ]]; then
                        return 0
                fi
        done
        return 1
}

main() {
        local k=${shard%/*} n=${shard#*/} i=0 name opline modeline o m tag tags
        local -a names=() ops=() modes=()
        for opline in "${OPS[@]}"; do
                for modeline in "${MODES[@]}"; do
                        read -r o _ _ tags <<<"$opline"
                        read -r m tag _ <<<"$modeline"
                        mode_applies "$tag" "$tags" || continue
                        name="$o/$m"
                        i=$((i + 1))
                        [ $(((i - 1) % n)) = $((k - 1)) ] || continue
                        [[ $name =~ $only ]] || continue
                        names+=("$name"); ops+=("$opline"); modes+=("$modeline")
                done
        done
        make_templates || { echo "Bail out! could not make the template TPM states"; exit 1; }
        trap 'rm -rf "$TEMPLATES"' EXIT
        RESULTS=${TPMGUARD_MATRIX_RESULTS:-$TEMPLATES/results}
        echo "1..${#names[@]}"
        local t0=$SECONDS failed=0
        for i in "${!names[@]}"; do
                # Not "|| rc=$?" nor "if ( ... )": bash ignores set -e inside a tested subshell.
                ( set -e; trap 'proxy_stop; tpm_teardown' EXIT; run_case "${names[$i]}" "${ops[$i]}" "${modes[$i]}" )
                # shellcheck disable=SC2181 # see above
                if [ $? = 0 ]; then
                        echo "ok $((i + 1)) - ${names[$i]}"
                else
                        echo "not ok $((i + 1)) - ${names[$i]}"
                        echo "${names[$i]} FAILED" >>"$RESULTS"
                        failed=$((failed + 1))
                fi
        done
        echo "# ${#names[@]} cases in $((SECONDS - t0)) s, $failed failed"
        [ $failed = 0 ]
}
main
