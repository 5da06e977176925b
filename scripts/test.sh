#!/usr/bin/env bash
# Runs every test of the project, installing what the tests need first.
# Usage: scripts/test.sh
#
# Everything native is compiled once, by one cargo invocation with one
# feature set (the workspace with bubble-core/contract, bubble-core/sim and bubble-wasm/sim), and every later step
# reuses those binaries: the black-box tests and the JavaScript tests run the
# `bubble` binary it built (BUBBLE_BIN), the bench smoke its `bubble-bench`.
# The wasm module is built once too (bindings-wasm/build.sh), checked for host
# imports, and used by the JavaScript tests.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --features bubble-core/contract,bubble-core/sim,bubble-wasm/sim -- -D warnings

echo "== build once: every native binary and test binary"
cargo test --workspace --features bubble-core/contract,bubble-core/sim,bubble-wasm/sim --no-run
export BUBBLE_BIN="$(pwd)/${CARGO_TARGET_DIR:-target}/debug/bubble"
test -x "$BUBBLE_BIN"

echo "== core builds for wasm32 with no host imports"
scripts/check-wasm-core.sh

echo "== Rust tests (unit, contract, property, black-box)"
cargo test --workspace --features bubble-core/contract,bubble-core/sim,bubble-wasm/sim

echo "== fuzz targets, ${FUZZ_SECS:-20}s each"
scripts/fuzz.sh

for extra in scripts/test-js.sh scripts/bench-smoke.sh; do
  if [ -x "$extra" ]; then
    echo "== $extra"
    "$extra"
  fi
done
