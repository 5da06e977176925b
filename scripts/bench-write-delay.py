#!/usr/bin/env python3
"""What Bubble's write delay (`--write-delay-ms`) buys at the fixed rates.

Runs ROUNDS rounds (default 3). Each round measures the fan-out's fixed
steps (20k, 40k and 100k deliveries/s, no quota) of channels without a
delay and with each delay of DELAYS, threads on the memory store without
one and with 20 ms, then nchan and the floor, each started fresh. Prints
every run's line as `bubble-bench` printed it (with its steps' p50
after it), then, per server and rate, the median over the rounds of its
CPU per delivery, of its p50 and p99, and of its reading divided by
nchan's and by `floor-write`'s of the same round.
The same text goes to bench/results/write-delay.txt.

Usage: scripts/bench-write-delay.py [ROUNDS] [DELAYS, e.g. 5,10,20,40]
"""

import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "target", "release", "bubble-bench")


def runs(delays):
    """The `bubble-bench` invocations of one round, in order."""
    out = [["fanout"]]
    out += [["fanout", "--write-delay-ms", str(d)] for d in delays]
    out += [["fanout-threads"], ["fanout-threads", "--write-delay-ms", "20"]]
    out += [["fanout-nchan"], ["fanout-floor"]]
    return out


def fixed_steps(record):
    """{server: [(rate in k/s, us, p99, p50), ...]} of every run in a record."""
    found = {}

    def walk(node):
        if isinstance(node, dict):
            if "server" in node and "fixed" in node:
                found[node["server"]] = [
                    (s["target_rate"] / 1000, s["us_per_item"], s["p99_ms"], s["p50_ms"])
                    for s in node["fixed"]
                ]
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(record)
    return found


def measure(args):
    """Runs one scenario; returns {server: steps} from the record it wrote, and its lines."""
    with tempfile.TemporaryDirectory() as results:
        cmd = [BENCH, *args, "--fixed-only", "--results", results]
        done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
        (path,) = glob.glob(os.path.join(results, "*.json"))
        with open(path, encoding="utf-8") as f:
            found = fixed_steps(json.load(f)[-1])
    lines = []
    for line in done.stdout.splitlines():
        if not line.startswith("fanout "):
            continue
        server = line[len("fanout ") :].split(":")[0]
        p50s = " / ".join(f"{step[3]:.2f}" for step in found[server])
        lines.append(f"{line} · p50 {p50s} ms")
    return found, lines


def summary(rounds):
    """Medians over the rounds, per server and rate."""
    out = []
    for server in rounds[0]:
        per_rate = []
        for i, (rate, _, _, _) in enumerate(rounds[0][server]):
            us = statistics.median(r[server][i][1] for r in rounds)
            p99 = statistics.median(r[server][i][2] for r in rounds)
            p50 = statistics.median(r[server][i][3] for r in rounds)
            vs = {
                peer: statistics.median(r[server][i][1] / r[peer][i][1] for r in rounds)
                for peer in ("nchan", "floor-write")
            }
            per_rate.append(
                f"{rate:g}k/s {us:.2f} us p50 {p50:.2f} ms p99 {p99:.2f} ms "
                f"(x{vs['nchan']:.2f} nchan, x{vs['floor-write']:.2f} floor-write)"
            )
        out.append(f"{server}: " + "; ".join(per_rate))
    return out


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    delays = [int(d) for d in (sys.argv[2] if len(sys.argv) > 2 else "5,10,20,40").split(",")]
    rounds, text = [], []
    for k in range(1, count + 1):
        text.append(f"== round {k}")
        print(text[-1], flush=True)
        found = {}
        for args in runs(delays):
            servers, lines = measure(args)
            found.update(servers)
            for line in lines:
                print(line, flush=True)
            text += lines
        rounds.append(found)
    medians = [f"== medians over {count} rounds", *summary(rounds)]
    print("\n".join(medians))
    text += medians
    path = os.path.join(ROOT, "bench", "results", "write-delay.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(text) + "\n")


if __name__ == "__main__":
    main()
