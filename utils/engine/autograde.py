"""nbgrader's autograder on two-process grading: each grade cell gets the score the grader computed.

`nbgrader_config.py` puts :class:`GradeInWorker` where nbgrader's `Execute` step was. No kernel runs the
submission: `utils.engine.checking.grade` runs the learner's cells in an isolated worker and the course's test cells in
this process, exactly as `attn check` does, so both give the same scores. Only the course's grade cells keep
their nbgrader metadata; a grade cell the learner added, duplicated or renamed becomes an ordinary cell worth
nothing, and a test cell the learner deleted is put back after its answer cell.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.preprocessors import Preprocessor
from nbformat import NotebookNode
from traitlets import Bool

from ..i18n import _, speaking
from ..results import ExerciseResult, say


def score_output(result: ExerciseResult, count: int) -> NotebookNode:
    """The execute_result nbgrader reads as partial credit (text/plain is the score), with the check table, in the
    language now spoken."""
    from ..grading import RESULT_MIME, report_html

    report = {**result.report(), "graded": True}
    if not report["checks"]:  # the engine stopped it before any check: its reason in the one row
        report["checks"] = [{"name": _("grading"), "passed": False, "hidden": False, "message": report["feedback"]}]
    data = {"text/plain": repr(float(result.score)), "text/html": report_html(report), RESULT_MIME: report}
    return nbformat.v4.new_output("execute_result", data=data, execution_count=count)


def annotate(nb: NotebookNode, grading: Any, source: NotebookNode) -> NotebookNode:
    """`nb` with each course test cell's output set to its grade (in the notebook's language), and nothing else
    graded."""
    with speaking(grading.lang):
        return _annotate(nb, grading, source)


def _annotate(nb: NotebookNode, grading: Any, source: NotebookNode) -> NotebookNode:
    from .. import notebooks as nbs

    results = {e.id: e for e in grading.exercises}
    tests = {s.grade_id: s for s in grading.steps if s.kind == "test"}
    answers = {s.grade_id: s for s in grading.steps if s.origin == "answer"}
    matched = nbs.course_cells(source, nb)
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        course_cell = matched.get(index)
        gid = nbs.nbgrader_meta(course_cell).get("grade_id") if course_cell is not None else None
        if gid in tests:
            seen.add(gid)
        elif cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata.pop("nbgrader", None)  # a grade cell the course does not have counts nothing
        step = answers.get(gid) if course_cell is not None and nbs.is_answer_cell(course_cell) else None
        if step is not None and step.status in ("error", "fatal") and step.error:
            kind, said = str(step.error.get("type", "Error")), say(step.error.get("why") or step.error.get("message", ""))
            cell.outputs = [nbformat.v4.new_output("error", ename=kind, evalue=said, traceback=[f"{kind}: {said}"])]
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
        from .. import notebooks as nbs

        notebook = resources["nbgrader"]["notebook"]
        if notebook not in nbs.assignments():
            return nb, resources
        matched = nbs.course_cells(nbs.read(nbs.solution_path(notebook)), nb)
        for index, cell in enumerate(nb.cells):
            course_cell = matched.get(index)
            if course_cell is not None:
                cell.metadata["nbgrader"] = copy.deepcopy(course_cell.metadata["nbgrader"])
            elif isinstance(cell.get("metadata"), dict):
                cell.metadata.pop("nbgrader", None)
        return nb, resources


#: Gradings made ahead of nbgrader's pass by `grade_class` (a pool of processes), by the steps they graded.
AHEAD: dict[str, list[Any]] = {}
_ENGINE: Any = None
_TAKEN = [0]  # gradings GradeInWorker took from AHEAD


def steps_key(learner: NotebookNode, notebook: str) -> str:
    """A digest of exactly what grading a notebook runs (`utils.engine.checking.plan`: every cell, in order, with its
    origin): two notebooks with one key are graded alike, whatever else differs between them."""
    from .. import notebooks as nbs
    from .checking import plan

    steps = plan(nbs.read(nbs.solution_path(notebook)), learner)
    data = [notebook] + [[s.kind, s.origin, s.grade_id, s.points, s.setup, s.source] for s in steps]
    return hashlib.sha256(json.dumps(data).encode()).hexdigest()


def engine() -> Any:
    """This process's grading engine: one warm zygote for every submission graded here (`utils.engine.checking.Engine`)."""
    global _ENGINE
    if _ENGINE is None:
        import atexit

        from .checking import Engine

        _ENGINE = Engine()
        atexit.register(_ENGINE.close)
    return _ENGINE


class GradeInWorker(Preprocessor):
    """Grade the submission with the learner's code in a worker process; write each grade cell's score."""

    enabled = Bool(True).tag(config=True)  # nbconvert preprocessors are off unless enabled

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        from .. import notebooks as nbs
        from .checking import grade

        notebook = resources["nbgrader"]["notebook"]
        if notebook not in nbs.assignments():
            raise nbs.CourseError(f"{notebook} is not one of the course's notebooks")
        source = nbs.read(nbs.solution_path(notebook))
        waiting = AHEAD.get(steps_key(nb, notebook)) if AHEAD else None
        grading = waiting.pop() if waiting else None
        _TAKEN[0] += grading is not None
        if grading is None:
            grading = grade(copy.deepcopy(nb), notebook, engine=engine())
        for note in grading.notes:
            self.log.warning("%s: %s", notebook, note)
        self.log.info("%s: %s / %s points in %.1f s", notebook, grading.score, grading.max_score, grading.seconds)
        return annotate(nb, grading, source), resources


# -- a whole class: `attn autograde` ------------------------------------------------------------------------------
def _grade_ahead(path: str, notebook: str) -> tuple[str, Any, str]:
    """In a pool process: (steps key, grading, "") of one submitted notebook, or ("", None, why not)."""
    from .checking import load_learner_notebook

    try:
        learner = load_learner_notebook(Path(path))
        return steps_key(learner, notebook), engine().grade(learner, notebook), ""
    except Exception as exc:  # noqa: BLE001 - nbgrader's own pass grades it again and reports it
        return "", None, f"{type(exc).__name__}: {exc}"


def _api() -> Any:
    """nbgrader's API with the course's configuration (nbgrader_config.py in the current folder), as Formgrader."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.apps.baseapp import NbGrader

    app = NbGrader()
    app.load_config_file()
    return NbGraderAPI(parent=app)


def grade_class(assignment: str, *, jobs: int = 2, students: list[str] | None = None, force: bool = False,
                progress: bool = True) -> dict[str, Any]:
    """Autograde every submission of `assignment` (or those of `students`) as `nbgrader autograde` does, faster.

    First a pool of `jobs` processes (started by spawn, each with a warm engine) grades every submitted notebook.
    Then nbgrader's own autograde runs here for one student after another, so the gradebook has one writer and its
    scores are nbgrader's: its GradeInWorker step takes the grading made ahead when that notebook's steps are exactly
    the ones it would grade (nbgrader's steps before it changed nothing that runs), and grades it again otherwise.
    Returns counts and seconds; progress bars (tqdm) go to stderr.
    """
    import multiprocessing
    import time
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from tqdm import tqdm

    from .. import notebooks as nbs

    if assignment not in nbs.assignments():
        raise nbs.CourseError(f"no notebook called {assignment!r} in the course (known: {', '.join(nbs.assignments())})")
    api = _api()
    submitted = Path(api.coursedir.root) / api.coursedir.submitted_directory
    found = {p.parent.parent.name: p for p in sorted(submitted.glob(f"*/{assignment}/{assignment}.ipynb"))}
    chosen = [s for s in (students or sorted(found)) if s in found]
    missing = sorted(set(students or []) - set(found))
    started = time.monotonic()
    ahead_failed: dict[str, str] = {}
    if chosen and jobs > 0:
        context = multiprocessing.get_context("spawn")  # no fork: the same path on Linux, macOS and Windows
        with ProcessPoolExecutor(max_workers=min(jobs, len(chosen)), mp_context=context) as pool:
            futures = {pool.submit(_grade_ahead, str(found[s]), assignment): s for s in chosen}
            bar = tqdm(as_completed(futures), total=len(futures), desc=f"grading {assignment}", unit="notebook",
                       disable=not progress, file=sys.stderr)
            for future in bar:
                key, grading, why = future.result()
                if grading is None:
                    ahead_failed[futures[future]] = why
                else:
                    AHEAD.setdefault(key, []).append(grading)
    graded_ahead = sum(map(len, AHEAD.values()))
    _TAKEN[0] = 0
    t_pool = time.monotonic() - started
    failed: dict[str, str] = {}
    for student in tqdm(chosen, desc="gradebook", unit="submission", disable=not progress, file=sys.stderr):
        result = api.autograde(assignment, student, force=force, create=True)
        if not result.get("success"):
            failed[student] = (result.get("error") or result.get("log") or "")[-2000:]
    regraded = len(chosen) - len(failed) - _TAKEN[0]  # what nbgrader's pass did not find graded ahead
    AHEAD.clear()
    seconds = time.monotonic() - started
    return {"assignment": assignment, "submissions": len(chosen), "graded ahead": graded_ahead,
            "graded again": max(0, regraded), "failed": failed, "missing": missing, "not graded ahead": ahead_failed,
            "seconds": round(seconds, 1), "pool seconds": round(t_pool, 1),
            "per minute": round(60 * len(chosen) / seconds, 1) if seconds else 0.0, "jobs": jobs,
            "cpus": os.cpu_count()}
