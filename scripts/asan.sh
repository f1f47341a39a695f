#!/usr/bin/env bash
# Runs the unit tests and the churn tests under AddressSanitizer with leak detection (nightly,
# rebuilt std). Extra arguments go to the test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup component add --toolchain nightly rust-src >/dev/null 2>&1 || true
HOST=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-Zsanitizer=address --cfg fairway_lean" RUSTDOCFLAGS="-Zsanitizer=address" \
  ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}" \
  cargo +nightly test -Zbuild-std --target "$HOST" --locked --target-dir target/asan \
  --lib --test churn -- "$@"
