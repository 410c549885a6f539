"""Where the test suite's CPU goes: run it with $ATTN_CPU_PROFILE=FILE, then `python tests/cpu_profile.py FILE`.

`make test`'s budget (README) is wall time on two cores. A machine whose two cores are one physical core's two
hardware threads, or whose cores are slower, has less CPU to spend: the suite's total CPU seconds, printed here, are
the wall time it needs on one core. The tests and the files that spend the most are listed first.

That profile sees a test's own process and the children it waited for, not the processes that outlive a test: the
notebooks' kernels, the graders' zygotes and workers, browsers, Jupyter servers. `python tests/cpu_profile.py --sample
-- make test` runs the command and reads every process's CPU time from /proc once a second (Linux), then prints the
CPU of each kind of process and how busy the machine was: on 2026-11-27, 1,418 of 1,640 CPU-seconds of a 13 min 40 s
`make test`, kernels 332, grading workers 277, the test processes 197, `attn` commands 168, Chromium 141.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict


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


#: Kinds of process, by a piece of their command line (the first that matches names it).
KINDS = [("notebook kernels", "ipykernel"), ("grading workers", "utils.engine.sandbox"), ("browsers", "chrom"),
         ("nbval", "--nbval"), ("test processes", "exec(eval(sys.stdin.readline()))"), ("nbgrader", "nbgrader"),
         ("spinning processes", "while True: pass"), ("Jupyter servers and the hub", "jupyter"),
         ("the hub's proxy, node", "node"), ("attn commands", "utils.cli"), ("attn commands", "bin/attn"),
         ("pytest", "pytest")]


def kind(command: str) -> str:
    return next((name for name, piece in KINDS if piece in command), "other: " + os.path.basename(command.split(" ")[0]))


def _processes() -> dict[tuple[int, str], tuple[float, str]]:
    """{(pid, start time): (CPU seconds so far, command line)} of every process /proc shows."""
    tick, found = os.sysconf("SC_CLK_TCK"), {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = open(f"/proc/{pid}/stat").read()
            command = open(f"/proc/{pid}/cmdline").read().replace("\0", " ").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        found[(int(pid), fields[19])] = ((int(fields[11]) + int(fields[12])) / tick,
                                         command or stat[stat.index("(") + 1:stat.rindex(")")])
    return found


def sample(command: list[str], every_s: float = 1.0) -> tuple[Counter, float]:
    """Run `command`; return the CPU seconds each kind of process spent while it ran, and its wall seconds. What a
    process spent in its last `every_s` before it ended is not seen (short commands are undercounted)."""
    seen, spent = _processes(), Counter()
    started = time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        time.sleep(every_s)
        now = _processes()
        for key, (cpu, cmd) in now.items():
            spent[kind(cmd)] += cpu - seen[key][0] if key in seen else cpu
        seen = now
    return spent, time.monotonic() - started


def main_sample(command: list[str]) -> int:
    spent, wall = sample(command)
    cores = len(os.sched_getaffinity(0))
    total = sum(spent.values())
    print(f"\n{' '.join(command)}: {wall:.0f} s on {cores} cores ({wall * cores:.0f} CPU-seconds to spend), "
          f"{total:.0f} CPU-seconds seen ({total / (wall * cores):.0%} busy), every process on the machine counted")
    for name, cpu in spent.most_common():
        if cpu >= 0.5:
            print(f"  {cpu:8.1f} s  {name}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--sample"]:
        sys.exit(main_sample(sys.argv[3:] if sys.argv[2:3] == ["--"] else sys.argv[2:]))
    main(*sys.argv[1:2])
