#!/usr/bin/env bash
# Same-run comparison of this build with another `bubble` binary (e.g. the
# previous release): each scenario runs on the other binary, then on this
# one, back to back, with the same generator. Results go to
# bench/results/compare/{other,current}/<scenario>.json.
#
# Usage: scripts/bench-compare.sh OTHER_BUBBLE [SCENARIO...]
#   (default scenarios: thread-fanout appends fanout-with-history fanout)
# Build first: cargo build --release -p bubble-server -p bubble-bench
set -euo pipefail
cd "$(dirname "$0")/.."

other=${1:?usage: scripts/bench-compare.sh OTHER_BUBBLE [SCENARIO...]}
shift
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(thread-fanout appends fanout-with-history fanout)
target=$(cd "${CARGO_TARGET_DIR:-target}/release" && pwd)
for scenario in "${scenarios[@]}"; do
  for side in other current; do
    bin=$target/bubble
    [ "$side" = other ] && bin=$other
    mkdir -p "bench/results/compare/$side"
    echo "== $scenario on $side ($bin)"
    "$target/bubble-bench" "$scenario" --bubble "$bin" --results "bench/results/compare/$side" \
      ${BENCH_ARGS:-}
  done
done
