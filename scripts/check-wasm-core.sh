#!/usr/bin/env bash
# Builds bubble-core for wasm32-unknown-unknown, then links it into the
# bubble-wasm module and rejects any import from "env": the engine must not
# reach for anything its host does not hand it through wasm-bindgen.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p bubble-core --target wasm32-unknown-unknown --release
cargo build -q -p bubble-wasm --target wasm32-unknown-unknown --release
module=${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/bubble_wasm.wasm
if wasm-objdump -j Import -x "$module" | grep -E '<- env\.' ; then
  echo "error: $module imports from \"env\"" >&2
  exit 1
fi
echo "bubble-core builds for wasm32-unknown-unknown; bubble-wasm imports nothing from \"env\""
