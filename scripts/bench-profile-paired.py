#!/usr/bin/env python3
"""Paired profiles: nchan and Bubble's fan-out servers profiled in turn.

One profile (scripts/bench-profile.sh) of a server says how its CPU per
delivery splits between the kernel and user space, but two profiles taken
minutes apart move by up to a third on these machines (the host's load
drifts). So the servers are profiled one after the other, round after
round, the order rotating each round, and each of Bubble's figures is
divided by nchan's of the same round; the report gives every round and the
median of the rounds' ratios.

Usage: scripts/bench-profile-paired.py [ROUNDS] [RATE] [SECONDS]
(default 5 rounds at 40000 deliveries/s, 10 s recordings). Writes
bench/results/profile-paired-<RATE>.txt (OUT=path: elsewhere); each
round's profiles are kept under bench/results/profile-paired-<RATE>/.
"""

import datetime
import os
import platform
import re
import statistics
import subprocess
import sys

SERVERS = ["nchan", "bubble", "threads", "threads-sqlite"]
LABELS = {
    "nchan": "nchan",
    "bubble": "channels",
    "threads": "threads on memory",
    "threads-sqlite": "threads on SQLite",
}
PER_DELIVERY = re.compile(
    r"([0-9.]+) µs per delivery, of which user space [0-9.]+ % \(([0-9.]+) µs\)"
)


def profile(root, who, rate, secs, path):
    """Total and user-space µs per delivery of one profile of `who`."""
    env = dict(os.environ, OUT=path)
    subprocess.run(
        [os.path.join(root, "scripts/bench-profile.sh"), who, str(rate), str(secs)],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    with open(path, encoding="utf-8") as report:
        match = PER_DELIVERY.search(report.read())
    if not match:
        sys.exit(f"no CPU per delivery in {path}")
    return float(match.group(1)), float(match.group(2))


def spread(values):
    """The median of `values` and, in brackets, the lowest and highest."""
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rate = int(sys.argv[2]) if len(sys.argv) > 2 else 40000
    secs = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    out = os.environ.get("OUT", f"bench/results/profile-paired-{rate}.txt")
    keep = f"bench/results/profile-paired-{rate}"
    os.makedirs(keep, exist_ok=True)
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%FT%TZ")
    readings = {who: [] for who in SERVERS}
    lines = []
    for r in range(rounds):
        order = SERVERS[r % len(SERVERS):] + SERVERS[:r % len(SERVERS)]
        for who in order:
            path = f"{keep}/{who}-round{r + 1}.txt"
            readings[who].append(profile(root, who, rate, secs, path))
        nchan_total, nchan_user = readings["nchan"][r]
        cells = [f"nchan {nchan_total:.2f} µs (user {nchan_user:.2f})"]
        for who in SERVERS[1:]:
            total, user = readings[who][r]
            cells.append(
                f"{LABELS[who]} {total:.2f} (user {user:.2f}: "
                f"{user / nchan_user:.2f}× nchan's; total {total / nchan_total:.2f}×)"
            )
        lines.append(f"round {r + 1} ({' → '.join(order)}): " + " · ".join(cells))
        print(lines[-1], flush=True)
    nchan = readings["nchan"]
    summary = [
        "| server | total µs per delivery | user space µs | user space / nchan's | total / nchan's |",
        "|---|---|---|---|---|",
    ]
    for who in SERVERS:
        totals = [t for t, _ in readings[who]]
        users = [u for _, u in readings[who]]
        if who == "nchan":
            summary.append(f"| nchan | {spread(totals)} | {spread(users)} | | |")
            continue
        user_ratios = [u / n for (_, u), (_, n) in zip(readings[who], nchan)]
        total_ratios = [t / n for (t, _), (n, _) in zip(readings[who], nchan)]
        summary.append(
            f"| {LABELS[who]} | {spread(totals)} | {spread(users)} | "
            f"{spread(user_ratios)} | {spread(total_ratios)} |"
        )
    with open(out, "w", encoding="utf-8") as report:
        report.write(
            f"# paired profiles (perf record -e cpu-clock -g) at {rate} deliveries/s, "
            f"{rounds} rounds of {secs} s recordings, the order rotating\n"
            f"# (scripts/bench-profile-paired.py {rounds} {rate} {secs}; {started}; "
            f"{platform.release()}; each profile under {keep}/)\n\n"
        )
        report.write("\n".join(lines) + "\n\n")
        report.write(
            "## Medians over the rounds (lowest–highest); ratios are of the same round\n"
        )
        report.write("\n".join(summary) + "\n")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
