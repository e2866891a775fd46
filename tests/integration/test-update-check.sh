#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Integration tier: tpmguard update check (issue 30 item 5, docs/design.md §9.2) on swtpm. A
# firmware event log (tests/fixture/make-eventlog) extended into the TPM as the firmware would,
# a fake efivars directory for what an update tool wrote since this boot, and a token sealed to
# PCR 7: the check must say "ok" when nothing is pending, name 'update prepare --pcr 7=...' for a
# pending dbx update (and "ok" once it ran), a grace for a staged fwupd capsule, and refuse a
# forged log (exit 3).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_tools swtpm swtpm_setup swtpm_ioctl tpm2_pcrextend tpm2_pcrread cryptsetup python3
python3 -c 'import cryptography' 2>/dev/null || skip_all "python3-cryptography not installed"

MAKE=$EVENTLOG_MAKE
OWNER=$EFI_OWNER
FWUPD_VAR=fwupd-ddc0ee61-e7f0-4e7d-acc5-c070a398838e-0-0abba7dc-e516-4167-bbf5-4d9d1c739416

# A booted, provisioned TPM and a volume enrolled to PCR 7 with PIN 1234; nothing written to efivars.
setup() {
        tpm_setup
        "$TPMGUARD" provision >/dev/null
        eventlog_sb_setup
        mkdir "$WORK/efivars"
        eventlog_boot "$WORK/log"
        make_luks "$WORK/disk.img"
        printf '1234\n' >"$WORK/pin"
        expect_exit 0 "$TPMGUARD" enroll --pcrs 7 --pin-file "$WORK/pin" --unlock-key-file "$WORK/recovery.key" \
                "$WORK/disk.img"
}

check() { "$TPMGUARD" update check --event-log "$WORK/log" --efivars "$WORK/efivars" "$@"; }

# dbx as a dbx update tool leaves it: the variable written now, PCR 7 changed at the next boot.
pending_dbx() {
        "$MAKE" esl-sha256 "$OWNER" 5 dbx-2026 >"$WORK/new.esl"
        "$MAKE" esl-append "$WORK/sb/dbx.esl" "$WORK/new.esl" >"$WORK/dbx-next.esl"
        { printf '\x27\x00\x00\x00'; cat "$WORK/dbx-next.esl"; } \
                >"$WORK/efivars/dbx-d719b2cb-3d3a-4596-a3bc-dad00e67656f"
}

# fwupd's update_info for a staged capsule (status $1: 1 = ATTEMPT_UPDATE, 2 = ATTEMPTED).
fwupd_capsule() {
        python3 - "$1" "$WORK/efivars/$FWUPD_VAR" <<'PY'
import struct, sys
info = struct.pack("<I16sIQ16sI", 7, bytes(16), 0x50000, 0, bytes(16), int(sys.argv[1])) + b"\x04\x04\x00\x7f\xff\x04\x00"
open(sys.argv[2], "wb").write(b"\x07\x00\x00\x00" + info)
PY
}

test_case nothing_pending_ok
nothing_pending_ok() {
        setup
        expect_exit 0 check "$WORK/disk.img"
        expect_in "$WORK/disk.img: token 0: ok (the next boot opens its main seal" "$OUT"
        # --quiet (the hooks): nothing to say.
        expect_exit 0 check --quiet "$WORK/disk.img"
        [ -z "$OUT" ]
        # Without a device: crypttab's volumes (one that is not LUKS is skipped).
        printf 'data %s none luks\nswap /dev/null none swap\n' "$WORK/disk.img" >"$WORK/crypttab"
        expect_exit 0 check --crypttab "$WORK/crypttab"
        expect_in "token 0: ok" "$OUT"
        expect_exit 0 check --json "$WORK/disk.img"
        python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["ok"] and d["volumes"][0]["tokens"][0]["opens"] == "main", d' <<<"$OUT"
}

test_case pending_dbx_names_prepare
pending_dbx_names_prepare() {
        setup
        pending_dbx
        expect_exit 0 "$TPMGUARD" pcrs --predict --event-log "$WORK/log" --efivars "$WORK/efivars"
        local arg=${OUT#--pcr }
        expect_exit 14 check --quiet "$WORK/disk.img"
        [ "$OUT" = "$WORK/disk.img: token 0 will not open with the PIN alone after the next boot: run 'tpmguard update prepare --pcr $arg $WORK/disk.img'." ]
        printf 'data %s none luks\n' "$WORK/disk.img" >"$WORK/crypttab"
        expect_exit 14 check --crypttab "$WORK/crypttab" --json
        printf '%s' "$OUT" >"$WORK/out.json"
        python3 - "$arg" "$WORK/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[2]))
assert d["ok"] is False and [c["variable"] for c in d["changes"]] == ["dbx"], d
assert d["volumes"][0]["tokens"][0]["opens"] is None, d
assert "--pcr " + sys.argv[1] in d["volumes"][0]["tokens"][0]["command"], d
PY
        # The command named, run: the next boot opens the predicted seal.
        expect_exit 0 "$TPMGUARD" update prepare --pin-file "$WORK/pin" --pcr "$arg" "$WORK/disk.img"
        expect_exit 0 check "$WORK/disk.img"
        expect_in "token 0: ok (the next boot opens its predicted seal" "$OUT"
        # And it does: the reboot with the new dbx measures the predicted value.
        eventlog_reboot "$WORK/log2" --dbx "$WORK/dbx-next.esl"
        pin_opens "$WORK/pin"
}

test_case forged_log_refused
forged_log_refused() {
        setup
        pending_dbx
        "$MAKE" esl-x509 "$OWNER" "$WORK/sb/db2023.der" >"$WORK/other-db.esl"
        "$MAKE" log --pk "$WORK/sb/pk.esl" --kek "$WORK/sb/kek.esl" --db "$WORK/other-db.esl" \
                --dbx "$WORK/sb/dbx.esl" --authority "$WORK/sb/db.der" --authority-owner "$OWNER" \
                --out "$WORK/forged" --extends "$WORK/forged.extends"
        expect_exit 3 "$TPMGUARD" update check --event-log "$WORK/forged" --efivars "$WORK/efivars" "$WORK/disk.img"
        expect_in "does not replay" "$ERR"
        refute_in "--pcr 7=" "$OUT"
}

test_case capsule_needs_grace
capsule_needs_grace() {
        setup
        # A capsule fwupd already ran (ATTEMPTED): nothing pending.
        fwupd_capsule 2
        expect_exit 0 check --quiet "$WORK/disk.img"
        fwupd_capsule 1
        expect_exit 14 check "$WORK/disk.img"
        expect_in "firmware capsule update is staged" "$ERR"
        expect_in "run 'tpmguard update prepare $WORK/disk.img'" "$OUT"
        # Even with a pending dbx: a capsule cannot be predicted, so no --pcr.
        pending_dbx
        expect_exit 14 check "$WORK/disk.img"
        refute_in "--pcr" "$OUT"
        # A grace of one boot does not outlast the capsule's own resets (the firmware's Startup(CLEAR)s).
        expect_exit 0 "$TPMGUARD" update prepare --boots 1 --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_exit 14 check "$WORK/disk.img"
        # Without --boots, a capsule staged makes it three.
        expect_exit 0 "$TPMGUARD" update prepare --pin-file "$WORK/pin" --efivars "$WORK/efivars" "$WORK/disk.img"
        expect_in "the grace lasts 3 boots" "$ERR"
        expect_in "for the next 3 boot(s)" "$OUT"
        expect_exit 0 check "$WORK/disk.img"
        expect_in "opens its grace seal" "$OUT"
}

# update prepare without --pcr or --boots (issue 30 item 4): the prediction when a change is known.
test_case prepare_uses_prediction
prepare_uses_prediction() {
        setup
        # Nothing pending: a grace, said so.
        expect_exit 0 "$TPMGUARD" update prepare --pin-file "$WORK/pin" --event-log "$WORK/log" \
                --efivars "$WORK/efivars" "$WORK/disk.img"
        expect_in "No change to PCR 7 is known" "$ERR"
        expect_in "opens with the PIN alone while PCR 7 change" "$OUT"
        # A forged log: refused, nothing added (the grace above stays, no predicted seal).
        pending_dbx
        "$MAKE" log --pk "$WORK/sb/pk.esl" --kek "$WORK/sb/kek.esl" --db "$WORK/sb/db.esl" \
                --dbx "$WORK/dbx-next.esl" --authority "$WORK/sb/db.der" --authority-owner "$OWNER" \
                --out "$WORK/forged" --extends "$WORK/forged.extends"
        expect_exit 3 "$TPMGUARD" update prepare --pin-file "$WORK/pin" --event-log "$WORK/forged" \
                --efivars "$WORK/efivars" "$WORK/disk.img"
        expect_in "update prepare --boots 1" "$ERR"
        expect_exit 0 with_plugin cryptsetup luksDump "$WORK/disk.img"
        refute_in "predicted" "$OUT"
        # The pending dbx: a predicted seal, no grace.
        expect_exit 0 "$TPMGUARD" update prepare --pin-file "$WORK/pin" --event-log "$WORK/log" \
                --efivars "$WORK/efivars" "$WORK/disk.img"
        expect_in "PCR 7 of the next boot predicted (a change written to efivarfs" "$ERR"
        expect_in "also opens with the predicted PCR values" "$OUT"
        expect_exit 0 check "$WORK/disk.img"
        expect_in "opens its predicted seal" "$OUT"
        eventlog_reboot "$WORK/log2" --dbx "$WORK/dbx-next.esl"
        pin_opens "$WORK/pin"
}

# The same from an update file named (--dbx), nothing written to efivarfs yet.
test_case prepare_predicts_from_file
prepare_predicts_from_file() {
        setup
        "$MAKE" esl-sha256 "$OWNER" 5 dbx-2026 >"$WORK/new.esl"
        "$MAKE" auth "$WORK/new.esl" >"$WORK/dbxupdate.auth"
        expect_exit 14 check --quiet --dbx "$WORK/dbxupdate.auth" "$WORK/disk.img"
        expect_in "update prepare --pcr 7=sha256:" "$OUT"
        expect_exit 0 "$TPMGUARD" update prepare --pin-file "$WORK/pin" --event-log "$WORK/log" \
                --efivars "$WORK/efivars" --dbx "$WORK/dbxupdate.auth" "$WORK/disk.img"
        expect_in "the update files named" "$ERR"
        expect_in "also opens with the predicted PCR values" "$OUT"
        expect_exit 0 check --quiet --dbx "$WORK/dbxupdate.auth" "$WORK/disk.img"
        [ -z "$OUT" ]
        "$MAKE" esl-append "$WORK/sb/dbx.esl" "$WORK/new.esl" >"$WORK/dbx-next.esl"
        eventlog_reboot "$WORK/log2" --dbx "$WORK/dbx-next.esl"
        pin_opens "$WORK/pin"
}

# The hooks (hooks/, initrd/, dracut/): against a fake PATH, they print the advice and never fail.
test_case hooks_warn_never_fail
hooks_warn_never_fail() {
        setup
        # As installed (configure_file leaves them unexecutable in the build tree).
        local hooks="$WORK/hooks"
        mkdir "$hooks"
        cp "$TPMGUARD_BUILD"/hooks/{tpmguard-update-warn,tpmguard-apt-hook,zz-tpmguard} "$hooks/"
        chmod +x "$hooks"/*
        printf 'data %s none luks\n' "$WORK/disk.img" >"$WORK/crypttab"
        # The installed tpmguard, with this test's log, efivars and crypttab.
        mkdir "$WORK/bin"
        cat >"$WORK/bin/tpmguard" <<EOF2
#!/bin/sh
verb=\$1 sub=\$2
shift 2
exec "$TPMGUARD" "\$verb" "\$sub" --event-log "$WORK/log" --efivars "$WORK/efivars" --crypttab "$WORK/crypttab" "\$@"
EOF2
        chmod +x "$WORK/bin/tpmguard"
        export TPMGUARD_BIN="$WORK/bin/tpmguard" TPMGUARD_UPDATE_WARN="$hooks/tpmguard-update-warn"
        export TPMGUARD_APT_FLAG="$WORK/apt-flag"
        # Nothing pending: silent.
        expect_exit 0 "$hooks/zz-tpmguard" 6.1.0-99-amd64
        [ -z "$OUT$ERR" ]
        pending_dbx
        expect_exit 0 "$TPMGUARD" pcrs --predict --event-log "$WORK/log" --efivars "$WORK/efivars"
        local arg=${OUT#--pcr }
        expect_exit 0 "$hooks/zz-tpmguard" 6.1.0-99-amd64
        [ "$ERR" = "W: tpmguard (kernel 6.1.0-99-amd64): $WORK/disk.img: token 0 will not open with the PIN alone after the next boot: run 'tpmguard update prepare --pcr $arg $WORK/disk.img'." ]
        # apt: a package of the boot chain leaves the flag, Post-Invoke warns and clears it.
        expect_exit 0 "$hooks/tpmguard-apt-hook" pre <<<"/var/cache/apt/archives/vim_9.0_amd64.deb"
        [ ! -e "$WORK/apt-flag" ]
        expect_exit 0 "$hooks/tpmguard-apt-hook" post
        [ -z "$ERR" ]
        printf '%s\n' /var/cache/apt/archives/vim_9.0_amd64.deb /var/cache/apt/archives/secureboot-db_1.9_amd64.deb \
                >"$WORK/debs"
        expect_exit 0 "$hooks/tpmguard-apt-hook" pre <"$WORK/debs"
        [ -e "$WORK/apt-flag" ]
        expect_exit 0 "$hooks/tpmguard-apt-hook" post
        expect_in "W: tpmguard (apt): $WORK/disk.img: token 0 will not open" "$ERR"
        expect_in "update prepare --pcr $arg" "$ERR"
        [ ! -e "$WORK/apt-flag" ]
        # After the command named: silent again.
        expect_exit 0 "$TPMGUARD" update prepare --pin-file "$WORK/pin" --pcr "$arg" "$WORK/disk.img"
        expect_exit 0 "$hooks/tpmguard-update-warn" initramfs
        [ -z "$ERR" ]
        # A check that cannot run (a forged log: exit 3) warns and still succeeds.
        cp "$WORK/log" "$WORK/log.good"
        printf 'garbage' >"$WORK/log"
        expect_exit 0 "$hooks/tpmguard-update-warn" dracut
        expect_in "W: tpmguard (dracut): cannot tell" "$ERR"
        TPMGUARD_BIN=/bin/false expect_exit 0 "$hooks/tpmguard-update-warn" kernel
        # No tpmguard token in crypttab: exit 0 without reading a log or asking the TPM.
        make_luks "$WORK/plain.img"
        printf 'plain %s none luks\n' "$WORK/plain.img" >"$WORK/crypttab"
        expect_exit 0 "$TPMGUARD" update check --crypttab "$WORK/crypttab" --event-log "$WORK/nonexistent" \
                --tcti "swtpm:host=127.0.0.1,port=1"
        expect_in "No volume with a tpmguard token" "$ERR"
        unset TPMGUARD_BIN TPMGUARD_UPDATE_WARN TPMGUARD_APT_FLAG
}

# doctor reports the pending change and the command (issue 30 item 5).
test_case doctor_reports_pending
doctor_reports_pending() {
        setup
        expect_exit 0 "$TPMGUARD" doctor --initrd "" --event-log "$WORK/log" --efivars "$WORK/efivars" --json \
                "$WORK/disk.img"
        printf '%s' "$OUT" >"$WORK/doctor.json"
        python3 - "$WORK/doctor.json" <<'PY'
import json, sys
u = [c for c in json.load(open(sys.argv[1]))["checks"] if c["check"] == "update"]
assert len(u) == 1 and u[0]["status"] == "ok" and "No db, dbx or KEK change" in u[0]["summary"], u
PY
        pending_dbx
        expect_exit 0 "$TPMGUARD" pcrs --predict --event-log "$WORK/log" --efivars "$WORK/efivars"
        local arg=${OUT#--pcr }
        expect_exit 14 "$TPMGUARD" doctor --initrd "" --event-log "$WORK/log" --efivars "$WORK/efivars" "$WORK/disk.img"
        expect_in "A dbx update is pending and token 0 of $WORK/disk.img will not open with the PIN alone after the next boot." "$OUT"
        expect_in "Before rebooting, run 'tpmguard update prepare --pcr $arg $WORK/disk.img'." "$OUT"
        expect_exit 0 "$TPMGUARD" update prepare --pin-file "$WORK/pin" --pcr "$arg" "$WORK/disk.img"
        expect_exit 0 "$TPMGUARD" doctor --initrd "" --event-log "$WORK/log" --efivars "$WORK/efivars" "$WORK/disk.img"
        expect_in "A dbx update is pending; token 0 of $WORK/disk.img opens after the next boot (its predicted seal)." "$OUT"
        # No event log: the check says it could not look, and doctor's verdict does not change.
        expect_exit 0 "$TPMGUARD" doctor --initrd "" --event-log "$WORK/nonexistent" --efivars "$WORK/efivars" "$WORK/disk.img"
        expect_in "Not checked: the next boot's PCR values cannot be computed" "$OUT"
}

test_case check_refuses_prepare_options
check_refuses_prepare_options() {
        setup
        expect_exit 2 check --pin-file "$WORK/pin" "$WORK/disk.img"
        expect_exit 2 "$TPMGUARD" update finish --dbx "$WORK/sb/dbx.esl" "$WORK/disk.img"
        expect_exit 2 "$TPMGUARD" update finish --changing 7 "$WORK/disk.img"
        expect_exit 2 "$TPMGUARD" update prepare --accept-change "$WORK/disk.img"
        expect_exit 2 "$TPMGUARD" update prepare --boots 1 --dbx "$WORK/sb/dbx.esl" "$WORK/disk.img"
        expect_exit 2 "$TPMGUARD" update prepare --json "$WORK/disk.img"
        expect_exit 17 check "$WORK/nonexistent"
}

run_cases
