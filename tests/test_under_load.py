"""A busy machine costs nobody points (issue 33): graded while busy loops keep every core loaded, every solution
notebook, a correct answer that computes for a while, and the attacks whose grading depends on time or processes earn
exactly what they earn on a quiet machine.

The grading engine's limits are CPU time and time spent waiting, counted over the learner's processes
(`utils.engine.remote.Budget`, `utils.engine.sandbox.Zygote.usage`), so another submission's load stretches the wall
clock, not what a submission is charged. Here BUSY_PER_CORE spinning processes per core, each in a session of its own
(as another submission's fork bomb's would be; with the kernel's autogroup scheduling each session takes a share of
the CPU), load the machine while this test process's warm engine (tests/conftest.py `engine`, as `attn check` from
JupyterLab) grades. The limits are lowered to LIMIT_S, as tests/test_adversarial.py lowers them for endless loops:
the loops then cost seconds of a loaded machine, not tens, and the test is sharp. The slow answer spends half its
limit in CPU time, and loaded, takes longer than its limit on the wall clock: graded with limits on the wall clock
(the engine before issue 32, and where /proc cannot be read) or with ATTN_WALL_FACTOR=1, it loses its points and this
test fails (both tried 2026-11-27; at three spinners a core, 02's and 06's solutions lost points too).

The grading is held to one core (this process's affinity, which the zygote and its workers inherit), and the
spinners are put on that core: what the grader meets is a machine whose every core it may use is loaded, as before,
while the rest of the machine goes on with the other tests. Loading both cores of a 2-core machine, the spinners
burnt 54-80 CPU-seconds of `make test` (measured 2026-11-27; the suite is CPU-bound, so that is 27-40 s of its wall
clock); on one core they burn about 30 (the test prints it), and the slow answer and the endless loop still lose their
points when the engine's limits are on the wall clock (ATTN_WALL_FACTOR=1; tried 2026-11-27).

Cost: about 45 s of grading on the loaded core, a quiet machine's other core free.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from utils import notebooks as nbs

from .attacks import ATTACKS, FULL
from .conftest import ASSIGNMENTS, attn_check, pin_process_tree, planted_copy
from .test_adversarial import build

pytestmark = pytest.mark.slow

#: Spinning processes per core: with them, this test's processes get a third of a core or less each (measured here:
#: 3-5x their CPU time on the wall clock; with the kernel's autogroup scheduling, the zygote's session and this
#: process's each get a share like one spinner's).
BUSY_PER_CORE = 2
#: The exercise and cell limits while loaded (CPU seconds; the wall clock allows remote.WALL_FACTOR times as long).
#: Quiet, every exercise of the solutions spends under 0.7 s of CPU time in the learner's worker here.
LIMIT_S = 2.0
#: A correct answer whose cell computes for this share of LIMIT_S (CPU time): loaded, it takes longer than LIMIT_S on
#: the wall clock, and it must keep its points.
SLOW_SHARE = 0.5
#: The attacks whose grading depends on time or on processes (the rest grade the same on any machine): an endless loop
#: stopped by its limit, a fork bomb's processes beside other load, and processes left behind.
ATTACK_IDS = ("endless-loop-in-a-function", "background-processes-left-behind", "fork-bomb-in-a-function")
#: Limits other than LIMIT_S: an endless loop costs its limit (half a second of CPU time tells it as well as ten); a
#: fork bomb is stopped once its processes have spent remote.STRAY_CPU_S, which must come before its exercise's limit
#: ends (the engine's own, 10 s).
LIMITS = {"endless-loop-in-a-function": 0.5, "fork-bomb-in-a-function": None}
#: The cell of notebook 01 that computes for a while, then defines the answer as the solution does.
SLOW = {"cell": "softmax", "old": "    ### END SOLUTION", "new": (
    "    ### END SOLUTION\nimport time\n_started = time.process_time()\n"
    f"while time.process_time() - _started < {SLOW_SHARE * LIMIT_S:.3f}:  # a correct answer that computes for a while\n"
    "    pass")}


def _spin(seconds: float) -> float:
    """Spin for `seconds` of this thread's CPU time; return the wall-clock seconds it took."""
    wall, cpu = time.monotonic(), time.thread_time()
    while time.thread_time() - cpu < seconds:
        pass
    return time.monotonic() - wall


def _quiet_score(attack: dict) -> dict[str, float]:
    """The scores tests/attacks.py says the attack earns (tests/test_adversarial.py grades them quietly)."""
    if "scores" in attack:
        return dict(attack["scores"])
    assert attack["total"] in (0.0, sum(FULL.values())), attack["id"]
    return {k: (v if attack["total"] else 0.0) for k, v in FULL.items()}


def _cpu_seconds(pid: int) -> float:
    """The CPU seconds process `pid` has spent (0 if it has ended), as the grading engine reads them."""
    from utils.engine.sandbox import _stat

    stat = _stat(pid)
    return stat[0] if stat else 0.0


def _pin_zygote(cores: set[int]) -> None:
    """Hold this process's grading engine to `cores`: its zygote's processes, and so every worker it forks from now
    on."""
    from .conftest import engine

    assert pin_process_tree(engine().zygote().proc.pid, cores) >= 2, "the zygote's processes were not found"


def test_a_loaded_machine_grades_as_a_quiet_one(tmp_path, monkeypatch):
    from utils.engine import checking

    attacks = [a for a in ATTACKS if a["id"] in ATTACK_IDS]
    assert len(attacks) == len(ATTACK_IDS), {a["id"] for a in attacks} ^ set(ATTACK_IDS)
    # (what, notebook, the quiet run's scores or None for full marks, its limits or None for the engine's)
    work = [(a, nbs.solution_path(a), None, LIMIT_S) for a in ASSIGNMENTS]
    work.append(("slow but correct 01", planted_copy(ASSIGNMENTS[0], [SLOW], tmp_path / "slow"), None, LIMIT_S))
    work += [(a["id"], build(a, nbs.ROOT, tmp_path / a["id"]), _quiet_score(a), LIMITS.get(a["id"], LIMIT_S))
             for a in attacks]
    attn_check(nbs.solution_path(ASSIGNMENTS[0]))  # the engine warm before the load (as a lab or a class keeps it)
    quiet = _spin(0.2) / 0.2

    cores = os.sched_getaffinity(0)
    core = {max(cores)}
    os.sched_setaffinity(0, core)  # a zygote started from here from now on runs there too
    _pin_zygote(core)
    busy = [subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {core})\nwhile True: pass"],
                             start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
            for _ in range(BUSY_PER_CORE)]
    graded: dict[str, dict] = {}
    took: dict[str, float] = {}
    try:
        time.sleep(0.5)  # every spinner running
        stretch = _spin(0.2) / 0.2
        for name, path, _, limit in work:
            with monkeypatch.context() as patch:
                if limit is not None:
                    patch.setattr(checking, "EXERCISE_TIME_LIMIT_S", limit)
                    patch.setattr(checking, "LEARNER_CELL_TIME_LIMIT_S", limit)
                t = time.monotonic()
                graded[name] = attn_check(path)
                took[name] = time.monotonic() - t
        stretch_after = _spin(0.2) / 0.2
    finally:
        burnt = sum(_cpu_seconds(proc.pid) for proc in busy)
        for proc in busy:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.sched_setaffinity(0, cores)
        _pin_zygote(cores)
    print(f"\nloaded ({len(busy)} spinners on core {min(core)}, where the grading ran, burning {burnt:.0f} "
          f"CPU-seconds): this process's work took {stretch:.1f}x and {stretch_after:.1f}x its CPU time on the wall "
          f"clock (quiet {quiet:.1f}x); graded in {sum(took.values()):.0f} s: "
          + ", ".join(f"{name[:12]} {s:.1f} s" for name, s in took.items()))
    # The machine was loaded: what was graded here took several times its CPU time on the wall clock.
    assert min(stretch, stretch_after) > 2, (stretch, stretch_after)

    lost = {}
    for name, _, expected, _ in work:
        exercises = graded[name]["exercises"]
        got = {e["id"]: e["score"] for e in exercises}
        if got != (expected or {e["id"]: e["max_score"] for e in exercises}) or not got:
            lost[name] = [(e["id"], e["score"], e["max_score"], e["feedback"][:300]) for e in exercises
                          if e["score"] != (expected or {}).get(e["id"], e["max_score"])]
    assert not lost, f"graded on a loaded machine, scores differ from a quiet run's: {lost}"
