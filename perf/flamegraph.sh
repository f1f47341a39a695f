#!/usr/bin/env bash
# Flame graph of one criterion bench of fairway.
#
#   perf/flamegraph.sh <bench> [filter] [seconds]
#
# Runs `cargo bench --bench <bench> -- --profile-time <seconds> [filter]` (default 30 s per
# benchmark: pprof samples at ~1 kHz, fewer on a loaded VM), which makes the benches' pprof
# profiler write target/criterion/<group>/<bench>/profile/flamegraph.svg, and copies every SVG
# written to target/fairway-perf/flamegraph/<bench>/<group>__<benchmark>.svg.
#
# Example: perf/flamegraph.sh scheduler 'queued cycle/lock-free' 10
set -euo pipefail

if [[ $# -lt 1 || $# -gt 3 ]]; then
    echo "usage: $0 <bench> [filter] [seconds]" >&2
    exit 2
fi
bench=$1
filter=${2:-}
seconds=${3:-30}

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/fairway-perf/flamegraph/$bench
mkdir -p "$out"
stamp=$(mktemp)
trap 'rm -f "$stamp"' EXIT

args=(--profile-time "$seconds")
[[ -n $filter ]] && args+=("$filter")
cargo bench --bench "$bench" -- "${args[@]}"

count=0
while IFS= read -r -d '' svg; do
    [[ -s $svg ]] || continue
    # target/criterion/<group path>/profile/flamegraph.svg -> <group path with / as __>.svg
    rel=${svg#"$target/criterion/"}
    rel=${rel%/profile/flamegraph.svg}
    name=$(printf '%s' "$rel" | tr '/ ' '__')
    cp "$svg" "$out/$name.svg"
    echo "$out/$name.svg"
    count=$((count + 1))
done < <(find "$target/criterion" -name flamegraph.svg -newer "$stamp" -print0)

if [[ $count -eq 0 ]]; then
    echo "no flame graph written (does the filter match a benchmark?)" >&2
    exit 1
fi
