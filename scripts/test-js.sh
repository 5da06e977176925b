#!/usr/bin/env bash
# The JavaScript side: builds the wasm packages, runs the wasm-bindgen tests
# in Node, then tests/js with node's test runner (both hosts agree, the AI SDK
# round trip, the offline page in headless Chromium).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== wasm packages"
bindings-wasm/build.sh

echo "== wasm-bindgen tests (Node)"
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p bubble-wasm --target wasm32-unknown-unknown

echo "== native server for the parity checks"
cargo build -q -p bubble-server --bin bubble

echo "== node --test (tests/js)"
mkdir -p test-output
cd tests/js
node --test --test-concurrency=1 --test-timeout=180000 ./*.test.mjs
