#!/usr/bin/env bash
# Smoke run of every benchmark scenario (bubble-bench --smoke): a few seconds
# each, tiny loads, no figure checked. It proves the load generator, the
# nchan side and the scenarios still work against the current server. The
# cluster scenario needs PostgreSQL and Redis (those of the cluster tests:
# BUBBLE_TEST_POSTGRES, BUBBLE_TEST_REDIS, scripts/setup-services.sh) and
# fails when they do not answer.
# Debug builds, with the test command's feature set, so the binaries it has
# built already are the ones run here.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build -q --workspace --features bubble-core/contract,bubble-core/sim,bubble-wasm/sim --bins
results="$(mktemp -d)"
trap 'rm -rf "$results"' EXIT
timeout 600 "${CARGO_TARGET_DIR:-target}/debug/bubble-bench" all --smoke --results "$results" \
  --postgres "${BUBBLE_TEST_POSTGRES:-postgres://postgres:postgres@127.0.0.1:5432/test}" \
  --redis "${BUBBLE_TEST_REDIS:-redis://127.0.0.1:6379}"
# Bubble with a write delay, as scripts/bench-write-delay.py starts it.
timeout 120 "${CARGO_TARGET_DIR:-target}/debug/bubble-bench" fanout --smoke --fixed-only \
  --write-delay-ms 5 --results "$results"
grep -q '"bubble_write_delay_ms": 5' "$results/fanout.json" \
  || { echo "fanout.json does not record the write delay" >&2; exit 1; }
for f in fanout-vs-nchan thread-fanout appends catchup idle fanout-with-history cluster fanout-pusher; do
  test -s "$results/$f.json" || { echo "missing result file $f.json" >&2; exit 1; }
done
echo "bench smoke: every scenario ran"
