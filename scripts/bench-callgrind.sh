#!/usr/bin/env bash
# Counts Bubble's user-space instructions per delivery under callgrind
# (valgrind): a count, not a time, so other load on the machine does not
# inflate it (it only changes how the server's work is batched into turns,
# which moves the figures by a few percent between runs), and user space
# alone (the kernel's share is the same for every server). Runs the fixed-rate step of `fanout-vs-nchan --fixed-only
# --paired-rounds 0` at a
# low rate (valgrind runs the server ~50× slower) with every `bubble` under
# callgrind, twice: a short step and a long one. The difference between the
# two runs is the cost of the extra deliveries alone (connection set-up,
# subscriptions and start-up cancel out), split by component.
# Usage: scripts/bench-callgrind.sh [RATE]   (default 3000 deliveries/s;
# BUBBLE=path measures another `bubble` binary, e.g. an older build;
# KEEP=DIR keeps the callgrind outputs there, for callgrind_annotate).
# HTTP is the request's way through hyper and the handler, less the engine's
# work that a request fed to the engine on its own task (`driver::here`,
# the server on one core) does within it.
# nginx + nchan, which the same run starts twice (`nchan`, `nchan-again`),
# runs under callgrind too, so its worker's count gives the peer's figure
# for the same deliveries, and each Bubble server's count over it is the
# user-space ratio counted rather than sampled (a cross-check of the paired
# profiles' time-based one; an instruction is not a unit of time, so the
# two differ by how well each server's code runs on the CPU).
# Writes bench/results/callgrind-fanout.txt (REPORT=path: elsewhere).
set -euo pipefail
cd "$(dirname "$0")/.."
rate=${1:-3000}
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
command -v jq >/dev/null || { echo "jq is not installed (apt-get install jq)" >&2; exit 1; }
target=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p bubble-server -p bubble-bench
bubble=${BUBBLE:-$(pwd)/$target/release/bubble}
nginx=$(command -v nginx) || { echo "nginx is not installed (scripts/setup.sh)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Inclusive instructions of a function in `file`: the largest of the lines
# naming it (callgrind lists a function once per file its code comes from).
incl() {
  grep -E "^ *[0-9,]+ \([ 0-9.]+%\)  [^ ]*:$2( |$)" "$1" |
    awk 'BEGIN { m = 0 } { gsub(",", "", $1); if ($1 + 0 > m) m = $1 + 0 } END { print m }'
}
# Instructions of the calls from function $3 to function $2, in the
# caller tree `file` (0 when the callee was inlined there).
from() {
  awk -v callee="$2" -v caller="$3" '
    /^$/ { n = 0; next }
    / < / { v[++n] = $0; next }
    / \*  / && index($0, ":" callee " [") {
      for (i = 1; i <= n; i++) if (index(v[i], ":" caller " (")) {
        split(v[i], f, " "); gsub(",", "", f[1]); s += f[1] } }
    END { print s + 0 }' "$1"
}

# Waits for valgrind to finish writing the counts of `file` (it writes
# them at the process's exit, which can take a while on a busy machine).
finished() {
  for _ in $(seq 120); do
    grep -q '^totals:' "$1" && return 0
    sleep 1
  done
  echo "callgrind did not finish $1" >&2
  exit 1
}

# One run with steps of $1 seconds: a line per Bubble server, in run order:
# deliveries total engine queue http.
measure() {
  local dir=$work/run-$1
  mkdir -p "$dir"
  # The generator stops a server with SIGTERM and kills it 5 s later;
  # callgrind needs longer to write its counts on a busy machine, so the
  # wrapper passes the SIGTERM on and a kill leaves valgrind running.
  cat >"$dir/bubble" <<WRAP
#!/bin/sh
valgrind --tool=callgrind --callgrind-out-file=$dir/callgrind.out.%p $bubble "\$@" &
child=\$!
trap 'kill -TERM \$child' TERM INT
wait \$child
wait \$child
WRAP
  chmod +x "$dir/bubble"
  # nginx found first on the PATH is nginx under callgrind; its master
  # forks the worker, whose counts go to a file of its own, in a directory
  # the worker can write to once it dropped root's privileges. Each master
  # notes its process id, in start order; valgrind's log of each process
  # names its parent, so a master's worker is found by that.
  mkdir -p "$dir/path" "$dir/nchan"
  chmod o+x "$work" "$dir"
  chmod 1777 "$dir/nchan"
  cat >"$dir/path/nginx" <<WRAP
#!/bin/sh
echo \$\$ >>$dir/nchan/masters
exec valgrind --tool=callgrind --log-file=$dir/nchan/log.%p --callgrind-out-file=$dir/nchan/nchan.out.%p $nginx "\$@"
WRAP
  chmod +x "$dir/path/nginx"
  PATH="$dir/path:$PATH" "$target/release/bubble-bench" fanout-vs-nchan --fixed-only --paired-rounds 0 --bubble "$dir/bubble" \
    --common-rate "$rate" --step-secs "$1" --results "$dir" >"$dir/bench.log" 2>&1 ||
    { cat "$dir/bench.log" >&2; exit 1; }
  # Deliveries of each server, in run order, as its subscribers counted
  # them: Bubble's servers, then nginx's.
  jq -r '.[-1].runs[] | "\(.server) \([.fixed[].completed] | add)"' \
    "$dir/fanout-vs-nchan.json" >"$dir/runs.txt"
  awk '$1 ~ /^bubble-/ { print $2 }' "$dir/runs.txt" >"$dir/deliveries.txt"
  awk '$1 ~ /^nchan/ { print $2 }' "$dir/runs.txt" >"$dir/nchan-deliveries.txt"
  # Each server's counts, once valgrind finished writing them, in the order
  # the servers were started (their scratch directories are numbered).
  local outs=() out
  for out in "$dir"/callgrind.out.*; do
    finished "$out"
    outs+=("$(grep -m1 '^cmd:' "$out" | sed -E 's/.*-bubble-([0-9]+)\/.*/\1/') $out")
  done
  local i=0
  for out in $(printf '%s\n' "${outs[@]}" | sort -n | cut -d' ' -f2); do
    i=$((i + 1))
    callgrind_annotate --inclusive=yes "$out" >"$dir/inclusive.txt" 2>/dev/null
    callgrind_annotate --tree=caller "$out" >"$dir/callers.txt" 2>/dev/null
    local f=$dir/inclusive.txt d=bubble_server::driver::Driver
    echo "$(sed -n "${i}p" "$dir/deliveries.txt")" \
      "$(grep -m1 "PROGRAM TOTALS" "$f" | awk '{gsub(",","",$1); print $1}')" \
      "$(( $(incl "$f" 'bubble_core::engine::Engine::handle') + $(incl "$f" 'bubble_core::engine::Engine::poll_output') ))" \
      "$(( $(incl "$f" "$d::queue") + $(incl "$f" "$d::queue_all") - $(from "$dir/callers.txt" "$d::queue" "$d::queue_all") + $(incl "$f" "$d::flush_sockets") ))" \
      "$(( $(incl "$f" 'bubble_server::http::serve::\{\{closure\}\}') - $(incl "$f" 'bubble_server::driver::here') + $(incl "$f" '<hyper::proto::h1::role::Server as hyper::proto::h1::Http1Transaction>::parse') ))"
  done
  # nchan: per nginx, in start order, its worker's total.
  local totals=() master worker
  while read -r master; do
    # (`|| true`: no match must reach the message below, not end the script.)
    worker=$(grep -l "Parent PID: $master\$" "$dir"/nchan/log.* | sed 's/.*log\.//' || true)
    [ -n "$worker" ] || { echo "no worker of nginx $master under callgrind" >&2; exit 1; }
    finished "$dir/nchan/nchan.out.$worker"
    totals+=("$(grep -m1 '^totals:' "$dir/nchan/nchan.out.$worker" | awk '{print $2}')")
  done <"$dir/nchan/masters"
  [ "${#totals[@]}" -eq 2 ] || { echo "expected 2 nginx under callgrind, got ${#totals[@]}" >&2; exit 1; }
  paste -d' ' "$dir/nchan-deliveries.txt" <(printf '%s\n' "${totals[@]}") >"$work/nchan-$1.txt"
}

measure 5 >"$work/short.txt"
measure 25 >"$work/long.txt"
if [ -n "${KEEP:-}" ]; then
  mkdir -p "$KEEP"
  cp -r "$work"/run-* "$KEEP"/
fi
report=${REPORT:-bench/results/callgrind-fanout.txt}
# nchan's instructions per delivery: each nginx's, then their mean.
nchan_each=$(paste -d' ' "$work/nchan-5.txt" "$work/nchan-25.txt" | awk '{ printf "%d %.0f\n", $3 - $1, ($4 - $2) / ($3 - $1) }')
nchan_mean=$(echo "$nchan_each" | awk '{ s += $2 } END { printf "%.0f", s / NR }')
{
  echo "# callgrind: user-space instructions per delivery at $rate deliveries/s"
  echo "# (scripts/bench-callgrind.sh $rate; $(date -u +%FT%TZ); $bubble)"
  echo "# the 25 s step's count less the 5 s step's, over the deliveries between them"
  paste -d' ' "$work/short.txt" "$work/long.txt" | awk -v nchan="$nchan_mean" '
    BEGIN { split("bubble-pubb bubble-threads-memory bubble-threads-sqlite", name, " ") }
    { d = $6 - $1
      printf "%-22s %7d deliveries: %5.0f instructions each (%.2f of nchan\x27s) = engine %4.0f + queue and send %4.0f + HTTP %4.0f + rest (runtime, sockets, allocation) %4.0f\n",
        name[NR], d, ($7 - $2) / d, (($7 - $2) / d) / nchan, ($8 - $3) / d, ($9 - $4) / d, ($10 - $5) / d,
        (($7 - $2) - ($8 - $3) - ($9 - $4) - ($10 - $5)) / d }'
  echo "$nchan_each" | awk '{ printf "%-22s %7d deliveries: %5.0f instructions each (its nginx worker)\n", NR == 1 ? "nchan" : "nchan-again", $1, $2 }'
  echo "nchan, the mean of the two: $nchan_mean instructions per delivery"
} | tee "$report"
