#!/usr/bin/env python3
"""The figures of one `fanout-vs-nchan` run, from its record.

Prints what BENCHMARKS.md quotes of a run: the paired ratios the run
printed (median over the rounds, lowest and highest, rounds counted), each
server's median, the paired ratios runs before AI did not print (the floor
over nchan, SQLite over memory; computed from the readings), the servers one by one with their crossgen
readings and maxima, and the steal and validity checks.

Only records whose paired readings say whether they were sustained (run
AD and later) are read; older ones have other fields.

Usage: scripts/bench-summary.py [INDEX] [FILE]
  INDEX: which record of the file (default -1, the last one)
  FILE:  default bench/results/fanout-vs-nchan.json
"""

import json
import statistics
import sys
from pathlib import Path

RATES = (20000.0, 40000.0, 100000.0)
# Pairs the runs before AI did not print: (server, over); computed here from
# the readings when the record's summary lacks them.
EXTRA_PAIRS = (
    ("floor-write", "nchan"),
    ("floor-writev", "nchan"),
    ("bubble-threads-sqlite", "bubble-threads-memory"),
)


def spread(values):
    """Median (lowest-highest; count) of `values`, or `none`."""
    if not values:
        return "none"
    return (f"{statistics.median(values):.2f} "
            f"({min(values):.2f}-{max(values):.2f}; {len(values)})")


def paired(record):
    summary = record["paired"]["summary"]
    print("== paired ratios, as the run printed them")
    for r in sorted(summary["ratios"], key=lambda r: (r["server"], r["vs"], r["rate"])):
        print(f"{r['server']:24} over {r['vs']:20} {r['rate'] / 1000:5.0f}k/s: "
              f"{r['median']:.2f} ({r['low']:.2f}-{r['high']:.2f}; {r['rounds']})")
    print("== medians over the rounds, us per delivery (sustained/readings)")
    medians = {}
    for m in summary["medians"]:
        medians.setdefault(m["server"], []).append(
            f"{m['us_per_item']:.2f} ({m['sustained']}/{m['readings']})")
    for server, values in medians.items():
        print(f"{server:24} " + " · ".join(values))
    sustained = {
        (x["server"], x["round"], x["rate"]): x["us_per_item"]
        for x in record["paired"]["readings"] if x["sustainable"]
    }
    printed = {(r["server"], r["vs"]) for r in summary["ratios"]}
    missing = [pair for pair in EXTRA_PAIRS if pair not in printed]
    if not missing:
        return
    print("== paired ratios the run did not print (rounds where both sustained)")
    rounds = range(1, record["paired"]["rounds"] + 1)
    for server, over in missing:
        cells = []
        for rate in RATES:
            ratios = [
                sustained[(server, n, rate)] / sustained[(over, n, rate)]
                for n in rounds
                if (server, n, rate) in sustained and (over, n, rate) in sustained
            ]
            cells.append(spread(ratios))
        print(f"{server} over {over}: " + " · ".join(cells))


def one_by_one(record):
    print("== one by one: us per delivery · p99 at each fixed rate | maxima | crossgen")
    for run in record["runs"]:
        fixed = " | ".join(
            f"{s['us_per_item']:.2f} · {s['p99_ms']:.2f} ms"
            + ("" if s["sustainable"] else " (not sustained)")
            for s in run["fixed"])
        maxima = " · ".join(
            f"{s['max_deliveries'] / 1000:.1f}k ({s['publishers']})" for s in run["searches"])
        cross = " ".join(
            f"{c['us_per_delivery_schedstat']:.2f}" + ("" if c["valid"] else " (invalid)")
            for c in run.get("crosscheck") or [])
        print(f"{run['server']:24} {fixed} | max {maxima} | crossgen {cross or '-'}")


def checks(record):
    steps = [s for run in record["runs"]
             for s in run["fixed"] + [t for search in run["searches"] for t in search["steps"]]]
    readings = [x["record"] for x in record["paired"]["readings"]]
    own = [r for r in readings if "server_core_steal" in r]
    steal = max((r.get("server_core_steal", 0.0) for r in steps + own), default=0.0)
    invalid = sum(1 for r in steps + own if not r["valid"])
    cross = [c for run in record["runs"] for c in run.get("crosscheck") or []]
    cross += [r for r in readings if "us_per_delivery_schedstat" in r]
    print(f"== checks: steal on the server's core at most {steal:.3f} cores; "
          f"{invalid} invalid bubble-bench steps of {len(steps) + len(own)}; "
          f"crossgen used at most {max((c['gen_cores'] for c in cross), default=0.0):.2f} of its core, "
          f"{sum(1 for c in cross if not c['valid'])} invalid of {len(cross)}")


def main():
    index = int(sys.argv[1]) if len(sys.argv) > 1 else -1
    default = Path(__file__).resolve().parent.parent / "bench/results/fanout-vs-nchan.json"
    path = Path(sys.argv[2]) if len(sys.argv) > 2 else default
    record = json.loads(path.read_text())[index]
    machine = record["machine"]
    print(f"# {path} record {index}: {machine['cpu']}, {machine['cpus']} CPUs, "
          f"Linux {machine['kernel']}, unix time {record['unix_time']}")
    readings = record.get("paired", {}).get("readings", [])
    if not readings or not all("sustainable" in x for x in readings):
        sys.exit(f"record {index} predates run AD: no paired readings marked sustained")
    paired(record)
    one_by_one(record)
    checks(record)


if __name__ == "__main__":
    main()
