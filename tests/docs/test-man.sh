#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# The man pages and bash completion against the real CLI: the pages render
# without a groff or man warning, and every command and option that
# `tpmguard --help` shows is documented in tpmguard(8) and completed by the
# bash completion, which is exercised as bash would call it.
#   test-man.sh  (environment: TPMGUARD, TPMGUARD_SRC)
set -uo pipefail
MAN="$TPMGUARD_SRC/docs/man"
COMPLETION="$TPMGUARD_SRC/data/bash-completion/tpmguard"
n=0 failed=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }

command -v groff >/dev/null || { echo "1..0 # SKIP groff not installed (apt-get install groff-base)"; exit 0; }
command -v man >/dev/null || { echo "1..0 # SKIP man not installed (apt-get install man-db)"; exit 0; }

help=$("$TPMGUARD" --help)
commands=$(sed -n '/^Commands:/,/^$/p' <<<"$help" | awk 'NR > 1 && NF { print $1 }')
options=$(grep -o -- '--[a-z][a-z-]*' <<<"$help" | sort -u)
echo "1..$((3 * 2 + 2 + $(wc -w <<<"$commands") * 3 + $(wc -w <<<"$options") * 2 + 3))"

for page in tpmguard.8 tpmguard.conf.5 tpmguard-token.7; do
        out=$(groff -wall -man -t -z "$MAN/$page" 2>&1)
        check "$page: groff -wall is silent" test -z "$out"
        [ -z "$out" ] || printf "%s\n" "$out" | sed "s/^/# /"
        out=$(MANWIDTH=80 LC_ALL=C.UTF-8 man --warnings -E UTF-8 -l "$MAN/$page" 2>&1 >/dev/null)
        check "$page: man --warnings is silent" test -z "$out"
        [ -n "$out" ] && echo "# $out"
done

rendered=$(MANWIDTH=200 LC_ALL=C.UTF-8 man -E ascii -l "$MAN/tpmguard.8" 2>/dev/null)
check "tpmguard(8) renders" test -n "$rendered"
check "commands found in --help" test -n "$commands"

# shellcheck disable=SC1091
. /usr/share/bash-completion/bash_completion 2>/dev/null || true
# shellcheck disable=SC1090
. "$COMPLETION"
complete_words() {
        COMP_WORDS=("$@")
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        COMP_LINE="${COMP_WORDS[*]}"
        COMP_POINT=${#COMP_LINE}
        COMPREPLY=()
        _tpmguard tpmguard "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}" 2>/dev/null
        printf '%s\n' "${COMPREPLY[@]}"
}

for c in $commands; do
        # A synopsis line and a paragraph of its own under COMMANDS.
        check "tpmguard(8) documents command $c" grep -qE "^ {7}tpmguard \[OPTIONS\] $c( |\$)" <<<"$rendered"
        check "tpmguard(8) has a paragraph on $c" grep -qE "^ {7}$c( |\$)" <<<"$rendered"
        check "bash completion offers command $c" grep -qx -- "$c" <<<"$(complete_words tpmguard "${c:0:2}")"
done
for o in $options; do
        check "tpmguard(8) documents option $o" grep -qF -- "$o" <<<"$rendered"
        in_completion() {
                local c
                for c in $commands; do
                        grep -qx -- "$1" <<<"$(complete_words tpmguard "$c" --)" && return 0
                done
                return 1
        }
        check "bash completion offers option $o" in_completion "$o"
done

check "completion: --pcr-bank values" grep -qx sha384 <<<"$(complete_words tpmguard enroll --pcr-bank sha3)"
check "completion: files after --pin-file" test -n "$(cd "$TPMGUARD_SRC" && complete_words tpmguard enroll --pin-file REA)"
check "completion: devices and files after doctor" test -n "$(cd "$TPMGUARD_SRC" && complete_words tpmguard doctor REA)"

[ "$failed" = 0 ]
