#!/usr/bin/env bash
# Builds the engine for JavaScript: the release-wasm profile, then
# wasm-bindgen (--target web) into bindings-wasm/pkg (Node and edge workers,
# used by worker/index.mjs) and www/pkg (the page), with the worker's host
# copied beside the page's build. Prints the wasm size, raw and gzipped.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build -q -p bubble-wasm --target wasm32-unknown-unknown --profile release-wasm
wasm=${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release-wasm/bubble_wasm.wasm

for out in bindings-wasm/pkg www/pkg; do
  rm -rf "$out"
  wasm-bindgen --target web --remove-name-section --remove-producers-section --out-dir "$out" "$wasm"
done
cp bindings-wasm/worker/host.mjs www/pkg/host.mjs

raw=$(wc -c < bindings-wasm/pkg/bubble_wasm_bg.wasm)
gz=$(gzip -9 -c bindings-wasm/pkg/bubble_wasm_bg.wasm | wc -c)
echo "bubble_wasm_bg.wasm: ${raw} bytes raw, ${gz} bytes gzip -9"
