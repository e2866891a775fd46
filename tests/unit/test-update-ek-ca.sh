#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
# scripts/update-ek-ca against small upstream checkouts made from the shipped
# store (data/ek-ca): a faithful one regenerates the same MANIFEST lines; a
# certificate whose fingerprint disagrees with the upstream manifest, or that
# the upstream manifest does not list, is refused and nothing is written.
#   test-update-ek-ca.sh  (environment: TPMGUARD_SRC)
set -uo pipefail
SRC=${TPMGUARD_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
SCRIPT="$SRC/scripts/update-ek-ca"
STORE="$SRC/data/ek-ca"
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }

command -v openssl >/dev/null || { echo "1..0 # SKIP openssl not installed"; exit 0; }
python3 -c 'import yaml' 2>/dev/null || { echo "1..0 # SKIP python3-yaml not installed"; exit 0; }
echo "1..8"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/tpmguard-update-ek-ca.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The n-th PEM block of a file.
pem_block() { awk -v want="$2" '/BEGIN CERTIFICATE/{n++} n==want{print} /END CERTIFICATE/{if(n==want)exit}' "$1"; }
fp() { openssl x509 -noout -fingerprint -sha256 | cut -d= -f2; }
fp1() { openssl x509 -noout -fingerprint -sha1 | cut -d= -f2; }

# An upstream checkout with two roots and one intermediate of the shipped
# store, listed in upstream's formats (one root by SHA-1, as some are).
make_upstream() {
        local dir=$1 r1 r2 i1
        mkdir -p "$dir"
        r1=$(pem_block "$STORE/roots.pem" 3)
        r2=$(pem_block "$STORE/roots.pem" 4)
        i1=$(grep -m1 -P '^intermediate\t' "$STORE/MANIFEST" | cut -f4)
        i1=$(awk -v want="$i1" '
                /^# SHA-256: /{ s = $3 } /BEGIN CERTIFICATE/{ keep = (s == want) } keep{ print } /END CERTIFICATE/{ keep = 0 }' \
                "$STORE/intermediates.pem")
        { printf '# Certificate: Root One\n# Owner: TST\n%s\n' "$r1"
          printf '# Certificate: Root Two\n# Owner: TST\n%s\n' "$r2"; } >"$dir/MIRROR.tpm-ca-certificates.pem"
        printf '# Certificate: Inter One\n# Owner: TST\n%s\n' "$i1" >"$dir/MIRROR.tpm-intermediate-ca-certificates.pem"
        cat >"$dir/.tpm-roots.yaml" <<EOF
version: "alpha"
vendors:
  - id: "TST"
    name: "Test Vendor"
    certificates:
      - name: "Root One"
        url: "https://example.invalid/root1.crt"
        validation:
          fingerprint:
            sha256: "$(fp <<<"$r1")"
      - name: "Root Two"
        url: "https://example.invalid/root2.crt"
        validation:
          fingerprint:
            sha1: "$(fp1 <<<"$r2")"
EOF
        cat >"$dir/.tpm-intermediates.yaml" <<EOF
version: "alpha"
vendors:
  - id: "TST"
    name: "Test Vendor"
    certificates:
      - name: "Inter One"
        url: "https://example.invalid/inter1.crt"
        validation:
          fingerprint:
            sha256: "$(fp <<<"$i1")"
EOF
        echo "Test licence text" >"$dir/LICENSE"
}

COMMIT=0123456789abcdef0123456789abcdef01234567
make_upstream "$WORK/up"
out=$("$SCRIPT" --commit "$COMMIT" "$WORK/up" "$WORK/out" 2>&1)
check "a faithful upstream bundle is accepted" test $? -eq 0
printf '%s\n' "$out" | sed 's/^/# /'
# The regenerated lines carry the shipped store's fingerprints, dates and subjects.
cut -f4-6,8 "$WORK/out/MANIFEST" | grep -v '^#' | sort >"$WORK/got"
while IFS=$'\t' read -r _ _ _ sha nb na _ subj; do
        grep -qF "$sha" "$WORK/got" && printf '%s\t%s\t%s\t%s\n' "$sha" "$nb" "$na" "$subj"
done < <(grep -v '^#' "$STORE/MANIFEST") | sort >"$WORK/want"
check "the regenerated MANIFEST lines match the shipped ones" cmp -s "$WORK/got" "$WORK/want"
check "two roots: the self-signed ones" test "$(grep -c -P '^root\t' "$WORK/out/MANIFEST")" -eq 2
check "an intermediate whose root is not in the bundle is an orphan" \
        test "$(grep -c -P '^orphan\t' "$WORK/out/MANIFEST")" -eq 1
check "the upstream commit and licence travel with the store" \
        grep -q "$COMMIT" "$WORK/out/roots.pem" "$WORK/out/MANIFEST" "$WORK/out/LICENSE"

# A fingerprint that disagrees: refused, nothing written.
make_upstream "$WORK/bad"
zeros=$(printf '00:%.0s' {1..31})00
sed -i "0,/sha256: \"[^\"]*\"/s//sha256: \"$zeros\"/" "$WORK/bad/.tpm-roots.yaml"
out=$("$SCRIPT" --commit "$COMMIT" "$WORK/bad" "$WORK/out-bad" 2>&1)
rc=$?
check "a disagreeing fingerprint is refused" test $rc -ne 0
refused() { [ "$1" -ne 0 ] && [[ $2 == *"$3"* ]] && [ ! -e "$4" ]; }
check "the refusal names the disagreement, and nothing is written" \
        refused "$rc" "$out" "disagrees with the upstream manifest" "$WORK/out-bad"
printf '%s\n' "$out" | head -3 | sed 's/^/# /'

# A certificate the upstream manifest does not list: refused.
make_upstream "$WORK/unlisted"
sed -i 's/# Certificate: Inter One/# Certificate: Someone Else/' "$WORK/unlisted/MIRROR.tpm-intermediate-ca-certificates.pem"
out=$("$SCRIPT" --commit "$COMMIT" "$WORK/unlisted" "$WORK/out-unlisted" 2>&1)
rc=$?
check "a certificate missing from the upstream manifest is refused" \
        refused "$rc" "$out" "not in the upstream manifest" "$WORK/out-unlisted"

[ "$failed" -eq 0 ]
