#!/usr/bin/env bash
# Rebuilds the page's wasm package, www/pkg (committed: the `bubble` binary
# embeds www/ at compile time, so the page works with no build step), and
# rewrites www/pkg/INPUTS.sha256, the sha256 of every source the package is
# built from. The test tests/tests/page_pkg.rs fails when those sources change
# without a rebuild. Run it after changing the engine or the wasm bindings,
# and commit www/pkg with the change.
#
# Usage: scripts/build-page-pkg.sh          rebuild the package
#        scripts/build-page-pkg.sh --inputs print the inputs' hashes only
set -euo pipefail
cd "$(dirname "$0")/.."
export LC_ALL=C

if command -v sha256sum >/dev/null; then
  sha256() { sha256sum "$1"; }
else
  sha256() { shasum -a 256 "$1"; }
fi

# The inputs, sorted by path: what the wasm is compiled from, how, and the
# JavaScript host copied beside it (www/in-page-transport.mjs runs the
# engine in the page through it). The test reads this list through
# `--inputs`, so this function is its only definition.
inputs() {
  {
    for f in Cargo.lock Cargo.toml core/Cargo.toml core/build.rs \
      bindings-wasm/Cargo.toml bindings-wasm/build.rs \
      bindings-wasm/worker/host.mjs bindings-wasm/worker/storage.mjs bindings-wasm/build.sh \
      scripts/build-page-pkg.sh; do
      if [ -f "$f" ]; then echo "$f"; fi
    done
    find core/src bindings-wasm/src -type f -not -path '*/.*'
  } | sort | while IFS= read -r f; do sha256 "$f"; done
}

if [ "${1:-}" = "--inputs" ]; then
  inputs
  exit 0
fi

BUBBLE_WASM_FEATURES=sim bindings-wasm/build.sh

pkg=www/pkg
rm -rf "$pkg"
mkdir -p "$pkg"
# What the page loads: the bindings, the wasm, any wasm-bindgen snippets, and
# the worker's host and storage beside them (not the TypeScript declarations).
(cd bindings-wasm/pkg && find . -type f -not -name '*.d.ts' -not -name 'package.json') \
  | while IFS= read -r f; do mkdir -p "$pkg/$(dirname "$f")" && cp "bindings-wasm/pkg/$f" "$pkg/$f"; done
cp bindings-wasm/worker/host.mjs "$pkg/host.mjs"
cp bindings-wasm/worker/storage.mjs "$pkg/storage.mjs"
{
  echo "# Written by scripts/build-page-pkg.sh; checked by tests/tests/page_pkg.rs."
  echo "# The sources www/pkg was built from: sha256 of each, sorted by path."
  inputs
  echo "# The package built from them."
  find "$pkg" -type f -not -name INPUTS.sha256 | sort | while IFS= read -r f; do sha256 "$f"; done
} > "$pkg/INPUTS.sha256"
echo "www/pkg rebuilt; commit it with the sources it was built from"
