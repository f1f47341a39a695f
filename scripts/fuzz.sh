#!/usr/bin/env bash
# Runs the cargo-fuzz targets of fuzz/ (libFuzzer, AddressSanitizer, debug assertions on), each
# for a bounded time, and prints one line per target:
#
#   FUZZ target=<name> secs=<s> runs=<n> cov=<edges> corpus=<inputs> peak_rss_mb=<mb>
#
# followed by libFuzzer's final status and stats lines for that target.
#
#   scripts/fuzz.sh [--time SECONDS] [--jobs N] [TARGET...]
#
# --time: seconds per target (default 60). --jobs: targets run side by side (default: the
# number of cores). TARGET: config, scheduler, graph, versions (default: all four).
#
# Each target starts from its seed corpus fuzz/seeds/<target>/ (in the tree, only read) and
# writes what it finds to fuzz/corpus/<target>/ (ignored by git). A failing input is kept in
# fuzz/artifacts/<target>/ and the script exits non-zero; replay it with
# `cargo +nightly fuzz run -a <target> <file>`. Needs the nightly toolchain and cargo-fuzz
# (installed with `cargo install --locked` when missing).
set -uo pipefail
cd "$(dirname "$0")/.."

SECS=60
JOBS=$(nproc 2>/dev/null || echo 2)
TARGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time) SECS="$2"; shift 2 ;;
    --jobs) JOBS="$2"; shift 2 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) TARGETS+=("$1"); shift ;;
  esac
done
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(config scheduler graph versions)

if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz not found: installing it"
  cargo install cargo-fuzz --locked || { echo "could not install cargo-fuzz" >&2; exit 3; }
fi

for t in "${TARGETS[@]}"; do cargo +nightly fuzz build -a "$t" || exit 1; done

LOGS=target/fuzz-logs
mkdir -p "$LOGS"

# run_target NAME: one libFuzzer run of NAME for SECS seconds.
run_target() {
  local t="$1"
  mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
  local t0 rc
  t0=$(date +%s)
  cargo +nightly fuzz run -a "$t" "fuzz/corpus/$t" "fuzz/seeds/$t" -- \
    -max_total_time="$SECS" -print_final_stats=1 >"$LOGS/$t.log" 2>&1
  rc=$?
  echo $(( $(date +%s) - t0 )) >"$LOGS/$t.secs"
  return "$rc"
}

FAILED=0
declare -A PIDS=()
for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 1; done
  run_target "$t" &
  PIDS[$t]=$!
done

for t in "${TARGETS[@]}"; do
  wait "${PIDS[$t]}"
  rc=$?
  log="$LOGS/$t.log"
  done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  secs=$(cat "$LOGS/$t.secs" 2>/dev/null)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -n 1)
  cov=$(echo "$done_line" | grep -Eo 'cov: [0-9]+' | grep -Eo '[0-9]+')
  corp=$(echo "$done_line" | grep -Eo 'corp: [0-9]+' | grep -Eo '[0-9]+')
  printf 'FUZZ target=%s secs=%s runs=%s cov=%s corpus=%s peak_rss_mb=%s\n' \
    "$t" "${secs:-0}" "${runs:-0}" "${cov:-0}" "${corp:-0}" "${rss:-0}"
  [ -n "$done_line" ] && echo "  $done_line"
  grep -E '^stat::' "$log" | sed 's/^/  /'
  if [ "$rc" != 0 ]; then
    FAILED=1
    echo "FUZZ FAILED: $t (exit $rc); the input is in fuzz/artifacts/$t/, the log in $log:"
    grep -E 'panicked|ERROR: |SUMMARY: |Test unit written' "$log" | head -n 20 | sed 's/^/  /'
  fi
done
exit "$FAILED"
