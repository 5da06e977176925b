#!/usr/bin/env bash
# Builds the engine for JavaScript: the release-wasm profile, then
# wasm-bindgen (--target web) into bindings-wasm/pkg (Node and edge workers,
# used by worker/index.mjs; not in git). Prints the wasm size, raw and
# gzipped. The page's copy, www/pkg, is committed: scripts/build-page-pkg.sh
# rebuilds it with this script.
#
# BUBBLE_WASM_FEATURES: cargo features of bubble-wasm to build with (the
# page's package is built with `sim`, the simulator).
#
# Paths of the machine (the cargo registry, this checkout) are remapped, so
# the same sources, toolchain and wasm-bindgen give the same bytes anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."

root=$(pwd)
cargo_home=${CARGO_HOME:-$HOME/.cargo}
flags=(--remap-path-prefix "$root=.")
for registry in "$cargo_home"/registry/src/*/; do
  [ -d "$registry" ] && flags+=(--remap-path-prefix "${registry%/}=registry")
done
export CARGO_ENCODED_RUSTFLAGS=$(IFS=$'\x1f'; echo "${flags[*]}")

wasm=$(cargo build -q -p bubble-wasm --target wasm32-unknown-unknown --profile release-wasm \
  ${BUBBLE_WASM_FEATURES:+--features "$BUBBLE_WASM_FEATURES"} \
  --message-format=json-render-diagnostics \
  | grep -o '"[^"]*/bubble_wasm\.wasm"' | tail -n 1 | tr -d '"')
[ -f "$wasm" ] || { echo "error: cargo reported no bubble_wasm.wasm" >&2; exit 1; }

out=bindings-wasm/pkg
rm -rf "$out"
wasm-bindgen --target web --remove-name-section --remove-producers-section --out-dir "$out" "$wasm"

raw=$(wc -c < "$out/bubble_wasm_bg.wasm")
gz=$(gzip -9 -c "$out/bubble_wasm_bg.wasm" | wc -c)
echo "bubble_wasm_bg.wasm: ${raw} bytes raw, ${gz} bytes gzip -9"
