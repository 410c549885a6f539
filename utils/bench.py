"""`attn bench`: measure the course's performance budgets on this machine and print the figures."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from . import notebooks as nbs

NOTEBOOK_BUDGET_S = 30.0
CHECK_BUDGET_S = 20.0
#: Notebook 08 trains its translator while it executes (COURSE.md: 3 min), and its checks decode with a model.
BUDGETS_S = {"08_transformer_translator": (180.0, 30.0)}
#: Cells of notebook 08 whose printed figures the benchmark repeats: training, BLEU, beam vs greedy, and the
#: cache (cached = uncached, then the speed-up by output length 8-128 for batches of 1 and 32, best of 3).
TRANSLATOR_CELLS = ("train", "train_verdict", "beam_compare", "cache_timing")
LOOP_BUDGET_S = 30.0
COURSE_BUDGET_S = 600.0  # the whole course executed once (what nbval does, kernel starts included)


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(assignments: list[str]) -> int:
    """Execute each solution notebook in a fresh kernel and time `attn check` on it; 1 if a budget is missed."""
    print(f"machine: {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print(f"{'notebook':<36}{'execute (s)':>12}{'budget':>8}{'attn check (s)':>16}{'budget':>8}")
    missed = 0
    total = 0.0
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
        total += t_exec
        budget_exec, budget_check = BUDGETS_S.get(assignment, (NOTEBOOK_BUDGET_S, CHECK_BUDGET_S))
        ok = t_exec <= budget_exec and t_check <= budget_check
        missed += not ok
        flag = "" if ok else "  OVER BUDGET"
        print(f"{assignment:<36}{t_exec:>12.1f}{budget_exec:>8.0f}{t_check:>16.1f}{budget_check:>8.0f}{flag}")
        if assignment == "08_transformer_translator":
            for line in translator_figures(nb):
                print(f"    {line}")
    ok = total <= COURSE_BUDGET_S
    missed += not ok
    print(f"{'all notebooks executed once':<36}{total:>12.1f}{COURSE_BUDGET_S:>8.0f}" + ("" if ok else "  OVER BUDGET"))
    missed += not endless_loop(assignments[0])
    return 1 if missed else 0


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
    from pathlib import Path

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
    return ok
