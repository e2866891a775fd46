#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Memcheck over the plugin's open path: the real cryptsetup binary loads our
# plugin (with_plugin) and unlocks an enrolled image under valgrind. No
# invalid read or write, no use of uninitialised memory and no definite leak
# may come from our code (any stack with a frame in the plugin); errors
# wholly inside other libraries are listed but are not ours to fix.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_createprimary cryptsetup unshare valgrind
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"
[ -z "${TPMGUARD_ASAN_RUNTIME:-}" ] || skip_all "valgrind cannot run an AddressSanitizer build; the sanitizer pass covers it"

setup_enrolled() {
        tpm_setup
        "$TPMGUARD" -q provision >/dev/null
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" -q enroll --pcrs 7 --pin-file "$WORK/pin" \
                --unlock-key-file "$WORK/recovery.key" "$WORK/disk.img"
}

# Runs cryptsetup's token open under memcheck; $1 = expected cryptsetup exit codes (a case pattern).
memcheck_open() {
        local want=$1 rc=0
        with_plugin valgrind --tool=memcheck --error-exitcode=99 --leak-check=full \
                --show-leak-kinds=definite --errors-for-leak-kinds=definite --track-origins=yes \
                --num-callers=40 --keep-debuginfo=yes --log-file="$WORK/memcheck.log" \
                cryptsetup -v open --test-passphrase --token-only --token-type tpmguard "$WORK/disk.img" \
                >"$WORK/out" 2>&1 || rc=$?
        # Error records naming our plugin anywhere in their stack. libcryptsetup
        # dlcloses the plugin before exit: --keep-debuginfo keeps its symbols,
        # and every call into our code passes through a cryptsetup_token_* entry.
        awk '/^==[0-9]+== [^ ]/ { rec = $0; next }
             /^==[0-9]+== *$/ { if (ours) print rec; ours = 0; rec = ""; next }
             /cryptsetup_token_|libcryptsetup-token-tpmguard/ { if (rec != "") ours = 1 }' "$WORK/memcheck.log" >"$WORK/ours"
        if [ -s "$WORK/ours" ]; then
                echo "# memcheck errors in tpmguard code:" >&2
                sed 's/^/#   /' "$WORK/memcheck.log" | head -80 >&2
                return 1
        fi
        grep -q 'ERROR SUMMARY' "$WORK/memcheck.log" || { echo "# valgrind did not run" >&2; return 1; }
        if [ "$rc" = 99 ]; then
                echo "# memcheck errors outside tpmguard (not failing the test):" >&2
                grep -E '^==[0-9]+== (Invalid|Conditional|Use of|[0-9,]+ bytes in)' "$WORK/memcheck.log" | head -10 | sed 's/^/#   /' >&2
        elif ! eval "case $rc in $want) true ;; *) false ;; esac"; then
                echo "# cryptsetup exited $rc, expected $want" >&2
                sed 's/^/#   /' "$WORK/out" >&2
                return 1
        fi
}

test_case memcheck_unlock_with_pin
memcheck_unlock_with_pin() {
        setup_enrolled
        memcheck_open 0 <"$WORK/pin"
        expect_in "Key slot 1 unlocked" "$(cat "$WORK/out")"
}

test_case memcheck_wrong_pin
memcheck_wrong_pin() {
        setup_enrolled
        printf '9999\n' >"$WORK/wrong"
        # A wrong PIN is -ENOANO (pin_tries): cryptsetup asks again, reads EOF: "no usable token" (1) or "wrong parameters" (2).
        memcheck_open '1|2' <"$WORK/wrong"
        # The plugin ran and refused (not: cryptsetup failed without it).
        expect_in "Wrong PIN" "$(cat "$WORK/out")"
}

# The unlock through an update grace (docs/design.md §9.2): the alternates parsed, the seal chosen
# from audited reads, the grace's policy, the message and the secret-free marker.
test_case memcheck_unlock_through_grace
memcheck_unlock_through_grace() {
        setup_enrolled
        expect_exit 0 "$TPMGUARD" -q update prepare --pin-file "$WORK/pin" "$WORK/disk.img"
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                7:sha256=2222222222222222222222222222222222222222222222222222222222222222 >/dev/null
        memcheck_open 0 <"$WORK/pin"
        expect_in "Unlocked with the update grace" "$(cat "$WORK/out")"
}

run_cases
