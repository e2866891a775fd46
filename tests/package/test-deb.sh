#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Package tier: builds the Debian package from a copy of the source tree
# (never in it), runs lintian on it, unpacks it into a scratch root and
# checks that every file lands where its consumer looks for it:
#   - the token plugin in libcryptsetup's crypt_token_external_path(),
#   - the CLI, man pages, bash completion, the /etc/tpmguard skeleton (a
#     conffile), the EK CA store (read-only in /usr/share/tpmguard/ek-ca, an
#     empty /etc/tpmguard/ek-ca for the administrator) and its licence,
#   - the dracut module, initramfs-tools hooks and systemd unit, when this
#     tree has them;
# and then (as root) installs it into a clean root of the same release: apt install,
# update-initramfs and a kernel upgrade unprovisioned and provisioned, purge
# (tests/package/clean-root; the root is cached in /var/cache/tpmguard-pkgroot,
# built on first use: 40 min cold measured on a loaded 2-core machine, most
# of it the stock kernel's first initrd; then 1-2 min for the clean-root part).
# The build takes under a minute on 2 cores (DEB_BUILD_OPTIONS=nocheck: the
# unit tier runs elsewhere). Environment: TPMGUARD_SRC,
# TPMGUARD_SKIP_CLEAN_ROOT=1 (leave the clean-root part out).
set -uo pipefail
SRC=${TPMGUARD_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }

for t in dpkg-buildpackage dpkg-deb lintian fakeroot cc; do
        command -v "$t" >/dev/null 2>&1 ||
                { echo "1..0 # SKIP $t not installed (apt-get install dpkg-dev debhelper fakeroot lintian)"; exit 0; }
done
dpkg-checkbuilddeps -d 'debhelper-compat (= 13)' /dev/null >/dev/null 2>&1 ||
        { echo "1..0 # SKIP debhelper 13 not installed (apt-get install debhelper)"; exit 0; }

T=$(mktemp -d "${TMPDIR:-/tmp}/tpmguard-deb.XXXXXX")
trap 'rm -rf "$T"' EXIT

# A copy of the tree as it is (tracked and new files, not build output).
mkdir "$T/src"
if git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
        (cd "$SRC" && git ls-files -z -co --exclude-standard | xargs -0 -I{} sh -c '[ -e "{}" ] && printf "%s\0" "{}"' |
                tar --null -T - -cf -) | tar -xf - -C "$T/src"
else
        (cd "$SRC" && tar --exclude='./build*' --exclude='./obj-*' -cf - .) | tar -xf - -C "$T/src"
fi

if (cd "$T/src" && DEB_BUILD_OPTIONS="nocheck parallel=2" dpkg-buildpackage -us -uc -b >"$T/build.log" 2>&1); then
        ok "dpkg-buildpackage -us -uc -b"
else
        not_ok "dpkg-buildpackage -us -uc -b"
        tail -30 "$T/build.log" | sed 's/^/# /'
        exit 1
fi
deb=$(find "$T" -maxdepth 1 -name "tpmguard_*.deb" | head -1)
check "the .deb exists" test -f "$deb"

# Lintian-clean means no error and no warning; info and pedantic tags are
# shown as diagnostics. (lintian as root also says so; that line is dropped.)
lintian --pedantic --display-info --fail-on error,warning "$T"/tpmguard_*.changes >"$T/lintian.log" 2>&1
rc=$?
grep -v 'running with root privileges' "$T/lintian.log" | sed 's/^/# /'
check "lintian: no error or warning" test "$rc" = 0 -a -z "$(grep -E '^[EW]: ' "$T/lintian.log")"

# dpkg's own view: would it install here, dependencies and all?
if [ "$(id -u)" = 0 ]; then
        dry_run() { dpkg --dry-run -i "$deb" >"$T/dryrun.log" 2>&1; }
        check "dpkg --dry-run -i accepts it on this system" dry_run
        [ -s "$T/dryrun.log" ] && sed 's/^/# /' "$T/dryrun.log" | tail -5
else
        skip "dpkg --dry-run -i accepts it on this system" "needs root"
fi

R="$T/root"
dpkg-deb -x "$deb" "$R"
dpkg-deb -e "$deb" "$T/control"

# Where libcryptsetup itself loads token plugins from, asked of the library.
cat >"$T/probe.c" <<'C'
#include <stdio.h>
#include <libcryptsetup.h>
int main(void) { const char *p = crypt_token_external_path(); if (!p) return 1; puts(p); return 0; }
C
tokendir=$(cc "$T/probe.c" -o "$T/probe" -lcryptsetup && "$T/probe")
plugin=$(cd "$R" && find . -name libcryptsetup-token-tpmguard.so | sed 's|^\.||')
echo "# libcryptsetup loads tokens from $tokendir; the package ships $plugin"
# The package's directory and the library's are the same directory on this
# system (bookworm merges /usr: /lib -> usr/lib).
check "plugin lands in crypt_token_external_path()" \
        test -n "$plugin" -a "$(realpath -m "$(dirname "$plugin")")" = "$(realpath -m "$tokendir")"
check "plugin exports exactly the CRYPTSETUP_TOKEN_1.0 symbols" \
        test "$(objdump -T "$R$plugin" | awk '/ DF .text/ {print $NF" "$(NF-1)}' | sort | tr '\n' ' ')" = \
             "cryptsetup_token_buffer_free CRYPTSETUP_TOKEN_1.0 cryptsetup_token_dump CRYPTSETUP_TOKEN_1.0 cryptsetup_token_open CRYPTSETUP_TOKEN_1.0 cryptsetup_token_open_pin CRYPTSETUP_TOKEN_1.0 cryptsetup_token_validate CRYPTSETUP_TOKEN_1.0 cryptsetup_token_version CRYPTSETUP_TOKEN_1.0 "

check "CLI in /usr/sbin and it runs" sh -c "'$R/usr/sbin/tpmguard' --version | grep -q '^tpmguard '"
check "tpmguard(8) installed and readable" sh -c "man -l '$R/usr/share/man/man8/tpmguard.8.gz' >/dev/null 2>&1"
check "tpmguard.conf(5) installed" test -f "$R/usr/share/man/man5/tpmguard.conf.5.gz"
check "tpmguard-token(7) installed" test -f "$R/usr/share/man/man7/tpmguard-token.7.gz"
check "/etc/tpmguard/tpmguard.conf installed" test -f "$R/etc/tpmguard/tpmguard.conf"
check "/etc/tpmguard/tpmguard.conf is a conffile (never overwritten once edited)" \
        grep -qx /etc/tpmguard/tpmguard.conf "$T/control/conffiles"
check "the shipped configuration is all defaults" \
        sh -c "! grep -qv '^\\(#.*\\)\\?\$' '$R/etc/tpmguard/tpmguard.conf'"
completions=$(pkg-config --variable=completionsdir bash-completion 2>/dev/null || echo /usr/share/bash-completion/completions)
check "bash completion in $completions" test -f "$R$completions/tpmguard"
check "annotated example in /usr/share/doc/tpmguard" test -f "$R/usr/share/doc/tpmguard/tpmguard.conf.example"
check "README.Debian with the first-run path (provision, enroll, initrd, reboot)" \
        sh -c "zcat -f '$R'/usr/share/doc/tpmguard/README.Debian* | grep -q 'tpmguard provision' &&
               zcat -f '$R'/usr/share/doc/tpmguard/README.Debian* | grep -q 'update-initramfs -u'"
# The postinst message and tpmguard-verify.service's Documentation= name these by their .md paths.
check "the guides the postinst and the unit name are there uncompressed (README.md, hardware.md, initrd.md)" \
        sh -c "for f in README.md hardware.md initrd.md; do [ -f '$R/usr/share/doc/tpmguard/'\$f ] || exit 1; done"
check "Recommends an initrd generator tpmguard hooks into, Suggests tpm2-tools" \
        sh -c "grep -q '^Recommends:.*cryptsetup-initramfs | dracut' '$T/control/control' &&
               grep -q '^Suggests:.*tpm2-tools' '$T/control/control'"

# The default EK CA store, read-only, where the compiled-in ek_ca looks.
store=/usr/share/tpmguard/ek-ca
check "EK CA store in $store (roots, intermediates, MANIFEST, LICENSE; 0644)" \
        sh -c "for f in roots.pem intermediates.pem MANIFEST LICENSE; do
                       [ \"\$(stat -c %a '$R$store/'\$f)\" = 644 ] || exit 1; done"
check "the store's content is the source tree's" \
        sh -c "cmp -s '$R$store/MANIFEST' '$SRC/data/ek-ca/MANIFEST' && cmp -s '$R$store/roots.pem' '$SRC/data/ek-ca/roots.pem'"
check "/etc/tpmguard/ek-ca exists, empty, for the administrator" \
        sh -c "[ -d '$R/etc/tpmguard/ek-ca' ] && [ -z \"\$(ls -A '$R/etc/tpmguard/ek-ca')\" ]"
check "debian/copyright carries the store's BSD-3-Clause licence and provenance" \
        sh -c "grep -q 'loicsikidi/tpm-ca-certificates' '$R/usr/share/doc/tpmguard/copyright' &&
               grep -q '^License: BSD-3-clause' '$R/usr/share/doc/tpmguard/copyright'"

# The initrd integration, when this tree has it (dracut/, initrd/, units/).
if [ -d "$SRC/dracut" ]; then
        check "dracut module in /usr/lib/dracut/modules.d/90tpmguard" \
                test -x "$R/usr/lib/dracut/modules.d/90tpmguard/module-setup.sh"
else
        skip "dracut module in /usr/lib/dracut/modules.d/90tpmguard" "no dracut/ in this tree"
fi
if [ -d "$SRC/initrd" ]; then
        check "initramfs-tools hook in /usr/share/initramfs-tools/hooks" \
                test -x "$R/usr/share/initramfs-tools/hooks/tpmguard"
        check "initramfs-tools boot script in /usr/share/initramfs-tools/scripts/local-top" \
                test -x "$R/usr/share/initramfs-tools/scripts/local-top/tpmguard"
else
        skip "initramfs-tools hook in /usr/share/initramfs-tools/hooks" "no initrd/ in this tree"
        skip "initramfs-tools boot script in /usr/share/initramfs-tools/scripts/local-top" "no initrd/ in this tree"
fi
if [ -d "$SRC/units" ]; then
        unitdir=$(pkg-config --variable=systemdsystemunitdir systemd 2>/dev/null || echo /lib/systemd/system)
        check "tpmguard-verify.service in $unitdir" test -f "$R$unitdir/tpmguard-verify.service"
        sleepdir=$(pkg-config --variable=systemdsleepdir systemd 2>/dev/null || echo /lib/systemd/system-sleep)
        check "system-sleep hook (suspend, hibernate) in $sleepdir" test -x "$R$sleepdir/tpmguard"
        check "systemd-cryptsetup@.service drop-in (quiet tpm2-tss) in $unitdir" \
                grep -qx "Environment=TSS2_LOG=all+NONE" "$R$unitdir/systemd-cryptsetup@.service.d/tpmguard.conf"
        check "tpmguard-update-finish.service in $unitdir, waiting for the plugin's markers" \
                grep -qx "ConditionDirectoryNotEmpty=/run/tpmguard/update-pending" "$R$unitdir/tpmguard-update-finish.service"
        check "its command in /usr/libexec/tpmguard" test -x "$R/usr/libexec/tpmguard/tpmguard-update-finish"
else
        skip "tpmguard-verify.service in the systemd unit directory" "no units/ in this tree"
        skip "systemd-cryptsetup@.service drop-in in the systemd unit directory" "no units/ in this tree"
fi

# Before the reboot, say so (hooks/): the warning, the kernel postinst hook and the apt hook.
if [ -d "$SRC/hooks" ]; then
        check "tpmguard-update-warn and tpmguard-apt-hook in /usr/libexec/tpmguard" \
                sh -c "test -x '$R/usr/libexec/tpmguard/tpmguard-update-warn' && test -x '$R/usr/libexec/tpmguard/tpmguard-apt-hook'"
        check "kernel postinst hook /etc/kernel/postinst.d/zz-tpmguard, a conffile" \
                sh -c "test -x '$R/etc/kernel/postinst.d/zz-tpmguard' &&
                       grep -qx /etc/kernel/postinst.d/zz-tpmguard '$T/control/conffiles'"
        check "apt hook /etc/apt/apt.conf.d/80tpmguard (Pre-Install-Pkgs, Post-Invoke), a conffile" \
                sh -c "grep -q '^DPkg::Pre-Install-Pkgs.*/usr/libexec/tpmguard/tpmguard-apt-hook pre' '$R/etc/apt/apt.conf.d/80tpmguard' &&
                       grep -q '^DPkg::Post-Invoke.*/usr/libexec/tpmguard/tpmguard-apt-hook post' '$R/etc/apt/apt.conf.d/80tpmguard' &&
                       grep -qx /etc/apt/apt.conf.d/80tpmguard '$T/control/conffiles'"
else
        skip "the update hooks" "no hooks/ in this tree"
fi

# Nothing outside the places above.
unexpected=$(cd "$R" && find . -type f | sed 's|^\.||' | grep -vE \
        "^(/usr/sbin/tpmguard|$plugin|/etc/tpmguard/tpmguard.conf|/etc/kernel/postinst.d/zz-tpmguard|/etc/apt/apt.conf.d/80tpmguard|/usr/share/(man|doc|bash-completion|initramfs-tools)/.*|/usr/share/tpmguard/ek-ca/(roots.pem|intermediates.pem|MANIFEST|LICENSE)|/usr/lib/dracut/modules.d/90tpmguard/.*|/(usr/)?lib/systemd/system(-sleep)?/.*|/usr/libexec/tpmguard/.*)$")
[ -n "$unexpected" ] && echo "# unexpected: $unexpected"
check "no file outside the expected places" test -z "$unexpected"

# The package on a clean system of the release that built it: install, initrd, kernel upgrade,
# provision, enroll, purge.
if [ -n "${TPMGUARD_SKIP_CLEAN_ROOT:-}" ]; then
        skip "clean root of this release: install, update-initramfs, purge" "TPMGUARD_SKIP_CLEAN_ROOT is set"
else
        while IFS= read -r line; do
                case $line in
                "ok: "*) ok "clean root: ${line#ok: }" ;;
                "not ok: "*) not_ok "clean root: ${line#not ok: }" ;;
                "SKIP: "*) skip "clean root of this release: install, update-initramfs, purge" "${line#SKIP: }" ;;
                *) echo "$line" ;;
                esac
        done < <("$SRC/tests/package/clean-root" "$deb" 2>&1)
fi

echo "1..$n"
[ "$failed" = 0 ]
