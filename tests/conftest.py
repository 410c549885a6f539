"""Shared fixtures: the course's notebooks, running `attn check`, and planting edits into a solution."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

# Every process of a test run computes on one thread: the suite runs two test workers on two cores, and torch's
# OpenMP threads in several processes spin against each other (03's notebook alone: 22 s; beside 02, 58 s with two
# threads each, 21 s with one). Set before torch is imported; kernels, graders and workers inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import pytest  # noqa: E402
from nbformat import NotebookNode  # noqa: E402

from utils import notebooks as nbs  # noqa: E402

ASSIGNMENTS = nbs.assignments()

# Grading runs the learner's code in a worker behind Unix sockets (utils/engine/), with POSIX resource limits: on
# Windows `attn check` says to use WSL, and the tests that grade are not collected (the workflow's Windows leg runs
# the rest of the fast tier: the checker, the diagnoses, the course's files, the translations).
collect_ignore = []
if sys.platform == "win32":
    collect_ignore = ["test_adversarial.py", "test_engine.py", "test_feedback_quality.py", "test_isolation.py",
                      "test_remote.py", "test_roundtrip.py", "test_sandbox_userns.py", "test_submission_files.py",
                      "test_hub.py", "test_stored_outputs.py", "test_i18n.py", "test_under_load.py"]


def _cpu_seconds() -> float:
    """CPU seconds of this process and of the children it has waited for (a kernel, a grading worker, a command)."""
    import resource

    return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                   resource.getrusage(resource.RUSAGE_CHILDREN)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """With $ATTN_CPU_PROFILE=FILE, each test's CPU and wall seconds are appended to FILE (JSON lines) for
    `tests/cpu_profile.py`: the suite's budget is wall time on two cores, and a machine whose two cores are one core's
    two hardware threads has about one core's CPU to spend."""
    path = os.environ.get("ATTN_CPU_PROFILE")
    if not path or sys.platform == "win32":
        yield
        return
    import time

    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    line = {"test": item.nodeid, "cpu": round(_cpu_seconds() - cpu, 3), "wall": round(time.monotonic() - wall, 3)}
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


def _whole_suite(config: pytest.Config) -> bool:
    """This run is `make test`: every test of testpaths, unfiltered, and this is not one of xdist's workers."""
    return (config.args_source == pytest.Config.ArgsSource.TESTPATHS and not config.option.keyword
            and not config.option.markexpr and not hasattr(config, "workerinput"))


def pytest_sessionstart(session: pytest.Session) -> None:
    import time

    session.config.stash[_STARTED] = time.monotonic()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A whole `make test` that passed records its length and test count for the table of measured figures
    (utils/figures.py: build/figures/, taken into docs/figures.json by `attn docs`)."""
    import time

    from utils import figures

    if exitstatus != 0 or not _whole_suite(session.config):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    stats = reporter.stats if reporter else {}
    passed, skipped = len(stats.get("passed", [])), len(stats.get("skipped", []))
    seconds = time.monotonic() - session.config.stash[_STARTED]
    figures.record("make-test", what="`make test`: the tests", by="tests/conftest.py, at the end of a whole run that passed",
                   value=f"{passed:,} tests passed ({skipped} skipped) in {figures.minutes(seconds)}")


_STARTED = pytest.StashKey[float]()


def pytest_configure(config: pytest.Config) -> None:
    # Jupyter, IPython and matplotlib write state under $HOME: keep the tests off the user's.
    home = Path(config.rootpath) / ".pytest_cache" / "home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("JUPYTER_PLATFORM_DIRS", "1")
    os.environ["MPLCONFIGDIR"] = str(home / "mpl")
    os.environ["IPYTHONDIR"] = str(home / "ipython")
    os.environ["JUPYTER_RUNTIME_DIR"] = str(home / "runtime")
    # `attn check` records each run for `attn progress` in a per-user state folder: the tests' runs go to a folder of
    # this process's own (each xdist worker makes its own), never into the user's home; removed at the end.
    import tempfile

    os.environ["ATTN_STATE_DIR"] = _STATE_DIR[0] = tempfile.mkdtemp(prefix="attn-state-")
    # pytest-xdist's loadgroup hands out its units largest group first, which would start the longest single tests
    # (LONGEST_FIRST) only after every group: keep the collection order instead (--no-loadscope-reorder).
    config.option.loadscopereorder = False


_STATE_DIR = [""]  # the temporary $ATTN_STATE_DIR of this test process (pytest_configure)


def pytest_unconfigure(config: pytest.Config) -> None:
    import shutil

    if _STATE_DIR[0]:
        shutil.rmtree(_STATE_DIR[0], ignore_errors=True)


#: Tests (and groups of tests, SHARED_FIXTURE) that take half a minute or more, longest first: started first, so that
#: two workers finish together rather than one waiting for the other's last long test (pytest-xdist hands out units
#: in collection order; pytest_configure keeps it from reordering them). Measured 2026-11-26: 08 nbval 226 s, the
#: browser 85-114 s, the hostile submission in a browser 82 s, test_cli 72 s, test_readme 76 s, test_translator 53 s;
#: 2026-11-27: grading on a loaded machine (test_under_load.py) 60 s, which slows the other worker meanwhile; the
#: class report's synthetic classes (test_report.py) 30 s.
LONGEST_FIRST = ("test_nbval.py::test_solution_notebook_passes_nbval[08", "test_browser.py", "test_browser_untrusted.py",
                 "test_site.py",
                 "test_readme.py", "test_cli.py", "test_translator.py", "test_submission_files.py",
                 "test_nbgrader_flow.py::test_generate_autograde", "test_hub.py", "test_under_load.py", "test_notebook_runs.py",
                 "test_engine.py::test_the_same", "test_sandbox_userns.py", "test_report.py", "test_nbval.py")
#: Files whose tests share an expensive module fixture (a JupyterLab, Unix users, graded plants): one worker runs them
#: all (`make test` distributes with --dist loadgroup), so the fixture is built once.
SHARED_FIXTURE = ("test_browser.py", "test_browser_untrusted.py", "test_submission_files.py", "test_feedback_quality.py",
                  "test_translator.py", "test_readme.py", "test_cli.py", "test_corpus.py", "test_remote.py",
                  "test_report.py", "test_progress.py", "test_export.py")
#: What `make test-fast` leaves out (`-m "not slow"`): notebooks executed, browsers, hubs, Unix users, nbgrader's
#: commands, attacks, and every grading round trip but notebook 01's.
SLOW = ("test_nbval.py", "test_browser", "test_hub.py", "test_submission_files.py", "test_sandbox_userns.py",
        "test_nbgrader_flow.py", "test_adversarial.py", "test_release.py", "test_feedback_quality.py",
        "test_translator.py", "test_stored_outputs.py", "test_engine.py", "test_isolation.py", "test_readme.py",
        "test_under_load.py")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which reads the xdist_group marks added here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((i for i, key in enumerate(LONGEST_FIRST) if key in item.nodeid), len(LONGEST_FIRST))

    for item in items:
        file = item.nodeid.split("::")[0].rsplit("/", 1)[-1]
        if file in SHARED_FIXTURE:
            item.add_marker(pytest.mark.xdist_group(file))
        roundtrip_elsewhere = file == "test_roundtrip.py" and ASSIGNMENTS[0] not in item.nodeid \
            and f"[{ASSIGNMENTS[0][:2]}-" not in item.nodeid
        if any(file.startswith(slow.removesuffix(".py")) for slow in SLOW) or roundtrip_elsewhere:
            item.add_marker(pytest.mark.slow)
    items.sort(key=rank)  # stable: the rest keep their order


def plants(assignment: str) -> ModuleType:
    """tests/plants_NN.py for an assignment: MISTAKES and VARIANTS to plant into its solution."""
    path = Path(__file__).parent / f"plants_{assignment[:2]}.py"
    spec = importlib.util.spec_from_file_location(f"plants_{assignment[:2]}", path)
    assert spec and spec.loader, f"missing {path}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.NOTEBOOK == assignment
    return module


def planted_copy(assignment: str, edits: list[dict], dest: Path) -> Path:
    """The solution notebook with each edit's `old` replaced by `new` in answer cell `cell`, saved under dest."""
    nb = nbs.read(nbs.solution_path(assignment))
    cells = {nbs.nbgrader_meta(c).get("grade_id"): c for c in nb.cells}
    for edit in edits:
        cell = cells[edit["cell"]]
        assert nbs.is_answer_cell(cell), f"{edit['cell']} is not an answer cell"
        count = cell.source.count(edit["old"])
        assert count == 1, f"plant {edit} must match exactly once in cell {edit['cell']}, matched {count} times"
        cell.source = cell.source.replace(edit["old"], edit["new"])
    path = dest / assignment / f"{assignment}.ipynb"
    nbs.write(nb, path)
    return path


def pin_process_tree(pid: int, cores: set[int]) -> int:
    """Hold every thread of process `pid` and of its descendants (the grading engine's own walk of them) to `cores`
    (what they start from now on inherits it); returns how many threads were pinned. The tests that load a machine
    load one core and pin the grading there, so that the rest of `make test` goes on beside them
    (tests/test_under_load.py)."""
    import contextlib

    from utils.engine.sandbox import _descendants

    pinned = 0
    for process in _descendants([pid], include_roots=True):
        for task in Path(f"/proc/{process}/task").glob("*"):
            with contextlib.suppress(OSError):  # a thread or a process that has just ended
                os.sched_setaffinity(int(task.name), cores)
                pinned += 1
    return pinned


_ENGINE = None


def engine():
    """This test process's grading engine: one warm zygote for every `attn_check` here (closed at exit)."""
    global _ENGINE
    if _ENGINE is None:
        import atexit

        from utils.engine.checking import Engine

        _ENGINE = Engine()
        atexit.register(_ENGINE.close)
    return _ENGINE


def attn_check(path: Path | str, *extra: str, env: dict[str, str] | None = None, cli: bool = False,
               only: str | None = None) -> dict:
    """What `attn check PATH --json` prints for a learner, as a dict (`only`: `--exercise NAME`).

    Graded here with this process's warm engine (the same `utils.engine.checking.check` the command calls, seconds
    faster); with extra arguments, an environment, or `cli=True`, by running the command itself: then assert it
    printed exactly one JSON object.
    """
    if not (extra or env or cli):
        result = engine().check(path, only=only).to_json()
        return json.loads(json.dumps(result))  # what --json prints: JSON, nothing else
    extra = (*extra, "--exercise", only) if only else extra
    proc = subprocess.run(  # 600 s: generous, not scaled (a cold `attn check` takes 3-6 s on a quiet machine)
        [sys.executable, "-m", "utils.cli", "check", str(path), "--json", *extra],
        capture_output=True, text=True, cwd=nbs.ROOT, env={**os.environ, **(env or {})}, timeout=600,
    )
    assert proc.returncode == 0, f"attn check failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    result = json.loads(proc.stdout)  # exactly one JSON document, nothing else on stdout
    return result


def run_scaled(cmd: list[str], quiet_s: float, *, poll_s: float = 5.0, **kwargs) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, capture_output=True, text=True, **kwargs)` with a time limit that scales with the machine's
    load, for a command that takes minutes (nbval of a notebook that trains a model): each second on the wall clock
    counts 1 / `nbs.load_factor()` (measured as it runs) against the `quiet_s` seconds the command may take on a quiet
    machine, and in all it may take at most `nbs.MAX_LOAD_FACTOR` times `quiet_s`. Past it, the command and its
    processes are killed and `subprocess.TimeoutExpired` raised, as by `subprocess.run`'s timeout."""
    import time

    import psutil

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    started = last = time.monotonic()
    spent = 0.0
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=poll_s)
                return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
            except subprocess.TimeoutExpired:
                now = time.monotonic()
                spent, last = spent + (now - last) / nbs.load_factor(), now
                if spent > quiet_s:  # load_factor() is at most nbs.MAX_LOAD_FACTOR: so is the stretch
                    break
    except BaseException:
        _kill_tree(proc, psutil)
        raise
    _kill_tree(proc, psutil)
    out, err = proc.communicate()
    raise subprocess.TimeoutExpired(cmd, time.monotonic() - started, out, err)


def _kill_tree(proc: subprocess.Popen, psutil) -> None:
    try:
        family = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        family = []
    for p in family:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    proc.kill()
    proc.wait()


def nbgrader(course: Path, *args: str, env: dict[str, str] | None = None, ok: bool = True) -> str:
    """`nbgrader ARGS` in `course` as README has it (.venv/bin/nbgrader, the environment not activated: the course's
    nbgrader_config.py finds `alembic`); assert it succeeded (or failed, `ok=False`); return what it printed."""
    env = {**os.environ, "PATH": "/usr/bin:/bin", **(env or {})}
    # 600 s: generous, not scaled (one nbgrader command takes seconds to a minute on a quiet machine)
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True,
                          env=env, timeout=600)
    out = proc.stdout + proc.stderr
    assert (proc.returncode == 0) == ok, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def fill_answers(nb: NotebookNode, assignment: str) -> NotebookNode:
    """`nb` (a student copy of `assignment`) with every answer cell holding the solution's answer."""
    solution = {nbs.nbgrader_meta(c)["grade_id"]: c for c in nbs.read(nbs.solution_path(assignment)).cells}
    for cell in filter(nbs.is_answer_cell, nb.cells):
        cell.source = solution[nbs.nbgrader_meta(cell)["grade_id"]].source
    return nb


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def by_id(result: Any) -> dict[str, dict]:
    """Each exercise of a result (`attn check --json`'s dict, or the NotebookResult it is printed from), by id."""
    result = result.to_json() if hasattr(result, "to_json") else result
    return {ex["id"]: ex for ex in result["exercises"]}


def secrets(assignment: str) -> tuple[list[str], dict]:
    """What must never reach students: hidden-test source lines, the mistake catalogue, reference tensors."""
    import re

    from utils.grading import Mistake, load_grader, load_references

    lines = []
    for cell in nbs.read(nbs.solution_path(assignment)).cells:
        hidden = re.search(r"### BEGIN HIDDEN TESTS\n(.*)### END HIDDEN TESTS", cell.source, re.S)
        if hidden:
            lines += [line.strip() for line in hidden.group(1).splitlines() if len(line.strip()) >= 12]
    grader = load_grader(assignment)
    lines += [m.explanation for m in vars(grader).values() if isinstance(m, Mistake)]
    source = Path(grader.__file__).read_text()
    lines += [line.strip() for line in source.splitlines() if "refs[" in line and len(line.strip()) >= 20]
    return lines, load_references(assignment)


def assert_no_secrets(text: str, assignment: str, where: str) -> None:
    """Fail if `text` carries hidden-test source, catalogued explanations or hidden reference values."""
    lines, refs = secrets(assignment)
    for line in lines:
        assert line not in text, f"{where} leaks hidden material: {line!r}"
    for name, tensor in refs.items():
        values = [abs(v) for v in tensor.flatten()[:64].tolist() if isinstance(v, float) and abs(v) % 1 > 1e-3]
        shown = [v for v in values if f"{v:.4f}" in text]
        assert len(shown) < max(3, len(values) // 2), f"{where} shows hidden reference values of {name}"
