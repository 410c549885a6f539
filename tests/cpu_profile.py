"""Where the test suite's CPU goes: run it with $ATTN_CPU_PROFILE=FILE, then `python tests/cpu_profile.py FILE`.

`make test`'s budget (README) is wall time on two cores. A machine whose two cores are one physical core's two
hardware threads, or whose cores are slower, has less CPU to spend: the suite's total CPU seconds, printed here, are
the wall time it needs on one core. The tests and the files that spend the most are listed first.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def main(path: str, top: int = 25) -> None:
    rows = [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]
    cpu, wall = sum(r["cpu"] for r in rows), sum(r["wall"] for r in rows)
    print(f"{len(rows)} tests: {cpu / 60:.1f} CPU-minutes, {wall / 60:.1f} minutes of test time "
          f"(CPU {cpu / wall:.0%} of it); on one core the suite needs at least {cpu / 60:.1f} minutes")
    print(f"\nthe {top} tests that spend the most CPU:")
    for r in sorted(rows, key=lambda r: -r["cpu"])[:top]:
        print(f"  {r['cpu']:7.1f} s CPU {r['wall']:7.1f} s wall  {r['test']}")
    files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for r in rows:
        f = files[r["test"].split("::")[0]]
        f[0], f[1], f[2] = f[0] + r["cpu"], f[1] + r["wall"], f[2] + 1
    print("\nby file:")
    for name, (c, w, n) in sorted(files.items(), key=lambda kv: -kv[1][0]):
        print(f"  {c:7.1f} s CPU {w:7.1f} s wall  {n:4d} tests  {name}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
