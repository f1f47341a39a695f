#!/usr/bin/env bash
# Runs the crate's unit tests (primitives, policy, engines) under Miri with tree borrows.
# Installs the nightly Miri components if they are missing. Leaks are not reported: the epoch
# collector (crossbeam-epoch, SPEC D51) keeps a thread's registration and its last deferred
# frees past the end of the process by design. AddressSanitizer's leak check (scripts/asan.sh)
# and the counting-allocator tests of tests/graph_backing.rs check that fairway's own memory
# all comes back.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  rustup component add --toolchain nightly miri rust-src
fi
MIRIFLAGS="${MIRIFLAGS:--Zmiri-tree-borrows -Zmiri-disable-isolation -Zmiri-ignore-leaks}" \
  cargo +nightly miri test --target-dir target/miri "${@:---lib}"
