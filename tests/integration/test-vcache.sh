#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: the per-boot verification cache (cache_dir/null-key.json).
# A warm cache makes unlocks cheaper; a tampered, stale or foreign cache can
# only cost a full verification or fail closed, never weaken verification.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_createprimary cryptsetup unshare
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"

# Unlock with cryptsetup --debug so that the plugin's debug lines show which path it took.
unlock_debug() {
        with_plugin cryptsetup open --test-passphrase --token-only --debug "$WORK/disk.img" <"$WORK/pin" \
                >"$WORK/unlock.log" 2>&1
}

test_case first_unlock_fills_second_uses_cache
first_unlock_fills_second_uses_cache() {
        setup_enrolled
        rm -f "$WORK/run/null-key.json"
        unlock_debug
        expect_in "Cached the verified NULL key" "$(cat "$WORK/unlock.log")"
        test -s "$WORK/run/null-key.json"
        [ "$(stat -c %a "$WORK/run")" = 700 ]
        unlock_debug
        expect_in "from this boot's cache" "$(cat "$WORK/unlock.log")"
        expect_in "unlocked" "$(cat "$WORK/unlock.log")"
}

test_case verify_record_fills_cache
verify_record_fills_cache() {
        setup_enrolled
        rm -f "$WORK/run/null-key.json"
        expect_exit 0 "$TPMGUARD" verify --record
        test -s "$WORK/run/null-key.json"
        unlock_debug
        expect_in "from this boot's cache" "$(cat "$WORK/unlock.log")"
}

# Every tampering costs a full verification and still unlocks.
test_case tampered_cache_costs_full_verification
tampered_cache_costs_full_verification() {
        setup_enrolled
        unlock_debug
        cp "$WORK/run/null-key.json" "$WORK/good.json"
        local edit
        # Flip one bit of a field (hex fields at their middle byte), or replace the file.
        for edit in boot_id null_name ek_signing_key_name context truncated-context not-json; do
                python3 - "$WORK/good.json" "$WORK/run/null-key.json" "$edit" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
edit = sys.argv[3]
if edit == "not-json":
    open(sys.argv[2], "w").write("not json")
    sys.exit(0)
if edit == "boot_id":
    c["boot_id"] = ("0" if c["boot_id"][0] != "0" else "1") + c["boot_id"][1:]
elif edit == "truncated-context":
    c["context"] = c["context"][:-2]
else:
    b = bytearray.fromhex(c[edit])
    b[len(b) // 2] ^= 1
    c[edit] = b.hex()
json.dump(c, open(sys.argv[2], "w"))
PY
                unlock_debug || { echo "# tampered cache ($edit) broke the unlock" >&2; cat "$WORK/unlock.log" >&2; return 1; }
                expect_in "Cached the verified NULL key" "$(cat "$WORK/unlock.log")"
        done
}

test_case cache_does_not_survive_tpm_reset
cache_does_not_survive_tpm_reset() {
        setup_enrolled
        unlock_debug
        "$FIXTURE" reset "$WORK/tpm"
        unlock_debug && { echo "# unlocked after a TPM reset with a warm cache" >&2; return 1; }
        expect_in "refuses the saved context" "$(cat "$WORK/unlock.log")"
        expect_in "reset" "$(cat "$WORK/unlock.log")"
}

test_case cache_in_foreign_directory_is_ignored
cache_in_foreign_directory_is_ignored() {
        setup_enrolled
        unlock_debug
        chmod 755 "$WORK/run"
        unlock_debug
        expect_in "not a private directory" "$(cat "$WORK/unlock.log")"
        expect_in "unlocked" "$(cat "$WORK/unlock.log")"
}

test_case cache_of_another_tpm_is_refused_by_the_tpm
cache_of_another_tpm_is_refused_by_the_tpm() {
        setup_enrolled
        unlock_debug
        cp "$WORK/run/null-key.json" "$WORK/ours.json"
        # A second TPM, provisioned and verified the same way, in the same boot.
        "$FIXTURE" start "$WORK/other" >/dev/null
        "$FIXTURE" null-name "$WORK/other" "$WORK/other_null_name"
        sed -e "s|^tcti = .*|tcti = $("$FIXTURE" tcti "$WORK/other")|" \
            -e "s|^state_dir = .*|state_dir = $WORK/other-state|" \
            -e "s|^null_name_path = .*|null_name_path = $WORK/other_null_name|" \
            -e "s|^ek_ca = .*|ek_ca = $WORK/other/ca/bundle.pem|" \
            -e "s|^cache_dir = .*|cache_dir = $WORK/other-run|" "$WORK/tpmguard.conf" >"$WORK/other.conf"
        mkdir -p "$WORK/other-state"
        TPMGUARD_CONFIG=$WORK/other.conf "$TPMGUARD" provision >/dev/null
        TPMGUARD_CONFIG=$WORK/other.conf "$TPMGUARD" verify --record >/dev/null
        # Its cache, presented to our TPM: refused (names differ), full verification, unlock.
        cp "$WORK/other-run/null-key.json" "$WORK/run/null-key.json"
        unlock_debug
        expect_in "Cached the verified NULL key" "$(cat "$WORK/unlock.log")"
}

# The cached SRK entry (its serialized ESYS_TR) saves a ReadPublic on the cached
# path without the kernel's null_name, whose audited proof reads it; a wrong or
# damaged one must only cost a full verification, and a missing one must not
# stop the cache from being used (the SRK is then read in the audit session).
test_case tampered_srk_entry_costs_full_verification
tampered_srk_entry_costs_full_verification() {
        setup_enrolled
        write_config prefer
        rm "$WORK/null_name"
        unlock_debug
        cp "$WORK/run/null-key.json" "$WORK/good.json"
        python3 -c 'import json,sys; sys.exit(0 if "srk" in json.load(open(sys.argv[1])) else 1)' "$WORK/good.json" ||
                { echo "# the cache holds no SRK entry" >&2; return 1; }
        local edit
        # Serialized ESYS_TR: handle (4 bytes), name (2 + 34), type, public area.
        for edit in handle name truncated; do
                python3 - "$WORK/good.json" "$WORK/run/null-key.json" "$edit" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
b = bytearray.fromhex(c["srk"])
edit = sys.argv[3]
if edit == "handle":
    b[3] ^= 0x02
elif edit == "name":
    b[4 + 2 + 20] ^= 0x01
else:
    b = b[:len(b) // 2]
c["srk"] = b.hex()
json.dump(c, open(sys.argv[2], "w"))
PY
                unlock_debug || { echo "# tampered SRK entry ($edit) broke the unlock" >&2; cat "$WORK/unlock.log" >&2; return 1; }
                expect_in "Cached the verified NULL key" "$(cat "$WORK/unlock.log")"
        done
        python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); del c["srk"]; json.dump(c, open(sys.argv[2], "w"))' \
                "$WORK/good.json" "$WORK/run/null-key.json"
        unlock_debug
        expect_in "from this boot's cache" "$(cat "$WORK/unlock.log")"
        expect_in "unlocked" "$(cat "$WORK/unlock.log")"
}

# Issue 18: with the kernel's null_name the warm unlock reads no SRK at all (its
# Load has a password authorization under an ESYS_TR made from the token's
# parent_name), so the cache holds none, and the unlock works from the cache.
test_case warm_unlock_reads_no_srk
warm_unlock_reads_no_srk() {
        setup_enrolled
        rm -f "$WORK/run/null-key.json"
        expect_exit 0 "$TPMGUARD" verify --record
        python3 -c 'import json,sys; sys.exit(1 if "srk" in json.load(open(sys.argv[1])) else 0)' "$WORK/run/null-key.json" ||
                { echo "# the cache holds an SRK entry with the kernel's null_name" >&2; return 1; }
        unlock_debug
        expect_in "from this boot's cache" "$(cat "$WORK/unlock.log")"
        expect_in "unlocked" "$(cat "$WORK/unlock.log")"
        case "$(cat "$WORK/unlock.log")" in
        *"reading the SRK"*) echo "# the warm unlock read the SRK" >&2; return 1 ;;
        esac
}

# A token sealed under a transient SRK (0x81000001 holds a key that is not an
# SRK): the warm unlock's Load under 0x81000001 without reading it fails at the
# TPM, and the unlock then reads the handle, re-creates the SRK and unlocks.
test_case transient_srk_token_unlocks_warm
transient_srk_token_unlocks_warm() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_createprimary -Q -C o -G ecc -c "$WORK/sign.ctx" \
                -a "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign|noda"
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_evictcontrol -Q -C o -c "$WORK/sign.ctx" 0x81000001
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_flushcontext -t
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
        expect_in "transient SRK" "$ERR"
        rm -f "$WORK/run/null-key.json"
        unlock_debug
        expect_in "Cached the verified NULL key" "$(cat "$WORK/unlock.log")"
        expect_in "unlocked" "$(cat "$WORK/unlock.log")"
        unlock_debug
        expect_in "from this boot's cache" "$(cat "$WORK/unlock.log")"
        expect_in "reading the SRK" "$(cat "$WORK/unlock.log")"
        expect_in "unlocked" "$(cat "$WORK/unlock.log")"
}

# Issue 18: through a resource manager that flushes a connection's objects at close
# (resource_manager = yes here: swtpm has none, so the test flushes what is left), the
# plugin's warm unlock leaves the sealed object's FlushContext to it: the recording has
# one FlushContext (the NULL key's, early) and the object is still loaded afterwards;
# with resource_manager = no both flushes are sent and nothing is left loaded.
test_case warm_unlock_leaves_last_flush_to_resource_manager
warm_unlock_leaves_last_flush_to_resource_manager() {
        local rm flushes commands transient no_commands=
        require_interposer
        setup_enrolled
        expect_exit 0 "$TPMGUARD" verify --record
        unlock_debug   # the first unlock reads the DA state live and caches it: the two below are alike
        for rm in no yes; do
                sed -i '/^resource_manager = /d' "$WORK/tpmguard.conf"
                echo "resource_manager = $rm" >>"$WORK/tpmguard.conf"
                rm -f "$WORK/record.jsonl"
                interposer_start --mode record --record "$WORK/record.jsonl"
                unlock_debug || { interposer_stop; cat "$WORK/unlock.log" >&2; return 1; }
                interposer_stop
                expect_in "from this boot's cache" "$(cat "$WORK/unlock.log")"
                expect_in "unlocked" "$(cat "$WORK/unlock.log")"
                # shellcheck disable=SC2016 # a python program
                read -r commands flushes < <($PY -c '
import json, sys
cmds = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cmds = [c["command"] for c in cmds if c["dir"] == "command"]
# The PIN call only: from its ContextLoad of the cached NULL key on. The call before it, without a
# PIN, checks that a PIN can work (tokens/unlock.c, pin_can_work(); docs/performance.md).
cmds = cmds[len(cmds) - cmds[::-1].index("ContextLoad") - 1:]
print(len(cmds), cmds.count("FlushContext"))' "$WORK/record.jsonl")
                transient=$(TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_getcap handles-transient | grep -c 0x || true)
                tpm_flush_contexts
                echo "# resource_manager = $rm: $commands commands, $flushes FlushContext, $transient transient left" >&2
                case $rm in
                no) [ "$flushes" = 2 ] && [ "$transient" = 0 ] && no_commands=$commands ;;
                yes) [ "$flushes" = 1 ] && [ "$transient" = 1 ] && [ "$commands" = $((no_commands - 1)) ] ;;
                esac || { echo "# unexpected flushes for resource_manager = $rm" >&2; return 1; }
        done
}

run_cases
