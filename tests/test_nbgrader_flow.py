"""The instructor's route: nbgrader's own commands release, autograde and send feedback that leaks nothing."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from nbgrader.api import Gradebook

from utils import notebooks as nbs

from .conftest import ASSIGNMENTS, assert_no_secrets, fill_answers, nbgrader, secrets


def test_generate_autograde_feedback_in_a_course_directory(tmp_path):
    """Every notebook through nbgrader's own commands at once (`"*"`: one command per step, as an instructor may type
    it for a whole course), in the repository's layout: source and (committed) release side by side."""
    course = tmp_path / "course"
    for assignment in ASSIGNMENTS:
        shutil.copytree(nbs.SOLUTIONS / assignment, course / "solutions" / assignment)
        shutil.copytree(nbs.NOTEBOOKS / assignment, course / "notebooks" / assignment)
    shutil.copy(nbs.ROOT / "nbgrader_config.py", course)

    # A learner has been working in notebooks/: no instructor command may touch their copy.
    mine = course / "notebooks" / ASSIGNMENTS[0] / f"{ASSIGNMENTS[0]}.ipynb"
    mine.write_text(mine.read_text().replace("raise NotImplementedError()", "return 42  # my work", 1))
    before = mine.read_bytes()

    nbgrader(course, "generate_assignment", "*")
    nbgrader(course, "generate_assignment", ASSIGNMENTS[0], "--force")  # regenerating the learner's notebook is safe
    assert mine.read_bytes() == before
    for assignment in ASSIGNMENTS:
        released = course / "release" / assignment
        assert [p.name for p in released.iterdir()] == [f"{assignment}.ipynb"]
        assert (released / f"{assignment}.ipynb").read_bytes() == nbs.release_path(assignment).read_bytes(), assignment

        # alice fills in every answer with the solution; bob hands in the blank copy.
        alice = fill_answers(nbs.read(released / f"{assignment}.ipynb"), assignment)
        nbs.write(alice, course / "submitted" / "alice" / assignment / f"{assignment}.ipynb")
        bob = course / "submitted" / "bob" / assignment
        bob.mkdir(parents=True)
        shutil.copy(released / f"{assignment}.ipynb", bob)

    nbgrader(course, "autograde", "*", "--create")
    nbgrader(course, "generate_feedback", "*")

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for assignment in ASSIGNMENTS:
            graded = {s: gb.find_submission(assignment, s) for s in ("alice", "bob")}
            assert graded["alice"].score == graded["alice"].max_score > 0, assignment
            assert graded["bob"].score == 0, assignment

    for assignment in ASSIGNMENTS:
        for student in ("alice", "bob"):
            html = (course / "feedback" / student / assignment / f"{assignment}.html").read_text()
            assert "HIDDEN TESTS" not in html and "check.hidden" not in html
            assert "points</b>" in html, "feedback shows each exercise's score table"
            assert_no_secrets(html, assignment, f"{student}'s feedback")
            files = [p.name for p in (course / "feedback" / student / assignment).iterdir()]
            assert files == [f"{assignment}.html"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_student_copies_and_utils_carry_no_secrets(assignment):
    assert_no_secrets(nbs.release_path(assignment).read_text(), assignment, f"notebooks/{assignment}")
    for path in (nbs.ROOT / "utils").rglob("*"):
        if path.is_file() and path.suffix == ".py":
            assert_no_secrets(path.read_text(), assignment, str(path.relative_to(nbs.ROOT)))
    # The one kind of tensor file utils/ ships: the visible catalogue (utils/visible.py), outputs on the inputs of the
    # visible checks, which name a mistake and its section but hold no explanation and no hidden value.
    stored = list((nbs.ROOT / "utils").rglob("*.safetensors"))
    assert {p.parent for p in stored} <= {nbs.ROOT / "utils" / "visible"}, stored
    from safetensors import safe_open

    _lines, refs = secrets(assignment)
    hidden: dict[tuple, list[torch.Tensor]] = {}
    for t in refs.values():
        hidden.setdefault((tuple(t.shape), t.dtype), []).append(t)
    for path in stored:
        with safe_open(str(path), framework="pt") as f:
            assert_no_secrets(json.dumps(f.metadata()), assignment, str(path.relative_to(nbs.ROOT)))
            for name in f.keys():  # noqa: SIM118 - safe_open has no iteration
                t = f.get_tensor(name)
                assert not any(torch.equal(t, h) for h in hidden.get((tuple(t.shape), t.dtype), [])), (
                    f"{path.name} holds a hidden reference tensor ({name})")


def test_exchange_release_fetch_submit_collect_autograde_as_two_students(tmp_path):
    """The Assignments panel's route through the course-local exchange: two students on one machine."""
    assignment = ASSIGNMENTS[0]
    course = tmp_path / "course"
    shutil.copytree(nbs.SOLUTIONS / assignment, course / "solutions" / assignment)
    shutil.copy(nbs.ROOT / "nbgrader_config.py", course)
    nbgrader(course, "generate_assignment", assignment)
    nbgrader(course, "release_assignment", assignment)
    exchange = course / "exchange"
    assert (exchange / "attention-course" / "outbound" / assignment / f"{assignment}.ipynb").is_file()
    assert exchange.stat().st_mode & 0o1777 == 0o1777, "everyone may drop files in the exchange (sticky)"

    # What the Assignments panel runs for each student, in their own folder: fetch, work, submit.
    for student in ("alice", "bob"):
        home = tmp_path / student
        home.mkdir()
        env = {"USER": student, "LOGNAME": student, "HOME": str(home)}
        opts = ["--course", "attention-course", f"--Exchange.root={exchange}"]
        nbgrader(home, "fetch_assignment", assignment, *opts, env=env)
        mine = home / assignment / f"{assignment}.ipynb"
        if student == "alice":
            nbs.write(fill_answers(nbs.read(mine), assignment), mine)
        # One Unix user plays both students here: --student names them (as their own login would).
        nbgrader(home, "submit", assignment, *opts, f"--student={student}", env=env)

    nbgrader(course, "collect", assignment)
    assert sorted(p.name for p in (course / "submitted").iterdir()) == ["alice", "bob"]
    nbgrader(course, "autograde", assignment, "--create")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        alice, bob = (gb.find_submission(assignment, s) for s in ("alice", "bob"))
        assert alice.score == alice.max_score > 0
        assert bob.score == 0


def test_attn_autograde_grades_a_class_in_parallel_with_nbgraders_scores(tmp_path):
    """`attn autograde --jobs 2`: a pool grades ahead, nbgrader's own pass writes the gradebook; every score is what
    `attn check` gives, a submission nbgrader's steps change is graded again, and a broken file is reported."""
    import subprocess
    import sys

    from utils.bench import make_class

    from .conftest import attn_check, planted_copy, plants

    nb = "01_attention_intuition"
    course = tmp_path / "course"
    students = make_class(course, nb, 2)  # s000, s001: finished
    shutil.copy(nbs.release_path(nb), (course / "submitted" / "blank" / nb).mkdir(parents=True) or
                course / "submitted" / "blank" / nb / f"{nb}.ipynb")
    plant = plants(nb).MISTAKES[0]
    planted = planted_copy(nb, [plant], tmp_path / "planted")
    (course / "submitted" / "planted" / nb).mkdir(parents=True)
    shutil.copy(planted, course / "submitted" / "planted" / nb / f"{nb}.ipynb")
    # A locked course cell the learner edited: graded as the course wrote it, by the pool as by nbgrader.
    edited = nbs.read(planted)
    locked = next(c for c in edited.cells if c.cell_type == "code" and not nbs.nbgrader_meta(c).get("solution")
                  and nbs.nbgrader_meta(c).get("locked") and not nbs.is_test_cell(c))
    locked.source += "\nprint('changed by the learner')"
    nbs.write(edited, course / "submitted" / "edited" / nb / f"{nb}.ipynb")
    (course / "submitted" / "broken" / nb).mkdir(parents=True)
    (course / "submitted" / "broken" / nb / f"{nb}.ipynb").write_text("{not json")

    proc = subprocess.run([sys.executable, "-m", "utils.cli", "autograde", nb, "--jobs", "2"], cwd=course,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]  # the broken file
    assert "broken: nbgrader could not autograde it" in proc.stdout, proc.stdout
    assert "6 submissions" in proc.stdout and "5 graded by the pool, 0 again" in proc.stdout, proc.stdout
    assert "gradebook" in proc.stderr and "100%" in proc.stderr  # tqdm's bars

    full = attn_check(nbs.solution_path(nb))["score"]
    expected = {**{s: full for s in students}, "blank": 0.0, "planted": attn_check(planted)["score"],
                "edited": attn_check(planted)["score"]}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        got = {s: gb.find_submission(nb, s).score for s in expected}
    assert got == expected
    assert 0 < expected["planted"] < full


def test_a_class_in_chinese_through_nbgraders_commands(tmp_path):
    """The instructor's route in Chinese: the Chinese solutions as nbgrader's source, a released copy that is the
    Chinese student copy, autograde with the course's scores and feedback in Chinese that leaks nothing."""
    from utils import release

    assignment = ASSIGNMENTS[0]
    course = tmp_path / "course"
    release.write_solutions("zh", course / "solutions-zh", [assignment])
    shutil.copy(nbs.ROOT / "nbgrader_config.py", course)
    source = ["--CourseDirectory.source_directory=solutions-zh"]
    nbgrader(course, "generate_assignment", assignment, *source)
    released = course / "release" / assignment / f"{assignment}.ipynb"
    zh_copy = nbs.release_path(assignment, release.release_dir("zh"))
    # The same cells as `attn release --lang zh` (which only words "# YOUR CODE HERE" in Chinese as well).
    assert released.read_text().replace(*release.CODE_STUB.values()) == zh_copy.read_text().replace(
        *release.CODE_STUB.values())
    nbs.write(fill_answers(nbs.read(released), assignment), course / "submitted" / "alice" / assignment / released.name)
    (course / "submitted" / "bob" / assignment).mkdir(parents=True)
    shutil.copy(released, course / "submitted" / "bob" / assignment)
    nbgrader(course, "autograde", assignment, "--create", *source)
    nbgrader(course, "generate_feedback", assignment, *source)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        alice, bob = (gb.find_submission(assignment, s) for s in ("alice", "bob"))
        assert alice.score == alice.max_score > 0 and bob.score == 0
    html = (course / "feedback" / "bob" / assignment / f"{assignment}.html").read_text()
    assert "还没有实现" in html or "尚未实现" in html or "未实现" in html, "bob's feedback should be in Chinese"
    assert_no_secrets(html, assignment, "bob's Chinese feedback")
