#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: tpmguard pcrs (issue 30, items 2 and 3). A realistic
# firmware event log (tests/fixture/make-eventlog, OVMF's shape) whose events
# are also extended into swtpm's PCRs, as the firmware would: the replay must
# equal the values read over the verified session, a log with one event
# changed must be caught, and a prediction must equal what the TPM holds after
# a simulated reboot (TPM reset, the next boot's events extended).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup swtpm_ioctl tpm2_pcrextend tpm2_pcrread
python3 -c 'import cryptography' 2>/dev/null || skip_all "python3-cryptography not installed"

MAKE=$EVENTLOG_MAKE
OWNER=$EFI_OWNER

# PCR 7 as tpm2-tools reads it (independent of tpmguard; the TPM is trusted here).
pcr7() {
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrread sha256:7 -o "$WORK/pcr7.bin" >/dev/null
        od -An -tx1 -v "$WORK/pcr7.bin" | tr -d ' \n'
}

setup() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        eventlog_sb_setup
        mkdir "$WORK/efivars" # empty: nothing written since this boot
        eventlog_boot "$WORK/log"
}

test_case replay_matches_verified_read
replay_matches_verified_read() {
        setup
        expect_exit 0 "$TPMGUARD" pcrs --event-log "$WORK/log"
        expect_in "PCR  7  $(pcr7)  replays" "$OUT"
        expect_in "db: 1 X.509, 0 SHA-256 hashes" "$OUT"
        expect_in "O=tpmguard tests,CN=Test UEFI CA 2011" "$OUT"
        expect_in "dbx: 0 X.509, 20 SHA-256 hashes" "$OUT"
        expect_in "authority db: O=tpmguard tests,CN=Test UEFI CA 2011" "$OUT"
        expect_in "path \\EFI\\BOOT\\BOOTX64.EFI" "$OUT"
        expect_exit 0 "$TPMGUARD" pcrs --event-log "$WORK/log" --json
        printf '%s' "$OUT" >"$WORK/out.json"
        python3 - "$(pcr7)" "$WORK/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[2]))
assert d["replays"] is True and d["format"] == "crypto-agile", d
bank = [b for b in d["banks"] if b["bank"] == "sha256"][0]
assert bank["pcrs"][7]["tpm"] == sys.argv[1] == bank["pcrs"][7]["replayed"]
assert all(p["match"] for p in bank["pcrs"][:8])
names = [v["name"] for v in d["pcr7"]["variables"]]
assert names == ["SecureBoot", "PK", "KEK", "db", "dbx"], names
PY
}

# One event changed in the log (db claims another certificate; the TPM measured the real one).
test_case forged_log_caught
forged_log_caught() {
        setup
        "$MAKE" esl-x509 "$OWNER" "$WORK/sb/db2023.der" >"$WORK/other-db.esl"
        "$MAKE" log --pk "$WORK/sb/pk.esl" --kek "$WORK/sb/kek.esl" --db "$WORK/other-db.esl" \
                --dbx "$WORK/sb/dbx.esl" --authority "$WORK/sb/db.der" --authority-owner "$OWNER" \
                --out "$WORK/forged" --extends "$WORK/forged.extends"
        expect_exit 3 "$TPMGUARD" pcrs --event-log "$WORK/forged"
        expect_in "PCR  7  $(pcr7)  DOES NOT REPLAY" "$OUT"
        expect_in "does not replay to PCR 7 read over the verified session" "$(cat "$WORK/stderr")"
        expect_exit 3 "$TPMGUARD" pcrs --event-log "$WORK/forged" --json
        python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(0 if d["replays"] is False else 1)' <<<"$OUT"
        # No prediction from it.
        expect_exit 3 "$TPMGUARD" pcrs --event-log "$WORK/forged" --predict --efivars "$WORK/efivars"
        refute_in "--pcr 7=" "$OUT"
        # A forged digest of an event (the data kept) is caught the same way.
        python3 - "$WORK/log" "$WORK/forged2" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"Exit Boot Services Invocation")
b[i - 4 - 1] ^= 1  # the last byte of the event's SHA-256 digest (PCR 5), before its size
open(sys.argv[2], "wb").write(b)
PY
        expect_exit 3 "$TPMGUARD" pcrs --event-log "$WORK/forged2"
        expect_in "does not replay to PCR 5" "$(cat "$WORK/stderr")"
}

# A dbx update (an authenticated append, one of its hashes already in dbx): the
# predicted PCR 7 is what the next boot's firmware measures.
test_case predict_dbx_append
predict_dbx_append() {
        setup
        "$MAKE" esl-sha256 "$OWNER" 5 dbx-2026 >"$WORK/new.esl"
        "$MAKE" esl-sha256 "$OWNER" 1 dbx-2025 >>"$WORK/new.esl" # held already: dropped by the append
        "$MAKE" auth "$WORK/new.esl" >"$WORK/dbxupdate.auth"
        expect_exit 0 "$TPMGUARD" pcrs --event-log "$WORK/log" --predict --dbx "$WORK/dbxupdate.auth" \
                --efivars "$WORK/efivars"
        local predicted=$OUT before
        before=$(pcr7)
        expect_in "--pcr 7=sha256:" "$predicted"
        [ "$predicted" != "--pcr 7=sha256:$before" ]
        "$MAKE" esl-append "$WORK/sb/dbx.esl" "$WORK/new.esl" >"$WORK/dbx-next.esl"
        eventlog_reboot "$WORK/log2" --dbx "$WORK/dbx-next.esl"
        [ "$predicted" = "--pcr 7=sha256:$(pcr7)" ]
        expect_exit 0 "$TPMGUARD" pcrs --event-log "$WORK/log2"
        expect_in "dbx: 0 X.509, 25 SHA-256 hashes" "$OUT"
        # --json gives the same argument.
        eventlog_reboot "$WORK/log" # back to the first boot
        expect_exit 0 "$TPMGUARD" pcrs --event-log "$WORK/log" --predict --dbx "$WORK/dbxupdate.auth" \
                --efivars "$WORK/efivars" --json
        printf '%s' "$OUT" >"$WORK/out.json"
        python3 - "${predicted#--pcr }" "$WORK/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[2]))
assert d["argument"] == sys.argv[1], d
assert [c["variable"] for c in d["changes"]] == ["dbx"] and d["changes"][0]["write"] == "append", d
PY
}

# The same update, written already (as fwupd does: the variable changes now, PCR 7 at the next
# boot): found in efivarfs without naming a file.
test_case predict_pending_efivars
predict_pending_efivars() {
        setup
        "$MAKE" esl-sha256 "$OWNER" 5 dbx-2026 >"$WORK/new.esl"
        "$MAKE" esl-append "$WORK/sb/dbx.esl" "$WORK/new.esl" >"$WORK/dbx-next.esl"
        { printf '\x27\x00\x00\x00'; cat "$WORK/dbx-next.esl"; } \
                >"$WORK/efivars/dbx-d719b2cb-3d3a-4596-a3bc-dad00e67656f"
        expect_exit 0 "$TPMGUARD" -v pcrs --event-log "$WORK/log" --predict --efivars "$WORK/efivars"
        local predicted=$OUT
        expect_in "dbx from efivarfs (written since this boot)" "$(cat "$WORK/stderr")"
        # Naming the file as well changes nothing: its entries are held already.
        expect_exit 0 "$TPMGUARD" pcrs --event-log "$WORK/log" --predict --dbx "$WORK/new.esl" --efivars "$WORK/efivars"
        [ "$OUT" = "$predicted" ]
        eventlog_reboot "$WORK/log2" --dbx "$WORK/dbx-next.esl"
        [ "$predicted" = "--pcr 7=sha256:$(pcr7)" ]
}

# The CA rollover: the 2023 CA appended to db, the boot chain signed by it.
test_case predict_new_authority
predict_new_authority() {
        setup
        "$MAKE" esl-x509 "$OWNER" "$WORK/sb/db2023.der" >"$WORK/db2023.esl"
        # Not in db: the firmware would refuse the boot chain.
        expect_exit 2 "$TPMGUARD" pcrs --event-log "$WORK/log" --predict --authority "$WORK/sb/db2023.der" \
                --efivars "$WORK/efivars"
        expect_in "not in db" "$(cat "$WORK/stderr")"
        expect_exit 0 "$TPMGUARD" pcrs --event-log "$WORK/log" --predict --db "$WORK/db2023.esl" \
                --authority "$WORK/sb/db2023.der" --efivars "$WORK/efivars"
        local predicted=$OUT
        "$MAKE" esl-append "$WORK/sb/db.esl" "$WORK/db2023.esl" >"$WORK/db-next.esl"
        eventlog_reboot "$WORK/log2" --db "$WORK/db-next.esl" --authority "$WORK/sb/db2023.der"
        [ "$predicted" = "--pcr 7=sha256:$(pcr7)" ]
        # --replace-variables: db becomes the 2023 CA alone.
        eventlog_reboot "$WORK/log"
        expect_exit 0 "$TPMGUARD" pcrs --event-log "$WORK/log" --predict --db "$WORK/db2023.esl" \
                --replace-variables --authority "$WORK/sb/db2023.der" --efivars "$WORK/efivars"
        predicted=$OUT
        eventlog_reboot "$WORK/log2" --db "$WORK/db2023.esl" --authority "$WORK/sb/db2023.der"
        [ "$predicted" = "--pcr 7=sha256:$(pcr7)" ]
        # The old authority also verified an option ROM: it stays, the new one comes in addition.
        eventlog_reboot "$WORK/log3" --option-rom yes
        expect_exit 2 "$TPMGUARD" pcrs --event-log "$WORK/log3" --predict --db "$WORK/db2023.esl" \
                --authority "$WORK/sb/db2023.der" --efivars "$WORK/efivars"
        expect_in "first verified a driver" "$ERR"
}

# A legacy SHA-1-only log: said to be one, compared on a TPM with SHA-1 PCRs, never predicted from
# (tokens seal to SHA-256).
test_case legacy_sha1_log
legacy_sha1_log() {
        setup
        "$MAKE" log --legacy --pk "$WORK/sb/pk.esl" --kek "$WORK/sb/kek.esl" --db "$WORK/sb/db.esl" \
                --dbx "$WORK/sb/dbx.esl" --out "$WORK/legacy" --extends "$WORK/legacy.extends"
        # This TPM has no SHA-1 PCRs: nothing to compare with.
        expect_exit 2 "$TPMGUARD" pcrs --event-log "$WORK/legacy"
        expect_in "SHA-1-only log" "$ERR"
        TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrallocate sha1:all+sha256:all >/dev/null
        "$FIXTURE" reset "$WORK/tpm" >/dev/null
        "$FIXTURE" null-name "$WORK/tpm" "$WORK/null_name"
        local pcr sha1 sha256
        while read -r pcr sha1 sha256; do
                TPM2TOOLS_TCTI=$TPMGUARD_TEST_TCTI tpm2_pcrextend "$pcr:sha1=$sha1,sha256=$sha256"
        done <"$WORK/legacy.extends"
        expect_exit 0 "$TPMGUARD" pcrs --event-log "$WORK/legacy"
        expect_in "SHA-1 only" "$OUT"
        expect_in "PCR  7" "$OUT"
        expect_exit 2 "$TPMGUARD" pcrs --event-log "$WORK/legacy" --predict --efivars "$WORK/efivars"
        expect_in "no sha256 digests" "$ERR"
}

test_case options_need_predict
options_need_predict() {
        setup
        expect_exit 2 "$TPMGUARD" pcrs --event-log "$WORK/log" --dbx "$WORK/sb/dbx.esl"
        expect_in "add --predict" "$(cat "$WORK/stderr")"
        expect_exit 17 "$TPMGUARD" pcrs --event-log "$WORK/nonexistent"
        expect_in "No event log at" "$(cat "$WORK/stderr")"
}

run_cases
