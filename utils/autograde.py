"""nbgrader's autograder on two-process grading: each grade cell gets the score the grader computed.

`nbgrader_config.py` puts :class:`GradeInWorker` where nbgrader's `Execute` step was. No kernel runs the
submission: `utils.checking.grade` runs the learner's cells in an isolated worker and the course's test cells in
this process, exactly as `attn check` does, so both give the same scores. Only the course's grade cells keep
their nbgrader metadata; a grade cell the learner added, duplicated or renamed becomes an ordinary cell worth
nothing, and a test cell the learner deleted is put back after its answer cell.
"""

from __future__ import annotations

import copy
from typing import Any

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets import Bool
from nbformat import NotebookNode


def score_output(result: dict[str, Any], count: int) -> NotebookNode:
    """The execute_result nbgrader reads as partial credit (text/plain is the score), with the check table."""
    from .grading import RESULT_MIME, _report_html

    report = {"id": result["id"], "score": result["score"], "max_score": result["max_score"],
              "passed": result["passed"], "feedback": result["feedback"], "mistake": result["mistake"],
              "graded": True, "checks": result.get("checks", [])}
    if "lead" in result:  # verdict first in the feedback HTML too (grading._report_html)
        report["verdict"], report["lead"] = result.get("verdict"), result["lead"]
    if not report["checks"]:
        report["checks"] = [{"name": "grading", "passed": False, "hidden": False, "message": result["feedback"]}]
    data = {"text/plain": repr(float(result["score"])), "text/html": _report_html(report), RESULT_MIME: report}
    return nbformat.v4.new_output("execute_result", data=data, execution_count=count)


def annotate(nb: NotebookNode, grading: Any, source: NotebookNode) -> NotebookNode:
    """`nb` with each course test cell's output set to its grade, and nothing else graded."""
    results = {e["id"]: e for e in grading.exercises}
    tests = {s.grade_id: s for s in grading.steps if s.kind == "test"}
    answers = {s.grade_id: s for s in grading.steps if s.origin == "answer"}
    seen: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        meta = cell.metadata.get("nbgrader", {})
        gid = meta.get("grade_id")
        if meta.get("grade") and not meta.get("solution"):
            if gid in tests and gid not in seen:
                seen.add(gid)
            else:
                cell.metadata.pop("nbgrader", None)  # a grade cell the course does not have counts nothing
        elif meta.get("grade"):
            cell.metadata.pop("nbgrader", None)
        step = answers.get(gid) if meta.get("solution") else None
        if step is not None and step.status in ("error", "fatal") and step.error:
            cell.outputs = [nbformat.v4.new_output(
                "error", ename=str(step.error.get("type", "Error")), evalue=str(step.error.get("message", "")),
                traceback=[f"{step.error.get('type')}: {step.error.get('message', '')}"])]
    # Test cells the learner deleted come back after their answer cell (or at the end).
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in source.cells}
    for gid in tests:
        if gid in seen or gid not in by_id:
            continue
        restored = copy.deepcopy(by_id[gid])
        restored.outputs, restored.execution_count = [], None
        exercise = gid.removeprefix("test_")
        at = next((i + 1 for i, c in enumerate(nb.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == exercise),
                  len(nb.cells))
        nb.cells.insert(at, restored)
    count = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        count += 1
        cell.execution_count = count
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in tests and tests[gid].exercise in results:
            cell.outputs = [score_output(results[tests[gid].exercise], count)]
    return nb


class KeepCourseCells(Preprocessor):
    """Before nbgrader looks at a submission: only the course's cells keep nbgrader metadata, the course's own.

    A cell the learner re-tagged, renamed, duplicated or invented would otherwise reach nbgrader's checks with
    metadata the gradebook does not know, and nbgrader would stop grading that submission (or, for a re-tagged
    answer cell, look up a grade cell that does not exist).
    """

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        from . import notebooks as nbs

        notebook = resources["nbgrader"]["notebook"]
        if notebook not in nbs.assignments():
            return nb, resources
        source = {c.metadata["nbgrader"]["grade_id"]: c for c in nbs.read(nbs.solution_path(notebook)).cells
                  if c.metadata.get("nbgrader", {}).get("grade_id")}
        seen: set[str] = set()
        for cell in nb.cells:
            meta = cell.get("metadata", {}).get("nbgrader")
            if meta is None:
                continue
            gid = meta.get("grade_id") if isinstance(meta, dict) else None
            if gid in source and gid not in seen and cell.cell_type == source[gid].cell_type:
                seen.add(gid)
                cell.metadata["nbgrader"] = copy.deepcopy(source[gid].metadata["nbgrader"])
            else:
                del cell.metadata["nbgrader"]
        return nb, resources


class GradeInWorker(Preprocessor):
    """Grade the submission with the learner's code in a worker process; write each grade cell's score."""

    enabled = Bool(True).tag(config=True)  # nbconvert preprocessors are off unless enabled

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        from . import notebooks as nbs
        from .checking import grade

        notebook = resources["nbgrader"]["notebook"]
        if notebook not in nbs.assignments():
            raise nbs.CourseError(f"{notebook} is not one of the course's notebooks")
        source = nbs.read(nbs.solution_path(notebook))
        grading = grade(copy.deepcopy(nb), notebook)
        for note in grading.notes:
            self.log.warning("%s: %s", notebook, note)
        self.log.info("%s: %s / %s points in %.1f s", notebook, grading.score, grading.max_score, grading.seconds)
        return annotate(nb, grading, source), resources
