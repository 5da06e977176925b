#!/usr/bin/env bash
# The JavaScript side: builds the wasm package for Node, runs the
# wasm-bindgen tests in Node, then tests/js with node's test runner (both
# hosts agree, the Cloudflare entry in workerd through miniflare, the AI SDK
# round trip, the JavaScript client (clients/js) against the native server
# in Node and in Chromium (and against the engine running in the page),
# the offline page in headless Chromium, the README's run command on a
# fresh clone). Every test has the runner's 180 s limit; the
# workerd tests wait out workerd's 10 s idle eviction twice and set their
# own, shorter limits.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== wasm package (Node)"
# After scripts/check-wasm-core.sh (scripts/test.sh runs it first) cargo
# finds the module fresh and only wasm-bindgen runs again.
bindings-wasm/build.sh

echo "== wasm-bindgen tests (Node), with the simulator"
# The test profile, with `sim` so that the Simulation class
# (bindings-wasm/src/sim.rs) is tested on wasm too: a build of its own, as
# the shipped package above is release-wasm without the simulator, and the
# JavaScript tests below must run the shipped build.
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
  cargo test -p bubble-wasm --target wasm32-unknown-unknown --features sim

echo "== native server for the parity checks"
# scripts/test.sh has built it (BUBBLE_BIN); on its own, this script builds it.
if [ -z "${BUBBLE_BIN:-}" ]; then
  cargo build -q -p bubble-server --bin bubble
fi

echo "== node --test (tests/js)"
mkdir -p test-output
cd tests/js
files=()
for f in ./*.test.mjs; do
  [ "$f" = ./readme-run.test.mjs ] || files+=("$f")
done
node --test --test-concurrency=1 --test-timeout=180000 "${files[@]}"

# A release build, as the README's command is `cargo run --release`: in its
# own target dir (<target>/readme-run, kept between runs), so only the first
# run compiles the dependencies; later ones rebuild the workspace crates of
# the clone only.
echo "== the README's run command on a fresh clone (a release build; slow the first time)"
node --test --test-timeout=1800000 ./readme-run.test.mjs
