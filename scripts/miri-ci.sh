#!/usr/bin/env bash
# The CI's Miri step (tree borrows, through scripts/miri.sh): builds the test binaries once, then
# runs them as two shards side by side, one per core (Miri interprets a test binary on one
# thread). Each shard's output goes to its own log, printed whole when both are done; the step
# fails if either shard fails. Extra arguments go to both shards' `cargo miri test` (e.g.
# `--locked`).
#
# What runs: the unit tests of the modules with `unsafe` code or lock-free state (raw: arena,
# inbox, ring; pool; the engines' entry slots and tenant records; cancel; the admission ledger
# and its permit), the scheduler rule tests on the engines with `unsafe` code (lock-free, ring;
# not the mutex baseline, which has none), the reliability tests, and the graph's rule and key
# tests on the lock-free graph (the mutex graph has no `unsafe` code either).
#
# Skipped: the policy (sequential, no `unsafe`), clock, error, stats and pack tests; the ledger's
# model and churn tests, the live-id set's, the SCQ ring's, the tenant-ring turn protocol's and
# the version directory's tests (atomics only, no `unsafe`; loom models them); f18 (needs a multi-thread tokio runtime);
# the tests at 10^4 tenants and 10^5 slots, the credit-holder churn, the narrow-width exhaustion,
# the graph's allocation-count test, its 300-round advance race and its 3,000-job reset, which
# take minutes under Miri while a smaller sibling of each runs. Tests that are only slow under
# Miri and cover no path a sibling does not are marked `#[cfg_attr(miri, ignore = ...)]` where
# they are written. RUST_BACKTRACE=0: capturing a backtrace per should-panic test costs a minute.
set -uo pipefail
cd "$(dirname "$0")/.."
export RUST_BACKTRACE=0

SKIPS=(--skip f18 --skip policy:: --skip clock:: --skip error:: --skip stats:: --skip pack::
  --skip f51_conservation_matches_model --skip raw::scq:: --skip engine::ring::turns::
  --skip at_ten_thousand_tenants --skip multi_thread_churn_conserves_and_never_exceeds
  --skip raw::idset:: --skip f08_credit_holder_always_finds_a_cell --skip hundred_thousand_slots
  --skip f21_narrow_widths_pack_and_exhaust_exactly --skip mutex:: --skip p9_
  --skip d21_completion_racing_advance --skip d24_reset_retires_every_key_at_scale
  --skip baseline:: --skip versions::)

# Shards balanced by their time under Miri on a 2-vCPU machine (each about 500 s). Every binary
# of a shard runs even when an earlier one fails (`--no-fail-fast`).
SHARD_A=(--lib --test graph_rules)
SHARD_B=(--test scheduler_rules --test reliability --test graph_keys)

LOGS=target/ci
mkdir -p "$LOGS"

scripts/miri.sh "$@" "${SHARD_A[@]}" "${SHARD_B[@]}" --no-run || exit $?

scripts/miri.sh "$@" --no-fail-fast "${SHARD_A[@]}" -- "${SKIPS[@]}" >"$LOGS/miri-a.txt" 2>&1 &
A=$!
# A timeout of the step (TERM to this script) stops the shard in the background too.
trap 'kill "$A" 2>/dev/null' TERM INT
scripts/miri.sh "$@" --no-fail-fast "${SHARD_B[@]}" -- "${SKIPS[@]}" >"$LOGS/miri-b.txt" 2>&1
RB=$?
wait "$A"
RA=$?
echo "--- shard A (${SHARD_A[*]}): exit $RA"
cat "$LOGS/miri-a.txt"
echo "--- shard B (${SHARD_B[*]}): exit $RB"
cat "$LOGS/miri-b.txt"
[ "$RA" = 0 ] && [ "$RB" = 0 ]
