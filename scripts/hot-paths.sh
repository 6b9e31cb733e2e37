#!/usr/bin/env bash
# Instructions per operation of the hot paths, counted by callgrind (repeatable whatever else the
# machine does): `hot_path_probe` (elite-rt's example) and `elite-bench blocking-probe`, each run at
# two operation counts; the difference of the totals over the difference of the counts cancels
# start-up and shut-down.
#
#   scripts/hot-paths.sh [TARGET_DIR]      (default: target; builds there first)
#
# Prints one line per probe: `<probe> <op> <instructions per op>`.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:-target}
cargo build --release --target-dir "$target" -p elite-rt --example hot_path_probe >&2
cargo build --release --target-dir "$target" -p elite-bench >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# total instructions of one run
refs() {
    valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" "$@" >/dev/null 2>"$tmp/err" || {
        cat "$tmp/err" >&2
        return 1
    }
    sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$tmp/err"
}

# probe NAME OP N1 N2 CMD...   (CMD gets OP and N appended)
probe() {
    local name=$1 op=$2 n1=$3 n2=$4
    shift 4
    local a b
    a=$(refs "$@" "$op" "$n1")
    b=$(refs "$@" "$op" "$n2")
    awk -v n="$name" -v o="$op" -v a="$a" -v b="$b" -v n1="$n1" -v n2="$n2" \
        'BEGIN { printf "%s %s %.2f\n", n, o, (b - a) / (n2 - n1) }'
}

for op in wake mutex yield yields; do
    probe hot_path_probe "$op" 100000 200000 "$target/release/examples/hot_path_probe"
done
for op in ping_pong ping_pong_sync spawn_join; do
    probe blocking-probe "$op" 10000 50000 "$target/release/elite-bench" blocking-probe
done
