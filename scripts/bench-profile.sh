#!/usr/bin/env bash
# Profiles one fan-out server at a fixed rate with perf and writes its CPU
# per delivery and where it goes (kernel against user space, the top
# symbols, and Bubble's share by component) to
# bench/results/profile-<server>-<rate>.txt.
# Usage: scripts/bench-profile.sh bubble|threads|threads-sqlite|nchan|floor [DELIVERIES_PER_S] [SECONDS]
# (bubble: channels; threads, threads-sqlite: the same fan-out as thread appends;
# KEEP=path keeps the perf recording there, for perf report and perf annotate;
# OUT=path writes the report there instead; BUBBLE=path profiles that
# bubble binary instead of this workspace's release build)
set -euo pipefail
cd "$(dirname "$0")/.."
who=${1:?bubble, threads, threads-sqlite, nchan or floor}
rate=${2:-40000}
secs=${3:-10}
# What to sample (the generator's servers only: other processes of the
# same name on the machine are left alone).
case "$who" in
  bubble) scenario=fanout; pattern='bubble serve' ;;
  threads) scenario=fanout-threads; pattern='bubble serve' ;;
  threads-sqlite) scenario=fanout-threads-sqlite; pattern='bubble serve' ;;
  nchan) scenario=fanout-nchan; pattern='nginx: worker' ;;
  floor) scenario=fanout-floor; pattern='bubble-floor' ;;
  *) echo "unknown server $who" >&2; exit 2 ;;
esac
command -v perf >/dev/null || { echo "perf is not installed (apt-get install linux-perf)" >&2; exit 1; }
target=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p bubble-server -p bubble-bench
out=${OUT:-bench/results/profile-$who-$rate.txt}
data=$(mktemp -d)/perf.data
# One fixed step long enough to sample inside it, after connecting and warming up.
"$target/release/bubble-bench" "$scenario" --common-rate "$rate" --step-secs $((secs + 20)) \
  ${BUBBLE:+--bubble "$BUBBLE"} --results "$(dirname "$data")" >/dev/null 2>&1 &
bench=$!
# Every process the generator started, and theirs (nginx's workers).
descendants() {
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}
started=
# The generator is killed, so it cannot stop its servers itself: they are
# stopped by their ids.
stop() {
  [ -n "$bench" ] || return 0
  started="$started $(descendants $bench)"
  kill $bench 2>/dev/null || true
  wait $bench 2>/dev/null || true
  for p in $started; do kill "$p" 2>/dev/null || true; done
  bench=
}
trap 'stop; rm -rf "$(dirname "$data")"' EXIT
sleep 12
started=$(descendants $bench)
pid=
for p in $started; do
  if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "$pattern"; then
    pid=$p
    break
  fi
done
[ -n "$pid" ] || { echo "no $who process found" >&2; exit 1; }
perf record -q -e cpu-clock -g -p "$pid" -o "$data" -- sleep "$secs" 2>/dev/null
stop
if [ -n "${KEEP:-}" ]; then
  cp "$data" "$KEEP"
fi
by_dso=$(perf report -i "$data" --no-children --sort dso -g none 2>/dev/null)
dsos=$(echo "$by_dso" | grep '%' | grep -v '^#')
syms=$(perf report -i "$data" --no-children --sort sym -g none 2>/dev/null | grep '%' | grep -v '^#')
# cpu-clock counts nanoseconds: the server's CPU over the recording, per
# delivery, and the part of it outside the kernel.
cpu_ns=$(echo "$by_dso" | sed -n 's/^# Event count (approx.): //p' | head -1)
per_delivery=$(echo "$dsos" | awk -v ns="$cpu_ns" -v rate="$rate" -v secs="$secs" '
  !/kernel.kallsyms/ { s = $1; sub("%", "", s); user += s }
  END { total = ns / 1000 / (rate * secs)
        printf "%.2f µs per delivery, of which user space %.2f %% (%.2f µs)", total, user, total * user / 100 }')
{
  echo "# perf record -e cpu-clock -g of $who at $rate deliveries/s for $secs s"
  echo "# (scripts/bench-profile.sh $who $rate $secs; $(date -u +%FT%TZ); $(uname -r))"
  echo
  echo "## CPU per delivery (the server's sampled CPU time over the recording)"
  echo "$per_delivery"
  echo
  echo "## Kernel against user space (share of the server's samples)"
  echo "$dsos" | sed -n 1,8p
  echo
  echo "## Top symbols"
  echo "$syms" | sed -n 1,40p
  if [ "$who" != nchan ] && [ "$who" != floor ]; then
    echo
    echo "## Bubble's user space by component (share of all samples)"
    echo "$syms" | grep '\[\.\]' |
      awk '{ share = $1; sub("%", "", share); name = $0
             if (name ~ /bubble_server::driver|bubble_server::ws/) c = "host: queue and write"
             else if (name ~ /bubble_core/) c = "engine"
             else if (name ~ /hyper|axum|http::|tower/) c = "HTTP publish parsing"
             else if (name ~ /tokio|mio|futures|waker/) c = "runtime: tasks and wake-ups"
             else if (name ~ /mi_|malloc|free|memmove|memcpy/) c = "allocation and copies"
             else if (name ~ /serde|json/) c = "JSON"
             else c = "other"
             sum[c] += share }
           END { for (c in sum) printf "%6.2f%%  %s\n", sum[c], c }' | sort -rn
  fi
} > "$out"
cat "$out"
