"""Grades a learner cannot fake, and honest work never loses: the attacks of tests/attacks.py, graded for real.

Each attack is planted into a copy of notebook 01 and graded with `attn check --json`, as a learner or an
instructor would; the score must be exactly what the attack earned (0 for doctored submissions, full marks for
honest noise). Afterwards grader/, utils/ and solutions/ must be byte for byte what they were. Some attacks go
through nbgrader's autograder too, all in one class, and must get the same scores there.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from utils import notebooks as nbs

from .attacks import ATTACKS, FULL, MAX, NOTEBOOK
from .conftest import attn_check

PROTECTED = ("grader", "utils", "solutions")


def _tree_digest(root: Path) -> dict[str, str]:
    from utils.engine.seed import is_key_in_making

    out = {}
    for folder in PROTECTED:
        for path in sorted((root / folder).rglob("*")):
            # Another test process may be making the key of the hidden inputs on a fresh clone: its temporary file
            # comes and goes on its own (the run of 2026-11-27 failed 13 attacks on one seen in BEFORE).
            if path.is_file() and "__pycache__" not in path.parts and not is_key_in_making(path):
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _course_state(root: Path) -> dict[str, str]:
    """The digest of `root`'s protected folders once grading has what it makes on first use (grader/seed.key)."""
    from utils.engine.seed import seed_key

    seed_key(root / "grader")
    return _tree_digest(root)


BEFORE = _course_state(nbs.ROOT)


def _isolated() -> bool:
    from utils.engine.sandbox import isolation

    return isolation() is None


def _cell(nb, grade_id: str):
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return cell
    raise KeyError(grade_id)


def _solved(repo: Path, assignment: str):
    """The student copy with every answer cell filled in from the solution."""
    nb = nbformat.read(str(repo / "notebooks" / assignment / f"{assignment}.ipynb"), as_version=4)
    solution = nbformat.read(str(repo / "solutions" / assignment / f"{assignment}.ipynb"), as_version=4)
    answers = {c.metadata["nbgrader"]["grade_id"]: c.source for c in solution.cells
               if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
    return nb


def build(attack: dict, repo: Path, dest: Path) -> Path:
    """The attack's notebook file, written under `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / attack.get("name", f"{NOTEBOOK}.ipynb")
    base = attack.get("base", "blank")
    if base == "blank":
        nb = nbformat.read(str(repo / "notebooks" / NOTEBOOK / f"{NOTEBOOK}.ipynb"), as_version=4)
    elif base == "other":
        nb = _solved(repo, "02_scaled_dot_product_attention")
    else:
        nb = _solved(repo, NOTEBOOK)
    raw = None
    for edit in attack["edits"]:
        op = edit["op"]
        if op == "raw":
            raw = edit["content"]
            continue
        if op == "nbformat":
            raw = nbformat.writes(nbformat.convert(nb, edit["version"]))
            continue
        if op == "strip_ids":
            nb.nbformat_minor = 4
            for cell in nb.cells:
                cell.pop("id", None)
            continue
        if op == "kernelspec":
            nb.metadata["kernelspec"] = {"name": "ir", "display_name": "R", "language": "R"}
            continue
        cell = _cell(nb, edit["cell"])
        index = nb.cells.index(cell)
        if op == "append":
            cell.source = cell.source + "\n" + edit["code"]
        elif op == "replace":
            assert cell.source.count(edit["old"]) >= 1, (attack["id"], edit["old"])
            cell.source = cell.source.replace(edit["old"], edit["new"], 1)
        elif op == "insert_after":
            new = nbformat.v4.new_code_cell(edit["code"])
            if "metadata" in edit:
                new.metadata["nbgrader"] = dict(edit["metadata"])
            nb.cells.insert(index + 1, new)
        elif op == "duplicate":
            for _ in range(edit["times"]):
                twin = copy.deepcopy(cell)
                twin.pop("id", None)
                nb.cells.insert(index + 1, twin)
        elif op == "move_before":
            nb.cells.remove(cell)
            nb.cells.insert(nb.cells.index(_cell(nb, edit["target"])), cell)
        elif op == "delete":
            nb.cells.remove(cell)
        elif op == "meta":
            cell.metadata["nbgrader"].update(edit["nbgrader"])
        else:
            raise ValueError(op)
    if raw is None:
        nbformat.validator.normalize(nb)
        raw = nbformat.writes(nb)
    path.write_text(raw)
    return path


def grade_with(repo: Path, path: Path) -> tuple[int, dict | None, str]:
    """`attn check PATH --json` run by the checkout `repo`: (exit code, result or None, stderr)."""
    try:
        proc = subprocess.run([sys.executable, "-m", "utils.cli", "check", str(path), "--json"], cwd=repo,
                              capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(repo)})
    except subprocess.TimeoutExpired:
        return -1, None, "no result after 300 s"
    try:
        return proc.returncode, json.loads(proc.stdout), proc.stderr
    except json.JSONDecodeError:
        return proc.returncode, None, proc.stderr


def _assert_expected(attack: dict, code: int, result: dict | None, err: str) -> None:
    if "exit" in attack:
        assert code == attack["exit"] and result is None, (code, result, err[-2000:])
        assert attack["says"] in err, err[-2000:]
        assert "Traceback" not in err
        return
    assert code == 0 and result is not None, err[-3000:]
    assert result["max_score"] == MAX
    scores = {e["id"]: e["score"] for e in result["exercises"]}
    assert list(scores) == list(FULL), "every exercise is reported once, in the course's order"
    for e in result["exercises"]:
        assert 0 <= e["score"] <= e["max_score"] == FULL[e["id"]]
    if "total" in attack:
        assert result["score"] == attack["total"], result
    if "scores" in attack:
        assert scores == attack["scores"], result
        for e in result["exercises"]:
            if e["score"] == 0 and FULL[e["id"]]:
                assert e["feedback"], e


@pytest.mark.parametrize("attack", [a for a in ATTACKS if "hidden_all_fail" not in a], ids=lambda a: a["id"])
def test_attack_earns_exactly_what_it_should(attack, tmp_path, monkeypatch):
    if attack.get("isolated") and not _isolated():
        pytest.skip("needs grading as root: without isolation the learner's code can read the grader's files")
    if "endless" in attack["id"]:
        # What is asked of an endless loop is that it costs its exercise alone, whatever the limit: 3 s, not 10, of a
        # core spinning (the default limits are timed by `attn bench`, and graded with in the other attacks).
        from utils.engine import checking

        monkeypatch.setattr(checking, "EXERCISE_TIME_LIMIT_S", 3.0)
        monkeypatch.setattr(checking, "LEARNER_CELL_TIME_LIMIT_S", 3.0)
    path = build(attack, nbs.ROOT, tmp_path)
    if "exit" in attack or not _isolated():
        code, result, err = grade_with(nbs.ROOT, path)  # the command's exit code and words are part of the answer
    else:  # the test session's warm engine: the same grading, recycled between attacks (tests/test_engine.py)
        code, result, err = 0, attn_check(path), ""
    if attack.get("writes") and not _isolated():
        # Not isolated, the write happens: grading must refuse the result and put the files back.
        assert code == 2 and "course files changed" in err, (code, result, err[-2000:])
    else:
        _assert_expected(attack, code, result, err)
    assert _tree_digest(nbs.ROOT) == BEFORE, "grading changed grader/, utils/ or solutions/"
    if "no_process" in attack:
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert attack["no_process"] not in ps, "a process the learner's code started survived grading"


@pytest.mark.parametrize("attack", [a for a in ATTACKS if "hidden_all_fail" in a], ids=lambda a: a["id"])
def test_replaying_visible_answers_earns_no_hidden_check(attack, tmp_path):
    from utils.engine.checking import load_learner_notebook

    from .conftest import engine

    grading = engine().grade(load_learner_notebook(build(attack, nbs.ROOT, tmp_path)), NOTEBOOK)
    exercise = next(e for e in grading.exercises if e.id == attack["hidden_all_fail"])
    hidden = [c for c in exercise.checks if c.hidden]
    assert hidden and not any(c.passed for c in hidden), hidden
    assert exercise.score < exercise.max_score


def test_a_class_graded_by_nbgrader_gets_the_attn_check_scores(tmp_path):
    """Several doctored submissions and a broken file in one nbgrader autograde run: attn check's scores."""
    chosen = [a for a in ATTACKS if a.get("nbgrader") and not (a.get("writes") and not _isolated())]
    course = tmp_path / "course"
    shutil.copytree(nbs.SOLUTIONS / NOTEBOOK, course / "solutions" / NOTEBOOK)
    shutil.copytree(nbs.NOTEBOOKS / NOTEBOOK, course / "notebooks" / NOTEBOOK)
    shutil.copy(nbs.ROOT / "nbgrader_config.py", course)
    env = nbs.kernel_env()

    def nbgrader(*args):
        return subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True,
                              text=True, env=env, timeout=900)

    proc = nbgrader("generate_assignment", NOTEBOOK, "--force")
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = {}
    # The broken files first: nbgrader must go on to grade everyone after them.
    chosen.sort(key=lambda a: "exit" not in a)
    for i, attack in enumerate(chosen):
        student = f"s{i:02d}"
        build(attack, nbs.ROOT, course / "submitted" / student / NOTEBOOK)
        if "exit" not in attack:  # the score attn check must give it (test_attack_earns_exactly_what_it_should)
            expected[student] = attack["total"] if "total" in attack else sum(attack["scores"].values())
    log = nbgrader("autograde", NOTEBOOK, "--create")  # a broken submission: exit 1, after grading the rest
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        got = {}
        for s in expected:
            try:
                got[s] = gb.find_submission(NOTEBOOK, s).score
            except Exception:  # noqa: BLE001 - reported below with nbgrader's log
                got[s] = None
        assert None not in got.values(), log.stdout[-4000:] + log.stderr[-6000:]
        assert all(gb.find_submission(NOTEBOOK, s).max_score == MAX for s in expected)
    assert got == expected
    assert _tree_digest(nbs.ROOT) == BEFORE
