#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: PIN retries at the prompt (issue 15 §2). The real
# cryptsetup binary on a pseudo-terminal (tests/integration/pty-answer types
# the PINs as a person at the console would) opens a volume through the
# plugin with --token-only --tries N against a real swtpm:
#   - a wrong PIN then the right one unlocks, without the passphrase;
#   - three wrong PINs end the token attempt (pin_tries = 3) even when the
#     caller would ask more often (--tries 10, like systemd-cryptsetup, which
#     asks again on -ENOANO without a bound of its own);
#   - the TPM's last dictionary-attack tries (pin_da_reserve) are never spent:
#     with a 3-try TPM and the default reserve of 2, one wrong PIN ends the
#     attempt, and the next unlock does not try the PIN at all;
#   - every wrong-PIN message says how many DA tries remain;
#   - after a PCR change no PIN is asked for: the mismatch is named first and
#     the caller goes on to the passphrase (issue 29).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_getcap cryptsetup unshare python3
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"

test_case wrong_then_right_unlocks
wrong_then_right_unlocks() {
        setup_enrolled
        pty_open 3 9999 1234
        [ "$RC" = 0 ] || { sed 's/^/#   /' "$WORK/tty.log" >&2; return 1; }
        [ "$PROMPTS" = 2 ] || { echo "# expected 2 PIN prompts, saw $PROMPTS" >&2; return 1; }
        tty_has "Wrong PIN"
        tty_has "tries left before the TPM locks out"
        tty_has "Try again (2 of 3 PIN tries left"
}

test_case three_wrong_fall_back
three_wrong_fall_back() {
        setup_enrolled
        local before after
        before=$(da_counter)
        pty_open 3 1111 2222 3333 1234
        [ "$RC" != 0 ] || { echo "# unlocked with three wrong PINs" >&2; return 1; }
        [ "$PROMPTS" = 3 ] || { echo "# expected 3 PIN prompts, saw $PROMPTS" >&2; return 1; }
        tty_has "No more PIN tries for this unlock (pin_tries = 3)"
        after=$(da_counter)
        echo "# DA counter $before -> $after" >&2
        recovery_opens "$WORK/disk.img"
}

test_case budget_holds_when_the_caller_asks_more
budget_holds_when_the_caller_asks_more() {
        setup_enrolled
        pty_open 10 1111 2222 3333 4444 1234
        [ "$RC" != 0 ] || { echo "# unlocked after the PIN budget was spent" >&2; return 1; }
        # The third wrong PIN is final (-EPERM): the caller stops asking.
        [ "$PROMPTS" = 3 ] || { echo "# expected 3 PIN prompts, saw $PROMPTS" >&2; return 1; }
        tty_has "No more PIN tries for this unlock (pin_tries = 3)"
}

test_case pin_tries_configurable
pin_tries_configurable() {
        setup_enrolled
        echo "pin_tries = 1" >>"$WORK/tpmguard.conf"
        pty_open 3 9999 1234
        [ "$RC" != 0 ] || { echo "# unlocked although pin_tries = 1" >&2; return 1; }
        [ "$PROMPTS" = 1 ] || { echo "# expected 1 PIN prompt, saw $PROMPTS" >&2; return 1; }
}

test_case da_reserve_is_never_spent
da_reserve_is_never_spent() {
        setup_enrolled --strict-da
        local before after
        before=$(da_counter)
        # 3 DA tries, 2 reserved: one wrong PIN and the plugin gives up.
        pty_open 3 9999 1234
        [ "$RC" != 0 ] || { echo "# unlocked after a wrong PIN with no spendable try left" >&2; return 1; }
        [ "$PROMPTS" = 1 ] || { echo "# expected 1 PIN prompt, saw $PROMPTS" >&2; return 1; }
        tty_has "2 of 3 tries left before the TPM locks out"
        tty_has "kept in reserve"
        # The next unlock does not spend a reserved try, even with the right PIN,
        # and does not ask for one (issue 29: a PIN only when one can work).
        pty_open 3 1234
        [ "$RC" != 0 ] || { echo "# a reserved DA try was spent" >&2; return 1; }
        [ "$PROMPTS" = 0 ] || { echo "# asked for a PIN that cannot work ($PROMPTS prompts)" >&2; return 1; }
        tty_has "Not asking for the PIN: only the reserved TPM dictionary-attack tries remain"
        after=$(da_counter)
        [ "$((after))" = "$((before + 1))" ] || { echo "# DA counter $before -> $after, expected +1" >&2; return 1; }
        recovery_opens "$WORK/disk.img"
}

# Issue 29: a PCR change is known before the prompt: the plugin says so and
# cryptsetup goes on to the passphrase without a PIN prompt (before: up to
# three prompts, each answered "PCR mismatch").
test_case pcr_change_asks_no_pin
pcr_change_asks_no_pin() {
        setup_enrolled
        local before after
        before=$(da_counter)
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend \
                7:sha256=0000000000000000000000000000000000000000000000000000000000000001
        pty_open 3 1234 1234 1234
        [ "$RC" != 0 ] || { echo "# unlocked despite changed PCR 7" >&2; return 1; }
        [ "$PROMPTS" = 0 ] || { echo "# asked for a PIN that cannot work ($PROMPTS prompts)" >&2; return 1; }
        tty_has "Not asking for the PIN: the sha256 values of PCR 7 no longer match"
        tty_has "tpmguard reseal"
        after=$(da_counter)
        [ "$((after))" = "$((before))" ] || { echo "# DA counter $before -> $after" >&2; return 1; }
        recovery_opens "$WORK/disk.img"
}

run_cases
