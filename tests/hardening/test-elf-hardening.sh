#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# Build hardening, checked on the binaries actually built (not on the flags
# meson.build asks for): PIE, full RELRO (BIND_NOW + GNU_RELRO), stack
# protector and _FORTIFY_SOURCE call sites, a non-executable stack, no text
# relocations; and the plugin's exported ABI: exactly the six libcryptsetup
# token symbols, each versioned CRYPTSETUP_TOKEN_1.0, nothing else.
set -uo pipefail
command -v readelf >/dev/null || { echo "1..0 # SKIP readelf not installed (binutils)"; exit 0; }
: "${TPMGUARD:?}" "${TPMGUARD_PLUGIN:?}" "${TPMGUARD_BUILD:?}"

n=0 failed=0
check() {
        local what=$1; shift
        n=$((n + 1))
        local out
        if out=$("$@" 2>&1); then
                echo "ok $n - $what"
        else
                echo "not ok $n - $what"
                sed 's/^/# /' <<<"$out"
                failed=$((failed + 1))
        fi
}

elf_type_dyn() {
        readelf -h "$1" | grep -Eq 'Type: +DYN ' || { readelf -h "$1" | grep Type:; return 1; }
}
bind_now() {
        readelf -d "$1" | grep -Eq '\(FLAGS\).*BIND_NOW|\(FLAGS_1\).*NOW|\(BIND_NOW\)' || { readelf -d "$1" | grep -E 'FLAGS'; echo "no BIND_NOW"; return 1; }
}
gnu_relro() {
        local ph
        ph=$(readelf -lW "$1")
        grep -q 'GNU_RELRO' <<<"$ph" || { echo "no GNU_RELRO segment"; return 1; }
}
stack_not_exec() {
        local line
        line=$(readelf -lW "$1" | grep GNU_STACK) || { echo "no GNU_STACK header: the stack defaults to executable"; return 1; }
        # Flags column: RW, never RWE.
        ! grep -q 'RWE' <<<"$line" || { echo "$line"; return 1; }
}
no_textrel() {
        local dyn
        dyn=$(readelf -d "$1")
        ! grep -q TEXTREL <<<"$dyn" || { echo "text relocations present"; return 1; }
}
undef_syms() {
        readelf --dyn-syms -W "$1" | awk '$7 == "UND" {print $8}' | sed 's/@.*//'
}
stack_protector() {
        local syms
        syms=$(undef_syms "$1")
        grep -qx '__stack_chk_fail' <<<"$syms" || { echo "__stack_chk_fail not referenced"; return 1; }
}
fortify() {
        local chk syms
        syms=$(undef_syms "$1")
        chk=$(grep -E '^__[a-z_]+_chk$' <<<"$syms" | grep -v '^__stack_chk_fail$' | sort -u)
        [ -n "$chk" ] || { echo "no __*_chk symbol: _FORTIFY_SOURCE had no effect"; return 1; }
        echo "$chk" | tr '\n' ' '
}

plugin_exports() {
        local want got
        want=$(printf '%s@@CRYPTSETUP_TOKEN_1.0\n' cryptsetup_token_buffer_free cryptsetup_token_dump \
                cryptsetup_token_open cryptsetup_token_open_pin cryptsetup_token_validate cryptsetup_token_version | sort)
        # Every defined symbol of global or weak binding, except the version definition itself.
        got=$(readelf --dyn-syms -W "$TPMGUARD_PLUGIN" |
                awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $4 != "SECTION" {print $8}' |
                grep -vx 'CRYPTSETUP_TOKEN_1.0' | sort)
        [ "$want" = "$got" ] || { echo "expected:"; echo "$want"; echo "exported:"; echo "$got"; return 1; }
}

plugin_no_core_leak() {
        # Hidden visibility: nothing of the core (tg_*) is visible outside the plugin.
        local defined
        defined=$(readelf --dyn-syms -W "$TPMGUARD_PLUGIN" | awk '$7 != "UND" {print $8}')
        ! grep -q '^tg_' <<<"$defined" ||
                { echo "core symbols exported"; return 1; }
}

plugin_no_cli_code() {
        # The plugin links tokens/ and below, never cli/: none of the functions
        # the CLI floor's library defines may be in it (symbol table, local
        # ones too).
        local cli_lib=$TPMGUARD_BUILD/cli/libtpmguard-cli.a cli_funcs present
        command -v nm >/dev/null || { echo "nm missing (binutils)"; return 1; }
        cli_funcs=$(nm --defined-only "$cli_lib" | awk '$2 == "T" || $2 == "t" {print $3}' | sort -u)
        [ -n "$cli_funcs" ] || { echo "no function found in $cli_lib"; return 1; }
        present=$(nm -a "$TPMGUARD_PLUGIN" 2>/dev/null | awk '{print $NF}' | grep -Fx -f <(echo "$cli_funcs"))
        [ -z "$present" ] || { echo "CLI code in the plugin:"; echo "$present"; return 1; }
        echo "none of $(wc -l <<<"$cli_funcs") CLI functions"
}

echo "1..17"
for bin in "$TPMGUARD" "$TPMGUARD_PLUGIN"; do
        name=$(basename "$bin")
        check "$name: position independent (ELF type DYN)" elf_type_dyn "$bin"
        check "$name: BIND_NOW" bind_now "$bin"
        check "$name: GNU_RELRO" gnu_relro "$bin"
        check "$name: non-executable stack" stack_not_exec "$bin"
        check "$name: stack protector" stack_protector "$bin"
        check "$name: _FORTIFY_SOURCE" fortify "$bin"
        check "$name: no text relocations" no_textrel "$bin"
done
check "plugin exports exactly the token ABI, versioned CRYPTSETUP_TOKEN_1.0" plugin_exports
check "plugin exports nothing of the core (hidden visibility)" plugin_no_core_leak
check "plugin contains no CLI code (cli/ floor)" plugin_no_cli_code
[ "$failed" = 0 ]
