"""What the committed notebooks show, and the measurements behind 07's memory checks.

- Every test table stored in a solution notebook reads full marks: an instructor opening a solution must never see
  the reference fail (07-W1: a check whose verdict depended on the kernel's history stored 2.6 / 3).
- The in-kernel memory measurement (`utils.grading.peak_memory`) does not depend on what the process allocated and
  freed before: a correct tiled implementation passes 07's hidden memory checks after a history that inflates the
  process's resident memory.
- Notebook 07 runs top to bottom where Triton cannot be imported (macOS, Windows): its stand-in says why and Run All
  goes on (07-W4).
"""

from __future__ import annotations

import json
import math
import re
import textwrap

import pytest
import torch

from utils import grading
from utils import notebooks as nbs
from utils.grading import RESULT_MIME, Checker, load_grader, load_references, peak_memory
from utils.results import say

from .conftest import ASSIGNMENTS


def _stored_reports(assignment: str) -> list[tuple[int, str, dict]]:
    """(cell index, cell id, report) for every test table stored in the solution notebook, read as plain JSON."""
    nb = json.loads(nbs.solution_path(assignment).read_text())
    found = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        for output in cell.get("outputs", []):
            report = output.get("data", {}).get(RESULT_MIME)
            if report is not None:
                found.append((index, cell.get("id", "?"), report))
    return found


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_stored_test_table_shows_full_marks(assignment):
    reports = _stored_reports(assignment)
    assert reports, f"{assignment}: no stored test table ({RESULT_MIME}) at all; run `attn execute {assignment}`"
    short = []
    for index, cell_id, report in reports:
        if report.get("score") != report.get("max_score"):
            failed = "; ".join(f"{c['name']}: {c['message']}" for c in report.get("checks", []) if not c["passed"])
            short.append(f"{assignment}, cell {index} (id {cell_id}), exercise {report.get('id')!r}: "
                         f"{report.get('score')} / {report.get('max_score')} points. Failed: {failed}")
    assert not short, "stored solution outputs below full marks:\n" + "\n".join(short)


def test_the_check_reads_the_stored_score(tmp_path, monkeypatch):
    """The test above can fail: a solution whose stored table says 2.6 / 3 is reported with its cell and exercise."""
    nb = json.loads(nbs.solution_path("07_flash_attention").read_text())
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            report = output.get("data", {}).get(RESULT_MIME)
            if report is not None and report["id"] == "FlashAttentionFunction":
                report["score"] = 2.6
    fake = tmp_path / "07.ipynb"
    fake.write_text(json.dumps(nb))
    monkeypatch.setattr(nbs, "solution_path", lambda assignment: fake)
    where = r"07_flash_attention, cell \d+ \(id .*\), exercise 'FlashAttentionFunction'"
    with pytest.raises(AssertionError, match=where):
        test_every_stored_test_table_shows_full_marks("07_flash_attention")


# -- 07's memory checks in a live kernel -------------------------------------------------------------------------
def _solution_namespace(*names: str) -> dict:
    """The solution's setup cell is not needed: exec the answer cells that define `names` with what they import."""
    nb = nbs.read(nbs.solution_path("07_flash_attention"))
    # A module name of its own, as in a notebook's __main__: standing_in looks for the class's methods by their module.
    ns: dict = {"__name__": "learner_07", "torch": torch, "math": math}
    for cell in nbs.code_cells(nb):
        if nbs.nbgrader_meta(cell).get("grade_id") in names:
            exec(compile(cell.source, f"<07 {nbs.nbgrader_meta(cell)['grade_id']}>", "exec"), ns)
    return ns


def _inflate_history() -> None:
    """Allocate and free what a notebook's earlier cells do: the naive N = 8192 attention (two 256 MiB matrices), and
    many mid-sized tensors that leave the allocator's heap fragmented and its thresholds raised."""
    q = torch.randn(1, 8192, 64)
    s = torch.softmax(q @ q.transpose(-2, -1), dim=-1)
    del s
    keep = [torch.randn(512, 512 + i) for i in range(64)]  # about 70 MiB in 1 MiB pieces
    del keep[::2]
    del q


def test_peak_memory_sees_a_full_matrix_and_not_the_history():
    _inflate_history()
    _, small = peak_memory(lambda: [torch.randn(512, 512) for _ in range(4)])
    _, large = peak_memory(lambda: torch.randn(4096, 4096).sum())
    assert small < 8 * 2**20, f"four 1 MiB tiles measured as {small / 2**20:.0f} MiB"
    assert large >= 64 * 2**20, f"a 64 MiB matrix measured as {large / 2**20:.0f} MiB"


def test_a_correct_tiled_solution_passes_07s_memory_checks_after_an_inflating_history(monkeypatch):
    # The per-check time limit is for learners' endless loops; on a loaded 2-core machine a 4096-long pass is slow.
    monkeypatch.setattr(grading, "CHECK_TIME_LIMIT_S", 300.0)
    grader = load_grader("07_flash_attention")
    refs = load_references("07_flash_attention")
    ns = _solution_namespace("flash_attention", "FlashAttentionFunction")
    _inflate_history()
    for exercise, obj in (("FlashAttentionFunction", ns["FlashAttentionFunction"]),
                          ("flash_attention", ns["flash_attention"])):
        check = Checker(exercise, points=3)
        check._hidden = True
        grader.HIDDEN_TESTS[exercise](check, refs, obj)
        score = check.score()
        failed = [f"{c['name']}: {c['message']}" for c in score.report["checks"] if not c["passed"]]
        assert float(score) == 3.0, f"{exercise} in a live kernel after a large history: " + "; ".join(failed)


# -- 07 without Triton -------------------------------------------------------------------------------------------
BLOCK_TRITON = textwrap.dedent('''
    import importlib.abc
    import sys


    class _NoTriton(importlib.abc.MetaPathFinder):
        """As on macOS or Windows: Triton publishes no wheels there, so `import triton` fails."""

        def find_spec(self, name, path=None, target=None):
            if name == "triton" or name.startswith("triton."):
                raise ModuleNotFoundError(f"No module named {name!r}")
            return None


    sys.meta_path.insert(0, _NoTriton())
''')


@pytest.mark.parametrize("copy", ["solution", "student"])
def test_07_runs_all_without_triton(copy, tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLOCK_TRITON)
    path = nbs.solution_path("07_flash_attention") if copy == "solution" else nbs.release_path("07_flash_attention")
    nb = nbs.read(path)
    # The slow cells (timings, sweeps) are the same with or without Triton, except the Triton timing: keep that one.
    nb.cells = [c for c in nb.cells if "slow" not in c.metadata.get("tags", [])
                or nbs.nbgrader_meta(c).get("grade_id") == "triton_time"]
    pythonpath = ":".join(p for p in (str(tmp_path), str(nbs.ROOT)) if p)
    nbs.execute(nb, nbs.ROOT, env={"PYTHONPATH": pythonpath}, quiet=True)  # raises CellExecutionError on any error
    text = "\n".join(o.get("text", "") for c in nbs.code_cells(nb) for o in c.get("outputs", []))
    assert "triton missing (Linux only)" in text, "the setup cell did not report Triton as missing"
    table = next(o["data"][RESULT_MIME] for c in nbs.code_cells(nb) for o in c.get("outputs", [])
                 if RESULT_MIME in o.get("data", {}) and o["data"][RESULT_MIME]["id"] == "flash_attention_triton")
    assert table["score"] == 0
    if copy == "solution":
        assert "Linux" in table["feedback"] + json.dumps(table["checks"]), table


def test_07_is_graded_out_of_what_can_be_earned_where_triton_cannot_install(monkeypatch):
    """On macOS or Windows (no Triton) `attn check` leaves the Triton exercise out, says why, and grades 07 out of the
    other exercises' points: a finished notebook gets all of them."""
    from utils.engine import checking

    from .conftest import engine

    monkeypatch.setattr(checking.importlib.util, "find_spec",
                        lambda name, *a, _real=checking.importlib.util.find_spec: None if name == "triton" else _real(
                            name, *a))
    result = engine().check(nbs.solution_path("07_flash_attention"))
    triton = next(e for e in result.exercises if e.id == "flash_attention_triton")
    assert triton.max_score == 0 and "Linux" in triton.feedback(), triton
    assert result.score == result.max_score == 15, (result.score, result.max_score)
    notes = [say(note) for note in result.notes]
    assert any("graded out of 15 points" in note for note in notes), notes
    assert "SKIP" in checking.render(result)


def _stored_stdout(assignment: str, key: str) -> str:
    from utils import i18n

    cell = next(c for c in nbs.read(nbs.solution_path(assignment)).cells if i18n.cell_key(c) == key)
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stdout")


def test_03s_timing_prose_is_what_its_stored_run_printed():
    """03 §8 says the dense masked attention grows near n^2 and the banded one near n, and its cell prints both
    exponents: in the stored run (an `attn execute` on a quiet machine) they are what the sentence says."""
    text = _stored_stdout("03_masking", "cost_time")
    found = re.search(r"dense \+ mask ~ n\^([\d.]+), banded ~ n\^([\d.]+)", text)
    assert found, text
    dense, banded = map(float, found.groups())
    assert 1.6 <= dense <= 2.6 and 0.6 <= banded <= 1.4, text


def test_03s_leak_and_reach_prose_is_what_its_stored_run_printed():
    """03 §8: every output but the last reads the last input through torch.roll (the last column leaks), the zero-padded
    shift leaks nothing, and two layers of window 3 reach t-4 ... t."""
    leak = _stored_stdout("03_masking", "leak_demo")
    pairs = re.search(r"(\d+) pairs \(output t, later input s\) with a non-zero gradient: (\[.*\])", leak)
    assert pairs, leak
    L = int(pairs.group(1)) + 1
    assert json.loads(pairs.group(2)) == [[t, L - 1] for t in range(L - 1)], leak
    assert "non-zero entries above the diagonal after the fix: 0" in _stored_stdout("03_masking", "leak_fix")
    reach = _stored_stdout("03_masking", "window_reach_demo")
    assert "[1, 2, 3, 4, 5, 5, 5, 5, 5, 5, 5, 5]" in reach, reach


def test_01s_bandwidth_prose_is_what_its_stored_run_printed():
    """01's Nadaraya–Watson demo: the prose after it says the learned bandwidth lies between the tiny and the huge
    one, scores best on the held-out points, and that the tiny one looks almost perfect on its own keys."""
    text = _stored_stdout("01_attention_intuition", "nw_demo")
    learned = float(re.search(r"learned, h = ([\d.]+)", text).group(1))
    assert 0.03 < learned < 5, text
    assert "the learned bandwidth has the smallest held-out loss: True" in text, text
    assert "the smallest loss is the tiny bandwidth's" in text, text


def test_08s_alignment_prose_is_what_its_stored_run_printed():
    """08 §9 says every first-layer head sits in its gold box more often than one row late and the second layer's
    heads are almost never late (08-W1); the Summary quotes how many probe words are out of order and says the best
    head finds most of them (08-M1); §8 says the training loss stays above the learner's predicted floor."""
    text = _stored_stdout("08_transformer_translator", "alignment")
    heads = {}  # the first line of each printed table -> {layer: [(value, value after " / " or "")]}
    for block in re.split(r"\n(?=\S)", text):
        rows = {m.group(1): re.findall(r"head \d+:\s+([\d.]+)%(?: /\s+([\d.]+)%)?", m.group(2))
                for m in re.finditer(r"^\s+(decoder\.\d)\.cross_attn(.*)$", block, re.M)}
        if rows:
            heads[block.splitlines()[0]] = rows
    accuracy = next(v for k, v in heads.items() if k.startswith("alignment accuracy of each"))
    late = next(v for k, v in heads.items() if k.startswith("one row late"))
    split = next(v for k, v in heads.items() if "are out of order" in k)
    assert all(float(lag) < float(a) for (a, _), (lag, _) in zip(accuracy["decoder.0"], late["decoder.0"])), text
    assert all(float(lag) < 5 for lag, _ in late["decoder.1"]), text
    counts = re.search(r"(\d+) of the (\d+) aligned target words are out of order", text)
    summary = next(c for c in nbs.read(nbs.solution_path("08_transformer_translator")).cells
                   if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "summary").source
    assert counts and f"{counts.group(1)} of the {counts.group(2)} aligned words" in summary, (text, summary)
    assert max(float(m) for layer in split.values() for m, _ in layer) > 50, text
    floor = _stored_stdout("08_transformer_translator", "train_plot")
    assert "the training loss stayed at or above your floor: True" in floor, floor


def test_06s_pooling_and_capacity_prose_is_what_its_stored_run_printed():
    """06 §4 says the mean of a group beats its first head everywhere, that shrinking the first head closes part of
    the gap with independent heads (s = 0) and hurts with redundant ones (s = 0.9), and that some first-head
    conversions do worse than an all-zero output; §7 says Mistral's 4k window serves twice as many 8k sequences."""
    text = _stored_stdout("06_grouped_query_attention", "convert_demo")
    assert "the mean closer than the first head at every s and every count below 8: True" in text, text
    assert "worse than an all-zero output (above 1.0): s = 0.0, first" in text, text
    closed = {s: [int(x) for x in re.findall(r"(-?\d+)% \(", line)]
              for s, line in re.findall(r"^s = ([\d.]+): shrinking the first head closes (.*)$", text, re.M)}
    assert all(0 < x < 100 for x in closed["0.0"]) and all(x < 0 for x in closed["0.9"]), text
    table = _stored_stdout("06_grouped_query_attention", "bytes_table")
    fits = {name.strip(): int(n) for name, n in re.findall(r"^(.{21}) [\d.]+ GiB free, .*: (\d+) sequences$", table, re.M)}
    assert fits["Mistral-7B, window 4k"] >= 2 * fits["Mistral-7B (GQA)"] - 1 and fits["LLaMA-2-7B (MHA)"] == 15, table
