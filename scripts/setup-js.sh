#!/usr/bin/env bash
# Installs what the JavaScript tests need: the wasm32 target, wasm-bindgen-cli
# at exactly the version of the wasm-bindgen crate in Cargo.lock, and the npm
# packages of tests/js (from its package-lock.json). Chromium comes from
# scripts/setup.sh. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-unknown-unknown >/dev/null

want=$(awk '$0 == "name = \"wasm-bindgen\"" { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
have=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$have" != "$want" ]; then
  echo "installing wasm-bindgen-cli $want (found: ${have:-none})"
  cargo install wasm-bindgen-cli --version "$want" --locked
fi

(cd tests/js && npm ci --no-audit --no-fund --loglevel=error)
