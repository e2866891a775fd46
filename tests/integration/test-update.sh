#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: the update path (docs/design.md "Updates", issue 30) on a
# real swtpm with simulated reboots: a TPM Reset (swtpm CMD_INIT +
# Startup(CLEAR): resetCount + 1, PCRs back to zero, a new NULL seed, so a new
# kernel null_name and an empty /run), then PCR 7 extended to this boot's value.
# The recovery passphrase is never used to unlock: every "opens" below is the
# plugin through cryptsetup with the PIN alone.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup tpm2_createprimary tpm2_pcrextend cryptsetup unshare python3
[ "$(id -u)" = 0 ] || skip_all "needs root for a private mount namespace (libcryptsetup 2.6 plugin path)"

# The digests a boot chain measures into PCR 7: A before the update, B after
# it, C an update nobody prepared for (named indirectly, by boot()).
# shellcheck disable=SC2034
DIGEST_A=1111111111111111111111111111111111111111111111111111111111111111
DIGEST_B=2222222222222222222222222222222222222222222222222222222222222222
# shellcheck disable=SC2034
DIGEST_C=3333333333333333333333333333333333333333333333333333333333333333

# boot X: a reboot into the boot chain that measures $DIGEST_X.
boot() {
        local digest
        digest=DIGEST_$1
        # An orderly reboot (TPM2_Shutdown first), as the machine's own: a reset without it counts
        # as a dictionary-attack failure once DA-protected authorizations were used, which would
        # heal (1 s here) at a moment of its own while grace_wrong_pin_one_try counts its one try.
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_shutdown --clear >/dev/null
        "$FIXTURE" reset "$WORK/tpm"
        rm -rf "$WORK/run"
        mkdir -m 700 "$WORK/run"
        "$FIXTURE" null-name "$WORK/tpm" "$WORK/null_name"
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend "7:sha256=${!digest}" >/dev/null
}

# PCR 7 after a boot that measured $1: SHA-256(32 zero bytes ‖ digest).
pcr7_after() {
        python3 -c 'import hashlib, sys; print(hashlib.sha256(bytes(32) + bytes.fromhex(sys.argv[1])).hexdigest())' "$1"
}

# A provisioned TPM, booted with A, and the volume enrolled to PCR 7 with PIN 1234.
enrolled_at_a() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        boot A
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" \
                "$WORK/disk.img"
        pin_opens "$WORK/pin"
}

# The plugin's unlock, its messages kept (cryptsetup -v).
token_open_v() {
        with_plugin cryptsetup open --test-passphrase --token-only --token-type tpmguard -v "$WORK/disk.img"
}

marker() { echo "$WORK/run/update-pending/$(cryptsetup luksUUID "$WORK/disk.img")"; }

# The issue's "Done when": A; update prepare --boots 1; B opens with the PIN;
# update finish; B opens; A (a rollback) and C (unprepared) are refused.
test_case grace_then_finish
grace_then_finish() {
        enrolled_at_a
        expect_exit 0 "$TPMGUARD" update prepare --boots 1 --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "next 1" "$OUT"
        # The token holds the grace, and the header shows it.
        expect_exit 0 with_plugin cryptsetup luksDump "$WORK/disk.img"
        expect_in "Update seal:     grace" "$OUT"

        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "update seal: grace while the TPM's resetCount" "$OUT"

        boot B
        # status says the main seal no longer matches and the grace does.
        expect_exit 0 "$TPMGUARD" status "$WORK/disk.img"
        expect_in "current PCR values: not-satisfied" "$OUT"
        expect_in "(now: satisfied); 'tpmguard update finish' ends it" "$OUT"
        expect_exit 0 token_open_v <"$WORK/pin"
        expect_in "Unlocked with the update grace, 0 boot(s) left" "$ERR$OUT"
        # The marker for tpmguard-update-finish.service, without any secret.
        [ "$(head -n 1 "$(marker)")" = "seal=grace" ]
        [ "$(sed -n 2p "$(marker)")" = "device=$WORK/disk.img" ]

        expect_exit 0 "$TPMGUARD" update finish --from-marker --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "old values no longer unlock" "$OUT"
        [ ! -e "$(marker)" ]
        expect_exit 0 with_plugin cryptsetup luksDump "$WORK/disk.img"
        refute_in "Update seal" "$OUT"
        # Nothing left to finish: exit 0.
        expect_exit 0 "$TPMGUARD" update finish --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_in "nothing to finish" "$OUT"

        boot B
        expect_exit 0 token_open_v <"$WORK/pin"
        refute_in "update grace" "$ERR$OUT"
        boot A
        refute pin_opens "$WORK/pin"
        boot C
        refute pin_opens "$WORK/pin"
        token_open <"$WORK/pin" >"$WORK/out" 2>&1 || true
        expect_in "tpmguard update prepare" "$(cat "$WORK/out")"
}

# tpmguard-update-finish.service's command, as the unit runs it: the PIN from
# systemd-ask-password (here a stand-in that prints it), through a pipe.
test_case unit_finishes_after_grace_boot
unit_finishes_after_grace_boot() {
        enrolled_at_a
        expect_exit 0 "$TPMGUARD" update prepare --pin-file "$WORK/pin" "$WORK/disk.img"
        boot B
        pin_opens "$WORK/pin"
        [ -f "$(marker)" ]
        mkdir "$WORK/bin"
        printf '#!/bin/sh\necho "$*" >>"%s/asked"\ncat "%s/pin"\n' "$WORK" "$WORK" >"$WORK/bin/systemd-ask-password"
        chmod +x "$WORK/bin/systemd-ask-password"
        expect_exit 0 env PATH="$WORK/bin:$PATH" TPMGUARD_BIN="$TPMGUARD" sh "$TPMGUARD_BUILD/units/tpmguard-update-finish"
        expect_in "TPM PIN of $WORK/disk.img" "$(cat "$WORK/asked")"
        [ ! -e "$(marker)" ]
        boot A
        refute pin_opens "$WORK/pin"
        boot B
        pin_opens "$WORK/pin"
        # Nothing pending: nothing asked.
        rm "$WORK/asked"
        expect_exit 0 env PATH="$WORK/bin:$PATH" TPMGUARD_BIN="$TPMGUARD" sh "$TPMGUARD_BUILD/units/tpmguard-update-finish"
        [ ! -e "$WORK/asked" ]
}

# The grace ends after N boots though nobody finishes: the TPM's resetCount, not a file.
grace_expires() {
        local n=$1 i
        enrolled_at_a
        expect_exit 0 "$TPMGUARD" update prepare --boots "$n" --pin-file "$WORK/pin" "$WORK/disk.img"
        for i in $(seq 1 "$n"); do
                boot C
                pin_opens "$WORK/pin" || { echo "# boot $i of $n did not open with the grace" >&2; return 1; }
        done
        boot C
        token_open <"$WORK/pin" >"$WORK/out" 2>&1 && { echo "# the grace outlived $n boot(s)" >&2; return 1; }
        expect_in "update grace has expired" "$(cat "$WORK/out")"
        # Even the boot chain it was sealed to needs the main seal now, which still opens.
        boot A
        pin_opens "$WORK/pin"
}

test_case grace_expires_after_one_boot
grace_expires_after_one_boot() { grace_expires 1; }

test_case grace_expires_after_two_boots
grace_expires_after_two_boots() { grace_expires 2; }

# A wrong PIN through the grace costs one dictionary-attack try, not two: the seal is chosen
# before the PIN-bearing Unseal, and one typed PIN is one Unseal on the bus (a client that tried
# the main seal first and the grace after its policy failure would send two, and an interposer
# forging that policy failure over a wrong PIN's would make each typed PIN cost two tries).
test_case grace_wrong_pin_one_try
grace_wrong_pin_one_try() {
        require_interposer
        enrolled_at_a
        expect_exit 0 "$TPMGUARD" update prepare --pin-file "$WORK/pin" "$WORK/disk.img"
        boot B
        local before after unseals
        before=$(da_counter)
        printf '9999\n' >"$WORK/wrong"
        interposer_start --mode record --record "$WORK/capture.jsonl"
        with_plugin cryptsetup open --test-passphrase --token-only --token-type tpmguard --tries 1 \
                "$WORK/disk.img" <"$WORK/wrong" >/dev/null 2>&1 && { echo "# a wrong PIN unlocked" >&2; return 1; }
        interposer_stop
        # Unseals the TPM evaluated: a TPM_RC_RETRY answer (0x922, a warning: the command was not
        # executed, and ESAPI sends it again) is none.
        unseals=$(python3 -c 'import json, sys
print(sum(1 for l in open(sys.argv[1]) for r in [json.loads(l)]
          if r.get("dir") == "response" and r.get("command") == "Unseal" and r.get("rc") != "0x00000922"))' \
                "$WORK/capture.jsonl")
        [ "$unseals" = 1 ] || { echo "# $unseals Unseals evaluated for one typed PIN" >&2; return 1; }
        after=$(da_counter)
        [ $((after)) -eq $((before + 1)) ] || { echo "# DA counter moved $before -> $after" >&2; return 1; }
        pin_opens "$WORK/pin"
}

# A known change: the predicted value opens after the update, no grace; finish drops A.
test_case predicted_then_finish
predicted_then_finish() {
        enrolled_at_a
        expect_exit 0 "$TPMGUARD" update prepare --pcr "7=sha256:$(pcr7_after $DIGEST_B)" --pin-file "$WORK/pin" \
                "$WORK/disk.img"
        expect_in "predicted" "$OUT"
        boot C
        refute pin_opens "$WORK/pin"
        boot B
        expect_exit 0 token_open_v <"$WORK/pin"
        expect_in "predicted update seal" "$ERR$OUT"
        expect_exit 0 "$TPMGUARD" update finish --pin-file "$WORK/pin" "$WORK/disk.img"
        boot A
        refute pin_opens "$WORK/pin"
        boot B
        pin_opens "$WORK/pin"
}

# prepare proves the PIN by unsealing: a wrong one changes nothing.
test_case prepare_wrong_pin_changes_nothing
prepare_wrong_pin_changes_nothing() {
        enrolled_at_a
        local before
        before=$(cryptsetup token export --token-id 0 "$WORK/disk.img")
        printf '9999\n' >"$WORK/wrong"
        expect_exit 12 "$TPMGUARD" update prepare --pin-file "$WORK/wrong" "$WORK/disk.img"
        [ "$(cryptsetup token export --token-id 0 "$WORK/disk.img")" = "$before" ]
        expect_exit 2 "$TPMGUARD" update prepare --boots 17 --pin-file "$WORK/pin" "$WORK/disk.img"
}

run_cases
