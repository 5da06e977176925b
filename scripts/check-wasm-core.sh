#!/usr/bin/env bash
# Builds the engine's wasm module (bindings-wasm/build.sh: bubble-core inside
# bubble-wasm, for wasm32-unknown-unknown) and rejects any import from "env":
# the engine must not reach for anything its host does not hand it through
# wasm-bindgen. The module it leaves in bindings-wasm/pkg is the one the
# JavaScript tests load.
set -euo pipefail
cd "$(dirname "$0")/.."
bindings-wasm/build.sh
module=bindings-wasm/pkg/bubble_wasm_bg.wasm
if wasm-objdump -j Import -x "$module" | grep -E '<- env\.' ; then
  echo "error: $module imports from \"env\"" >&2
  exit 1
fi
echo "bubble-core builds for wasm32-unknown-unknown; bubble-wasm imports nothing from \"env\""
