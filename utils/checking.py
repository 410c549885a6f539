"""`attn check`: grade one learner notebook with the hidden tests, the way nbgrader's autograder would."""

from __future__ import annotations

import copy
import textwrap
from pathlib import Path
from typing import Any

from nbformat import NotebookNode

from . import notebooks as nbs
from .grading import RESULT_MIME, grader_dir


def merge_with_source(learner: NotebookNode, source: NotebookNode) -> NotebookNode:
    """The learner's notebook with every locked or test cell restored from the source, as nbgrader does.

    The learner's answer cells and any cells they added are kept; test cells they deleted are put back
    at the end; outputs are cleared so nothing stale is graded.
    """
    by_id = {nbs.nbgrader_meta(c)["grade_id"]: c for c in source.cells if nbs.nbgrader_meta(c).get("grade_id")}
    merged = copy.deepcopy(learner)
    seen = set()
    for i, cell in enumerate(merged.cells):
        meta = nbs.nbgrader_meta(cell)
        grade_id = meta.get("grade_id")
        if grade_id in by_id:
            seen.add(grade_id)
            original = by_id[grade_id]
            if nbs.is_test_cell(original) or nbs.nbgrader_meta(original).get("locked"):
                merged.cells[i] = copy.deepcopy(original)
        if merged.cells[i].cell_type == "code":
            merged.cells[i].outputs = []
            merged.cells[i].execution_count = None
    for grade_id, cell in by_id.items():
        if grade_id not in seen and nbs.is_test_cell(cell):
            merged.cells.append(copy.deepcopy(cell))
    return merged


def _exercise_id(cell: NotebookNode) -> str:
    grade_id = nbs.nbgrader_meta(cell)["grade_id"]
    return grade_id[len("test_"):] if grade_id.startswith("test_") else grade_id


def collect(nb: NotebookNode) -> list[dict[str, Any]]:
    """One result per test cell of an executed notebook: nbgrader's score plus the checker's feedback."""
    from nbgrader.utils import determine_grade

    results = []
    for cell in nb.cells:
        if not nbs.is_test_cell(cell):
            continue
        score, max_score = determine_grade(cell)
        report = next((o.data[RESULT_MIME] for o in cell.outputs if RESULT_MIME in o.get("data", {})), None)
        errors = [o for o in cell.outputs if o.output_type == "error"]
        stderr = [o for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"]
        if errors:
            err = errors[0]
            feedback = f"the test cell stopped with {err.ename}: {err.evalue}"
            if err.ename == "NameError":
                feedback += " — did you rename, delete or not run the cell that defines it?"
        elif stderr:
            feedback = f"something was printed to stderr, which the autograder counts as an error: {stderr[0].text[:300]}"
        elif report is not None:
            feedback = report["feedback"]
        else:
            feedback = "the test cell finished without a result (was it edited?)"
        results.append(
            {
                "id": report["id"] if report else _exercise_id(cell),
                "score": float(score or 0.0),
                "max_score": float(max_score),
                "passed": bool(score == max_score),
                "feedback": feedback,
                "mistake": report["mistake"] if report and not errors else None,
            }
        )
    return results


def check(path: str | Path, timeout: int = 60) -> dict[str, Any]:
    """Grade the notebook at `path`; returns the JSON object that `attn check --json` prints."""
    nb_path, assignment = nbs.resolve_notebook(path)
    grader_dir()  # fail early, with advice, when the hidden tests are not available
    source = nbs.read(nbs.solution_path(assignment))
    learner = nbs.read(nb_path)
    merged = merge_with_source(learner, source)
    merged.cells = [c for c in merged.cells if nbs.SLOW_TAG not in c.metadata.get("tags", [])]
    nbs.execute(
        merged,
        cwd=nb_path.parent.resolve(),
        timeout=timeout,
        allow_errors=True,
        env={"MPLBACKEND": "agg", "ATTN_CHECK": "1"},
        quiet=True,
    )
    exercises = collect(merged)
    return {
        "notebook": str(path),
        "score": round(sum(e["score"] for e in exercises), 2),
        "max_score": float(sum(e["max_score"] for e in exercises)),
        "exercises": exercises,
    }


def render(result: dict[str, Any]) -> str:
    """A plain-text report of `check`'s result for the terminal."""
    lines = [f"{result['notebook']}: {result['score']:g} / {result['max_score']:g} points", ""]
    for ex in result["exercises"]:
        mark = "PASS" if ex["passed"] else "FAIL"
        lines.append(f"  {mark}  {ex['id']:<32} {ex['score']:>5g} / {ex['max_score']:g}")
        if not ex["passed"]:
            for line in ex["feedback"].splitlines():
                lines.append(textwrap.fill(line, width=110, initial_indent=" " * 8, subsequent_indent=" " * 10))
    return "\n".join(lines)
