#!/usr/bin/env bash
# Runs the concurrent churn tests under ThreadSanitizer (nightly, rebuilt std).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup component add --toolchain nightly rust-src >/dev/null 2>&1 || true
RUSTFLAGS="-Zsanitizer=thread" RUSTDOCFLAGS="-Zsanitizer=thread" \
  cargo +nightly test -Zbuild-std --target x86_64-unknown-linux-gnu --target-dir target/tsan \
  --test churn -- --test-threads=1 "$@"
