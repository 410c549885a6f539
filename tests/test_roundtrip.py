"""Every exercise is gradable both ways through `attn check`: full marks, zero, named mistakes, variants."""

from __future__ import annotations

import pytest

from utils import notebooks as nbs

from .conftest import ASSIGNMENTS, attn_check, by_id, planted_copy, plants

MISTAKE_CASES = [(a, m) for a in ASSIGNMENTS for m in plants(a).MISTAKES]


def _exercises(assignment: str) -> list[str]:
    nb = nbs.read(nbs.solution_path(assignment))
    return [nbs.nbgrader_meta(c)["grade_id"] for c in nb.cells if nbs.is_answer_cell(c)]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_earns_full_marks(assignment):
    result = attn_check(nbs.solution_path(assignment))
    assert set(result) == {"notebook", "score", "max_score", "exercises"}
    assert [e["id"] for e in result["exercises"]] == _exercises(assignment)
    failed = [e for e in result["exercises"] if not e["passed"]]
    assert not failed, failed
    assert result["score"] == result["max_score"] > 0
    for ex in result["exercises"]:
        assert set(ex) == {"id", "score", "max_score", "passed", "feedback", "mistake"} and ex["mistake"] is None


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_blank_student_copy_scores_zero_without_crashing(assignment):
    result = attn_check(nbs.release_path(assignment))
    assert result["score"] == 0 and result["max_score"] > 0
    assert [e["id"] for e in result["exercises"]] == _exercises(assignment)
    for ex in result["exercises"]:
        assert ex["score"] == 0 and "not implemented yet" in ex["feedback"], ex


@pytest.mark.parametrize(
    "assignment, plant", MISTAKE_CASES, ids=[f"{a[:2]}-{m['exercise']}-{m['mistake']}" for a, m in MISTAKE_CASES]
)
def test_planted_mistake_earns_partial_marks_and_is_named(assignment, plant, tmp_path):
    # Graded as `attn check --exercise`: the planted exercise alone (that other exercises keep their points is
    # tests/test_isolation.py's and the blind plants' part).
    result = by_id(attn_check(planted_copy(assignment, [plant], tmp_path), only=plant["exercise"]))
    ex = result[plant["exercise"]]
    if plant.get("loses_everything"):  # a mistake that breaks every call of the function: nothing to earn
        assert ex["score"] == 0, f"expected no marks, got {ex}"
    else:
        assert 0 < ex["score"] < ex["max_score"], f"expected partial marks, got {ex}"
    assert ex["mistake"] == plant["mistake"], ex
    assert plant["mistake"] in ex["feedback"]


DIAGNOSED_CASES = [(a, m) for a in ASSIGNMENTS for m in getattr(plants(a), "DIAGNOSED", [])]


@pytest.mark.parametrize(
    "assignment, plant", DIAGNOSED_CASES, ids=[f"{a[:2]}-{m['exercise']}-{m['diagnosis']}" for a, m in DIAGNOSED_CASES]
)
def test_uncatalogued_mistake_gets_the_right_generic_diagnosis(assignment, plant, tmp_path):
    result = by_id(attn_check(planted_copy(assignment, [plant], tmp_path), only=plant["exercise"]))
    ex = result[plant["exercise"]]
    assert ex["score"] < ex["max_score"], ex
    assert ex["mistake"] is None, f"an uncatalogued mistake was given a catalogue name: {ex}"
    assert "Diagnosis: " in ex["feedback"] and plant["diagnosis"] in ex["feedback"], ex["feedback"]


UNNAMED_CASES = [(a, m) for a in ASSIGNMENTS for m in getattr(plants(a), "UNNAMED", [])]


@pytest.mark.parametrize("assignment, plant", UNNAMED_CASES,
                         ids=[f"{a[:2]}-{m['exercise']}-{i}" for i, (a, m) in enumerate(UNNAMED_CASES)])
def test_a_mistake_nothing_explains_gets_no_name(assignment, plant, tmp_path):
    ex = by_id(attn_check(planted_copy(assignment, [plant], tmp_path), only=plant["exercise"]))[plant["exercise"]]
    assert ex["score"] < ex["max_score"], ex
    assert ex["mistake"] is None and "This matches a known mistake" not in ex["feedback"], ex["feedback"]
    assert plant.get("feedback", "") in ex["feedback"], ex["feedback"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_correct_answers_written_differently_keep_full_marks(assignment, tmp_path):
    variants = plants(assignment).VARIANTS
    assert variants, "give at least one differently written correct answer"
    result = attn_check(planted_copy(assignment, variants, tmp_path))
    assert result["score"] == result["max_score"], [e for e in result["exercises"] if not e["passed"]]


def test_one_exercise_is_graded_alone_as_in_the_whole_notebook(tmp_path):
    """`attn check --exercise NAME` grades that exercise as the whole notebook's grading does, and nothing else."""
    assignment = ASSIGNMENTS[1]
    plant = plants(assignment).MISTAKES[0]
    path = planted_copy(assignment, [plant], tmp_path)
    whole = by_id(attn_check(path))
    alone = attn_check(path, only=plant["exercise"])
    assert [e["id"] for e in alone["exercises"]] == [plant["exercise"]]
    assert alone["exercises"][0]["score"] == whole[plant["exercise"]]["score"] < whole[plant["exercise"]]["max_score"]
    assert alone["exercises"][0]["mistake"] == whole[plant["exercise"]]["mistake"] == plant["mistake"]
    cli = attn_check(path, only=plant["exercise"], cli=True)
    assert cli["exercises"][0]["score"] == alone["exercises"][0]["score"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_catalogued_mistake_has_a_plant(assignment):
    from utils.grading import Mistake, load_grader

    grader = load_grader(assignment)
    catalogue = {m.name for m in vars(grader).values() if isinstance(m, Mistake)}
    planted = {m["mistake"] for m in plants(assignment).MISTAKES}
    # Names a grader builds from what it observed (02's "keys and values swapped") form a family its
    # DERIVED_MISTAKES pattern describes: a planted one must belong to it, and the family needs one plant at least.
    derived = getattr(grader, "DERIVED_MISTAKES", None)
    from_family = {n for n in planted if derived is not None and derived.fullmatch(n)}
    assert derived is None or from_family, f"no plant of the derived mistakes {derived.pattern!r}"
    assert catalogue == planted - from_family


def test_a_messy_learner_notebook_costs_only_the_broken_exercise(tmp_path):
    """Infinite loop in one answer, a helper cell the learner added, a test cell they deleted."""
    assignment = "01_attention_intuition"
    path = planted_copy(assignment, [], tmp_path)
    nb = nbs.read(path)
    cells = {nbs.nbgrader_meta(c).get("grade_id"): c for c in nb.cells}
    pool = cells["attention_pool"]
    pool.source = pool.source.replace("### BEGIN SOLUTION", "### BEGIN SOLUTION\n    while True:\n        pass", 1)
    index = nb.cells.index(cells["softmax"])
    helper = nbs.nbformat.v4.new_code_cell("def _my_helper(x):\n    return x - x.max(dim=-1, keepdim=True).values")
    nb.cells.insert(index, helper)
    nb.cells.remove(cells["test_additive_scores"])
    nbs.write(nb, path)
    result = by_id(attn_check(path, env={"ATTN_EXERCISE_TIME_LIMIT": "3"}))
    assert result["attention_pool"]["score"] == 0 and "stopped after" in result["attention_pool"]["feedback"]
    assert result["softmax"]["passed"] and result["additive_scores"]["passed"], result
