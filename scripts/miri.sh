#!/usr/bin/env bash
# Runs the crate's unit tests (primitives, policy, engines) under Miri with tree borrows.
# Installs the nightly Miri components if they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly miri --version >/dev/null 2>&1; then
  rustup component add --toolchain nightly miri rust-src
fi
MIRIFLAGS="${MIRIFLAGS:--Zmiri-tree-borrows -Zmiri-disable-isolation}" \
  cargo +nightly miri test --target-dir target/miri "${@:---lib}"
