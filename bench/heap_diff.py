"""What grew between two tracemalloc snapshots of `bench/heap_hook` (never part of the product).

    python bench/heap_diff.py /tmp/heap/1.snap /tmp/heap/9.snap [--top 25] [--frames 8]

Prints the allocation sites (grouped by traceback) whose live memory grew the most from
the first snapshot to the second, with the change in bytes and in blocks, and the totals.
"""

from __future__ import annotations

import argparse
import tracemalloc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--by", default="traceback", choices=("traceback", "lineno", "filename"))
    args = parser.parse_args()
    ignore = [  # the hook's own work: the snapshot, and the source lines its report reads
        tracemalloc.Filter(False, tracemalloc.__file__, all_frames=True),
        tracemalloc.Filter(False, "*/linecache.py", all_frames=True),
        tracemalloc.Filter(False, "*/heap_hook/sitecustomize.py", all_frames=True),
    ]
    before = tracemalloc.Snapshot.load(args.before).filter_traces(ignore)
    after = tracemalloc.Snapshot.load(args.after).filter_traces(ignore)
    total_before = sum(s.size for s in before.statistics("filename"))
    total_after = sum(s.size for s in after.statistics("filename"))
    print(
        f"traced {total_before / 2**20:.2f} -> {total_after / 2**20:.2f} MiB "
        f"({(total_after - total_before) / 2**20:+.2f})\n"
    )
    for diff in after.compare_to(before, args.by)[: args.top]:
        print(f"{diff.size_diff / 1024:+10.1f} KiB {diff.count_diff:+8d} blocks "
              f"(now {diff.size / 1024:.1f} KiB, {diff.count} blocks)")  # fmt: skip
        for line in diff.traceback.format()[-2 * args.frames :]:
            print(f"    {line}")


if __name__ == "__main__":
    main()
