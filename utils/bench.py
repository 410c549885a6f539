"""`attn bench`: measure the course's performance budgets on this machine and print the figures."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from . import notebooks as nbs

NOTEBOOK_BUDGET_S = 30.0
CHECK_BUDGET_S = 20.0
#: Notebook 08 trains its translator while it executes (COURSE.md: 3 min), and its checks decode with a model.
BUDGETS_S = {"08_transformer_translator": (180.0, 30.0)}
#: Cells of notebook 08 whose printed figures the benchmark repeats: training, BLEU, beam vs greedy, and the
#: cache (cached = uncached, then the speed-up by output length 8-128 for batches of 1 and 32, best of 3).
TRANSLATOR_CELLS = ("train", "train_verdict", "beam_compare", "cache_timing")
LOOP_BUDGET_S = 30.0
#: `attn check` with the engine warm (a test session, a learner's lab: the zygote started, 08's corpus made), every
#: notebook, 08 included.
WARM_CHECK_BUDGET_S = 2.0
COURSE_BUDGET_S = 600.0  # the whole course executed once (what nbval does, kernel starts included)


#: What `machine()`'s reference work took on one core of the machine that measures README's figures (2026-11-27: a
#: 2-core AMD EPYC virtual machine, one hardware thread per core, PyTorch 2.13's AVX-512 kernels; its AVX2 kernels
#: take as long there): a machine that takes N times as long runs `make test`, whose processes compute on both cores
#: nearly all along, about N times as long.
REFERENCE_S = {"python": 0.33, "torch": 0.19}


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _cpu_timed(fn, repeat: int = 3) -> float:
    """The least CPU time of this thread that `fn()` took in `repeat` runs (CPU time: another process's load on the
    machine does not count, another thread on the same core does)."""
    fn()  # warm: first calls load and allocate
    best = float("inf")
    for _ in range(repeat):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best


def _torch_work() -> None:
    """Small attention-sized tensor work, as the notebooks and their grading do it: matmuls, softmax, exp."""
    import torch

    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(16, 128, 64, generator=g), torch.randn(64, 64, generator=g)
    for _ in range(200):
        scores = (x @ w) @ x.transpose(1, 2) / 8.0
        torch.softmax(scores, dim=-1).exp().sum()


def machine() -> list[str]:
    """What this machine is, as the figures depend on it: its CPU and cores, whether two of its cores are one core's
    two hardware threads, the vector instructions PyTorch's kernels use, and how long one core takes for reference
    work compared with the machine that measured README's figures."""
    import platform

    import torch

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    siblings = Path("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list")
    try:
        text = siblings.read_text().strip()
        per_core = sum(int(b) - int(a) + 1 if "-" in part else 1
                       for part in text.split(",") for a, _, b in [part.partition("-")])
    except (OSError, ValueError):
        per_core = None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        took = {"python": _cpu_timed(lambda: sum(i * i for i in range(10_000_000))), "torch": _cpu_timed(_torch_work)}
    finally:
        torch.set_num_threads(threads)
    ratios = ", ".join(f"{name} {took[name]:.2f} s ({took[name] / REFERENCE_S[name]:.2f}x)" for name in took)
    return [
        f"machine: {model}, {os.cpu_count()} cores"
        + (f" ({per_core} hardware threads per physical core)" if per_core and per_core > 1 else "")
        + f"; Python {sys.version.split()[0]}, PyTorch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}"
        + f" kernels{', MKL' if torch.backends.mkl.is_available() else ''})",
        f"one core, reference work (times the machine that measured README's figures took): {ratios}",
    ]


def run(assignments: list[str]) -> int:
    """Execute each solution notebook in a fresh kernel and time `attn check` on it; 1 if a budget is missed."""
    for line in machine():
        print(line)
    from .engine.checking import Engine

    print(f"{'notebook':<36}{'execute (s)':>12}{'budget':>8}{'attn check (s)':>16}{'budget':>8}"
          f"{'warm (s)':>10}{'budget':>8}")
    missed = 0
    total = 0.0
    measured: dict[str, tuple[float, float, float]] = {}
    engine = Engine(one_learner=True)  # what a test session or a learner's lab keeps warm
    for assignment in assignments:
        path = nbs.solution_path(assignment)
        nb = nbs.read(path)
        t_exec = _timed(lambda: nbs.execute(nb, cwd=path.parent, quiet=True))
        t_check = _timed(
            lambda: subprocess.run(
                [sys.executable, "-m", "utils.cli", "check", str(path), "--json"],
                cwd=nbs.ROOT, check=True, capture_output=True,
            )
        )
        engine.check(path)  # the engine's first notebook starts its zygote
        t_warm = _timed(lambda: engine.check(path))
        total += t_exec
        measured[assignment] = (t_exec, t_check, t_warm)
        budget_exec, budget_check = BUDGETS_S.get(assignment, (NOTEBOOK_BUDGET_S, CHECK_BUDGET_S))
        budget_warm = WARM_CHECK_BUDGET_S
        ok = t_exec <= budget_exec and t_check <= budget_check and t_warm <= budget_warm
        missed += not ok
        flag = "" if ok else "  OVER BUDGET"
        print(f"{assignment:<36}{t_exec:>12.1f}{budget_exec:>8.0f}{t_check:>16.1f}{budget_check:>8.0f}"
              f"{t_warm:>10.1f}{budget_warm:>8.0f}{flag}")
        if assignment == "08_transformer_translator":
            for line in translator_figures(nb):
                print(f"    {line}")
    ok = total <= COURSE_BUDGET_S
    missed += not ok
    print(f"{'all notebooks executed once':<36}{total:>12.1f}{COURSE_BUDGET_S:>8.0f}" + ("" if ok else "  OVER BUDGET"))
    engine.close()
    if set(assignments) == set(nbs.assignments()):
        _record_notebook_figures(measured)
    missed += not endless_loop(assignments[0])
    return 1 if missed else 0


def _record_notebook_figures(measured: dict[str, tuple[float, float, float]]) -> None:
    """The table of measured figures (utils/figures.py) from a bench of every notebook."""
    from . import figures

    def each(i: int, digits: int) -> str:
        return ", ".join(f"{a[:2]} {t[i]:.{digits}f} s" for a, t in measured.items())

    figures.record("execute", what="each solution executed top to bottom", value=each(0, 0), by="`attn bench`")
    figures.record("check-cold", what="`attn check` on one solution, cold (a fresh `attn check` command)",
                   value=each(1, 1), by="`attn bench`")
    figures.record("check-warm", what="`attn check` on one solution, engine warm (as from JupyterLab or a test "
                   "session)", value=each(2, 1), by="`attn bench`")


def translator_figures(nb) -> list[str]:
    """What notebook 08 printed about its training (steps, time, BLEU), beam vs greedy and the cache's speed-up."""
    lines = []
    for cell in nbs.code_cells(nb):
        if nbs.nbgrader_meta(cell).get("grade_id") in TRANSLATOR_CELLS:
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stdout":
                    lines += [line for line in out["text"].splitlines() if line.strip()]
    return lines


def endless_loop(assignment: str) -> bool:
    """Time `attn check` on the solution with an endless loop planted in its second exercise; within budget?"""
    import tempfile

    nb = nbs.read(nbs.solution_path(assignment))
    answers = [c for c in nb.cells if nbs.is_answer_cell(c)]
    victim = answers[min(1, len(answers) - 1)]
    victim.source = victim.source.replace("### BEGIN SOLUTION", "### BEGIN SOLUTION\n    while True:\n        pass", 1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{assignment}.ipynb"
        nbs.write(nb, path)
        t = _timed(lambda: subprocess.run([sys.executable, "-m", "utils.cli", "check", str(path), "--json"],
                                          cwd=nbs.ROOT, check=True, capture_output=True))
    ok = t <= LOOP_BUDGET_S
    name = nbs.nbgrader_meta(victim)["grade_id"]
    print(f"attn check on {assignment} with an endless loop in {name}: {t:.1f} s (budget {LOOP_BUDGET_S:.0f} s)"
          + ("" if ok else "  OVER BUDGET"))
    from . import figures

    figures.record("check-loop", what="`attn check` with an endless loop in one answer", by="`attn bench`",
                   value=f"{t:.1f} s (the exercise's time limit, then the rest)")
    return ok


#: Submissions per minute `attn autograde` must reach on 2 cores (issue: a class of 200 x 8 graded in minutes).
AUTOGRADE_BUDGET_PER_MIN = 20.0
#: The classes `attn bench --autograde` grades: (notebook, submissions).
CLASSES = (("02_scaled_dot_product_attention", 40), ("08_transformer_translator", 20))


def make_class(course: Path, assignment: str, n: int) -> list[str]:
    """A course folder with `n` finished submissions of `assignment` in submitted/ (each with a note cell of its own,
    so no two are alike) and nbgrader's gradebook ready; returns the student ids."""
    import shutil

    import nbformat

    shutil.copytree(nbs.solution_path(assignment).parent, course / "solutions" / assignment)
    shutil.copy(nbs.ROOT / "nbgrader_config.py", course)
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", assignment, "--force"], cwd=course,
                   check=True, capture_output=True, env=nbs.kernel_env())
    finished = nbs.read(nbs.solution_path(assignment))
    students = [f"s{i:03d}" for i in range(n)]
    for student in students:
        nb = nbformat.from_dict(finished)
        nb.cells.append(nbformat.v4.new_code_cell(f"note = 'handed in by {student}'"))
        nbs.write(nb, course / "submitted" / student / assignment / f"{assignment}.ipynb")
    return students


def autograde_figures(jobs: int = 2) -> bool:
    """Time `attn autograde` on each class of CLASSES in a scratch course folder; within budget?"""
    import tempfile

    from .engine.autograde import grade_class

    ok = True
    here = os.getcwd()
    for assignment, n in CLASSES:
        with tempfile.TemporaryDirectory(prefix="attn-class-") as tmp:
            course = Path(tmp)
            make_class(course, assignment, n)
            os.chdir(course)
            try:
                summary = grade_class(assignment, jobs=jobs, progress=False)
            finally:
                os.chdir(here)
        fine = summary["per minute"] >= AUTOGRADE_BUDGET_PER_MIN and not summary["failed"]
        ok &= fine
        print(f"attn autograde {assignment} --jobs {jobs}: {n} submissions in {summary['seconds']:.1f} s "
              f"(pool {summary['pool seconds']:.1f} s), {summary['per minute']:.1f} a minute "
              f"(budget {AUTOGRADE_BUDGET_PER_MIN:.0f}); {summary['graded ahead']} graded by the pool, "
              f"{summary['graded again']} again" + ("" if fine else "  OVER BUDGET"))
        from . import figures

        figures.record(f"autograde-{assignment[:2]}", by="`attn bench --autograde`",
                       what=f"`attn autograde {assignment} --jobs {jobs}`, {n} submissions",
                       value=f"{summary['seconds']:.1f} s: {summary['per minute']:.0f} a minute")
    return ok
