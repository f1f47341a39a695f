#!/usr/bin/env bash
# The scheduler rows at 1, 2, 4, 8 and 16 threads (capped at the machine's cores), for runs on
# machines with more cores than the 2-vCPU VM: wait and pull mode (closed loop) and the
# open-loop rows at 80 % of the std baseline's capacity, every engine, 4 cells.
#
#   perf/scaling.sh [extra fairway-perf flags, e.g. --reps 3]
#
# Writes perf/results/scaling-<cores>-cores.txt (the text report) and .json beside it (for
# `fairway-perf --compare`); the latency plots go to target/fairway-perf/scaling-<cores>-cores/.
# 55 s on 2 cores; about 3 minutes on 16 (14 workloads x 3 engines x 7.25 runs of 0.5 s).
set -euo pipefail
cd "$(dirname "$0")/.."

cores=$(nproc)
threads=""
for t in 1 2 4 8 16; do
    if [[ $t -le $cores || $t -le 2 ]]; then
        threads+="${threads:+,}$t"
    fi
done
cargo build --release --quiet -p fairway-perf
out=perf/results/scaling-$cores-cores
mkdir -p perf/results
target/release/fairway-perf --suite scaling --threads "$threads" --out "$out.json" \
    --plots "target/fairway-perf/scaling-$cores-cores" "$@" > "$out.txt"
cat "$out.txt"
echo "wrote $out.txt and $out.json (threads $threads)"
