"""Static checks of the course files: the exercise contract, nbgrader metadata, clean notebooks in git."""

from __future__ import annotations

import ast
import re

import pytest
from nbgrader.nbgraderformat import MetadataValidator

from utils import course, docs
from utils import notebooks as nbs
from utils.grading import load_grader

from .conftest import ASSIGNMENTS

# The exercise names and points: a contract between notebooks, graders and gradebooks, held in one registry
# (utils/course.py). The course is built in its order, so the notebooks present are always its first ones.
CONTRACT = {nb.id: [e.name for e in nb.exercises] for nb in course.NOTEBOOKS}


@pytest.fixture(params=ASSIGNMENTS)
def solution(request):
    return request.param, nbs.read(nbs.solution_path(request.param))


def test_the_course_is_the_first_notebooks_of_the_contract_in_order():
    assert ASSIGNMENTS, "solutions/ holds no notebook"
    assert ASSIGNMENTS == list(CONTRACT)[: len(ASSIGNMENTS)]


def test_readme_and_the_course_contract_show_the_registrys_tables():
    """README's course table and docs/COURSE.md's points are written by `attn docs` from utils/course.py."""
    assert docs.sync_docs(nbs.ROOT, write=False) == [], "run `attn docs` after changing utils/course.py"
    assert docs.sync_notebooks(write=False) == [], "run `attn docs`: the Colab badges and set-up are not current"
    assert docs.sync_picture(nbs.ROOT, write=False) == [], "run `attn docs`: README's picture or its alt is not current"
    readme = (nbs.ROOT / "README.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in readme.splitlines() if re.match(r"\| \d\d \|", line)}
    assert sorted(rows) == [a[:2] for a in ASSIGNMENTS], "README's course map must list exactly the notebooks there are"


def test_exercises_follow_the_contract_each_with_a_test_cell(solution):
    assignment, nb = solution
    answers = [nbs.nbgrader_meta(c)["grade_id"] for c in nb.cells if nbs.is_answer_cell(c)]
    tests = [nbs.nbgrader_meta(c) for c in nb.cells if nbs.is_test_cell(c)]
    assert answers == CONTRACT[assignment]
    assert [t["grade_id"] for t in tests] == [f"test_{a}" for a in answers]
    points = {e.name: e.points for e in course.notebook(assignment).exercises}
    assert {t["grade_id"].removeprefix("test_"): float(t["points"]) for t in tests} == points, "points as registered"


def test_each_answer_defines_its_name_outside_the_solution_block(solution):
    _, nb = solution
    for cell in filter(nbs.is_answer_cell, nb.cells):
        name = nbs.nbgrader_meta(cell)["grade_id"]
        before = cell.source.split("### BEGIN SOLUTION")[0]
        assert "### BEGIN SOLUTION" in cell.source, f"{name}: no solution block"
        assert re.search(rf"^(def|class) {name}\b", before, re.M), f"{name}: signature must stay in the student copy"
        assert '"""' in before, f"{name}: its docstring must stay in the student copy"


def test_test_cells_score_with_the_points_nbgrader_knows_and_run_hidden_tests(solution):
    """A test cell names its exercise once: `Checker("name")` takes the points, `check.hidden(name)` the notebook,
    from the registry; its grader has hidden tests for exactly the notebook's exercises."""
    assignment, nb = solution
    grader = load_grader(assignment)
    assert sorted(grader.HIDDEN_TESTS) == sorted(CONTRACT[assignment]), f"grader/{assignment}.py: HIDDEN_TESTS"
    assert set(getattr(grader, "STAND_INS", {})) <= set(CONTRACT[assignment]), f"grader/{assignment}.py: STAND_INS"
    for cell in filter(nbs.is_test_cell, nb.cells):
        exercise = nbs.nbgrader_meta(cell)["grade_id"].removeprefix("test_")
        match = re.search(r'Checker\("(\w+)"(?:, time_limit=[\d.]+)?\)', cell.source)
        assert match and match.group(1) == exercise, f"test_{exercise}: must create its Checker(\"{exercise}\")"
        hidden = re.search(r"### BEGIN HIDDEN TESTS\n(.*)### END HIDDEN TESTS", cell.source, re.S)
        assert hidden and re.search(rf"check\.hidden\({exercise}[,)]", hidden.group(1)), f"test_{exercise}: check.hidden"
        assert cell.source.rstrip().endswith("check.score()")


def test_test_cells_use_only_the_setup_cell_and_the_exercises(solution):
    # While grading, a test cell runs in the grader: the setup cell's names are the grader's own, every other
    # name is the learner's object. A helper from another cell would be the learner's to change.
    from utils.engine.checking import free_names

    _, nb = solution
    code = [c for c in nb.cells if c.cell_type == "code"]
    exec(code[0].source, ns := {})  # noqa: S102 - the course's own setup cell
    setup_names = set(ns)
    exercises = {nbs.nbgrader_meta(c)["grade_id"] for c in nb.cells if nbs.is_answer_cell(c)}
    # Course objects a test must build in the learner's process (notebook 08's Translator, which holds the learner's
    # layers): imported from utils by a locked course cell after the setup cell, they are proxies like exercises.
    course_imports = set()
    for cell in code[1:]:
        if not (nbs.is_answer_cell(cell) or nbs.is_test_cell(cell)):
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("utils"):
                    course_imports |= {alias.asname or alias.name for alias in node.names}
    for cell in filter(nbs.is_test_cell, nb.cells):
        stray = free_names(cell.source) - setup_names - exercises - course_imports
        assert not stray, f"{nbs.nbgrader_meta(cell)['grade_id']} uses {sorted(stray)}: import them in the setup cell"


def test_nbgrader_metadata_is_valid_and_ids_unique(solution):
    _, nb = solution
    MetadataValidator().validate_nb(nb)
    ids = [nbs.nbgrader_meta(c).get("grade_id") for c in nb.cells]
    assert None not in ids, "every cell needs nbgrader metadata (locked cells too)"
    assert len(ids) == len(set(ids))


def test_solutions_are_clean_in_git(solution):
    assignment, nb = solution
    raw = nbs.solution_path(assignment).read_text()
    assert set(nb.metadata) <= {"kernelspec", "language_info"}
    counts = [c.execution_count for c in nbs.code_cells(nb)]
    assert counts == list(range(1, len(counts) + 1)), "run `attn execute` so execution counts are 1, 2, 3, ..."
    for cell in nb.cells:
        assert set(cell.metadata) <= {"nbgrader", "tags"}, f"stray cell metadata {set(cell.metadata)}"
        for out in cell.get("outputs", []):
            assert not (out.output_type == "stream" and out.name == "stderr"), f"stderr output: {out.text[:200]}"
            assert out.output_type != "error", f"solution cell raised: {out.get('ename')}"
    assert not re.search(r"object at 0x[0-9a-f]+", raw), "memory address in an output"


def test_assignment_folders_hold_only_the_notebook():
    # nbgrader copies every other file of the folder into the release and the feedback.
    for assignment in ASSIGNMENTS:
        files = [p.name for p in (nbs.SOLUTIONS / assignment).iterdir() if p.name != ".ipynb_checkpoints"]
        assert files == [f"{assignment}.ipynb"]


def _headings(nb) -> list[str]:
    return [line.lstrip("#").strip() for cell in nb.cells if cell.cell_type == "markdown"
            for line in cell.source.splitlines() if re.match(r"#{2,3} ", line)]


def test_sections_are_numbered_one_to_n_and_only_the_summary_is_not(solution):
    assignment, nb = solution
    top = [line[3:].strip() for cell in nb.cells if cell.cell_type == "markdown"
           for line in cell.source.splitlines() if line.startswith("## ")]
    numbers = [int(m.group(1)) for h in top if (m := re.match(r"(\d+)\. ", h))]
    assert numbers == list(range(1, len(numbers) + 1)), f"{assignment}: sections numbered {numbers}"
    assert [h for h in top if not re.match(r"\d+\. ", h)] == ["Summary"], f"{assignment}: unnumbered sections {top}"


def test_every_section_the_grader_or_the_notebook_refers_to_exists(solution):
    """A catalogued mistake's "see '5. ...'" and a cell's "section 5" must survive a section moving."""
    from utils.grading import Mistake

    assignment, nb = solution
    headings = set(_headings(nb))
    sections = {m.section for m in vars(load_grader(assignment)).values() if isinstance(m, Mistake)}
    assert sections <= headings, f"{assignment}: the grader points to sections that are not headings: {sections - headings}"
    count = sum(1 for h in headings if re.match(r"\d+\. ", h))
    for cell in nb.cells:
        # "section 5", not "notebook 03's section 5" (another notebook's numbering)
        for m in re.finditer(r"(?<!'s )\bsections? (\d+)(?:\.\d+)?", cell.source):
            assert 1 <= int(m.group(1)) <= count, f"{assignment}: '{m.group(0)}' in {cell.source[:80]!r}"


def _bound(source: str) -> set[str]:
    """Names a cell binds at its top level (assignments, definitions, imports)."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        else:
            names.update(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store))
    return names


def test_cells_grading_skips_bind_nothing_a_later_cell_reads(solution):
    """Cells tagged `slow` or `demo` are skipped while grading: what they define must not be needed by a cell that
    grading runs after them (a chain of skipped cells may share names: the training and the figures of its loss)."""
    from utils.engine.checking import free_names

    assignment, nb = solution
    code = [c for c in nb.cells if c.cell_type == "code"]
    skipped = [c for c in code if set(nbs.SKIPPED_TAGS) & set(c.metadata.get("tags", []))]
    assert skipped, f"{assignment}: no cell tagged slow or demo (grading would run every figure)"
    for cell in skipped:
        at = code.index(cell)
        later = set().union(*(free_names(c.source) for c in code[at + 1:] if c not in skipped))
        before = set().union(*(_bound(c.source) for c in code[:at] if c not in skipped))  # rebound: still defined
        read = (_bound(cell.source) - before) & later
        assert not read, f"{assignment}: {nbs.nbgrader_meta(cell)['grade_id']} is skipped while grading, but later " \
                         f"cells read {sorted(read)}"
