"""One result, words at the edges (issue 33): an exercise's result is data (`utils.results`), made once by the checker
or the engine, and said in the learner's language only where it is shown: the test cell's table, the terminal and
`--json`. Which learner cell is which course cell is one helper's answer (`utils.notebooks.course_cells`)."""

from __future__ import annotations

import dataclasses
import json
import re

import nbformat
import pytest
import torch

from utils import i18n
from utils import notebooks as nbs
from utils.engine.checking import render
from utils.grading import Checker, Mistake, report_html
from utils.results import ExerciseResult, Message, NotebookResult, Where, say

NO_SCALE = Mistake("no 1/sqrt(d_k) scaling", "scores grow with d_k", "2. Why divide")


def _failed() -> Checker:
    check = Checker("scaled_dot_product_attention", points=4)
    with check("passes"):
        check.close(torch.ones(2), torch.ones(2))
    with check("no scaling"):
        check.close(torch.arange(4.0) * 2, torch.arange(4.0), mistakes={NO_SCALE: torch.arange(4.0) * 2})
    return check


def test_a_score_is_computed_once_and_again_only_after_a_new_check():
    check = _failed()
    first = check.score()
    assert check.score() is first and isinstance(first.result, ExerciseResult)
    with check("one more"):
        pass
    assert check.score() is not first and len(check.score().result.checks) == 3


def test_the_result_is_frozen_data_and_its_words_are_said_where_they_are_shown():
    """A result is frozen data; each renderer says its words (a check's message, a summary, a note, where it
    happened: Messages) in the language it is shown in."""
    result = _failed().score().result
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.score = 4.0  # type: ignore[misc]
    assert result.mistake == NO_SCALE.name
    with i18n.speaking("zh"):
        chinese = _failed().score().result
        shown = (chinese.feedback(), report_html(chinese.report()), render(NotebookResult("02", (chinese,), "zh")))
    for text in shown:
        assert any("\u4e00" <= ch <= "\u9fff" for ch in text), text[:300]
    blank = Checker("softmax", points=3)
    with blank("calls the stub"):
        raise NotImplementedError()
    stub = blank.score().result
    assert isinstance(stub.summary, Message)  # made once, said twice
    said = {}
    for lang in ("en", "zh"):
        with i18n.speaking(lang):
            said[lang] = (stub.feedback(), render(NotebookResult("01", (stub,), lang)))
    assert "not implemented yet" in said["en"][0] and "not implemented yet" not in said["zh"][0], said
    assert said["zh"][0] in said["zh"][1] and said["en"][0] in said["en"][1]


def test_attn_check_json_is_the_documented_keys_and_nothing_private():
    result = NotebookResult("02", (_failed().score().result,), lang="zh", notes=(Message.of("not isolated: {why}",
                                                                                             why="a test"),))
    out = json.loads(json.dumps(result.to_json()))
    assert set(out) == {"notebook", "score", "max_score", "exercises"}
    assert set(out["exercises"][0]) == {"id", "score", "max_score", "passed", "feedback", "mistake"}
    assert not any(key.startswith("_") for key in out) and out["score"] == result.score
    with i18n.speaking("zh"):
        assert say(result.notes[0]) != "not isolated: a test"  # a note is data, said in the notebook's language


def test_where_is_data_from_the_learners_process_bounded_and_said_in_each_language():
    where = Where.from_data({"function": "f" * 500, "line": 3, "code": "x = y @ z"})
    assert where is not None and len(where.function) == 200 and where.line == 3
    assert Where.from_data({"function": 7}) is None and Where.from_data("(in f, line 3)") is None
    assert Where.from_data({"function": "f", "line": "3"}).line is None  # typed: a string is not a line number
    said = {}
    for lang in ("en", "zh"):
        with i18n.speaking(lang):
            said[lang] = say(where.said())
    assert said["en"].startswith(" (in ") and all("x = y @ z" in s for s in said.values()) and said["en"] != said["zh"]


def test_one_helper_says_which_learner_cell_is_which_course_cell():
    course = nbs.read(nbs.solution_path("01_attention_intuition"))
    learner = nbformat.from_dict(json.loads(json.dumps(course)))
    answer = next(i for i, c in enumerate(learner.cells) if nbs.is_answer_cell(c))
    gid = nbs.nbgrader_meta(learner.cells[answer])["grade_id"]
    copy = nbformat.from_dict(json.loads(json.dumps(learner.cells[answer])))
    learner.cells.insert(answer + 1, copy)  # a duplicated answer cell: the first one is the course's
    markdown = nbformat.v4.new_markdown_cell("my notes")
    markdown.metadata["nbgrader"] = dict(nbs.nbgrader_meta(learner.cells[answer]))  # a re-typed cell keeps its id
    learner.cells.insert(0, markdown)
    matched = nbs.course_cells(course, learner)
    assert nbs.nbgrader_meta(matched[answer + 1])["grade_id"] == gid
    assert answer + 2 not in matched and 0 not in matched
    assert len(matched) == sum(1 for c in course.cells if nbs.nbgrader_meta(c).get("grade_id"))


def _plants() -> dict[str, object]:
    """Wrong answers whose hidden checks say every kind of words: a catalogued mistake (02), the generic diagnoses
    of a tensor (01, 03) and of a count (04), with the checks' labels and messages from the graders' catalogue."""
    def softmax(x, dim=-1):
        return x.exp() / x.exp().sum()  # normalised over the whole tensor

    def scaled_dot_product_attention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1)  # no 1/√d_k
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(-1)
        return weights @ v, weights

    def causal_mask(L):
        return torch.ones(L, L).tril(-1).bool()  # the diagonal forbidden

    def mha_parameter_count(d_model, h, bias=True):
        return 4 * d_model * d_model  # the biases forgotten

    return {f.__name__: f for f in (softmax, scaled_dot_product_attention, causal_mask, mha_parameter_count)}


def test_a_result_graded_in_one_language_reads_in_another_word_for_word_as_one_graded_there():
    """Every word of a result is said when it is shown (issue 33): the hidden checks of four wrong answers graded in
    English and shown in Chinese read exactly as the same answers graded in Chinese, and the other way round, in
    the table's report, the feedback and the terminal."""
    def graded(lang: str) -> list[ExerciseResult]:
        results = []
        with i18n.speaking(lang):
            for name, answer in _plants().items():
                check = Checker(name)
                check.hidden(answer)
                results.append(check.score().result)
        return results

    made = {lang: graded(lang) for lang in ("en", "zh")}
    assert [r.score < r.max_score and r.verdict is not None for r in made["en"]] == [True] * 4
    for lang in ("en", "zh"):
        with i18n.speaking(lang):
            for english, chinese in zip(made["en"], made["zh"]):
                assert english.report() == chinese.report() and english.feedback() == chinese.feedback()
            assert (render(NotebookResult("mixed", tuple(made["en"]), lang))
                    == render(NotebookResult("mixed", tuple(made["zh"]), lang)))
    with i18n.speaking("zh"):
        said = [r.report() for r in made["en"]]
    english_words = re.compile(r"\b(?:the|your|expected|should|differs|matches|output|diagnosis)\b", re.IGNORECASE)
    for report in said:
        for text in [report["feedback"], report["verdict"], *(c["message"] for c in report["checks"] if c["message"]),
                     *(c["name"] for c in report["checks"])]:
            ours = re.sub(r"RuntimeError[：:].*", "", text)  # what PyTorch said to the learner's code stays its own
            assert not english_words.search(ours.replace("`", " ")), text
