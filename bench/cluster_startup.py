"""Benchmark: how long the local control plane takes to build (cold) and to start (warm).

Prints the cold build time of the binaries when this run had to build them (or the
one recorded when they were built), then starts and stops the control plane RUNS
times in a scratch state folder and prints the start-to-ready times and their median.
Run by hand or with `make bench`; it asserts nothing.

    .venv/bin/python bench/cluster_startup.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from humanwork_dev import cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    bin_dir = cluster.binaries(build=False)
    cached = all((bin_dir / b).exists() for b in ("kube-apiserver", "etcd", "kwok", "kubectl"))
    if cached:
        recorded = bin_dir.parent / "build-seconds"
        note = f"{recorded.read_text().strip()}s (recorded)" if recorded.exists() else "unknown"
        print(f"cold build: binaries cached in {bin_dir}; cold build took {note}")
    else:
        t0 = time.monotonic()
        subprocess.run([str(cluster.BUILD_SCRIPT)], check=True, stdout=subprocess.DEVNULL)
        print(f"cold build: {time.monotonic() - t0:.1f}s")

    times: list[float] = []
    phase_runs: dict[str, list[float]] = {}
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="hw-bench-") as tmp:
            state = Path(tmp) / "cluster"
            t0 = time.monotonic()
            info = cluster.up(state)
            elapsed = time.monotonic() - t0
            cluster.down(state)
        times.append(elapsed)
        for phase, at in info.phases.items():
            phase_runs.setdefault(phase, []).append(at)
        print(
            f"warm start {i + 1}/{args.runs}: {elapsed:.2f}s to ready (node Ready, controllers up)"
        )
    print(
        f"warm start-to-ready: median {statistics.median(times):.2f}s, "
        f"min {min(times):.2f}s, max {max(times):.2f}s over {len(times)} runs"
    )
    for phase, ats in phase_runs.items():
        print(f"  {phase:>15} ready at median {statistics.median(ats):.2f}s after start")


if __name__ == "__main__":
    main()
