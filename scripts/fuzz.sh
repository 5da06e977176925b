#!/usr/bin/env bash
# Runs every fuzz target (fuzz/, cargo-fuzz + libFuzzer) for a bounded time
# and fails on the first crash, panic or broken invariant.
# Usage: scripts/fuzz.sh [TARGET...]
#   FUZZ_SECS  seconds per target (default 30: six targets, three minutes of
#              the test command); the long mode is FUZZ_SECS=600 scripts/fuzz.sh
#
# Each target starts from its committed seed corpus (fuzz/seeds/TARGET) and
# grows a working corpus in a temp dir, so the seeds are never rewritten.
# A crash leaves its input in fuzz/artifacts/TARGET/; replay it with
#   cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run -s none -a --features host \
#     TARGET artifacts/TARGET/crash-…
#
# The stable toolchain builds the targets: RUSTC_BOOTSTRAP=1 lets cargo-fuzz
# pass the unstable flags it needs. The code under test forbids unsafe code,
# so no sanitizer is used (-s none): a bug shows as a panic, which libFuzzer
# catches; debug assertions (-a) turn arithmetic overflows into panics too.
#
# This is the test command's one instrumented build (fuzz/target, release
# with coverage instrumentation): libFuzzer is guided by that coverage, so
# the build cannot be the test command's debug one, and config_file parses
# with the server crate, so the server's code is in it. It is built once for
# every target and kept in fuzz/target, so a second run only relinks.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
export RUSTC_BOOTSTRAP=1

secs="${FUZZ_SECS:-30}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(ws_frames pubb_commands http_api jwt sim_steps config_file)
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Every target is built with the same features (config_file needs the
# server crate), so one build serves them all.
for target in "${targets[@]}"; do
  mkdir -p "$work/$target"
  log="$work/$target.log"
  echo "== fuzz $target for ${secs}s"
  if ! cargo fuzz run -s none -a --features host "$target" "$work/$target" "seeds/$target" \
      -- -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz $target: FAILED (input in fuzz/artifacts/$target/)" >&2
    exit 1
  fi
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  echo "fuzz $target: ${runs:-?} executions, no crash"
done
