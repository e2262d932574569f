#!/usr/bin/env bash
# Rebuild the committed C and Zig plugin fixtures (tests/fixtures/polyglot/{c,zig}/) with
# the pinned toolchains, or with --check rebuild them elsewhere and compare hashes: the
# fixtures must be reproducible bit for bit from plugins/polyglot/, guest-sdk/ and wit/.
#
# C and Zig plugins are committed because their toolchain install (cargo install of
# wit-bindgen-cli and wasm-tools) takes ~10-45 minutes on a 2-core machine; the Python and
# JavaScript plugins install in ~2 minutes each from PyPI/npm and are built by
# scripts/polyglot/{python,js}.sh (CI does so) into target/polyglot/.
source "$(dirname "$0")/common.sh"
check=false
[[ ${1:-} == --check ]] && check=true
fixtures="$ROOT/tests/fixtures/polyglot"
for lang in c zig; do
    if $check; then
        out="$ROOT/target/polyglot/check/$lang"
        rm -rf "$out"
    else
        out="$fixtures/$lang"
    fi
    "$ROOT/scripts/polyglot/$lang.sh" "$out"
done
if $check; then
    status=0
    for lang in c zig; do
        for f in "$fixtures/$lang"/*.wasm; do
            rebuilt="$ROOT/target/polyglot/check/$lang/$(basename "$f")"
            if cmp -s "$f" "$rebuilt"; then
                echo "same     $(sha256sum "$f" | cut -c1-16)  $lang/$(basename "$f")"
            else
                echo "DIFFERS  $lang/$(basename "$f"): committed $(sha256sum <"$f" | cut -c1-16), rebuilt $(sha256sum <"$rebuilt" 2>/dev/null | cut -c1-16)"
                status=1
            fi
        done
    done
    exit $status
fi
(cd "$fixtures" && sha256sum c/*.wasm zig/*.wasm)
