"""Each exercise is graded on its own: a bug in an earlier exercise costs points there, not again in a later one.

A later exercise's code calls the earlier ones by name (MultiHeadAttention calls split_heads and merge_heads).
While its hidden checks run, the grader's own implementation stands in for those names (`utils.grading.standing_in`;
in the learner's process the stand-ins call back to the grader, so no grader code enters it). The visible checks
still run the learner's own parts: they are what the learner debugs with.
"""

from __future__ import annotations

import re

import pytest

from utils import notebooks as nbs

from .conftest import attn_check, by_id, planted_copy

# (notebook, a catalogued bug planted in an earlier exercise, the later exercise that calls it and must not pay again)
CASES = [
    # attention_pool written with the learner's own softmax, and that softmax without the max shift
    ("01_attention_intuition",
     {"cell": "softmax", "old": "shifted = x - x.max(dim=dim, keepdim=True).values", "new": "shifted = x",
      "exercise": "softmax", "also": [{"cell": "attention_pool", "old": "weights = torch.softmax(scores, dim=-1)",
                                       "new": "weights = softmax(scores)"}]}, "attention_pool"),
    # build_attention_mask written with the learner's own padding_mask and causal_mask, both upside down
    ("03_masking",
     {"cell": "padding_mask", "old": "positions[None, :] < lengths[:, None]", "new": "positions[None, :] >= lengths[:, None]",
      "exercise": "padding_mask", "also": [
          {"cell": "causal_mask", "old": ".tril()  # (L, L)", "new": ".triu()  # (L, L)"},
          {"cell": "build_attention_mask",
           "old": "    mask = j[None, None, None, :] < key_lengths[:, None, None, None]  # (B, 1, 1, Lk): real keys only\n",
           "new": "    mask = padding_mask(key_lengths, Lk)[:, None, None, :]  # (B, 1, 1, Lk)\n"},
          {"cell": "build_attention_mask", "old": "mask = mask & (j[None, :] <= i[:, None])",
           "new": "mask = mask & causal_mask(max(Lq, Lk))[:Lq, :Lk]"}]},
     "build_attention_mask"),
    ("02_scaled_dot_product_attention",
     {"cell": "scaled_dot_product_attention", "old": "scores = (q / math.sqrt(d_k)) @ k.transpose(-2, -1)",
      "new": "scores = q @ k.transpose(-2, -1)", "exercise": "scaled_dot_product_attention"}, "SelfAttention"),
    ("04_multi_head_attention",
     {"cell": "split_heads", "old": "x.view(B, L, num_heads, D // num_heads).transpose(1, 2)",
      "new": "x.reshape(B, num_heads, L, D // num_heads)", "exercise": "split_heads"}, "MultiHeadAttention"),
    ("04_multi_head_attention",
     {"cell": "merge_heads", "old": "x.transpose(1, 2).reshape(B, L, h * d)", "new": "x.reshape(B, L, h * d)",
      "exercise": "merge_heads"}, "MultiHeadAttention"),
    # load_gpt2_attention ports into the course's module: a wrong MultiHeadAttention costs nothing there
    ("04_multi_head_attention",
     {"cell": "MultiHeadAttention", "old": "math.sqrt(self.d_k)", "new": "math.sqrt(self.d_model)",
      "exercise": "MultiHeadAttention"}, "load_gpt2_attention"),
    ("05_positional_encoding",
     {"cell": "sinusoidal_encoding", "old": "10000.0 ** (-2 * i / d_model)", "new": "1000.0 ** (-2 * i / d_model)",
      "exercise": "sinusoidal_encoding"}, "PositionalEncoding"),
    ("05_positional_encoding",
     {"cell": "apply_rope", "old": "out1 = x1 * cos - x2 * sin", "new": "out1 = x1 * cos + x2 * sin",
      "exercise": "apply_rope"}, "name_the_rope_bug"),
    ("06_grouped_query_attention",
     {"cell": "repeat_kv", "old": "x.repeat_interleave(n_rep, dim=1)", "new": "x.repeat(1, n_rep, 1, 1)",
      "exercise": "repeat_kv"}, "GroupedQueryAttention"),
    ("06_grouped_query_attention",
     {"cell": "repeat_kv", "old": "x.repeat_interleave(n_rep, dim=1)", "new": "x.repeat(1, n_rep, 1, 1)",
      "exercise": "repeat_kv"}, "KVCache"),
    ("07_flash_attention",
     {"cell": "flash_attention", "old": "for k_start in range(0, kv_stop, block_size_k):",
      "new": "for k_start in range(0, kv_stop - block_size_k + 1, block_size_k):", "exercise": "flash_attention"},
     "FlashAttentionFunction"),
]


def _visible_checks(assignment: str, exercise: str) -> list[re.Pattern]:
    """The names of the checks a learner sees in the exercise's test cell (f-string fields match anything)."""
    for cell in nbs.read(nbs.solution_path(assignment)).cells:
        if cell.cell_type == "code" and re.search(rf"Checker\(\s*[\"']{re.escape(exercise)}[\"']", cell.source):
            visible = re.sub(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", "", cell.source, flags=re.S)
            names = [m.group(2) for m in re.finditer(r"check\(\s*f?([\"'])(.+?)\1", visible)]
            return [re.compile(".*?".join(map(re.escape, re.split(r"\{[^}]*\}", name)))) for name in names]
    raise AssertionError(f"no test cell for {exercise} in {assignment}")


@pytest.mark.parametrize("assignment, plant, spared", CASES, ids=[f"{a[:2]}-{p['exercise']}-{s}" for a, p, s in CASES])
def test_a_bug_costs_points_once(assignment, plant, spared, tmp_path):
    result = by_id(attn_check(planted_copy(assignment, [plant, *plant.get("also", [])], tmp_path)))
    buggy, later = result[plant["exercise"]], result[spared]
    assert buggy["score"] < buggy["max_score"], buggy
    failed = set(re.findall(r"^\[(.+?)\] ", later["feedback"], re.M)) if later["score"] < later["max_score"] else set()
    # Checks that failed with one message share a line, "[first] (and N more checks) ...": the others are unnamed.
    failed |= {f"{n} more" for n in re.findall(r"^\[.+?\] \(and (\d+) more checks?\)", later["feedback"], re.M)}
    visible = _visible_checks(assignment, spared)
    hidden_failures = {name for name in failed if not any(p.fullmatch(name) for p in visible)}
    assert not hidden_failures, f"{spared}'s hidden checks charged {plant['exercise']}'s bug again: {later['feedback']}"
    assert later["mistake"] is None, later


def test_the_stand_ins_are_restored_and_only_answer_while_grading(tmp_path):
    """After the hidden checks, the learner's own split_heads is back; a stand-in kept by the learner's code fails."""
    assignment = "04_multi_head_attention"
    path = planted_copy(assignment, [], tmp_path)
    nb = nbs.read(path)
    cells = {nbs.nbgrader_meta(c).get("grade_id"): c for c in nb.cells}
    # The learner's module keeps whatever split_heads is at each call, and the mha_parameter_count cell (graded
    # after MultiHeadAttention) asks both: the learner's own function must be back, and the kept stand-in refused.
    mha = cells["MultiHeadAttention"]
    mha.source = mha.source.replace(
        "        q = split_heads(self.W_q(query), self.num_heads)",
        "        KEPT.append(split_heads)\n        q = split_heads(self.W_q(query), self.num_heads)", 1)
    mha.source = "KEPT = []\n" + mha.source
    count = cells["mha_parameter_count"]
    count.source = count.source.replace(
        "    per_projection =",
        "    stand_ins = [f for f in KEPT if f is not split_heads]\n"
        "    back = split_heads(torch.arange(12.).view(1, 3, 4), 2).shape == (1, 2, 3, 2)\n"
        "    try:\n"
        "        stand_ins[-1](torch.zeros(1, 1, 4), 2)\n"
        "        refused = False\n"
        "    except TypeError as exc:\n"
        "        refused = 'not standing in' in str(exc)\n"
        "    if not (back and refused):\n"
        "        return -1\n"
        "    per_projection =", 1)
    nbs.write(nb, path)
    result = by_id(attn_check(path))
    assert result["MultiHeadAttention"]["score"] == result["MultiHeadAttention"]["max_score"], result
    assert result["mha_parameter_count"]["score"] == result["mha_parameter_count"]["max_score"], result


def _double(x):
    return 2 * x


def _uses_double(x):
    return _double(x) + 1


class _UsesDouble:
    def __call__(self, x):
        return _double(x)


def test_standing_in_in_process_replaces_what_the_code_reads_and_puts_it_back():
    """In the learner's own kernel (hidden tests run live by an instructor) the globals are swapped in place."""
    from utils.grading import standing_in

    with standing_in(_uses_double, _double=lambda x: 10 * x, _not_read=None):
        assert _uses_double(1) == 11
        assert "_not_read" not in globals()  # a name the code does not read is not created
    assert _uses_double(1) == 3
    with standing_in(_UsesDouble(), _double=lambda x: -x):
        assert _UsesDouble()(4) == -4
    assert _UsesDouble()(4) == 8
    with pytest.raises(ZeroDivisionError), standing_in(_UsesDouble, _double=lambda x: x):
        _ = 1 / 0
    assert _uses_double(1) == 3  # restored after an exception too


def _uses_missing(x):
    return _never_defined(x) + 1  # noqa: F821 - the cell that defines it "has a SyntaxError"


def test_a_part_that_is_not_defined_is_stood_in_for_and_removed_again():
    from utils.grading import standing_in

    with standing_in(_uses_missing, _never_defined=lambda x: 2 * x):
        assert _uses_missing(1) == 3
    assert "_never_defined" not in globals()
    with pytest.raises(NameError):
        _uses_missing(1)


def test_a_syntax_error_costs_its_own_exercise_and_is_reported_as_one(tmp_path):
    """softmax's cell does not compile; attention_pool calls softmax: its checks, visible ones included, run with the
    grader's softmax standing in (grader/01's STAND_INS), so the SyntaxError costs softmax only."""
    edits = [{"cell": "softmax", "old": "e = torch.exp(shifted)", "new": "e = torch.exp(shifted"},
             {"cell": "attention_pool", "old": "weights = torch.softmax(scores, dim=-1)", "new": "weights = softmax(scores)"}]
    result = by_id(attn_check(planted_copy("01_attention_intuition", edits, tmp_path)))
    softmax, pool = result["softmax"], result["attention_pool"]
    assert softmax["score"] == 0 and "its cell has a SyntaxError on line 5" in softmax["feedback"], softmax
    assert len(softmax["feedback"].splitlines()) == 1, "the same message for every check: one line"
    assert pool["passed"], pool
    assert result["additive_scores"]["passed"], result
