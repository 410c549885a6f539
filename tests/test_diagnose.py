"""utils.diagnose: each generic diagnosis on the mistake it describes, and silence where none explains the answer."""

from __future__ import annotations

import math

import pytest
import torch

from utils import diagnose as diagnosis
from utils.grading import Checker, CheckFailure
from utils.results import say


def diagnose(actual, expected, **tolerance):
    """The generic diagnosis as the learner reads it (utils.diagnose gives words said when shown), or None."""
    found = diagnosis.diagnose(actual, expected, **tolerance)
    return None if found is None else say(found)


def count_diagnosis(got, expected, terms):
    found = diagnosis.count_diagnosis(got, expected, terms)
    return None if found is None else say(found)


@pytest.fixture
def x():
    torch.manual_seed(0)
    return torch.randn(2, 4, 6, 8)


def test_axes_in_another_order(x):
    assert "axes in another order" in diagnose(x.transpose(1, 2), x)
    assert "axes in another order" in diagnose(x.permute(0, 2, 1, 3).reshape(2, 6, 4, 8), x)


def test_same_shape_transposed():
    s = torch.randn(3, 5, 5)
    assert "axes 1 and 2 swapped" in diagnose(s.transpose(1, 2), s)


def test_heads_and_features_interleaved():
    # merge_heads with the view in the wrong order: (h, d) flattened as (d, h)
    h, d = 4, 3
    y = torch.randn(2, 5, h * d)
    wrong = y.reshape(2, 5, h, d).transpose(-1, -2).reshape(2, 5, h * d)
    message = diagnose(wrong, y)
    assert "different order" in message and "merged in the opposite order" in message


def test_neighbouring_pairs_exchanged():
    y = torch.randn(5, 8)
    assert "neighbouring pair exchanged" in diagnose(y.reshape(5, 4, 2).flip(-1).reshape(5, 8), y)


def test_a_permutation_is_found_when_two_slices_are_both_within_tolerance():
    # A sinusoidal table's slowest cosines are all ~1: columns 1 and 3 agree to 1e-4, and sin/cos swapped must
    # still be read as the neighbouring-pair exchange (each column's nearest match), not called ambiguous.
    pos = torch.arange(37, dtype=torch.float32)[:, None]
    angle = pos * torch.tensor([2e-4, 1e-4])  # (37, 2): two slow frequencies
    table = torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(37, 4)  # sin, cos, sin, cos
    swapped = torch.stack([angle.cos(), angle.sin()], dim=-1).reshape(37, 4)
    assert torch.allclose(table[:, 1], table[:, 3], atol=1e-4)
    assert "neighbouring pair exchanged" in diagnose(swapped, table, atol=1e-4)


def test_rows_reversed_and_rolled():
    y = torch.randn(6, 4)
    assert "reversed" in diagnose(y.flip(0), y)
    assert "roll" in diagnose(y.roll(2, 0), y)


@pytest.mark.parametrize("factor, name", [(math.sqrt(64), "√64"), (1 / math.sqrt(16), "1/√16"), (2.0, "2"),
                                          (-1.0, "−1"), (1 / 8, "1/8")])
def test_constant_factor_is_named(x, factor, name):
    message = diagnose(x * factor, x)
    assert "multiplied by" in message and name in message


def test_a_factor_no_one_writes_points_to_a_normalising_sum(x):
    message = diagnose(x * 1.043, x)
    assert "about 1.043" in message and "normalising sum" in message and "√d_k" not in message
    assert "normalising sum" not in diagnose(x * 8, x)


def test_constant_shift(x):
    assert "plus a constant 0.5" in diagnose(x + 0.5, x)


def test_some_rows_wrong(x):
    wrong = x.clone()
    wrong[..., -1, :] += 1.0
    message = diagnose(wrong, x)
    assert "rows of your output are right" in message and "wrong" in message


def test_a_mistake_in_the_columns_is_not_blamed_on_the_rows():
    """05's sinusoid with the exponent i/d for 2i/d: row 0 (position 0) and the first pair's columns are right, every
    other entry wrong. The learner review met "look at what the wrong rows have in common" for it: the rows were
    innocent."""
    pos, i = torch.arange(10.0)[:, None], torch.arange(8.0)
    table = lambda omega: torch.stack((torch.sin(pos * omega), torch.cos(pos * omega)), -1).flatten(-2)  # noqa: E731
    message = diagnose(table(10000 ** (-i / 16)), table(10000 ** (-2 * i / 16)))
    assert message.startswith("your output is right in 1 of 10 rows and in 2 of 16 columns (indices 0, 1)"), message
    assert "depends on the column" in message
    x = torch.randn(10, 6)
    wrong = x.clone()
    wrong[3, 2] += 1.0  # one entry of one row: no column is to blame, the rows' message stays
    assert diagnose(wrong, x).startswith("9 of 10 rows of your output are right"), diagnose(wrong, x)


def test_rows_that_vanished_in_exp():
    """A row maximum subtracted only where positive: rows of scores far below zero underflow to all zeros."""
    scores = torch.randn(6, 9) - torch.tensor([[0.0], [0.0], [2000.0], [0.0], [3000.0], [0.0]])
    expected = torch.softmax(scores, -1)
    wrong = torch.exp(scores - scores.amax(-1, keepdim=True).clamp(min=0))
    wrong = wrong / wrong.sum(-1, keepdim=True).clamp(min=1e-30)
    message = diagnose(wrong, expected)
    assert message.startswith("2 of 6 rows of your output are all zeros") and "indices 2, 4" in message, message
    assert diagnose(expected * torch.tensor([[1.0]] * 5 + [[2.0]]), expected) is not None  # not all zeros: another
    assert "all zeros" not in (diagnose(expected * 2, expected) or "")
    eye, holed = torch.eye(6), torch.eye(6)
    holed[1::2] = 0.0  # a rotation's odd rows lost: zero rows of a matrix that is no distribution, not an exp
    assert "vanish in exp" not in (diagnose(holed, eye) or ""), diagnose(holed, eye)


def test_wrong_dtype_right_values(x):
    assert "dtype is torch.float64" in diagnose(x.double(), x)


def test_broadcast_shape(x):
    e = torch.randn(3, 5)[:, :1].expand(3, 5).contiguous()  # equal columns: (3, 1) broadcasts to it
    assert "once broadcast" in diagnose(e[:, :1], e)


def test_non_finite_rows():
    e = torch.softmax(torch.randn(4, 5), -1)
    a = e.clone()
    a[2] = float("nan")
    message = diagnose(a, e)
    assert "NaN in 1 of 4 rows" in message and "whole rows" in message


def test_boolean_masks():
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert "opposite" in diagnose(~causal, causal)
    assert "transposed" in diagnose(causal.T, causal)
    assert "diagonal" in diagnose(torch.ones(5, 5, dtype=torch.bool).tril(-1), causal)
    window = causal & ~torch.ones(5, 5, dtype=torch.bool).tril(-3)
    off_by_one = causal & ~torch.ones(5, 5, dtype=torch.bool).tril(-2)
    assert "off-by-one" in diagnose(off_by_one, window)


@pytest.mark.parametrize("seed", range(20))
def test_no_diagnosis_for_an_unrelated_answer(seed):
    torch.manual_seed(seed)
    e = torch.randn(3, 4, 5)
    assert diagnose(torch.randn(3, 4, 5), e) is None
    assert diagnose(e + 0.1 * torch.randn(3, 4, 5), e) is None  # noise: no constant factor or shift explains it
    assert diagnose(torch.randn(3, 4), e) is None


def test_no_diagnosis_where_the_expected_tensor_says_nothing():
    assert diagnose(torch.full((4, 4), 0.5), torch.full((4, 4), 0.25)) is None  # constant: factor or shift?
    assert diagnose(torch.tensor([1.0, 2.0]), torch.tensor([2.0, 4.0])) is None  # too few entries


def test_checker_adds_the_diagnosis_only_without_a_catalogue_match(x):
    check = Checker("demo", points=1)
    with pytest.raises(CheckFailure, match="Diagnosis: .*multiplied by 2"):
        check.close(2 * x, x, "output")
    from utils.grading import Mistake

    twice = Mistake("scaled twice", "explained", "Section")
    with pytest.raises(CheckFailure) as caught:
        check.close(2 * x, x, "output", mistakes={twice: 2 * x})
    assert "Diagnosis" not in str(caught.value) and "scaled twice" in str(caught.value)


def test_an_extra_or_missing_position_at_one_end_is_named_with_its_axis_and_end():
    ys = torch.randint(3, 19, (6, 8))
    with_bos = torch.cat([torch.ones(6, 1, dtype=torch.long), ys], dim=1)
    assert "1 extra entry at the start of axis 1" in diagnose(with_bos, ys)
    assert "1 entry missing at the end of axis 1" in diagnose(ys[:, :-1], ys)
    assert "2 extra entries at the end of axis 0" in diagnose(torch.cat([ys, ys[:2] + 100]), ys)
    assert diagnose(torch.randint(3, 19, (6, 9)), ys) is None  # one more column, but the rest does not match either
    assert diagnose(ys[:1, :-1], ys) is None  # two axes differ: not this diagnosis


def test_a_size_1_axis_against_a_constant_one_is_a_broadcast_not_missing_entries():
    # build_attention_mask without the expand: (B, 1, 1, Lk) where (B, 1, Lq, Lk) repeats the row for every query
    keys = torch.arange(7)[None, None, None, :] < torch.tensor([3, 7, 0, 5])[:, None, None, None]
    message = diagnose(keys.long(), keys.expand(-1, 1, 7, 7).long())
    assert "once broadcast" in message and "missing at the start" not in message
    # the longer answer with a repeated slice keeps the edge diagnosis: a first cache update stored twice
    k = torch.randn(2, 3, 1, 4)
    message = diagnose(torch.cat([k, k], dim=2), k)
    assert "1 extra entry at the start of axis 2" in message
    # a size-1 answer whose one slice is not what every expected slice holds is neither
    e = torch.randn(2, 5, 4)
    assert diagnose(e[:, :1] + 1.0, e) is None


def test_dtype_named_when_the_values_differ_only_by_its_rounding():
    # float64 work written into a float32 buffer, checked at float64's tolerance
    e = torch.randn(2, 10, 8, dtype=torch.float64) * 3
    for dtype, name in ((torch.float32, "torch.float32"), (torch.float16, "torch.float16")):
        message = diagnose(e.to(dtype), e, rtol=1e-8, atol=1e-10)
        assert f"dtype is {name}, not torch.float64" in message and f"precision of {name}" in message
    assert "dtype is torch.float64, not torch.float32" in diagnose(e, e.float(), rtol=1e-8, atol=1e-10)


def test_dtype_not_named_when_the_values_are_wrong_beyond_its_rounding():
    torch.manual_seed(3)
    e = torch.randn(2, 10, 8, dtype=torch.float64)
    off = (e * (1 + 1e-3 * torch.randn_like(e))).float()  # float32, and wrong by 0.1 %: more than rounding
    assert diagnose(off, e, rtol=1e-8, atol=1e-10) is None
    assert diagnose((e + 1e-2 * torch.randn_like(e)).half(), e, rtol=1e-8, atol=1e-10) is None
    assert diagnose(e.float().round(), e, rtol=1e-8, atol=1e-10) is None  # integers in a float dtype: not rounding


# -- 2026-11-25: relations a learner's answer often has with the expected one, whatever the exercise -----------------
@pytest.fixture
def scores():
    torch.manual_seed(1)
    return torch.randn(2, 3, 5, 7) * 2


def test_log_probabilities_where_probabilities_were_asked_for(scores):
    weights = torch.softmax(scores, -1)
    assert "logarithm of the expected" in diagnose(torch.log_softmax(scores, -1), weights)
    assert "exponential of the expected" in diagnose(scores.exp(), scores)


def test_softmax_applied_or_missing_is_named_with_its_axis(scores):
    weights = torch.softmax(scores, -1)
    assert "softmax (along the last axis) of the expected" in diagnose(weights, scores)
    missing = diagnose(scores, weights)
    assert "is missing" in missing and "scores before the softmax" in missing
    # a shift per row does not change a softmax: scores minus their row max are still "the scores before it"
    assert "scores before the softmax" in diagnose(scores - scores.amax(-1, keepdim=True), weights)


def test_normalised_over_the_wrong_axis(scores):
    message = diagnose(torch.softmax(scores, -2), torch.softmax(scores, -1))
    assert "sums to 1 along the second-to-last axis (axis 2) instead of the last axis (axis 3)" in message


def test_every_row_scaled_by_its_own_factor(scores):
    weights = torch.softmax(scores, -1)
    unnormalised = weights * torch.rand(2, 3, 5, 1).add(0.5)
    assert "factor of its own" in diagnose(unnormalised, weights)
    assert "factor of its own" not in (diagnose(weights * 3, weights) or "")  # one factor: "multiplied by 3"


def test_an_axis_reduced_away_is_named_with_its_position(x):
    assert "summed over axis 1 (size 4)" in diagnose(x.sum(1), x)
    assert "averaged over axis 0 (size 2)" in diagnose(x.mean(0), x)
    assert "first entry of axis 2" in diagnose(x[:, :, 0], x)


def test_a_missing_size_1_axis_is_named_by_its_position():
    torch.manual_seed(2)
    m = torch.randn(3, 1, 7, 7)
    assert "size 1 at position 1 of the expected shape is missing" in diagnose(m[:, 0], m)
    assert "extra axis of size 1 at position 0" in diagnose(m[None], m)


def test_pieces_added_where_they_should_be_concatenated(x):
    merged = x.transpose(1, 2).reshape(2, 6, 32)  # (B, L, h * d) from (B, h, L, d)
    summed = x.sum(1)  # (B, L, d): the heads added instead of put side by side
    assert "4 pieces of size 8 along axis 2 added together" in diagnose(summed, merged)
    assert "averaged" in diagnose(x.mean(1), merged)


def test_the_new_relations_stay_silent_on_unrelated_answers(scores):
    torch.manual_seed(3)
    weights = torch.softmax(scores, -1)
    for wrong in (torch.rand_like(weights), torch.softmax(torch.randn_like(scores), -1), weights.flip(-1) * 0.9 + 0.01):
        message = diagnose(wrong, weights) or ""
        assert not any(w in message for w in ("logarithm", "softmax", "wrong axis", "factor of its own")), message
    assert diagnose(torch.randn(2, 6, 8), torch.randn(2, 6, 32)) is None


def test_a_wrong_count_is_explained_in_the_exercises_own_quantities():
    N, d = 1024, 64
    terms = {"N·d": N * d, "N": N}
    assert "short by exactly N (= 1024)" in count_diagnosis(5000 - N, 5000, terms)
    assert "over by exactly 2 × N·d" in count_diagnosis(5000 + 2 * N * d, 5000, terms)
    assert "exactly 1/2 times the expected" in count_diagnosis(2500, 5000, {})
    assert count_diagnosis(5000, 5000, terms) is None
    assert count_diagnosis(4999, 5000, terms) is None  # nothing explains an odd difference
    assert count_diagnosis(2.5, 5000, terms) is None  # not a whole number: the type check says so
