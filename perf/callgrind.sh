#!/usr/bin/env bash
# Instructions per operation of single-thread rows, counted by callgrind (deterministic, so it
# judges costs too small for wall time on a shared VM: PERF.md, Method).
#
#   perf/callgrind.sh [--ops N] ROW [ROW...]     rows: cycle fast pull-cycle admit-refund
#                                                cancel-1 cancel-4096 reorder-1 reorder-4096
#                                                (the engine), std-reorder-4096, std-cycle
#                                                std-pull-cycle std-admit-refund pl-cycle (the
#                                                mutex twins), owned-fast cas pool tokio,
#                                                graph-p8-lock-free graph-p8-std
#                                                graph-p9-lock-free graph-p9-std (P8, P9)
#   perf/callgrind.sh --p7                       P7's O(1) check: cancel-4096 vs cancel-1,
#                                                ≤ 1.05x instructions (exit status 1 if not)
#   FAIRWAY_PERF_BIN=path perf/callgrind.sh ...  count in that binary instead of building one
#
# Each row is built and warmed outside the measured region; `fairway-perf --instr ROW` then runs
# it N times (default 100000) inside one function, `measured`, and callgrind collects only
# there (--toggle-collect), so setup and teardown do not count.
set -euo pipefail
cd "$(dirname "$0")/.."

ops=100000
p7=false
prefix=
rows=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --ops) ops=$2; shift 2 ;;
        --p7) p7=true; rows=(cancel-1 cancel-4096); shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) rows+=("$1"); shift ;;
    esac
done
if [[ ${#rows[@]} -eq 0 ]]; then
    echo "usage: $0 [--ops N] ROW [ROW...] | $0 --p7" >&2
    exit 2
fi
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 2; }

# FAIRWAY_PERF_BIN: a fairway-perf binary built earlier (e.g. of the tree before a change).
bin=${FAIRWAY_PERF_BIN:-target/release/fairway-perf}
[[ -n ${FAIRWAY_PERF_BIN:-} ]] || cargo build --release --quiet -p fairway-perf
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

declare -A per_op
for row in "${rows[@]}"; do
    # The graph rows time their own regions (`p8_timed`, `p9_timed` in the bench support).
    case $row in
        graph-*) region='*fairway_bench_support*graph*_timed*' ;;
        *) region='*fairway_perf*measured*' ;;
    esac
    valgrind --tool=callgrind --toggle-collect="$region" \
        --callgrind-out-file="$out/$row.out" "$bin" --instr "$row" --ops "$ops" >/dev/null 2>"$out/$row.log" \
        || { cat "$out/$row.log" >&2; exit 1; }
    total=$(grep -m1 '^summary:' "$out/$row.out" | awk '{print $2}')
    per_op[$row]=$(awk -v t="$total" -v n="$ops" 'BEGIN { printf "%.1f", t / n }')
    printf '%-14s %12s instructions in %s operations: %8s per operation\n' \
        "$row" "$total" "$ops" "${per_op[$row]}"
done

if $p7; then
    ratio=$(awk -v a="${per_op[${prefix}cancel-4096]}" -v b="${per_op[${prefix}cancel-1]}" 'BEGIN { printf "%.3f", a / b }')
    if awk -v r="$ratio" 'BEGIN { exit !(r <= 1.05) }'; then
        echo "P7 ${prefix%-}${prefix:+ }instructions, depth 4096 vs 1: ${ratio}x (bound 1.05x): pass"
    else
        echo "P7 ${prefix%-}${prefix:+ }instructions, depth 4096 vs 1: ${ratio}x (bound 1.05x): MISS"
        exit 1
    fi
fi
