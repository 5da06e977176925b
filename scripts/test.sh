#!/usr/bin/env bash
# Runs every test of the project, installing what the tests need first.
# Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --features bubble-core/contract -- -D warnings

echo "== core builds for wasm32 with no host imports"
scripts/check-wasm-core.sh

echo "== Rust tests (unit, contract, property, black-box)"
cargo test --workspace --features bubble-core/contract

for extra in scripts/test-js.sh scripts/bench-smoke.sh; do
  if [ -x "$extra" ]; then
    echo "== $extra"
    "$extra"
  fi
done
