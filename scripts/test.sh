#!/usr/bin/env bash
# Runs every test of the project, installing what the tests need first.
# Usage: scripts/test.sh
#
# Everything native is compiled once, by one cargo invocation with one
# feature set (the workspace with bubble-core/contract, bubble-core/sim and
# bubble-wasm/sim), and every later step reuses those binaries: the
# black-box tests and the JavaScript tests run the `bubble` binary it built
# (BUBBLE_BIN), the bench smoke its `bubble-bench`. The wasm module is built
# once too (bindings-wasm/build.sh), checked for host imports, and used by
# the JavaScript tests.
#
# Four other builds remain, each because a test needs what the debug build
# is not (decided so; removing one would weaken its test):
# - the fuzz targets (scripts/fuzz.sh): libFuzzer needs coverage
#   instrumentation, and config_file needs the server crate in that build;
# - the wasm-bindgen tests (scripts/test-js.sh): core and the bindings for
#   wasm32 in the test profile with the simulator (`sim`), which the shipped
#   package (release-wasm, size-optimized, no simulator) is not; the
#   JavaScript tests run the shipped build, not a test build;
# - the README's run command on a fresh clone (tests/js/readme-run.test.mjs):
#   `cargo run --release` as the README writes it, in its own target dir
#   (<target>/readme-run) that later runs reuse, so only the first run
#   compiles the dependencies;
# - clippy on fuzz/ (a check build of its own workspace, sharing the main
#   target dir's checked dependencies).
set -euo pipefail
cd "$(dirname "$0")/.."

# The run must leave the tree as it found it: a generated file that a step
# rewrites (a lock file, a built package) is committed stale otherwise.
tree_state() {
  git status --porcelain=v1 --untracked-files=all
  git diff HEAD --binary | sha256sum
}
tree_before=""
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  tree_before="$(tree_state)"
fi

scripts/setup.sh

echo "== format and lints"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --features bubble-core/contract,bubble-core/sim,bubble-wasm/sim -- -D warnings
# fuzz/ is a workspace of its own (cargo-fuzz's layout): the same checks,
# in the main target dir, so that the dependencies both share are checked
# once.
(cd fuzz && cargo fmt -- --check \
  && CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$(cd .. && pwd)/target}" \
    cargo clippy --all-targets --features host -- -D warnings)

echo "== build once: every native binary and test binary"
cargo test --workspace --features bubble-core/contract,bubble-core/sim,bubble-wasm/sim --no-run
export BUBBLE_BIN="$(pwd)/${CARGO_TARGET_DIR:-target}/debug/bubble"
test -x "$BUBBLE_BIN"

echo "== core builds for wasm32 with no host imports"
scripts/check-wasm-core.sh

echo "== Rust tests (unit, contract, property, black-box)"
cargo test --workspace --features bubble-core/contract,bubble-core/sim,bubble-wasm/sim

echo "== fuzz targets, ${FUZZ_SECS:-30}s each"
scripts/fuzz.sh

for extra in scripts/test-js.sh scripts/bench-smoke.sh; do
  if [ -x "$extra" ]; then
    echo "== $extra"
    "$extra"
  fi
done

if [ -n "$tree_before" ]; then
  echo "== the run left the tree as it found it"
  if [ "$(tree_state)" != "$tree_before" ]; then
    echo "the test run changed files in the repository:" >&2
    diff <(echo "$tree_before") <(tree_state) >&2 || true
    exit 1
  fi
fi
