#!/usr/bin/env python3
"""What one commit's sync costs on a file system: `fsync` against `fdatasync`.

Each round overwrites 8 KiB of a preallocated file (as a commit writes WAL
frames over a WAL that a checkpoint restarted), syncs it, and rests 2 ms (a
server committing at rest). Prints the mean time of write and sync and the
CPU the process used per round, for each call, alternating them.

Usage: scripts/bench-sync.py DIR [ROUNDS]
"""

import os
import resource
import sys
import time

PAUSE_S = 0.002
FRAME = b"y" * 8192


def measure(path, sync, rounds):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.pwrite(fd, b"x" * 8192 * 32, 0)
        os.fsync(fd)
        before = resource.getrusage(resource.RUSAGE_SELF)
        busy = 0.0
        for i in range(rounds):
            start = time.perf_counter()
            os.pwrite(fd, FRAME, (i % 32) * 8192)
            sync(fd)
            busy += time.perf_counter() - start
            time.sleep(PAUSE_S)
        after = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        os.close(fd)
        os.unlink(path)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return busy / rounds * 1e6, cpu / rounds * 1e6


def main():
    directory = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    path = os.path.join(directory, f"bench-sync-{os.getpid()}")
    for _ in range(2):
        for name in ("fsync", "fdatasync"):
            wall, cpu = measure(path, getattr(os, name), rounds)
            print(f"{name:9s} {directory}: write+sync {wall:6.0f} us, cpu {cpu:5.0f} us per round")


if __name__ == "__main__":
    main()
