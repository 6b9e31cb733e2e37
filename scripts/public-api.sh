#!/usr/bin/env bash
# The public API listings of the published crates, docs/public-api/<crate>.txt, from rustdoc's
# JSON output (nightly rustdoc: `--output-format json` is unstable) through scripts/public-api.py.
#
#   scripts/public-api.sh --check   # exit 1, with the diff, when an API changed and its listing was not updated
#   scripts/public-api.sh --write   # rewrite the listings after a deliberate API change
#
# A pull request that changes an API changes its listing in the same commit, where review sees it.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:---check}
case "$mode" in --check | --write) ;; *) echo "usage: scripts/public-api.sh [--check|--write]" >&2; exit 2 ;; esac
if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "public-api: needs a nightly toolchain (rustup toolchain install nightly)" >&2
    exit 2
fi
mkdir -p docs/public-api
status=0
for crate in elite-affinity elite-rt; do
    json="target/api/doc/${crate//-/_}.json"
    cargo +nightly rustdoc -q -p "$crate" --lib --target-dir target/api -- -Z unstable-options --output-format json
    listing=$(python3 scripts/public-api.py "$json")
    file="docs/public-api/$crate.txt"
    if [ "$mode" = --write ]; then
        printf '%s\n' "$listing" >"$file"
        echo "public-api: wrote $file ($(wc -l <"$file") items)"
    elif ! diff -u "$file" <(printf '%s\n' "$listing"); then
        echo "public-api: the public API of $crate differs from $file (above: - listed, + now)." >&2
        echo "If the change is deliberate, run scripts/public-api.sh --write and commit the listing." >&2
        status=1
    else
        echo "public-api: $crate matches $file"
    fi
done
exit $status
