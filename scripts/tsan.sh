#!/usr/bin/env bash
# Runs the concurrent churn tests under ThreadSanitizer (nightly, rebuilt std). Suppressions:
# scripts/tsan.supp (exact dependency frames only). Extra arguments go to the test binary.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup component add --toolchain nightly rust-src >/dev/null 2>&1 || true
HOST=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-Zsanitizer=thread --cfg fairway_lean" RUSTDOCFLAGS="-Zsanitizer=thread" \
  TSAN_OPTIONS="suppressions=$PWD/scripts/tsan.supp halt_on_error=1 ${TSAN_OPTIONS:-}" \
  cargo +nightly test -Zbuild-std --target "$HOST" --locked --target-dir target/tsan \
  --test churn -- "$@"
