"""Unit tests of the grading harness: checks isolate failures, score partially, teach, and hide secrets."""

from __future__ import annotations

import warnings

import nbformat
import pytest
import torch
from nbgrader.utils import determine_grade

from utils import grading
from utils.grading import RESULT_MIME, Checker, CheckFailure, Mistake, expect_pair, identify, load_weights
from utils.results import say

NO_SCALE = Mistake("no scaling", "scores grow with d_k", "Why divide")


def test_all_checks_passing_earn_full_points():
    check = Checker("ex", points=3)
    with check("one"):
        check.close(torch.ones(2), torch.ones(2))
    with check("two"):
        check.true(True, "never shown")
    score = check.score()
    assert float(score) == 3.0 and score.report["passed"] is True
    assert score.report["feedback"] == "all 2 checks passed."


def test_a_failing_check_costs_its_share_only_and_says_why():
    check = Checker("ex", points=2)
    with check("passes"):
        pass
    with check("fails"):
        check.close(torch.zeros(2), torch.ones(2), "row sums")
    score = check.score()
    assert float(score) == 1.0
    assert "row sums differs from the expected values in 2 of 2 entries" in score.report["feedback"]
    assert "expected [1.0, 1.0]" in score.report["feedback"]  # visible checks may show small expected values


def test_not_implemented_anywhere_scores_zero_even_if_other_checks_pass():
    check = Checker("ex", points=2)
    with check("unrelated"):
        pass
    with check("calls the stub"):
        raise NotImplementedError()
    score = check.score()
    assert float(score) == 0.0
    assert "not implemented yet" in score.report["feedback"]


def test_a_learners_exception_is_reported_with_their_line():
    def learner(x):
        return x @ torch.ones(3, 3)  # wrong inner size

    check = Checker("ex", points=1)
    with check("runs"):
        learner(torch.ones(2, 2))
    message = check.score().report["checks"][0]["message"]
    assert message.startswith("your code raised RuntimeError")
    assert "in learner" in message and "x @ torch.ones(3, 3)" in message


def test_an_infinite_loop_is_stopped_and_later_checks_get_a_short_limit(monkeypatch):
    monkeypatch.setattr(grading, "CHECK_TIME_LIMIT_S", 0.3)
    monkeypatch.setattr(grading, "AFTER_TIMEOUT_S", 0.1)
    check = Checker("ex", points=2)
    for name in ("first", "second"):
        with check(name):
            while True:
                pass
    messages = [c["message"] for c in check.score().report["checks"]]
    assert messages[0].startswith("stopped after 0.3 s") and messages[1].startswith("stopped after 0.1 s")
    assert float(check.score()) == 0.0


def test_warnings_are_recorded_not_printed():
    check = Checker("ex", points=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # anything escaping the check would raise here
        with check("warns"):
            warnings.warn("deprecated thing", UserWarning, stacklevel=1)
    report = check.score().report
    assert report["passed"] and "deprecated thing" in report["checks"][0]["message"]


def test_checks_do_not_disturb_the_learners_random_state():
    torch.manual_seed(0)
    expected = torch.rand(1)
    torch.manual_seed(0)
    check = Checker("ex", points=1)
    with check("uses randomness"):
        torch.randn(100)
    assert torch.equal(torch.rand(1), expected)


@pytest.mark.parametrize(
    "actual, fragment",
    [
        ((torch.ones(2), torch.ones(2)), "should be a single tensor, got a tuple of two"),
        ([1.0, 1.0], "should be a torch.Tensor, got list"),
        (torch.ones(3), "has shape (3,), expected (2,)"),
        (torch.ones(2, dtype=torch.float64), "has dtype torch.float64, expected torch.float32"),
        (torch.tensor([float("nan"), 1.0]), "contains NaN in 1 of 2 entries"),
    ],
)
def test_close_explains_each_kind_of_wrong_answer(actual, fragment):
    check = Checker("ex", points=1)
    with pytest.raises(CheckFailure, match=None) as info:
        check.close(actual, torch.ones(2))
    assert fragment in str(info.value)


def test_a_wrong_scalar_is_shown_as_a_number_not_a_crash():
    """The teacher's review: formatting a 0-d tensor raised TypeError inside the grader, blamed on the test line."""
    check = Checker("ex", points=1)
    with check("sum of the weights"):
        check.close(torch.tensor(0.75), torch.tensor(1.0), "sum of the weights")
    message = check.score().report["checks"][0]["message"]
    assert message == ("sum of the weights differs from the expected values in 1 of 1 entries (largest difference "
                       "0.25). Got 0.75, expected 1.0."), message


def test_close_compares_boolean_masks_and_counts_wrong_entries():
    check = Checker("ex", points=1)
    with pytest.raises(CheckFailure, match="differs from the expected values in 1 of 4 entries"):
        check.close(torch.tensor([True, True, False, False]), torch.tensor([True, False, False, False]), "mask")


def test_a_catalogued_mistake_is_named_with_its_section():
    check = Checker("ex", points=1)
    wrong = torch.tensor([2.0, 4.0])
    with check("values"):
        check.close(wrong.clone(), torch.ones(2), mistakes={NO_SCALE: wrong})
    report = check.score().report
    assert report["mistake"] == "no scaling"
    assert "no scaling: scores grow with d_k — see 'Why divide'" in report["feedback"]


def test_a_mistake_seen_by_several_checks_is_explained_once():
    check = Checker("ex", points=3)
    wrong = torch.tensor([2.0, 4.0])
    for name in ("first", "second", "third"):
        with check(name):
            check.close(wrong.clone(), torch.ones(2), mistakes={NO_SCALE: wrong})
    report = check.score().report
    feedback = report["feedback"]
    # verdict first: the mistake and its section on the first line, then the checks that show it, sharing one line
    assert feedback.splitlines()[0] == say(NO_SCALE.describe()) and feedback.count("scores grow with d_k") == 1
    assert "[first] (and 2 more checks) output differs" in feedback and len(feedback.splitlines()) == 2
    # each check's own message (the table's fold, `attn check --verbose`) explains it once and refers to it after
    messages = [c["message"] for c in report["checks"]]
    assert "scores grow with d_k" in messages[0]
    assert all(m.endswith("(the same known mistake, no scaling)") for m in messages[1:]), messages


def test_a_mistake_is_named_only_if_no_comparison_that_offered_it_contradicts_it():
    """softmax(scores * mask): its fully masked rows look like a -1e9 fill, its full output does not."""
    fill = Mistake("-1e9 instead of -inf", "a finite fill", "Masks")
    check = Checker("ex", points=2)
    expected, like_fill, answer = torch.tensor([0.5, 0.5, 0.0]), torch.tensor([0.4, 0.4, 0.2]), torch.tensor([0.3, 0.3, 0.4])
    with check("the whole output"):
        check.close(answer, expected, mistakes={fill: like_fill})
    with check("one row of it"):
        check.true(False, "the empty row should be all zeros.", fill)
    report = check.score().report
    assert report["mistake"] is None and "known mistake" not in report["feedback"], report
    assert "the empty row should be all zeros." in report["feedback"]

    check = Checker("ex", points=2)  # the same answer as the mistake: named, once
    with check("the whole output"):
        check.close(like_fill, expected, mistakes={fill: like_fill})
    with check("one row of it"):
        check.true(False, "the empty row should be all zeros.", fill)
    report = check.score().report
    assert report["mistake"] == fill.name and report["feedback"].count("a finite fill") == 1


def test_every_case_of_a_check_runs_and_a_mistake_must_explain_all_of_them():
    """A causal mask without its diagonal equals the inverted one at L = 1 only: not "inverted polarity"."""
    inverted = Mistake("inverted polarity", "True marks what to block", "Masks")
    check = Checker("ex", points=1)
    ran = []
    with check("hidden sizes, smallest first"):
        for L in (1, 4):
            with check.case():
                ran.append(L)
                expected = torch.ones(L, L, dtype=torch.bool).tril()
                check.close(torch.ones(L, L, dtype=torch.bool).tril(-1), expected, mistakes={inverted: ~expected})
    report = check.score().report
    assert ran == [1, 4] and not report["passed"]
    assert report["mistake"] is None and "(1, 1)" not in report["feedback"], report
    assert "differs from the expected values in 1 of 1 entries" in report["feedback"]  # the first failed case

    check = Checker("ex", points=1)
    with check("the truly inverted mask"):
        for L in (1, 4):
            with check.case():
                expected = torch.ones(L, L, dtype=torch.bool).tril()
                check.close(~expected, expected, mistakes={inverted: ~expected})
    assert check.score().report["mistake"] == "inverted polarity"


def test_identify_requires_matching_values_not_just_shape():
    assert identify(torch.ones(2), {NO_SCALE: torch.zeros(2)}) is None
    assert identify(torch.full((2,), float("nan")), {NO_SCALE: torch.full((2,), float("nan"))}) is NO_SCALE


def test_hidden_checks_never_print_expected_values(tmp_path, monkeypatch):
    (tmp_path / "99_demo.py").write_text(
        "import torch\n"
        "def make_references():\n    return {'x': torch.tensor([0.123456, 0.654321])}\n"
        "def hidden(check, refs, fn):\n"
        "    with check('matches hidden reference'):\n        check.close(fn(), refs['x'])\n"
        "HIDDEN_TESTS = {'ex': hidden}\n"
    )
    from safetensors.torch import save_file

    save_file({"x": torch.tensor([0.123456, 0.654321])}, str(tmp_path / "99_demo.safetensors"))
    monkeypatch.setenv(grading.GRADER_ENV, str(tmp_path))
    check = Checker("ex", points=1)
    check.hidden("99_demo", lambda: torch.zeros(2))
    report = check.score().report
    assert report["checks"][0]["hidden"] and not report["checks"][0]["passed"]
    assert "0.1235" not in report["feedback"] and "0.123456" not in report["feedback"]
    assert report["graded"] is True


def test_missing_grader_folder_explains_where_hidden_tests_live(tmp_path, monkeypatch):
    monkeypatch.setenv(grading.GRADER_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="ship with the course repository"):
        Checker("ex", points=1).hidden("01_attention_intuition")


def test_nbgrader_reads_the_score_as_partial_credit():
    check = Checker("ex", points=4)
    with check("a"):
        pass
    with check("b"):
        raise ValueError("boom")
    score = check.score()
    bundle = score._repr_mimebundle_()
    output = nbformat.v4.new_output("execute_result", data={"text/plain": repr(score), **bundle}, execution_count=1)
    cell = nbformat.v4.new_code_cell(
        "check.score()",
        metadata={"nbgrader": {"grade": True, "solution": False, "points": 4, "grade_id": "t", "locked": True}},
        outputs=[output],
    )
    assert determine_grade(cell) == (2.0, 4.0)
    assert bundle[RESULT_MIME]["score"] == 2.0 and "<table" in bundle["text/html"]


def test_points_must_be_positive():
    with pytest.raises(ValueError, match="points must be positive"):
        Checker("ex", points=0)


def test_expect_pair_explains_a_missing_tuple():
    assert expect_pair((1, 2)) == (1, 2)
    with pytest.raises(CheckFailure, match=r"attention_pool should return a tuple \(output, weights\), got Tensor"):
        expect_pair(torch.ones(2), "attention_pool")


def test_load_weights_copies_by_name_and_says_what_is_missing():
    layer = torch.nn.Module()
    layer.W_q = torch.nn.Linear(3, 2)
    weights = {"W_q.weight": torch.ones(2, 3), "W_q.bias": torch.zeros(2)}
    load_weights(layer, weights, "W_q = nn.Linear(3, 2)")
    assert torch.equal(layer.W_q.weight, torch.ones(2, 3)) and torch.equal(layer.W_q.bias, torch.zeros(2))
    with pytest.raises(CheckFailure, match=r"no parameter\(s\) \['W_k.weight'\]: it needs W_q and W_k"):
        load_weights(layer, {"W_k.weight": torch.ones(2, 3)}, "W_q and W_k")
    with pytest.raises(CheckFailure, match=r"W_q.weight has shape \(2, 3\), expected \(4, 3\)"):
        load_weights(layer, {"W_q.weight": torch.ones(4, 3)}, "W_q")
    with pytest.raises(CheckFailure, match="should be an nn.Module"):
        load_weights(object(), weights, "W_q")


def test_live_kernel_names_the_syntax_error_that_left_an_exercise_undefined():
    # In JupyterLab a SyntaxError in an answer cell leaves the name undefined; the test cell under it should say
    # which line to fix, not only "NameError". Run in a fresh IPython shell (its own process: a shell is global).
    import subprocess
    import sys
    import textwrap

    from utils import notebooks as nbs

    script = textwrap.dedent('''
        from IPython.core.interactiveshell import InteractiveShell
        sh = InteractiveShell.instance()
        run = lambda src: sh.run_cell(src, store_history=True)
        run("import torch\\nfrom utils.grading import Checker")
        run("def softmax(x, dim=-1):\\n    e = x.exp(\\n    return e / e.sum(dim, keepdim=True)\\n")
        test = "c = Checker('softmax', points=1)\\nwith c('values'):\\n    softmax(torch.ones(3))\\nprint('MSG', c.results[0].message)"
        run(test)
        run("def unrelated():\\n    pass")
        run("del softmax") if "softmax" in sh.user_ns else None
        run("def softmax(x, dim=-1):\\n    return x.softmax(dim)\\n")
        run("del softmax")
        run(test)
    ''')
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=str(nbs.ROOT))
    messages = [line for line in proc.stdout.splitlines() if line.startswith("MSG")]
    assert len(messages) == 2, proc.stdout + proc.stderr
    assert "its cell has a SyntaxError on line 2: `e = x.exp(`" in messages[0]
    assert "SyntaxError" not in messages[1] and "NameError" in messages[1]  # its cell compiles now: not the reason


# -- verdict first: the likely mistake on the first line, the few checks that show it, the rest one flag away --------
def _five_failures(mistake: Mistake | None) -> Checker:
    check = Checker("ex", points=6)
    with check("passes"):
        check.close(torch.ones(2), torch.ones(2))
    with check("crashes first"):
        raise RuntimeError("The size of tensor a (6) must match the size of tensor b (4)")
    for i in range(4):
        with check(f"reference {i}"):
            wrong = torch.arange(1.0, 7.0) * (i + 2)
            check.close(wrong.clone() * 2, wrong, mistakes={mistake: wrong * 2} if mistake else None)
    return check


def test_the_first_line_of_feedback_names_the_likely_mistake_then_at_most_three_checks():
    report = _five_failures(NO_SCALE).score().report
    lines = report["feedback"].splitlines()
    assert lines[0] == say(NO_SCALE.describe()), lines  # the verdict leads, ahead of the crash that came first
    shown = [line for line in lines[1:] if line.startswith("[")]
    assert len(shown) <= grading.LEAD_CHECKS and shown[0].startswith("[reference 0]"), lines
    assert lines[-1].startswith("(and ") and "attn check --verbose" in lines[-1], lines
    assert "RuntimeError" not in report["feedback"]  # one of the checks behind the flag
    assert report["feedback"].count("scores grow with d_k") == 1
    # every check is still in the report (the table's fold, `attn check --verbose`), each with its whole message
    assert [c["name"] for c in report["checks"]][:2] == ["passes", "crashes first"]
    assert "RuntimeError" in report["checks"][1]["message"]
    assert report["verdict"] == say(NO_SCALE.describe()) and report["lead"][0] == 2


def test_without_a_catalogued_mistake_the_generic_diagnosis_is_the_verdict():
    report = _five_failures(None).score().report
    first = report["feedback"].splitlines()[0]
    assert first.startswith("Diagnosis: ") and "multiplied by 2" in first, first
    assert report["mistake"] is None and "known mistake" not in report["feedback"]


def test_the_table_leads_with_the_verdict_and_folds_every_check_into_details():
    failed = _five_failures(NO_SCALE).score()
    page = failed._repr_mimebundle_()["text/html"]
    assert page.index("scores grow with d_k") < page.index("<table") < page.index("<details>")
    assert "all 6 checks (1 passed, 5 failed)" in page and page.count("crashes first") == 1  # only in the fold
    check = Checker("ex", points=1)  # a passed exercise: one table, as before (stored notebook outputs stay as they were)
    with check("fine"):
        check.close(torch.ones(2), torch.ones(2))
    report = check.score().report
    assert "lead" not in report and "verdict" not in report
    assert "<details>" not in grading.report_html(report)


def test_validate_shows_points_and_verdict_on_the_first_line_of_a_failing_cell(monkeypatch, capsys):
    """nbgrader's Validate dialog shows a failing cell's source, then its stderr: that begins with what to fix."""
    monkeypatch.setenv("NBGRADER_VALIDATING", "1")
    _five_failures(NO_SCALE).score()
    first, *rest = capsys.readouterr().err.splitlines()
    assert first.startswith("ex: ") and " points — " in first and "scores grow with d_k" in first, first
    assert rest and len(rest) <= 5, rest
    check = Checker("ex", points=1)  # a passing cell says nothing there
    with check("fine"):
        pass
    check.score()
    assert capsys.readouterr().err == ""


def test_attn_check_verbose_lists_every_check():
    from utils.engine.checking import render
    from utils.results import NotebookResult

    result = NotebookResult("nb", (_five_failures(NO_SCALE).score().result,))
    short, verbose = render(result), render(result, verbose=True)
    assert "RuntimeError" not in short and "attn check --verbose" in short
    assert "RuntimeError" in verbose and "[passes]" in verbose and "attn check --verbose" not in verbose


def test_attention_variants_compute_the_standard_mistakes_from_q_k_v():
    import math

    from utils.attention_variants import attention, attention_variants

    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
    mask = torch.rand(5, 7) > 0.3
    mask[:, 0] = True
    out, w = attention(q, k, v, mask)
    torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    variants = attention_variants(q, k, v, mask, d_model=24)
    torch.testing.assert_close(variants["no_scale"][0],
                               torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0))
    torch.testing.assert_close(variants["scale_d_model"][1], attention(q, k, v, mask, divisor=math.sqrt(24))[1])
    assert "mask_inverted" not in attention_variants(q, k, v) and "scale_d_model" not in attention_variants(q, k, v)
    with pytest.raises(KeyError):
        attention_variants(q, k, v, concepts=("no_such_mistake",))


def test_equal_names_a_mistake_only_where_every_comparison_agrees_and_trusts_only_plain_values():
    from utils.grading import Checker, Mistake
    small = Mistake("small", "", "s")
    check = Checker("counts", 2)
    with check("a small case, where the mistake happens to give the learner's count"):
        check.equal(5, 7, "5 is wrong", {small: 5})
    with check("a larger case, where it does not"):
        check.equal(40, 70, "40 is wrong", {small: 50})
    check.score()
    assert [r.mistake for r in check.results] == [None, None]  # refuted by the second case: no name at all

    class Yes:
        def __eq__(self, other):
            return True

    check = Checker("counts", 1)
    with check("an object that equals everything"):
        check.equal(Yes(), 7, "not a count")
    with check("a numpy integer is a count"):
        import numpy as np
        check.equal(np.int64(7), 7, "7")
    assert [r.passed for r in check.results] == [False, True]


def test_a_random_answer_is_the_verdict_even_where_more_checks_share_another_diagnosis():
    from utils.grading import VARIES, CheckFailure, CheckResult, _verdict
    from utils.results import Message
    scaled = "your output is the expected one multiplied by about 1.111 everywhere"
    varied = Message.of(VARIES, changed=3, total=12)
    results = [CheckResult(f"c{i}", 1, True, passed=False, failure=CheckFailure("wrong", diagnosis=d))
               for i, d in enumerate([scaled, scaled, varied, scaled])]
    verdict, lead = _verdict(results)
    verdict = say(verdict)
    assert verdict == f"Diagnosis: {varied}" and lead[0] == 2
    assert verdict.startswith("Diagnosis: your output changes from one call to the next with the same inputs (3 of 12")


def test_a_spurious_ast_recursion_error_is_parsed_again(monkeypatch):
    """CPython 3.11's "AST constructor recursion depth mismatch" (python/cpython#106905) once failed a grading:
    the checker parses again; any other SystemError still surfaces."""
    import ast

    from utils.engine import checking

    real, calls = ast.parse, []

    def flaky(source, *args, **kwargs):
        calls.append(source)
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=39, after=36)")
        return real(source, *args, **kwargs)

    monkeypatch.setattr(checking.ast, "parse", flaky)
    assert checking.free_names("y = x + 1") == {"x"} and len(calls) == 2
    monkeypatch.setattr(checking.ast, "parse", lambda *a, **k: (_ for _ in ()).throw(SystemError("something else")))
    with pytest.raises(SystemError, match="something else"):
        checking.is_definition("def f(): pass")
