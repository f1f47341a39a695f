#!/usr/bin/env bash
# Atomic read-modify-writes per operation of single-thread rows, counted exactly: callgrind
# records how often each machine instruction ran (--dump-instr=yes) inside `measured` (as in
# perf/callgrind.sh), and every executed x86-64 instruction with a `lock` prefix, or an `xchg`
# with a memory operand (locked implicitly), counts as one RMW. Prints, per row, the RMWs per
# operation and the functions they ran in.
#
#   perf/rmw-count.sh [--ops N] ROW [ROW...]     rows as perf/callgrind.sh (cycle fast pull-cycle
#                                                admit-refund cancel-1 cancel-4096 owned-fast cas
#                                                pool tokio, graph-p8-lock-free graph-p9-lock-free
#                                                and their -std twins)
#   FAIRWAY_PERF_BIN=path perf/rmw-count.sh ...  count in that binary instead of building one
set -euo pipefail
cd "$(dirname "$0")/.."

ops=20000
rows=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --ops) ops=$2; shift 2 ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) rows+=("$1"); shift ;;
    esac
done
[[ ${#rows[@]} -gt 0 ]] || { echo "usage: $0 [--ops N] ROW [ROW...]" >&2; exit 2; }
[[ $(uname -m) == x86_64 ]] || { echo "x86-64 only (lock prefixes)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "valgrind is needed" >&2; exit 2; }

# FAIRWAY_PERF_BIN: a fairway-perf binary built earlier (e.g. of the tree before a change).
bin=${FAIRWAY_PERF_BIN:-target/release/fairway-perf}
[[ -n ${FAIRWAY_PERF_BIN:-} ]] || cargo build --release --quiet -p fairway-perf
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
objdump -d --no-show-raw-insn "$bin" >"$out/asm.txt"

for row in "${rows[@]}"; do
    # The graph rows time their own regions (`p8_timed`, `p9_timed` in the bench support).
    case $row in
        graph-*) region='*fairway_bench_support*graph*_timed*' ;;
        *) region='*fairway_perf*measured*' ;;
    esac
    valgrind --tool=callgrind --toggle-collect="$region" --dump-instr=yes \
        --compress-pos=no --compress-strings=no \
        --callgrind-out-file="$out/$row.out" "$bin" --instr "$row" --ops "$ops" >/dev/null \
        2>"$out/$row.log" || { cat "$out/$row.log" >&2; exit 1; }
    python3 - "$out/asm.txt" "$out/$row.out" "$ops" "$row" <<'PY'
import re, sys
from collections import Counter
asm, cg, ops, row = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
rmw = set()
for line in open(asm):
    m = re.match(r'\s*([0-9a-f]+):\s+(.*)', line)
    if not m:
        continue
    ins = m.group(2)
    if ins.startswith('lock ') or (ins.startswith('xchg') and '(' in ins):
        rmw.add(int(m.group(1), 16))
by_fn, total, fn, skip, npos = Counter(), 0, '?', False, 1
for line in open(cg):
    if line.startswith('positions:'):
        npos = len(line.split()) - 1  # e.g. "instr line": the cost follows both
    elif line.startswith('fn='):
        fn = line[3:].strip()
    elif line.startswith('calls='):
        skip = True  # the next line is the call's inclusive cost
    elif line[:2] == '0x':
        if skip:
            skip = False
            continue
        fields = line.split()
        addr, count = fields[0], fields[npos]
        if int(addr, 16) in rmw:
            by_fn[fn] += int(count)
            total += int(count)
    else:
        skip = False if not line.strip() else skip
print(f"{row}: {total / ops:.2f} atomic RMWs per operation")
for f, c in by_fn.most_common():
    name = re.sub(r'::h[0-9a-f]{16}$', '', f)
    print(f"  {c / ops:6.2f}  {name[:150]}")
PY
done
