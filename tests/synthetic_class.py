"""A synthetic class for `attn report`: submissions built from the planted mistakes (tests/plants_NN.py) in known
proportions, graded by the course's grader and written into nbgrader's gradebook the way nbgrader's autograde does.

Each distinct submission (the finished solution, the blank student copy, the solution with one plant) is graded once
by the grading engine (`utils.engine.checking.grade`, as `attn autograde`'s pool does); every student who handed it
in gets the autograded notebook `utils.engine.autograde.annotate` writes from that grading, and nbgrader's own
`SaveAutoGrades` step reads the scores from it into the gradebook (after `gb.add_submission`, as autograde's
`init_assignment` does). So the report meets what a real class leaves, without grading sixty identical notebooks
sixty times.

    python -m tests.synthetic_class [ASSIGNMENT...] [--students 60]

builds one class per assignment (default: all eight) in a temporary course folder, runs `attn report` on it, prints
the planted and the reported counts of every planted (exercise, mistake) and the time the report took, and exits 1
when any differ.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from utils import figures
from utils import notebooks as nbs


@dataclass(frozen=True)
class Variant:
    """One kind of submission: `plant` None is the finished solution (`blank` True: the student copy)."""

    key: str
    plant: dict | None = None
    blank: bool = False


def plan(assignment: str, n: int = 60, plants_: list[dict] | None = None) -> list[tuple[str, Variant]]:
    """`n` students and what each handed in: a fifth the finished solution, a tenth the blank copy, the rest one
    plant each; plant k gets at least one student and the others in proportion to 1/(k+1)² (so the mistakes rank)."""
    from .conftest import plants

    mistakes = plants_ if plants_ is not None else plants(assignment).MISTAKES
    solved, blank = max(1, n // 5), max(1, n // 10)
    left = n - solved - blank
    counts = [1] * min(len(mistakes), left)
    extra = left - len(counts)
    weights = [1 / (k + 1) ** 2 for k in range(len(counts))]
    shares = [extra * w / sum(weights) for w in weights] if counts else []
    counts = [c + int(s) for c, s in zip(counts, shares)]
    for k in sorted(range(len(counts)), key=lambda k: -(shares[k] - int(shares[k])))[:left - sum(counts)]:
        counts[k] += 1  # largest remainders
    variants = [Variant("solution")] * solved + [Variant("blank", blank=True)] * blank
    for k, c in enumerate(counts):
        variants += [Variant(f"plant{k:02d}", mistakes[k])] * c
    variants += [Variant("solution")] * (n - len(variants))  # more plants than students: the rest finish
    # Students in an order that mixes the variants (a fixed shuffle), so no block of ids shares one.
    order = sorted(range(n), key=lambda i: (i * 7919) % n if n % 7919 else i)
    return [(f"s{i:03d}", variants[j]) for i, j in zip(range(n), order)]


def expected(students: list[tuple[str, Variant]]) -> dict[tuple[str, str], list[str]]:
    """The planted (exercise, mistake) pairs and the students who handed each in."""
    found: dict[tuple[str, str], list[str]] = {}
    for student, v in students:
        if v.plant is not None:
            found.setdefault((v.plant["exercise"], v.plant["mistake"]), []).append(student)
    return found


def build(course: Path, assignment: str, students: list[tuple[str, Variant]], engine) -> dict[str, float]:
    """Write the class into the course folder `course` (made if needed): solutions/, release/, submitted/,
    autograded/ and gradebook.db. Returns seconds spent grading and writing."""
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveAutoGrades

    from utils.engine.autograde import annotate
    from utils.engine.checking import load_learner_notebook

    from .conftest import nbgrader, planted_copy

    course.mkdir(parents=True, exist_ok=True)
    shutil.copytree(nbs.solution_path(assignment).parent, course / "solutions" / assignment, dirs_exist_ok=True)
    shutil.copy(nbs.ROOT / "nbgrader_config.py", course)
    nbgrader(course, "generate_assignment", assignment, "--force")
    source = nbs.read(nbs.solution_path(assignment))
    scratch = course / ".variants"
    t0 = time.monotonic()
    gradings, paths = {}, {}
    for _student, v in students:
        if v.key in paths:
            continue
        if v.blank:
            paths[v.key] = course / "release" / assignment / f"{assignment}.ipynb"
        elif v.plant is None:
            paths[v.key] = nbs.solution_path(assignment)
        else:
            paths[v.key] = planted_copy(assignment, [v.plant], scratch / v.key)
        gradings[v.key] = engine.grade(load_learner_notebook(paths[v.key]), assignment)
    t_grade = time.monotonic() - t0
    db_url = f"sqlite:///{course / 'gradebook.db'}"
    with Gradebook(db_url) as gb, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy's SAWarning on nbgrader's own add_submission (as in autograde)
        for student, _v in students:
            gb.update_or_create_student(student)
            gb.add_submission(assignment, student)
    for student, v in students:
        shutil.copy(paths[v.key], (course / "submitted" / student / assignment).mkdir(parents=True, exist_ok=True)
                    or course / "submitted" / student / assignment / f"{assignment}.ipynb")
        nb = annotate(nbs.read(paths[v.key]), gradings[v.key], source)
        SaveAutoGrades().preprocess(nb, {"nbgrader": {"notebook": assignment, "assignment": assignment,
                                                      "student": student, "db_url": db_url}})
        nbs.write(nb, course / "autograded" / student / assignment / f"{assignment}.ipynb")
    shutil.rmtree(scratch, ignore_errors=True)
    return {"grading": t_grade, "writing": time.monotonic() - t0 - t_grade, "graded": len(gradings)}


def reported(course: Path, assignment: str) -> dict[tuple[str, str], list[str]]:
    """Every (exercise, mistake) the report names, with its students (the report's own statistics)."""
    from utils import report

    [data] = report.collect(report._api(course), [assignment])
    return {(m.exercise, m.mistake): m.students for st in report.exercise_stats(data) for m in st.mistakes}


def main(argv: list[str] | None = None) -> int:
    import tempfile

    from utils.engine.checking import Engine

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*")
    parser.add_argument("--students", type=int, default=60)
    parser.add_argument("--keep", type=Path, metavar="DIR", help="build the course folders in DIR/ASSIGNMENT, kept")
    parser.add_argument("--together", action="store_true",
                        help="one course folder for every assignment (DIR itself with --keep), and at the end the "
                             "whole course's report")
    args = parser.parse_args(argv)
    engine = Engine()
    bad, timings = 0, {}
    shared = tempfile.TemporaryDirectory(prefix="attn-synthetic-")
    try:
        for assignment in args.assignments or nbs.assignments():
            with tempfile.TemporaryDirectory(prefix="attn-synthetic-") as tmp:
                folder = args.keep or Path(shared.name)
                course = folder if args.together else args.keep / assignment if args.keep else Path(tmp)
                students = plan(assignment, args.students)
                times = build(course, assignment, students, engine)
                t0 = time.monotonic()  # as an instructor types it: a fresh `attn report` in the course folder
                subprocess.run([sys.executable, "-m", "utils.cli", "report", assignment], cwd=course, check=True,
                               capture_output=True, env={**os.environ, "PYTHONPATH": str(nbs.ROOT)})
                took = time.monotonic() - t0
                timings[assignment] = took
                want, got = expected(students), reported(course, assignment)
                differ = {k: (len(v), len(got.get(k, []))) for k, v in want.items() if sorted(v) != sorted(got.get(k, []))}
                knock_on = Counter({k: len(v) for k, v in got.items() if k not in want})
                bad += bool(differ)
                print(f"{assignment}: {len(students)} students, {len(want)} planted (exercise, mistake) pairs, "
                      f"{times['graded']} distinct submissions graded in {times['grading']:.1f} s; report in "
                      f"{took:.2f} s; {'all counts equal' if not differ else f'{len(differ)} differ: {differ}'}"
                      + (f"; named besides (a plant's knock-on on another exercise): {dict(knock_on)}" if knock_on else ""),
                      flush=True)
        if args.together:
            t0 = time.monotonic()
            out = subprocess.run([sys.executable, "-m", "utils.cli", "report"], cwd=course, check=True,
                                 capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(nbs.ROOT)}).stdout
            print(f"the whole course's report in {time.monotonic() - t0:.2f} s:\n{out}", end="", flush=True)
    finally:
        engine.close()
        shared.cleanup()
    chosen = args.assignments or nbs.assignments()
    if not bad and chosen == ["02_scaled_dot_product_attention"] and args.students >= 300:
        figures.record("report-02", by="`python -m tests.synthetic_class 02_scaled_dot_product_attention --students "
                       f"{args.students}`", what=f"`attn report` on a class of {args.students} submissions of 02 "
                       "(gradebook and autograded notebooks read, statistics, plot, HTML and CSV written)",
                       value=f"{timings[chosen[0]]:.1f} s")
    if not bad and chosen == nbs.assignments() and args.students >= 60:
        figures.record("report-synthetic", by="`python -m tests.synthetic_class`",
                       what=f"`attn report` on synthetic classes of {args.students} submissions of each notebook, "
                            "built from the planted mistakes",
                       value=f"every planted mistake counted exactly in all eight; {min(timings.values()):.1f}–"
                             f"{max(timings.values()):.1f} s a report")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
