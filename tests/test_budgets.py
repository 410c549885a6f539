"""One submission's processes share one budget, so that no submission can slow another's grading (issue 32).

The grader measures what a submission's processes spend together (`utils.engine.sandbox.Zygote.usage`): its limits are
CPU seconds, not the wall clock that another submission's load stretches; processes that compute beside the worker
(a fork bomb) stop that submission's grading at once, with every process it started; their memory counts together;
and as root each zygote's workers run as a user id of their own, so the process limit is per submission.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from utils import notebooks as nbs
from utils.engine import sandbox
from utils.engine.remote import RemoteObject, Worker, WorkerLost
from utils.engine.sandbox import Zygote, isolation

pytestmark = pytest.mark.slow  # processes that fork, spin and fill memory: not for the maintainer's quick loop
LEARNER = '''
import os, time

def work(n):
    total = 0
    for i in range(n):
        total += i * i
    return total

def bomb(n):
    for _ in range(n):
        if os.fork() == 0:
            os.setsid()  # a session, and so a share of the CPU, of its own
            while True:
                pass
    return n

def hoard(n, mb):
    for _ in range(n):
        if os.fork() == 0:
            block = bytearray(mb * 2**20)  # zeroed: every page touched
            time.sleep(3600)
    return n

def fork_until_refused():
    made = 0
    while True:
        try:
            pid = os.fork()
        except OSError:
            return made
        if pid == 0:
            time.sleep(3600)
        made += 1

def whoami():
    return os.getuid()
'''


def _worker(zygote: Zygote) -> Worker:
    w = Worker(zygote)
    reply, _ = w.exchange({"op": "run_cell", "source": LEARNER, "name": "learner"}, None, None)
    assert reply["ok"], reply
    return w


def call(w: Worker, name: str, *args):
    return RemoteObject(w, {"global": name})(*args)


@pytest.fixture
def zygote():
    z = Zygote(nbs.ROOT, [])
    yield z
    z.close()


def left_running(zygote: Zygote, wait_s: float = 5.0) -> int:
    """How many of the workers' processes are still there once the ones just killed are gone (up to `wait_s`)."""
    end = time.monotonic() + wait_s
    while True:
        usage = zygote.usage()
        assert usage is not None
        if usage.processes == 0 or time.monotonic() > end:
            return usage.processes
        time.sleep(0.05)


def _needs_isolation() -> None:
    if isolation() is not None:
        pytest.skip(f"needs isolated workers: {isolation()}")


def test_each_zygote_runs_its_workers_as_a_user_of_its_own(zygote):
    if os.geteuid() != 0:
        pytest.skip("as root only: in a user namespace the process limit is counted per namespace")
    _needs_isolation()
    other = Zygote(nbs.ROOT, [])
    try:
        uids = {call(_worker(z), "whoami") for z in (zygote, other)}
    finally:
        other.close()
    assert len(uids) == 2 and all(uid >= sandbox.WORKER_UIDS[0] for uid in uids), uids


def test_a_submission_can_start_only_its_own_count_of_processes(zygote):
    _needs_isolation()
    w = _worker(zygote)
    w.deadline = w.budget(30)
    made = call(w, "fork_until_refused")
    assert 0 < made < sandbox.PROCESSES, made
    # Beside it, another submission's worker still starts, and starts processes of its own.
    other = Zygote(nbs.ROOT, [])
    try:
        assert call(_worker(other), "bomb", 0) == 0
        neighbour = _worker(other)
        neighbour.deadline = neighbour.budget(10)
        assert call(neighbour, "work", 1000) == sum(i * i for i in range(1000))
    finally:
        other.close()
    w.kill()
    assert left_running(zygote) == 0  # the worker and its 200-odd children are all gone


def test_processes_that_compute_beside_the_worker_stop_it_and_end_with_it(zygote):
    w = _worker(zygote)
    w.deadline = w.budget(10)
    assert call(w, "bomb", 16) == 16  # it returns at once; its 16 processes go on spinning
    started = time.monotonic()
    with pytest.raises(WorkerLost, match="^stray$"):
        call(w, "work", 10**9)
    took = time.monotonic() - started
    # STRAY_CPU_S of their CPU time: well before the 10 s the worker itself may spend, and the 30 on the clock.
    assert took < 10, took
    assert left_running(zygote) == 0


def test_the_processes_of_a_submission_are_held_to_one_memory_limit(zygote, monkeypatch):
    monkeypatch.setattr(sandbox, "MEMORY_MB", 1024)  # what the grader compares with (each process may hold 6 GB)
    w = _worker(zygote)
    w.deadline = w.budget(10)
    assert call(w, "hoard", 4, 400) == 4  # 1.6 GB together, no process over 400 MB; they sleep: no CPU time to speak of
    with pytest.raises(WorkerLost, match="^stray$"):
        call(w, "work", 10**8)  # the worker's own next call: its processes are measured while the grader waits
    assert left_running(zygote) == 0


def test_limits_are_cpu_time_so_a_loaded_machine_costs_nobody_points(zygote):
    """The same work, timed first on a quiet machine and then beside a busy loop on every core (each in a session
    of its own, as another submission's fork bomb would be): the wall clock stretches past the limit, the CPU time
    does not, and the work is not stopped."""
    w = _worker(zygote)
    w.deadline = w.budget(60)
    n = 200_000
    started = time.monotonic()
    call(w, "work", n)
    quiet = time.monotonic() - started
    n = int(n * 0.5 / max(quiet, 1e-3))  # about half a second of CPU time here
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(4 * (os.cpu_count() or 1))]
    try:
        time.sleep(0.5)
        w.deadline = budget = w.budget(1.0)
        started = time.monotonic()
        assert call(w, "work", n) == sum(i * i for i in range(n))
        loaded = time.monotonic() - started
    finally:
        for proc in busy:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    cpu, _ = budget.used()
    assert cpu < 1.0 < loaded, (cpu, loaded)  # stopped by the wall clock alone, it would have lost its points


def test_a_class_graded_beside_a_fork_bomb_keeps_its_scores(tmp_path):
    """`attn autograde 02 --jobs 2`: one submission starts 64 spinning processes, each in a session of its own (so
    each takes a share of the CPU), and keeps its worker busy for a minute; three honest ones are graded beside it
    by the pool's other process. Each honest one scores full marks; the bomb's grading stops, with the reason."""
    if isolation() is not None:
        pytest.skip(f"needs isolated workers: {isolation()}")
    from nbgrader.api import Gradebook

    from utils.bench import make_class

    assignment = "02_scaled_dot_product_attention"
    course = tmp_path / "course"
    students = make_class(course, assignment, 4)
    path = course / "submitted" / students[0] / assignment / f"{assignment}.ipynb"
    nb = nbs.read(path)
    answers = [c for c in nb.cells if nbs.is_answer_cell(c)]
    answers[0].source += ("\nimport os\nfor _i in range(64):\n    if os.fork() == 0:\n        os.setsid()\n"
                          "        while True:\n            pass\n")
    for cell in answers[1:]:
        cell.source += "\nimport time\ntime.sleep(9)\n"  # a cell under its limit: the spinners would live on
    nbs.write(nb, path)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "utils.cli", "autograde", assignment, "--jobs", "2"], cwd=course,
                          capture_output=True, text=True, timeout=600)
    took = time.monotonic() - started
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: (gb.find_submission(assignment, s).score, gb.find_submission(assignment, s).max_score)
                  for s in students}
    assert all(score == full > 0 for score, full in (scores[s] for s in students[1:])), scores
    assert scores[students[0]][0] == 0, scores
    graded = (course / "autograded" / students[0] / assignment / f"{assignment}.ipynb").read_text()
    assert "a fork bomb?" in graded  # the reason, in the bomb's own feedback
    assert took < 120, took  # the bomb's grading stopped, not waited out (9 s a cell and 64 spinners otherwise)
    print(f"class of three beside a fork bomb: {scores} in {took:.1f} s")
