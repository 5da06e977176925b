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
REPORT_ONLY=1 writes the report again from the kept profiles, without
profiling.
"""

import os
import re
import statistics
import subprocess
import sys
from typing import NamedTuple

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
# The profile's own header: `# (scripts/bench-profile.sh WHO RATE SECS; DATE; KERNEL)`.
HEADER = re.compile(r"^# \(scripts/bench-profile\.sh [^;]*; ([^;]*); ([^)]*)\)$", re.M)
COMPONENT = re.compile(r"^\s*([0-9.]+)%\s+(.+)$")


class Profile(NamedTuple):
    """One kept profile's figures."""

    total: float
    """µs of CPU per delivery."""
    user: float
    """µs of user space per delivery."""
    components: dict
    """Bubble's user space by component, µs per delivery (none for nchan)."""
    date: str
    kernel: str


def read(path):
    """The figures of the kept profile at `path`."""
    with open(path, encoding="utf-8") as report:
        text = report.read()
    match = PER_DELIVERY.search(text)
    header = HEADER.search(text)
    if not match or not header:
        sys.exit(f"no CPU per delivery in {path}")
    total, user = float(match.group(1)), float(match.group(2))
    components = {}
    _, _, by_component = text.partition("by component")
    for line in by_component.splitlines():
        share = COMPONENT.match(line)
        if share:
            components[share.group(2)] = float(share.group(1)) * total / 100
    return Profile(total, user, components, header.group(1), header.group(2))


def profile(root, who, rate, secs, path):
    """Profiles `who` into `path` (scripts/bench-profile.sh)."""
    subprocess.run(
        [os.path.join(root, "scripts/bench-profile.sh"), who, str(rate), str(secs)],
        check=True,
        env=dict(os.environ, OUT=path),
        stdout=subprocess.DEVNULL,
    )


def spread(values, digits=2):
    """The median of `values` and, in brackets, the lowest and highest."""
    return (
        f"{statistics.median(values):.{digits}f} "
        f"({min(values):.{digits}f}–{max(values):.{digits}f})"
    )


def round_line(r, order, readings):
    """Round `r`'s figures, each of Bubble's against nchan's."""
    nchan = readings["nchan"][r]
    cells = [f"nchan {nchan.total:.2f} µs (user {nchan.user:.2f})"]
    for who in SERVERS[1:]:
        p = readings[who][r]
        cells.append(
            f"{LABELS[who]} {p.total:.2f} (user {p.user:.2f}: "
            f"{p.user / nchan.user:.2f}× nchan's; total {p.total / nchan.total:.2f}×)"
        )
    return f"round {r + 1} ({' → '.join(order)}): " + " · ".join(cells)


def summary(readings):
    """The medians over the rounds, as a table, then Bubble's components."""
    nchan = readings["nchan"]
    rows = [
        "| server | total µs per delivery | user space µs | user space / nchan's | total / nchan's |",
        "|---|---|---|---|---|",
    ]
    for who in SERVERS:
        totals = [p.total for p in readings[who]]
        users = [p.user for p in readings[who]]
        if who == "nchan":
            rows.append(f"| nchan | {spread(totals)} | {spread(users)} | | |")
            continue
        user_ratios = [p.user / n.user for p, n in zip(readings[who], nchan)]
        total_ratios = [p.total / n.total for p, n in zip(readings[who], nchan)]
        rows.append(
            f"| {LABELS[who]} | {spread(totals)} | {spread(users)} | "
            f"{spread(user_ratios)} | {spread(total_ratios)} |"
        )
    rows += ["", "## Bubble's user space by component (µs per delivery, median over the rounds)"]
    for who in SERVERS[1:]:
        names = sorted({name for p in readings[who] for name in p.components})
        medians = {n: [p.components.get(n, 0.0) for p in readings[who]] for n in names}
        ranked = sorted(names, key=lambda n: -statistics.median(medians[n]))
        rows.append(
            f"{LABELS[who]}: "
            + " · ".join(f"{n} {spread(medians[n], 3)}" for n in ranked)
        )
    return rows


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    rate = int(sys.argv[2]) if len(sys.argv) > 2 else 40000
    secs = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(root)
    out = os.environ.get("OUT", f"bench/results/profile-paired-{rate}.txt")
    keep = f"bench/results/profile-paired-{rate}"
    os.makedirs(keep, exist_ok=True)
    readings = {who: [] for who in SERVERS}
    lines = []
    for r in range(rounds):
        order = SERVERS[r % len(SERVERS):] + SERVERS[:r % len(SERVERS)]
        for who in order:
            path = f"{keep}/{who}-round{r + 1}.txt"
            if not os.environ.get("REPORT_ONLY"):
                profile(root, who, rate, secs, path)
            readings[who].append(read(path))
        lines.append(round_line(r, order, readings))
        print(lines[-1], flush=True)
    first = readings[SERVERS[0]][0]
    rows = summary(readings)
    with open(out, "w", encoding="utf-8") as report:
        report.write(
            f"# paired profiles (perf record -e cpu-clock -g) at {rate} deliveries/s, "
            f"{rounds} rounds of {secs} s recordings, the order rotating\n"
            f"# (scripts/bench-profile-paired.py {rounds} {rate} {secs}; {first.date}; "
            f"{first.kernel}; each profile under {keep}/)\n\n"
        )
        report.write("\n".join(lines) + "\n\n")
        report.write(
            "## Medians over the rounds (lowest–highest); ratios are of the same round\n"
        )
        report.write("\n".join(rows) + "\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
